import Glibc

/// A map from symbols to small non-negative integers (a slot in some table: a charge, a
/// group, an instruction), sized by what it holds, not by the symbol table.
///
/// The planner and the charges file each needed "the slot of this charge (group, order,
/// recipient)". A flat array indexed by symbol answered it with one read, but cost 4 bytes
/// for every interned string of the batch, line ids included, and every page of it was
/// touched: 72 MB a table on the 6.75 M-line benchmark, up to five of them alive at once.
/// This open-addressing table costs 8 bytes a slot at most 70 % full, about 11 bytes a
/// key: for 2.7 M charges 32 MB. A class, so that copying the struct holding it never copies
/// its slots.
public final class SymbolSlots: @unchecked Sendable {
    /// Each slot is 0 (empty) or the symbol's raw value + 1 (high 32 bits) and the value
    /// (low 32 bits).
    private var slots: UnsafeMutablePointer<UInt64>
    private var mask: Int
    private var shift: UInt64
    public private(set) var count = 0

    /// `expected`: about how many keys it will hold (it grows past that).
    public init(expected: Int = 0) {
        var capacity = 1024
        while max(0, expected) * 10 > capacity * 7 { capacity *= 2 }
        (slots, mask, shift) = SymbolSlots.table(capacity)
    }

    deinit { free(slots) }

    /// The value of a symbol, -1 when it has none.
    @inline(__always)
    public subscript(symbol: Symbol) -> Int32 {
        let key = UInt64(UInt32(bitPattern: symbol.raw) &+ 1)
        var slot = index(key)
        while true {
            let entry = slots[slot]
            if entry == 0 { return -1 }
            if entry >> 32 == key { return Int32(truncatingIfNeeded: entry & 0xFFFF_FFFF) }
            slot = (slot + 1) & mask
        }
    }

    /// Sets the value of a symbol (a non-negative value).
    public func set(_ symbol: Symbol, _ value: Int32) {
        precondition(value >= 0, "a symbol's slot is never negative")
        let key = UInt64(UInt32(bitPattern: symbol.raw) &+ 1)
        var slot = index(key)
        while true {
            let entry = slots[slot]
            if entry == 0 { break }
            if entry >> 32 == key {
                slots[slot] = key << 32 | UInt64(UInt32(value))
                return
            }
            slot = (slot + 1) & mask
        }
        slots[slot] = key << 32 | UInt64(UInt32(value))
        count += 1
        if count * 10 > (mask + 1) * 7 { grow() }
    }

    /// Fibonacci hashing: symbols are dense integers, this spreads neighbours apart.
    @inline(__always)
    private func index(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    private func grow() {
        let old = (slots, mask)
        (slots, mask, shift) = SymbolSlots.table((mask + 1) * 2)
        for position in 0...old.1 {
            let entry = old.0[position]
            if entry == 0 { continue }
            var slot = index(entry >> 32)
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = entry
        }
        free(old.0)
    }

    /// Zeroed slots from calloc: a large table's pages cost memory only once touched.
    private static func table(_ capacity: Int) -> (UnsafeMutablePointer<UInt64>, Int, UInt64) {
        guard let raw = calloc(capacity, MemoryLayout<UInt64>.stride) else { fatalError("out of memory") }
        HugePages.advise(raw, byteCount: capacity * MemoryLayout<UInt64>.stride)
        let bits = UInt64(capacity.trailingZeroBitCount)
        return (raw.bindMemory(to: UInt64.self, capacity: capacity), capacity - 1, 64 - bits)
    }
}
