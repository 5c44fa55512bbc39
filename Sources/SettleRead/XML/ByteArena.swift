import Glibc

/// A growable run of bytes that callers address by offset; reused across chunks.
///
/// Manual memory on purpose: appends are `memcpy`, and trimming the front is one `memmove`.
final class ByteArena {
    @exclusivity(unchecked) private(set) var base: UnsafeMutableRawPointer
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private var capacity: Int

    init(capacity: Int = 64 * 1024) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    @inline(__always)
    func append(_ bytes: UnsafeRawPointer, count byteCount: Int) {
        if count + byteCount > capacity { grow(to: count + byteCount) }
        (base + count).copyMemory(from: bytes, byteCount: byteCount)
        count += byteCount
    }

    @inline(__always)
    func append(byte: UInt8) {
        if count + 1 > capacity { grow(to: count + 1) }
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    func bytes(from start: Int, count byteCount: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + start, count: byteCount)
    }

    var all: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Drops the first `byteCount` bytes; what followed now starts at 0.
    func removeFirst(_ byteCount: Int) {
        guard byteCount > 0 else { return }
        let rest = count - byteCount
        if rest > 0 { memmove(base, base + byteCount, rest) }
        count = rest
    }

    func removeAll() { count = 0 }

    private func grow(to needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        grown.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }
}
