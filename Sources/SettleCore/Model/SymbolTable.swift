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
public final class SymbolTable: @unchecked Sendable {
    private var arena: [UInt8] = []
    /// start offset and length of each symbol in the arena; index 0 is ``Symbol/none``.
    private var starts: [Int] = [0]
    private var lengths: [Int32] = [0]
    private var slots: [Int32]
    private var mask: Int

    public init() {
        slots = [Int32](repeating: 0, count: 1024)
        mask = 1023
        arena.reserveCapacity(1 << 16)
    }

    /// Number of distinct symbols.
    public var count: Int { starts.count - 1 }

    /// The symbol for these bytes, adding it when new. Empty bytes are ``Symbol/none``.
    public func intern(_ bytes: UnsafeRawBufferPointer) -> Symbol {
        if bytes.isEmpty { return .none }
        let hash = SymbolTable.hash(bytes)
        var slot = hash & mask
        while true {
            let candidate = slots[slot]
            if candidate == 0 { break }
            if equals(Int(candidate), bytes) { return Symbol(raw: candidate) }
            slot = (slot + 1) & mask
        }
        let symbol = Int32(starts.count)
        starts.append(arena.count)
        lengths.append(Int32(bytes.count))
        arena.append(contentsOf: bytes)
        slots[slot] = symbol
        if starts.count * 2 > slots.count { grow() }
        return Symbol(raw: symbol)
    }

    public func intern(_ text: String) -> Symbol {
        var text = text
        return text.withUTF8 { intern(UnsafeRawBufferPointer($0)) }
    }

    /// The text of a symbol (empty for ``Symbol/none``).
    public func string(_ symbol: Symbol) -> String {
        let index = Int(symbol.raw)
        let start = starts[index]
        return arena.withUnsafeBufferPointer {
            String(
                decoding: UnsafeBufferPointer(rebasing: $0[start..<start + Int(lengths[index])]),
                as: UTF8.self)
        }
    }

    /// Calls `body` with the bytes of a symbol, without copying.
    public func withBytes<R>(_ symbol: Symbol, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let index = Int(symbol.raw)
        let start = starts[index]
        return arena.withUnsafeBytes {
            body(UnsafeRawBufferPointer(rebasing: $0[start..<start + Int(lengths[index])]))
        }
    }

    private func equals(_ index: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard Int(lengths[index]) == bytes.count else { return false }
        let start = starts[index]
        return arena.withUnsafeBytes { arena in
            memcmp(arena.baseAddress! + start, bytes.baseAddress!, bytes.count) == 0
        }
    }

    private func grow() {
        let capacity = slots.count * 2
        var fresh = [Int32](repeating: 0, count: capacity)
        let newMask = capacity - 1
        for symbol in 1..<starts.count {
            let start = starts[symbol]
            let hash = arena.withUnsafeBytes {
                SymbolTable.hash(UnsafeRawBufferPointer(rebasing: $0[start..<start + Int(lengths[symbol])]))
            }
            var slot = hash & newMask
            while fresh[slot] != 0 { slot = (slot + 1) & newMask }
            fresh[slot] = Int32(symbol)
        }
        slots = fresh
        mask = newMask
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
