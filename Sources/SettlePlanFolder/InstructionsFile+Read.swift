public import Foundation
public import SettleApply
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

    /// An instruction from its line of plan format 2 (docs/PLAN-FORMAT.md): `[id, kind,
    /// group, payee, charge or target, currency, amount_minor, lines, description?, extras?]`,
    /// each line `[line_id, amount_minor, content, kind?]`. The request parameters are built
    /// from these facts (``RequestParams``); the path and idempotency key follow from them.
    public init(json: JSON) throws(JSON.ParseError) {
        if case .object = json {
            throw ObjectReader.problem(
                "is an object: the folder was written by an older settle (plan format 1); plan again with this one")
        }
        guard case .array(let items) = json, (8...10).contains(items.count) else {
            throw ObjectReader.problem("is not an array of 8 to 10 items")
        }
        func string(_ position: Int, _ what: String) throws(JSON.ParseError) -> String {
            guard case .string(let text) = items[position] else {
                throw ObjectReader.problem("\(what) is not a string")
            }
            return text
        }
        let id = try string(0, "the id")
        guard let kind = Kind(name: try string(1, "the kind")) else {
            throw ObjectReader.problem("the kind is not transfer, reversal or payout")
        }
        let group = try string(2, "the group")
        let payee = try string(3, "the payee")
        let chargeOrTarget = try string(4, "the charge")
        let currency = try string(5, "the currency")
        guard case .int(let amount) = items[6] else { throw ObjectReader.problem("the amount is not an integer") }
        guard case .array(let lineItems) = items[7] else { throw ObjectReader.problem("the lines are not an array") }
        let lines = try lineItems.map { (item) throws(JSON.ParseError) in try Line(json: item, of: kind) }
        var extras = RequestParams.Extras()
        var preflightCharge = false
        if items.count > 8 {
            switch items[8] {
            case .null: break
            case .string(let text): extras.description = text
            default: throw ObjectReader.problem("the description is not a string")
            }
        }
        if items.count > 9 {
            let object = try ObjectReader(items[9], "the extras")
            if let metadata = object.optional("metadata") {
                guard case .object(let pairs) = metadata else {
                    throw ObjectReader.problem("\"metadata\" is not an object")
                }
                for (key, value) in pairs {
                    guard case .string(let text) = value else {
                        throw ObjectReader.problem("metadata \"\(key)\" is not a string")
                    }
                    extras.metadata.append((key, text))
                }
            }
            extras.payoutMethod = try object.optionalString("payout_method")
            extras.financialAccount = try object.optionalString("financial_account")
            preflightCharge = object.optional("preflight_charge") == .bool(true)
        }
        let charge = kind == .reversal ? "" : chargeOrTarget
        let path = RequestParams.path(kind: kind, target: chargeOrTarget)
        let preflight: Preflight
        switch kind {
        case .transfer:
            preflight = preflightCharge ? Preflight(charge: charge) : Preflight()
        case .reversal:
            preflight = Preflight()
        case .payout:
            preflight = Preflight(payoutMethod: extras.payoutMethod ?? "", recipient: payee)
        }
        self.init(
            id: id, kind: kind, path: path,
            params: RequestParams.make(
                id: id, kind: kind, group: group, payee: payee, charge: charge, currency: currency,
                amountMinor: amount, extras: extras),
            lines: lines, group: group, payee: payee, charge: charge, currency: currency, amountMinor: amount,
            preflight: preflight)
    }
}

extension Instruction.Line {
    /// `[line_id, amount_minor, content, kind?]`: without a kind, a line of a transfer with a
    /// negative amount is a reversal netted into it (its amount is the magnitude), any other
    /// line has the instruction's kind.
    init(json: JSON, of instruction: Instruction.Kind) throws(JSON.ParseError) {
        guard case .array(let items) = json, items.count == 3 || items.count == 4,
            case .string(let lineID) = items[0], case .int(let amount) = items[1],
            case .string(let content) = items[2]
        else { throw ObjectReader.problem("a line is not [line_id, amount_minor, content, kind?]") }
        if items.count == 4 {
            guard case .string(let kind) = items[3] else { throw ObjectReader.problem("a line's kind is not a string") }
            self.init(lineID: lineID, kind: kind, amountMinor: amount, content: content)
        } else if instruction == .transfer && amount < 0 {
            self.init(lineID: lineID, kind: "reversal", amountMinor: -amount, content: content)
        } else {
            self.init(lineID: lineID, kind: instruction.name, amountMinor: amount, content: content)
        }
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
