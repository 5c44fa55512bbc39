extension JSON {
    /// Why bytes are not the JSON expected, and where: the byte offset (from 0) of a syntax
    /// error; nil when the JSON is well formed but its content is not what was expected.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Offset of the byte where the problem starts, from 0.
        public var offset: Int?
        public var message: String

        public init(offset: Int?, message: String) {
            self.offset = offset
            self.message = message
        }

        public var description: String { offset.map { "byte \($0): \(message)" } ?? message }
    }

    /// Objects and arrays nested deeper than this are refused (the parser recurses).
    public static let maximumDepth = 512

    /// Parses one JSON text (RFC 8259: whitespace around one value). Strings must be valid
    /// UTF-8; an object may not repeat a key (which of two would count is not defined).
    public static func parse(_ bytes: some Collection<UInt8>) throws(ParseError) -> JSON {
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(ParseError) in try parse(UnsafeRawBufferPointer(buffer)) }
        }
        if let parsed { return try parsed.get() }
        return try Array(bytes).withUnsafeBytes { buffer in Result { () throws(ParseError) in try parse(buffer) } }
            .get()
    }

    /// Parses a JSON text held in a string.
    public static func parse(_ text: String) throws(ParseError) -> JSON {
        var text = text
        return try text.withUTF8 { buffer in
            Result { () throws(ParseError) in try parse(UnsafeRawBufferPointer(buffer)) }
        }.get()
    }

    /// Parses JSON bytes in place: no copy but the strings it keeps.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(ParseError) -> JSON {
        var parser = Parser(bytes: bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.failure("more bytes after the JSON value") }
        return value
    }

    struct Parser {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        func failure(_ message: String, at offset: Int? = nil) -> ParseError {
            ParseError(offset: offset ?? index, message: message)
        }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(ParseError) -> JSON {
            guard index < bytes.count else { throw failure("the text ends where a value should be") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw failure("expected a value")
            }
        }

        mutating func literal(_ word: StaticString, _ value: JSON) throws(ParseError) -> JSON {
            let word = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
            guard bytes.count - index >= word.count, bytes[index..<index + word.count].elementsEqual(word) else {
                throw failure("expected a value")
            }
            index += word.count
            return value
        }

        mutating func object(depth: Int) throws(ParseError) -> JSON {
            guard depth <= JSON.maximumDepth else { throw failure("nested deeper than \(JSON.maximumDepth)") }
            index += 1
            var pairs: [(String, JSON)] = []
            var keys: Set<String> = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(pairs)
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw failure("expected a key (a string)")
                }
                let keyStart = index
                let key = try string()
                // Small objects are searched; a set only once an object is large.
                let repeated = pairs.count < 16 ? pairs.contains { $0.0 == key } : !keys.insert(key).inserted
                if pairs.count == 15 { keys = Set(pairs.map(\.0) + [key]) }
                guard !repeated else { throw failure("the key \"\(key)\" appears twice in one object", at: keyStart) }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
                index += 1
                skipSpace()
                pairs.append((key, try value(depth: depth)))
                skipSpace()
                guard index < bytes.count else { throw failure("the text ends inside an object") }
                switch bytes[index] {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return .object(pairs)
                default: throw failure("expected ',' or '}'")
                }
            }
        }

        mutating func array(depth: Int) throws(ParseError) -> JSON {
            guard depth <= JSON.maximumDepth else { throw failure("nested deeper than \(JSON.maximumDepth)") }
            index += 1
            var items: [JSON] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                skipSpace()
                items.append(try value(depth: depth))
                skipSpace()
                guard index < bytes.count else { throw failure("the text ends inside an array") }
                switch bytes[index] {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return .array(items)
                default: throw failure("expected ',' or ']'")
                }
            }
        }

        /// A string from its opening quote; escapes decoded, UTF-8 checked.
        mutating func string() throws(ParseError) -> String {
            let opening = index
            index += 1
            var runStart = index
            // Only a string with an escape is copied.
            var decoded: [UInt8] = []
            var escaped = false
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    let run = UnsafeRawBufferPointer(rebasing: bytes[runStart..<index])
                    index += 1
                    guard escaped else { return try text(run, at: opening) }
                    decoded.append(contentsOf: run)
                    guard let string = String(validating: decoded, as: UTF8.self) else {
                        throw failure("the string is not valid UTF-8", at: opening)
                    }
                    return string
                case UInt8(ascii: "\\"):
                    escaped = true
                    decoded.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<index]))
                    try escape(into: &decoded)
                    runStart = index
                case 0..<0x20:
                    throw failure("a control character (byte \(byte)) inside a string must be escaped")
                default:
                    index += 1
                }
            }
            throw failure("the string is not closed", at: opening)
        }

        func text(_ run: UnsafeRawBufferPointer, at opening: Int) throws(ParseError) -> String {
            guard let string = String(validating: run, as: UTF8.self) else {
                throw failure("the string is not valid UTF-8", at: opening)
            }
            return string
        }

        /// One escape from its backslash.
        mutating func escape(into out: inout [UInt8]) throws(ParseError) {
            let start = index
            index += 1
            guard index < bytes.count else { throw failure("the text ends inside an escape", at: start) }
            let letter = bytes[index]
            index += 1
            switch letter {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(letter)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                var scalar = try hex4(escapeAt: start)
                if (0xD800..<0xDC00).contains(scalar) {
                    guard bytes.count - index >= 2, bytes[index] == 0x5C, bytes[index + 1] == UInt8(ascii: "u") else {
                        throw failure("a high surrogate without its low surrogate", at: start)
                    }
                    index += 2
                    let low = try hex4(escapeAt: start)
                    guard (0xDC00..<0xE000).contains(low) else {
                        throw failure("a high surrogate without its low surrogate", at: start)
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw failure("a low surrogate without its high surrogate", at: start)
                }
                // Never nil: surrogates are handled above and the value is below 0x110000.
                out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default:
                throw failure("an unknown escape", at: start)
            }
        }

        mutating func hex4(escapeAt start: Int) throws(ParseError) -> UInt32 {
            guard bytes.count - index >= 4 else { throw failure("\\u needs four hex digits", at: start) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw failure("\\u needs four hex digits", at: start)
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// A number: an exact `Int64` when it is an integer that fits, else its text.
        mutating func number() throws(ParseError) -> JSON {
            let start = index
            let negative = bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a '-' without digits", at: start) }
            // Accumulated negative, so Int64.min fits.
            var value: Int64 = 0
            var fits = true
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while index < bytes.count, isDigit(bytes[index]) {
                    let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
                    let (sum, overflowB) = times.subtractingReportingOverflow(Int64(bytes[index] - 0x30))
                    if overflowA || overflowB { fits = false }
                    value = sum
                    index += 1
                }
            }
            var integral = true
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a '.' without digits") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
                integral = false
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard index < bytes.count, isDigit(bytes[index]) else { throw failure("an exponent without digits") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
                integral = false
            }
            if integral, fits {
                if negative { return .int(value) }
                if value != .min { return .int(-value) }
            }
            return .number(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    }
}
