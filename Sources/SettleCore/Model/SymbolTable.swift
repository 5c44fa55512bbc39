import CPrefetch
import Glibc

/// An interned string: a small integer naming a byte string held once in a ``SymbolTable``.
public struct Symbol: Hashable, Sendable, Comparable {
    public let raw: Int32
    public init(raw: Int32) { self.raw = raw }
    /// No value (an empty field).
    public static let none = Symbol(raw: 0)
    public var isNone: Bool { raw == 0 }
    public static func < (lhs: Symbol, rhs: Symbol) -> Bool { lhs.raw < rhs.raw }
}

/// Interns byte strings so that a million lines naming the same account store it once.
///
/// Bytes live in one growing arena; an open-addressing table maps hashes to symbols.
/// Interning does not build a `String`: the hot path works on the input's bytes. A class, so
/// that reading a symbol never copies (and retains) the table's arrays.
///
/// Memory is managed by hand (the arena, the spans and the slots are plain allocations):
/// an intern touches one slot and, only when its 32-bit hash tag matches, one span and the
/// arena; growing the table rehashes from the tags alone.
public final class SymbolTable: @unchecked Sendable {
    /// The bytes of every symbol, one after the other.
    @usableFromInline var arena: UnsafeMutableRawPointer
    @usableFromInline var arenaCount = 0
    private var arenaCapacity: Int
    /// Per symbol (index 0 is ``Symbol/none``): start in the arena (low 40 bits) and length
    /// (high 24 bits; ``longLength`` marks a length kept in ``longLengths``).
    @usableFromInline var spans: UnsafeMutablePointer<UInt64>
    @usableFromInline var spanCount = 1
    private var spanCapacity: Int
    @usableFromInline var longLengths: [Int32: Int] = [:]
    @usableFromInline static let longLength: UInt64 = 0xFF_FFFF
    /// Open addressing: each slot is 0 (empty) or the symbol (low 32 bits) and its hash's
    /// low 32 bits (high 32 bits); the slot index is the hash's low bits.
    /// nil after ``dropIndex()``: rebuilt from the spans at the next ``intern(_:)``.
    private var slots: UnsafeMutablePointer<UInt64>?
    private var mask: Int

    public init() {
        arenaCapacity = 1 << 16
        guard let arena = malloc(arenaCapacity) else { fatalError("out of memory") }
        self.arena = arena
        spanCapacity = 1024
        spans = UnsafeMutablePointer<UInt64>.allocate(capacity: spanCapacity)
        spans[0] = 0
        mask = 1023
        slots = SymbolTable.zeroedSlots(mask + 1)
    }

    deinit {
        free(arena)
        spans.deallocate()
        free(slots)
    }

    /// Frees the hash table (8 bytes a slot, about 16 a symbol) once reading is done: the
    /// writers only read symbols. An ``intern(_:)`` after it rebuilds the table from the
    /// spans (the planner interns a few ids from the ledger or Stripe); symbols do not change.
    public func dropIndex() {
        free(slots)
        slots = nil
    }

    /// Whether the hash table is held (false after ``dropIndex()`` until the next intern).
    public var hasIndex: Bool { slots != nil }

    /// The table rebuilt from every symbol's bytes, at the size interning would have grown it to.
    private func rebuildIndex() {
        var capacity = 1024
        while spanCount * 10 > capacity * 7 { capacity *= 2 }
        let fresh = SymbolTable.zeroedSlots(capacity)
        let newMask = capacity - 1
        for symbol in 1..<spanCount {
            let tag = UInt64(UInt32(truncatingIfNeeded: SymbolTable.hash(bytes(Symbol(raw: Int32(symbol))))))
            var slot = Int(tag) & newMask
            while fresh[slot] != 0 { slot = (slot + 1) & newMask }
            fresh[slot] = tag << 32 | UInt64(symbol)
        }
        slots = fresh
        mask = newMask
    }

    /// Number of distinct symbols.
    public var count: Int { spanCount - 1 }

    /// Makes room for about this many symbols' spans, so that they are not copied their way
    /// up while a large input is read (untouched pages cost no memory). The slots still grow
    /// with the symbols: a table's pages are all touched, so an overestimate would cost.
    public func reserve(symbols: Int) {
        let wanted = max(0, min(symbols, Int(Int32.max) - 1))
        if wanted + 1 > spanCapacity { growSpans(to: wanted + 1) }
    }

    /// Starts loading the table slot an ``intern(_:)`` of these bytes will read first: a line's
    /// ids each land at a random place in a table of hundreds of megabytes, and prefetching
    /// them all before interning them one by one overlaps their cache misses.
    @inline(__always)
    public func prefetch(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, let slots else { return }
        let tag = UInt64(UInt32(truncatingIfNeeded: SymbolTable.hash(bytes)))
        settle_prefetch(slots + (Int(tag) & mask))
    }

    /// Starts loading where a symbol's bytes are (its span): the first of two prefetches for a
    /// writer that reads symbols at random across the table (accounts repeat all over a plan).
    @inline(__always)
    public func prefetchSpan(_ symbol: Symbol) { settle_prefetch(spans + Int(symbol.raw)) }

    /// Starts loading a symbol's first bytes; its span should already be in cache
    /// (``prefetchSpan(_:)`` a few rows earlier), else this waits for it.
    @inline(__always)
    public func prefetchBytes(_ symbol: Symbol) {
        settle_prefetch(arena + Int(spans[Int(symbol.raw)] & 0xFF_FFFF_FFFF))
    }

