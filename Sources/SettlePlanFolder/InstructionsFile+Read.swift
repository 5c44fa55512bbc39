public import Foundation
public import SettleCore

extension Instruction {
    /// Decodes `instructions.jsonl`: one object per non-blank line.
    ///
    /// - Throws: ``SettleError/Code/planInvalid`` at the 1-based line.
    public static func decodeJSONLines(_ data: Data) throws(SettleError) -> [Instruction] {
        var result: [Instruction] = []
        var number = 0
        for line in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if let instruction = try decode(line: line, number: number) { result.append(instruction) }
        }
        return result
    }

    /// Decodes one line of `instructions.jsonl`; nil for a blank line.
    ///
    /// - Parameter number: the line's 1-based number, for the error.
    /// - Throws: ``SettleError/Code/planInvalid``: `instructions.jsonl line N: …`, located at
    ///   the line and, for a syntax error, the byte offset in it.
    public static func decode(line: some Collection<UInt8>, number: Int) throws(SettleError)
        -> Instruction?
    {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return nil }
        do throws(JSON.ParseError) {
            return try Instruction(json: JSON.parse(line))
        } catch {
            throw SettleError(
                .planInvalid, "instructions.jsonl line \(number): \(error)",
                at: .init(file: "instructions.jsonl", line: number, byteOffset: error.offset), cause: error.description)
        }
    }

    /// An instruction from its JSON object (plan format 3, docs/PLAN-FORMAT.md); keys it
    /// does not know are ignored, and `stripe_context`, `group`, `charge` and `preflight` may
    /// be missing or null. Whether the parameters are those its facts give is checked before
    /// it is sent (``RequestParams/mismatch(_:)``).
    public init(json: JSON) throws(JSON.ParseError) {
        if case .array = json {
            throw ObjectReader.problem(
                "is an array: the folder was written by an older settle (plan format 2); plan again with this one")
        }
        let object = try ObjectReader(json, "the instruction")
        guard let kind = Kind(name: try object.string("kind")) else {
            throw ObjectReader.problem("\"kind\" is not transfer, reversal or payout")
        }
        self.init(
            id: try object.string("id"), kind: kind, method: try object.string("method"),
            path: try object.string("path"), idempotencyKey: try object.string("idempotency_key"),
            stripeContext: try object.optionalString("stripe_context"), params: try object.value("params"),
            lines: try object.array("lines").map { (line) throws(JSON.ParseError) in try Line(json: line) },
            group: try object.optionalString("group") ?? "", payee: try object.string("payee"),
            charge: try object.optionalString("charge") ?? "", currency: try object.string("currency"),
            amountMinor: try object.int("amount_minor"),
            preflight: try object.optional("preflight").map { (value) throws(JSON.ParseError) in
                try Preflight(json: value)
            } ?? Preflight())
    }
}

extension Instruction.Line {
    /// `{"line_id", "kind", "amount_minor", "content"}`.
    init(json: JSON) throws(JSON.ParseError) {
        let object = try ObjectReader(json, "a line")
        self.init(
            lineID: try object.string("line_id"), kind: try object.string("kind"),
            amountMinor: try object.int("amount_minor"), content: try object.string("content"))
    }
}

extension Instruction.Preflight {
    init(json: JSON) throws(JSON.ParseError) {
        let object = try ObjectReader(json, "\"preflight\"")
        self.init(
            charge: try object.optionalString("charge"), payoutMethod: try object.optionalString("payout_method"),
            recipient: try object.optionalString("recipient"))
    }
}

/// The members of one JSON object, read by key with a message naming what is wrong.
struct ObjectReader {
    let json: JSON
    let what: String

    init(_ json: JSON, _ what: String) throws(JSON.ParseError) {
        guard case .object = json else { throw Self.problem("\(what) is not a JSON object") }
        self.json = json
        self.what = what
    }

    /// A problem with the content, not the syntax: it has no byte offset of its own.
    static func problem(_ message: String) -> JSON.ParseError { JSON.ParseError(offset: nil, message: message) }

    func value(_ key: String) throws(JSON.ParseError) -> JSON {
        guard let value = json[key] else { throw Self.problem("\(what) has no \"\(key)\"") }
        return value
    }

    /// The member, or nil when it is missing or null.
    func optional(_ key: String) -> JSON? {
        guard let value = json[key], value != .null else { return nil }
        return value
    }

    func string(_ key: String) throws(JSON.ParseError) -> String {
        guard case .string(let text) = try value(key) else { throw Self.problem("\"\(key)\" is not a string") }
        return text
    }

    func optionalString(_ key: String) throws(JSON.ParseError) -> String? {
        guard let value = optional(key) else { return nil }
        guard case .string(let text) = value else { throw Self.problem("\"\(key)\" is not a string") }
        return text
    }

    func int(_ key: String) throws(JSON.ParseError) -> Int64 {
        guard case .int(let number) = try value(key) else { throw Self.problem("\"\(key)\" is not an integer") }
        return number
    }

    func array(_ key: String) throws(JSON.ParseError) -> [JSON] {
        guard case .array(let items) = try value(key) else { throw Self.problem("\"\(key)\" is not an array") }
        return items
    }
}
