import SettleCore
import Testing

/// The one JSON type: exact bytes out, exact values in, and a byte offset when bytes are not JSON.
@Suite struct JSONTests {
    /// The parse error for `text`, or nil when it parses.
    static func failure(_ text: String) -> JSON.ParseError? {
        do {
            _ = try JSON.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func roundTripKeepsOrderAndEveryKind() throws {
        let value: JSON = [
            "z": "last key first", "a": [1, -2, .int(.max), .int(.min)], "m": ["t": true, "f": false, "n": .null],
            "rate": .number("1.25e-3"), "empty": [:], "none": [],
        ]
        let text = value.encoded()
        #expect(
            text
                == #"{"z":"last key first","a":[1,-2,9223372036854775807,-9223372036854775808],"m":{"t":true,"f":false,"n":null},"rate":1.25e-3,"empty":{},"none":[]}"#
        )
        #expect(try JSON.parse(text) == value)
        #expect(try JSON.parse(" \n\t\r" + text + " \n") == value)
    }

    @Test func sortingKeysSortsEveryObject() {
        let value: JSON = ["b": 1, "a": ["d": 2, "c": [["y": 1, "x": 2]]]]
        #expect(value.encoded(sortingKeys: true) == #"{"a":{"c":[{"x":2,"y":1}],"d":2},"b":1}"#)
        #expect(value.encoded() == #"{"b":1,"a":{"d":2,"c":[{"y":1,"x":2}]}}"#)
    }

    @Test func escapesExactlyWhatJSONRequires() throws {
        let text = "q\" b\\ n\n r\r t\t \u{01}\u{08}\u{0C}\u{1F} é/€😀\u{7F}"
        let encoded = JSON.string(text).encoded()
        #expect(encoded == #""q\" b\\ n\n r\r t\t \u0001\u0008\u000c\u001f é/€😀"# + "\u{7F}\"")
        #expect(try JSON.parse(encoded) == .string(text))
        var writer = JSON.Writer()
        writer.open()
        writer.key("k")
        writer.string(text)
        writer.key("n")
        writer.int(-7)
        writer.key("list")
        writer.openArray()
        writer.null()
        writer.string("x")
        writer.closeArray()
        writer.close()
        #expect(String(decoding: writer.out, as: UTF8.self) == #"{"k":"# + encoded + #","n":-7,"list":[null,"x"]}"#)
    }

    /// Every byte at every position of a run longer than a word: the escaper's word-at-a-time
    /// scan must stop exactly where the byte-by-byte rule would.
    @Test func writerEscapesEveryByteAtEveryPositionAsTheRuleSays() {
        func expected(_ bytes: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [0x22]
            for byte in bytes {
                switch byte {
                case 0x22: out += [0x5C, 0x22]
                case 0x5C: out += [0x5C, 0x5C]
                case 0x0A: out += Array(#"\n"#.utf8)
                case 0x0D: out += Array(#"\r"#.utf8)
                case 0x09: out += Array(#"\t"#.utf8)
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
                default: out.append(byte)
                }
            }
            return out + [0x22]
        }
        var failures = 0
        for byte in 0...255 {
            for position in 0..<19 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 19)
                bytes[position] = UInt8(byte)
                bytes[18 - position] = UInt8(byte)
                var writer = JSON.Writer()
                bytes.withUnsafeBytes { writer.string(bytes: $0) }
                var appended: [UInt8] = []
                bytes.withUnsafeBytes { JSON.appendBytes($0, to: &appended) }
                if writer.out != expected(bytes) || appended != expected(bytes) { failures += 1 }
            }
        }
        #expect(failures == 0)
    }

    @Test func writerPartsAndNumbersAreTheJoinedForms() {
        var parts = JSON.Writer()
        var joined = JSON.Writer()
        parts.open()
        joined.open()
        let name = Array("shift \"x\"".utf8)
        name.withUnsafeBytes { parts.key("metadata[", escaping: $0, "]") }
        joined.key(escaping: "metadata[shift \"x\"]")
        let target = Array("tr_1\n".utf8)
        target.withUnsafeBytes { parts.string("/v1/transfers/", escaping: $0, "/reversals") }
        joined.string("/v1/transfers/tr_1\n/reversals")
        for value: Int64 in [0, 7, -7, 10, 9346, .max, .min] {
            parts.key("n")
            joined.key("n")
            parts.string(integer: value)
            var digits: [UInt8] = []
            JSON.appendInteger(value, to: &digits)
            joined.string(String(decoding: digits, as: UTF8.self))
            parts.int(value)
            joined.int(value)
        }
        parts.close()
        joined.close()
        #expect(parts.out == joined.out)
        #expect(
            String(decoding: parts.out, as: UTF8.self).hasSuffix(
                #""n":"-9223372036854775808","# + "-9223372036854775808}"))
    }

    @Test func writerGrowsAndStartsAgainAfterRemoveAll() {
        let long = String(repeating: "a\u{01}\"", count: 2000)
        var writer = JSON.Writer(out: Array("[".utf8))
        writer.string(long)
        writer.string("x")
        #expect(String(decoding: writer.out, as: UTF8.self) == "[" + JSON.string(long).encoded() + #","x""#)
        writer.removeAll()
        writer.open()
        writer.key("k")
        writer.null()
        writer.close()
        writer.newline()
        writer.open()
        writer.close()
        #expect(String(decoding: writer.out, as: UTF8.self) == "{\"k\":null}\n{}")
    }

    @Test func readsEscapesAndSurrogatePairs() throws {
        #expect(try JSON.parse(#""\u00e9\/\b\f\ud83d\ude00\u20AC""#) == .string("é/\u{08}\u{0C}😀€"))
        #expect(Self.failure(#""\ud83d""#) == .init(offset: 1, message: "a high surrogate without its low surrogate"))
        #expect(Self.failure(#""\ude00""#) == .init(offset: 1, message: "a low surrogate without its high surrogate"))
        #expect(Self.failure(#""\x""#) == .init(offset: 1, message: "an unknown escape"))
        #expect(Self.failure(#""\u12""#) == .init(offset: 1, message: "\\u needs four hex digits"))
    }

    @Test func integersAreExactAndOtherNumbersKeepTheirText() throws {
        #expect(try JSON.parse("9223372036854775807") == .int(.max))
        #expect(try JSON.parse("-9223372036854775808") == .int(.min))
        #expect(try JSON.parse("0") == .int(0))
        #expect(try JSON.parse("-0") == .int(0))
        #expect(try JSON.parse("9223372036854775808") == .number("9223372036854775808"))
        #expect(try JSON.parse("-9223372036854775809") == .number("-9223372036854775809"))
        #expect(try JSON.parse("1.50") == .number("1.50"))
        #expect(try JSON.parse("2E+3") == .number("2E+3"))
        #expect(try JSON.parse("[1.0]").arrayValue?.first?.intValue == nil)
    }

    @Test func accessorsAndTheSubscriptSetter() {
        var value: JSON = ["from": ["financial_account": .null, "currency": "usd"], "amount": 5]
        value["from"]?["financial_account"] = "fa_1"
        value["extra"] = true
        value["amount"] = nil
        #expect(value.encoded() == #"{"from":{"financial_account":"fa_1","currency":"usd"},"extra":true}"#)
        #expect(value["from"]?["currency"]?.stringValue == "usd")
        #expect(value["extra"]?.boolValue == true)
        #expect(value["missing"] == nil)
        #expect(JSON.string("x")["key"] == nil)
    }

    @Test func prettyIsTheManifestLayout() {
        let value: JSON = ["a": 1, "b": ["x", ["c": .null]], "e": [], "o": [:]]
        #expect(
            value.pretty()
                == "{\n  \"a\": 1,\n  \"b\": [\n    \"x\",\n    {\n      \"c\": null\n    }\n  ],\n  \"e\": [],\n  \"o\": {}\n}"
        )
    }

    @Test func syntaxErrorsNameTheByte() {
        #expect(Self.failure(#"{"a":1,}"#) == .init(offset: 7, message: "expected a key (a string)"))
        #expect(Self.failure("[1 2]") == .init(offset: 3, message: "expected ',' or ']'"))
        #expect(Self.failure(#"{"a" 1}"#) == .init(offset: 5, message: "expected ':'"))
        #expect(Self.failure(#"{"a":1 "b":2}"#) == .init(offset: 7, message: "expected ',' or '}'"))
        #expect(
            Self.failure(#"{"a":1,"a":2}"#) == .init(offset: 7, message: "the key \"a\" appears twice in one object"))
        #expect(Self.failure(#"  "abc"#) == .init(offset: 2, message: "the string is not closed"))
        #expect(Self.failure("tru") == .init(offset: 0, message: "expected a value"))
        #expect(Self.failure("{} x") == .init(offset: 3, message: "more bytes after the JSON value"))
        #expect(Self.failure("01") == .init(offset: 1, message: "more bytes after the JSON value"))
        #expect(Self.failure("-") == .init(offset: 0, message: "a '-' without digits"))
        #expect(Self.failure("1.") == .init(offset: 2, message: "a '.' without digits"))
        #expect(Self.failure("1e") == .init(offset: 2, message: "an exponent without digits"))
        #expect(Self.failure("") == .init(offset: 0, message: "the text ends where a value should be"))
        #expect(Self.failure("[1,") == .init(offset: 3, message: "the text ends where a value should be"))
        #expect(
            Self.failure("\"a\u{0A}b\"")
                == .init(offset: 2, message: "a control character (byte 10) inside a string must be escaped"))
        #expect(Self.failure("{\"a\":1,\"a\":2}")?.description == "byte 7: the key \"a\" appears twice in one object")
    }

    @Test func invalidUTF8AndDeepNestingAreRefused() throws {
        #expect(throws: JSON.ParseError(offset: 1, message: "the string is not valid UTF-8")) {
            try JSON.parse([UInt8(ascii: "["), 0x22, 0xFF, 0x22, UInt8(ascii: "]")])
        }
        let deep = String(repeating: "[", count: JSON.maximumDepth) + String(repeating: "]", count: JSON.maximumDepth)
        #expect(try JSON.parse(deep).arrayValue?.count == 1)
        let tooDeep = "[" + deep + "]"
        #expect(Self.failure(tooDeep) == .init(offset: JSON.maximumDepth, message: "nested deeper than 512"))
    }

    @Test func manyKeysStillFindADuplicate() {
        let members = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(Self.failure("{" + members + "}") == nil)
        let repeated = "{" + members + ",\"k3\":0}"
        #expect(Self.failure(repeated)?.message == "the key \"k3\" appears twice in one object")
    }
}
