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

    /// An instruction from its JSON object (plan format 4, docs/PLAN-FORMAT.md); keys it
    /// does not know are ignored. The facts its parameters carry are read from them (a
    /// transfer's amount, currency, destination, charge and group; a payout's amount,
    /// currency, recipient and payout method); the rest from their own keys (a reversal's
    /// `group`, `payee` and `currency`, a per-line payout's `group`, a transfer's
    /// `preflight`). Whether the parameters are exactly those its facts give is checked before
    /// it is sent (``RequestParams/mismatch(_:)``), and whether the facts give its id
    /// (``Instruction/inconsistency``).
    public init(json: JSON) throws(JSON.ParseError) {
        if case .array = json {
            throw ObjectReader.problem(
                "is an array: the folder was written by an older settle (plan format 2); plan again with this one")
        }
        let object = try ObjectReader(json, "the instruction")
        guard let kind = Kind(name: try object.string("kind")) else {
            throw ObjectReader.problem("\"kind\" is not transfer, reversal or payout")
        }
        let params = try object.value("params")
        let facts = try Facts(kind: kind, params: params, object: object)
        self.init(
            id: try object.string("id"), kind: kind, method: try object.string("method"),
            path: try object.string("path"), idempotencyKey: try object.string("idempotency_key"),
            stripeContext: try object.optionalString("stripe_context"), params: params,
            lines: try Self.lines(object, kind: kind), group: facts.group, payee: facts.payee,
            charge: facts.charge, currency: facts.currency, amountMinor: facts.amountMinor,
            preflight: facts.preflight)
        if kind == .transfer, facts.charge.isEmpty { ledgerCharge = try object.optionalString("charge_key") ?? "" }
    }

    /// `lines` (the ids) zipped with `line_claims` (`[amount_minor, content]` each; a
    /// negative amount is a reversal line netted into its transfer).
    private static func lines(_ object: ObjectReader, kind: Kind) throws(JSON.ParseError) -> [Line] {
        let ids = try object.array("lines")
        let claims = try object.array("line_claims")
        guard ids.count == claims.count else {
            throw ObjectReader.problem("has \(ids.count) lines but \(claims.count) line claims")
        }
        var lines: [Line] = []
        lines.reserveCapacity(ids.count)
        for (id, claim) in zip(ids, claims) {
            guard case .string(let lineID) = id else {
                throw ObjectReader.problem("has a line id that is not a string")
            }
            guard case .array(let pair) = claim, pair.count == 2, case .int(let amount) = pair[0],
                case .string(let content) = pair[1]
            else { throw ObjectReader.problem("has a line claim that is not [amount_minor, content]") }
            let netted = amount < 0
            guard amount != 0, amount != .min, !netted || kind == .transfer else {
                throw ObjectReader.problem("has a line claim of amount \(amount)")
            }
            lines.append(
                Line(
                    lineID: lineID, kind: netted ? LineKind.reversal.name : kind.name,
                    amountMinor: netted ? -amount : amount, content: content))
        }
        return lines
    }

    /// The facts of an instruction: from its parameters where they carry them.
    private struct Facts {
        var group = "", payee = "", charge = "", currency = ""
        var amountMinor: Int64 = 0
        var preflight = Preflight()

        init(kind: Kind, params: JSON, object: ObjectReader) throws(JSON.ParseError) {
            let form = try ObjectReader(params, "\"params\"")
            switch kind {
            case .transfer:
                payee = try form.string("destination")
                group = try form.string("transfer_group")
                charge = try form.optionalString("source_transaction") ?? ""
                currency = try form.string("currency")
                amountMinor = try Self.integer(form.string("amount"), "amount")
                preflight =
                    try object.optional("preflight").map { (value) throws(JSON.ParseError) in
                        try Preflight(json: value)
                    } ?? Preflight()
            case .reversal:
                group = try object.string("group")
                payee = try object.string("payee")
                currency = try object.string("currency")
                amountMinor = try Self.integer(form.string("amount"), "amount")
            case .payout:
                let to = try ObjectReader(form.value("to"), "\"to\"")
                let amount = try ObjectReader(form.value("amount"), "\"amount\"")
                payee = try to.string("recipient")
                currency = try amount.string("currency")
                amountMinor = try amount.int("value")
                group = try object.optionalString("group") ?? ""
                // The charge a payout's line names, looked up first when nothing said of it.
                let charge = try object.optional("preflight").map { (value) throws(JSON.ParseError) in
                    try Preflight(json: value).charge
                }
                preflight = Preflight(
                    charge: charge ?? nil, payoutMethod: try to.string("payout_method"), recipient: payee)
            }
        }

        static func integer(_ text: String, _ key: String) throws(JSON.ParseError) -> Int64 {
            guard let value = Int64(text) else { throw ObjectReader.problem("\"\(key)\" is not an integer") }
            return value
        }
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
