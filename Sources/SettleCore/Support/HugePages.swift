import Glibc

/// Asks the kernel to back the large tables with transparent huge pages (2 MiB) where the
/// machine allows it (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, Debian's
/// default). The symbol table, the line records and the plan rows are read at random across
/// hundreds of megabytes at full size; with 4 KiB pages nearly every such read also misses
/// the TLB. Advice only: no content changes, a refusal costs nothing, and pages that are
/// never touched still cost no memory.
public enum HugePages {
    /// 2 MiB, the x86-64 and arm64 (4 KiB granule) huge page.
    static let size = 2 << 20
    /// Regions smaller than this are left alone (they fit the TLB well enough).
    static let minimum = 4 << 20

    /// Advises the whole huge pages inside `[base, base + byteCount)`.
    public static func advise(_ base: UnsafeMutableRawPointer, byteCount: Int) {
        guard byteCount >= minimum else { return }
        let start = (Int(bitPattern: base) + size - 1) & ~(size - 1)
        let end = (Int(bitPattern: base) + byteCount) & ~(size - 1)
        guard end > start, let aligned = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = madvise(aligned, end - start, MADV_HUGEPAGE)
    }

    /// Advises an array's whole storage (its capacity, not only its count): call after
    /// reserving, and again when the array has grown into new storage.
    public static func advise<Element>(_ array: inout [Element]) {
        let capacity = array.capacity
        guard capacity * MemoryLayout<Element>.stride >= minimum else { return }
        array.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            advise(UnsafeMutableRawPointer(base), byteCount: capacity * MemoryLayout<Element>.stride)
        }
    }

    /// An array of `count` copies of `value` whose storage was advised before it was filled
    /// (advice on pages already touched comes too late to matter).
    public static func array<Element>(repeating value: Element, count: Int) -> [Element] {
        var array: [Element] = []
        array.reserveCapacity(count)
        advise(&array)
        array.append(contentsOf: repeatElement(value, count: count))
        return array
    }

    /// Appends `count` copies of `value`, advising the storage the array grows into before
    /// filling it.
    public static func append<Element>(_ value: Element, count: Int, to array: inout [Element]) {
        array.reserveCapacity(array.count + count)
        advise(&array)
        array.append(contentsOf: repeatElement(value, count: count))
    }
}
