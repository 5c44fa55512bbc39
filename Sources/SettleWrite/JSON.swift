import SettleCore

/// A JSON value, for the files settle writes and reads (instructions, manifest).
///
/// Objects keep their key order so that output is deterministic and diffable.
public indirect enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    public subscript(key: String) -> JSON? {
        if case .object(let pairs) = self { return pairs.first { $0.0 == key }?.1 }
        return nil
    }

    public var string: String? { if case .string(let s) = self { return s } else { return nil } }
    public var int: Int64? { if case .int(let i) = self { return i } else { return nil } }
    public var array: [JSON]? { if case .array(let a) = self { return a } else { return nil } }

    /// Compact serialisation.
    public func encoded() -> String {
        var out: [UInt8] = []
        append(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public func append(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): MinorUnits.appendDecimal(value, to: &out)
        case .string(let value): JSON.appendString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.append(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let pairs):
            out.append(UInt8(ascii: "{"))
            for (index, (key, value)) in pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSON.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.append(to: &out)
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

    public static func appendString(_ value: String, to out: inout [UInt8]) {
        var value = value
        value.withUTF8 { appendBytes(UnsafeRawBufferPointer($0), to: &out) }
    }

    /// Appends UTF-8 bytes as a JSON string, escaping what JSON requires.
    public static func appendBytes(_ value: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var plain = true
        for byte in value where byte < 0x20 || byte == 0x22 || byte == 0x5C {
            plain = false
            break
        }
        if plain {
            out.append(contentsOf: value)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in value {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xf)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Parses JSON text (objects, arrays, strings, integers, booleans, null).
    public static func parse(_ text: String) -> JSON? {
        var parser = Parser(bytes: Array(text.utf8))
        guard let value = parser.value() else { return nil }
        parser.skipSpace()
        return parser.index == parser.bytes.count ? value : nil
    }

    struct Parser {
        let bytes: [UInt8]
        var index = 0

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
        }

        mutating func value() -> JSON? {
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var pairs: [(String, JSON)] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(pairs) }
                while true {
                    skipSpace()
                    guard case .string(let key)? = value() else { return nil }
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                    index += 1
                    guard let item = value() else { return nil }
                    pairs.append((key, item))
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(pairs) }
                    return nil
                }
            case UInt8(ascii: "["):
                index += 1
                var items: [JSON] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                while true {
                    guard let item = value() else { return nil }
                    items.append(item)
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                    return nil
                }
            case UInt8(ascii: "\""):
                index += 1
                var out: [UInt8] = []
                while index < bytes.count {
                    let byte = bytes[index]
                    index += 1
                    if byte == UInt8(ascii: "\"") { return .string(String(decoding: out, as: UTF8.self)) }
                    if byte == 0x5C {
                        guard index < bytes.count else { return nil }
                        let escape = bytes[index]
                        index += 1
                        switch escape {
                        case UInt8(ascii: "n"): out.append(0x0A)
                        case UInt8(ascii: "r"): out.append(0x0D)
                        case UInt8(ascii: "t"): out.append(0x09)
                        case UInt8(ascii: "b"): out.append(0x08)
                        case UInt8(ascii: "f"): out.append(0x0C)
                        case UInt8(ascii: "u"):
                            guard index + 4 <= bytes.count,
                                let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
                            else { return nil }
                            index += 4
                            var scalarValue = code
                            if (0xD800..<0xDC00).contains(code), index + 6 <= bytes.count, bytes[index] == 0x5C,
                                let low = UInt32(
                                    String(decoding: bytes[index + 2..<index + 6], as: UTF8.self), radix: 16)
                            {
                                index += 6
                                scalarValue = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                            }
                            out.append(contentsOf: Array(String(Unicode.Scalar(scalarValue) ?? "\u{FFFD}").utf8))
                        default: out.append(escape)
                        }
                    } else {
                        out.append(byte)
                    }
                }
                return nil
            case UInt8(ascii: "t"):
                guard bytes[index...].starts(with: "true".utf8) else { return nil }
                index += 4
                return .bool(true)
            case UInt8(ascii: "f"):
                guard bytes[index...].starts(with: "false".utf8) else { return nil }
                index += 5
                return .bool(false)
            case UInt8(ascii: "n"):
                guard bytes[index...].starts(with: "null".utf8) else { return nil }
                index += 4
                return .null
            default:
                var value: Int64 = 0
                var negative = false
                if bytes[index] == UInt8(ascii: "-") { negative = true; index += 1 }
                let start = index
                while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                    value = value &* 10 &+ Int64(bytes[index] - 0x30)
                    index += 1
                }
                // Fractions are skipped: settle's own files never hold them in money fields.
                if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                    index += 1
                    while index < bytes.count, (bytes[index] >= 0x30 && bytes[index] <= 0x39) { index += 1 }
                }
                guard index > start else { return nil }
                return .int(negative ? -value : value)
            }
        }
    }
}
