/// A JSON value: the one type for every JSON settle reads and writes — the plan folder's
/// files, the config, the ledger's stored request bodies, Stripe's requests and answers.
///
/// Objects keep their key order so that output is deterministic and diffable; integers are
/// exact `Int64` (amounts are minor units, never floating point).
public indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    /// A number that is not an exact `Int64` (a fraction, an exponent, or too large), kept
    /// as its text so nothing is rounded. Stripe's answers may hold one (an exchange rate);
    /// settle never reads money from it.
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    /// The member `key` of an object (nil for anything else); setting it replaces the member
    /// in place or appends it, and setting nil removes it.
    public subscript(key: String) -> JSON? {
        get {
            if case .object(let pairs) = self { return pairs.first { $0.0 == key }?.1 }
            return nil
        }
        set {
            guard case .object(var pairs) = self else { return }
            if let position = pairs.firstIndex(where: { $0.0 == key }) {
                if let newValue { pairs[position].1 = newValue } else { pairs.remove(at: position) }
            } else if let newValue {
                pairs.append((key, newValue))
            }
            self = .object(pairs)
        }
    }

    /// The string, else nil.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The integer, else nil.
    public var intValue: Int64? { if case .int(let i) = self { return i } else { return nil } }
    /// The flag, else nil.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The elements of an array, else nil.
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }
    /// The members of an object in their order, else nil.
    public var objectValue: [(String, JSON)]? { if case .object(let o) = self { return o } else { return nil } }

    // MARK: - Writing

    /// Compact serialisation. With `sortingKeys`, every object's keys are sorted, so the same
    /// members always give the same bytes whatever their order (the ledger's stored request
    /// bodies and the v2 bodies sent to Stripe).
    public func encoded(sortingKeys: Bool = false) -> String {
        var out: [UInt8] = []
        append(to: &out, sortingKeys: sortingKeys)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact serialisation (see ``encoded(sortingKeys:)``).
    public func append(to out: inout [UInt8], sortingKeys: Bool = false) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): JSON.appendInteger(value, to: &out)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let value): JSON.appendString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.append(to: &out, sortingKeys: sortingKeys)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let pairs):
            out.append(UInt8(ascii: "{"))
            let ordered = sortingKeys ? pairs.sorted { $0.0 < $1.0 } : pairs
            for (index, (key, value)) in ordered.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSON.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.append(to: &out, sortingKeys: sortingKeys)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Pretty serialisation (two-space indent) for the manifest.
    public func pretty(indent: String = "") -> String {
        var out: [UInt8] = []
        appendPretty(to: &out, indent: Array(indent.utf8))
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the pretty form to a byte buffer: no string is built per value, so a manifest
    /// of 100,000 charges costs a few copies of its bytes, not one string per level and value.
    public func appendPretty(to out: inout [UInt8], indent: [UInt8] = []) {
        var indent = indent
        appendPretty(to: &out, indent: &indent)
    }

    /// `indent` is the current line prefix; it grows by two spaces a level and is restored.
    private func appendPretty(to out: inout [UInt8], indent: inout [UInt8]) {
        switch self {
        case .array(let values) where !values.isEmpty:
            out.append(UInt8(ascii: "["))
            indent.append(contentsOf: [0x20, 0x20])
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out.append(0x0A)
                out.append(contentsOf: indent)
                value.appendPretty(to: &out, indent: &indent)
            }
            indent.removeLast(2)
            out.append(0x0A)
            out.append(contentsOf: indent)
            out.append(UInt8(ascii: "]"))
        case .object(let pairs) where !pairs.isEmpty:
            out.append(UInt8(ascii: "{"))
            indent.append(contentsOf: [0x20, 0x20])
            for (index, (key, value)) in pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out.append(0x0A)
                out.append(contentsOf: indent)
                JSON.appendString(key, to: &out)
                out.append(contentsOf: [UInt8(ascii: ":"), 0x20])
                value.appendPretty(to: &out, indent: &indent)
            }
            indent.removeLast(2)
            out.append(0x0A)
            out.append(contentsOf: indent)
            out.append(UInt8(ascii: "}"))
        default:
            append(to: &out)
        }
    }

    /// Appends an integer in decimal (all of `Int64`, its minimum included).
    public static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        if value == .min {
            out.append(contentsOf: "-9223372036854775808".utf8)
        } else {
            MinorUnits.appendDecimal(value, to: &out)
        }
    }

    /// Appends a string as a JSON string (see ``appendBytes(_:to:)``).
    public static func appendString(_ value: String, to out: inout [UInt8]) {
        var value = value
        value.withUTF8 { appendBytes(UnsafeRawBufferPointer($0), to: &out) }
    }

    /// Appends UTF-8 bytes as a JSON string, quoted and escaped by ``escape(_:to:)``.
    public static func appendBytes(_ value: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var plain = true
        for byte in value where byte < 0x20 || byte == 0x22 || byte == 0x5C {
            plain = false
            break
        }
        if plain {
            out.append(contentsOf: value)
        } else {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: escapedCapacity(value.count)) { scratch in
                let count = escape(value, to: scratch.baseAddress!)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<count]))
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The most bytes ``escape(_:to:)`` writes for `count` bytes (`\u00xx` for each).
    @inline(__always)
    static func escapedCapacity(_ count: Int) -> Int { 6 * count }

    /// Writes UTF-8 bytes escaped for inside a JSON string at `at`, which has room for
    /// ``escapedCapacity(_:)`` bytes, and returns how many it wrote: the one escaper. `"`,
    /// `\` and the control characters are escaped (`\n`, `\r`, `\t`, else `\u00xx`); every
    /// other byte is copied.
    @inline(__always)
    static func escape(_ value: UnsafeRawBufferPointer, to at: UnsafeMutablePointer<UInt8>) -> Int {
        guard let base = value.baseAddress else { return 0 }
        let end = value.count
        var index = 0
        var count = 0
        while index < end {
            // The run of bytes copied as they are: eight at a time while no byte of the word
            // needs an escape, then byte by byte; then one copy of the run.
            var run = index
            while run + 8 <= end,
                !needsEscape(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: run, as: UInt64.self)))
            {
                run += 8
            }
            while run < end, base.load(fromByteOffset: run, as: UInt8.self) >= 0x20,
                base.load(fromByteOffset: run, as: UInt8.self) != 0x22,
                base.load(fromByteOffset: run, as: UInt8.self) != 0x5C
            {
                run += 1
            }
            if run > index {
                UnsafeMutableRawPointer(at + count).copyMemory(from: base + index, byteCount: run - index)
                count += run - index
                index = run
                if index == end { break }
            }
            let byte = base.load(fromByteOffset: index, as: UInt8.self)
            index += 1
            at[count] = 0x5C
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                at[count + 1] = byte
                count += 2
            case 0x0A:
                at[count + 1] = UInt8(ascii: "n")
                count += 2
            case 0x0D:
                at[count + 1] = UInt8(ascii: "r")
                count += 2
            case 0x09:
                at[count + 1] = UInt8(ascii: "t")
                count += 2
            default:
                let hex: StaticString = "0123456789abcdef"
                at[count + 1] = UInt8(ascii: "u")
                at[count + 2] = 0x30
                at[count + 3] = 0x30
                at[count + 4] = hex.utf8Start[Int(byte >> 4)]
                at[count + 5] = hex.utf8Start[Int(byte & 0xf)]
                count += 6
            }
        }
        return count
    }

    /// Whether a byte of the word is below 0x20, `"` or `\\` (exact: the bit tricks of
    /// "Bit Twiddling Hacks", determine if a word has a byte less than n / equal to n).
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (word &- ones &* 0x20) & ~word
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let quoteZero = (quote &- ones) & ~quote
        let backslashZero = (backslash &- ones) & ~backslash
        return (control | quoteZero | backslashZero) & highs != 0
    }
}

/// Literals for tests and fixed bodies: `["amount": 100, "currency": "usd"]` keeps the
/// order it is written in.
extension JSON: ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByStringLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral
{
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(elements) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}