    /// The symbol for these bytes, adding it when new. Empty bytes are ``Symbol/none``.
    public func intern(_ bytes: UnsafeRawBufferPointer) -> Symbol {
        if bytes.isEmpty { return .none }
        if slots == nil { rebuildIndex() }
        let slots = self.slots.unsafelyUnwrapped
        let tag = UInt64(UInt32(truncatingIfNeeded: SymbolTable.hash(bytes)))
        var slot = Int(tag) & mask
        while true {
            let entry = slots[slot]
            if entry == 0 { break }
            if entry >> 32 == tag, equals(Int(entry & 0xFFFF_FFFF), bytes) {
                return Symbol(raw: Int32(truncatingIfNeeded: entry & 0xFFFF_FFFF))
            }
            slot = (slot + 1) & mask
        }
        precondition(spanCount < Int(Int32.max), "more than 2^31 distinct strings")
        let symbol = spanCount
        if spanCount == spanCapacity { growSpans(to: spanCapacity * 2) }
        if arenaCount + bytes.count > arenaCapacity { growArena(toFit: arenaCount + bytes.count) }
        (arena + arenaCount).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        var length = UInt64(bytes.count)
        if length >= SymbolTable.longLength {
            longLengths[Int32(symbol)] = bytes.count
            length = SymbolTable.longLength
        }
        spans[symbol] = UInt64(arenaCount) | length << 40
        arenaCount += bytes.count
        spanCount += 1
        slots[slot] = tag << 32 | UInt64(symbol)
        if spanCount * 10 > (mask + 1) * 7 { rehash(capacity: (mask + 1) * 2) }
        return Symbol(raw: Int32(symbol))
    }

    public func intern(_ text: String) -> Symbol {
        var text = text
        return text.withUTF8 { intern(UnsafeRawBufferPointer($0)) }
    }

    /// The bytes of a symbol (empty for ``Symbol/none``), valid until the next ``intern(_:)``:
    /// the writers read millions of them after reading is done, without a closure each.
    @inlinable @inline(__always)
    public func bytes(_ symbol: Symbol) -> UnsafeRawBufferPointer {
        let span = spans[Int(symbol.raw)]
        var length = Int(span >> 40)
        if length == Int(SymbolTable.longLength) { length = longLengths[symbol.raw] ?? 0 }
        return UnsafeRawBufferPointer(start: arena + Int(span & 0xFF_FFFF_FFFF), count: length)
    }

    /// The text of a symbol (empty for ``Symbol/none``).
    public func string(_ symbol: Symbol) -> String {
        String(decoding: bytes(symbol), as: UTF8.self)
    }

    /// Calls `body` with the bytes of a symbol, without copying.
    @inlinable @inline(__always)
    public func withBytes<R>(_ symbol: Symbol, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(bytes(symbol))
    }

    @inline(__always)
    private func equals(_ index: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        let known = self.bytes(Symbol(raw: Int32(truncatingIfNeeded: index)))
        return known.count == bytes.count && memcmp(known.baseAddress!, bytes.baseAddress!, bytes.count) == 0
    }

    /// A larger arena by `realloc`: a large one is moved by remapping its pages, neither
    /// copied nor zeroed again (it is hundreds of megabytes at full size).
    private func growArena(toFit needed: Int) {
        var capacity = arenaCapacity
        while capacity < needed { capacity *= 2 }
        guard let fresh = realloc(arena, capacity) else { fatalError("out of memory") }
        HugePages.advise(fresh, byteCount: capacity)
        arena = fresh
        arenaCapacity = capacity
    }

    private func growSpans(to capacity: Int) {
        let fresh = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
        HugePages.advise(UnsafeMutableRawPointer(fresh), byteCount: capacity * MemoryLayout<UInt64>.stride)
        fresh.update(from: spans, count: spanCount)
        spans.deallocate()
        spans = fresh
        spanCapacity = capacity
    }

    /// A larger table, filled from the slots' tags (the arena is not read).
    private func rehash(capacity: Int) {
        guard let slots else { return rebuildIndex() }
        let fresh = SymbolTable.zeroedSlots(capacity)
        let newMask = capacity - 1
        for old in 0...mask {
            let entry = slots[old]
            if entry == 0 { continue }
            var slot = Int(entry >> 32) & newMask
            while fresh[slot] != 0 { slot = (slot + 1) & newMask }
            fresh[slot] = entry
        }
        free(slots)
        self.slots = fresh
        mask = newMask
    }

    /// Zeroed slots from calloc: a large table's pages cost memory only once touched.
    private static func zeroedSlots(_ count: Int) -> UnsafeMutablePointer<UInt64> {
        guard let raw = calloc(count, MemoryLayout<UInt64>.stride) else { fatalError("out of memory") }
        HugePages.advise(raw, byteCount: count * MemoryLayout<UInt64>.stride)
        return raw.bindMemory(to: UInt64.self, capacity: count)
    }

    /// A multiply-xorshift hash taking 8 bytes at a time: ids are short, so this is
    /// a few multiplications per field.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var offset = 0
        let count = bytes.count
        let base = bytes.baseAddress!
        while offset + 8 <= count {
            let word = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
            hash ^= hash >> 31
            offset += 8
        }
        if offset < count {
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while offset < count {
                tail |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self)) << shift
                shift += 8
                offset += 1
            }
            hash = (hash ^ tail) &* 0x94D0_49BB_1331_11EB
        }
        hash ^= hash >> 29
        hash = hash &* 0xBF58_476D_1CE4_E5B9
        return Int(truncatingIfNeeded: hash ^ (hash >> 32))
    }
}
