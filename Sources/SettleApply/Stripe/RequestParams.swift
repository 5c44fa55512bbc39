public import SettleCore

/// The request parameters of an instruction, built from its facts: the one place that knows
/// the shape of each call settle sends. The planner writes them into `instructions.jsonl`
/// through ``write(_:into:)`` (straight to bytes, from the plan's symbols), and `apply`
/// builds them again from the instruction's facts with the same function and sends only a
/// plan whose parameters are exactly those (``mismatch(_:)``).
public enum RequestParams {
    /// What of an instruction the input says and settle cannot derive.
    public struct Extras: Sendable, Equatable {
        /// The description, when the instruction's lines agree on one.
        public var description: String?
        /// Metadata on which the lines agree, in the input's order (never `settle_instruction`).
        public var metadata: [(key: String, value: String)]
        /// A payout's payout method.
        public var payoutMethod: String?
        /// A payout's financial account, when the plan was made with `--financial-account`.
        public var financialAccount: String?

        public init(
            description: String? = nil, metadata: [(key: String, value: String)] = [], payoutMethod: String? = nil,
            financialAccount: String? = nil
        ) {
            self.description = description
            self.metadata = metadata
            self.payoutMethod = payoutMethod
            self.financialAccount = financialAccount
        }

        public static func == (lhs: Extras, rhs: Extras) -> Bool {
            lhs.description == rhs.description && lhs.payoutMethod == rhs.payoutMethod
                && lhs.financialAccount == rhs.financialAccount
                && lhs.metadata.map(\.key) == rhs.metadata.map(\.key)
                && lhs.metadata.map(\.value) == rhs.metadata.map(\.value)
        }
    }

    /// A text fact of a call, written by its holder (the planner writes symbols of the batch
    /// without making strings; apply writes the strings it read).
    public enum Field: Sendable { case id, group, payee, charge, payoutMethod }

    /// The facts a request is built from.
    public protocol Facts {
        var kind: Instruction.Kind { get }
        var currencyCode: String { get }
        var amountMinor: Int64 { get }
        /// A transfer linked to its charge (`source_transaction`).
        var hasCharge: Bool { get }
        var extras: Extras { get }
        /// Writes the field as a JSON string.
        func write(_ field: Field, into json: inout JSON.Writer)
    }

    /// Writes the parameters as a JSON object. v1 (transfer, reversal): the flat form keys,
    /// in the order settle sends them; v2 (payout): the JSON body. `from.financial_account`
    /// is null when the plan has none (apply then sends its own `--financial-account`).
    public static func write(_ facts: some Facts, into json: inout JSON.Writer) {
        let extras = facts.extras
        let settleKey = "settle_instruction"
        json.open()
        switch facts.kind {
        case .transfer, .reversal:
            json.key("amount"); json.string(integer: facts.amountMinor)
            if facts.kind == .transfer {
                json.key("currency"); json.string(facts.currencyCode)
                json.key("destination"); facts.write(.payee, into: &json)
                if facts.hasCharge { json.key("source_transaction"); facts.write(.charge, into: &json) }
                json.key("transfer_group"); facts.write(.group, into: &json)
            }
            if let description = extras.description { json.key("description"); json.string(description) }
            json.key("metadata[settle_instruction]"); facts.write(.id, into: &json)
            for (key, value) in extras.metadata where key != settleKey {
                var key = key
                key.withUTF8 { json.key("metadata[", escaping: UnsafeRawBufferPointer($0), "]") }
                json.string(value)
            }
        case .payout:
            json.key("from")
            json.open()
            json.key("financial_account")
            if let account = extras.financialAccount { json.string(account) } else { json.null() }
            json.key("currency"); json.string(facts.currencyCode)
            json.close()
            json.key("to")
            json.open()
            json.key("recipient"); facts.write(.payee, into: &json)
            json.key("payout_method"); facts.write(.payoutMethod, into: &json)
            json.key("currency"); json.string(facts.currencyCode)
            json.close()
            json.key("amount")
            json.open()
            json.key("value"); json.int(facts.amountMinor)
            json.key("currency"); json.string(facts.currencyCode)
            json.close()
            json.key("delivery_options")
            json.open()
            json.key("speed"); json.string("instant")
            json.close()
            if let description = extras.description { json.key("description"); json.string(description) }
            json.key("metadata")
            json.open()
            json.key("settle_instruction"); facts.write(.id, into: &json)
            for (key, value) in extras.metadata where key != settleKey {
                json.key(escaping: key); json.string(value)
            }
            json.close()
        }
        json.close()
    }

    /// The parameters as a value, from facts as text.
    public static func make(
        id: String, kind: Instruction.Kind, group: String, payee: String, charge: String, currency: String,
        amountMinor: Int64, extras: Extras
    ) -> JSON {
        let facts = TextFacts(
            kind: kind, id: id, group: group, payee: payee, charge: charge, currencyCode: currency,
            amountMinor: amountMinor, extras: extras)
        var json = JSON.Writer()
        write(facts, into: &json)
        // The writer's own output: it always parses.
        return (try? JSON.parse(json.out)) ?? .null
    }

    /// Facts held as strings (what apply read from the plan).
    struct TextFacts: Facts {
        var kind: Instruction.Kind
        var id, group, payee, charge, currencyCode: String
        var amountMinor: Int64
        var extras: Extras
        var payoutMethod: String { extras.payoutMethod ?? "" }
        var hasCharge: Bool { !charge.isEmpty }

        func write(_ field: Field, into json: inout JSON.Writer) {
            switch field {
            case .id: json.string(id)
            case .group: json.string(group)
            case .payee: json.string(payee)
            case .charge: json.string(charge)
            case .payoutMethod: json.string(payoutMethod)
            }
        }
    }
}

extension RequestParams {
    /// The API path of an instruction's call; a reversal names the transfer it reverses.
    public static func path(kind: Instruction.Kind, target: String) -> String {
        switch kind {
        case .transfer: "/v1/transfers"
        case .reversal: "/v1/transfers/\(target)/reversals"
        case .payout: "/v2/money_management/outbound_payments"
        }
    }

    /// What of the parameters the input decided (description, metadata, payout method,
    /// financial account), read back from parameters ``write(_:into:)`` wrote.
    public static func extras(of params: JSON, kind: Instruction.Kind) -> Extras {
        var extras = Extras(description: params["description"]?.stringValue)
        guard case .object(let pairs) = params else { return extras }
        switch kind {
        case .transfer, .reversal:
            for (key, value) in pairs where key.hasPrefix("metadata[") && key.hasSuffix("]") {
                let name = String(key.dropFirst("metadata[".count).dropLast())
                guard name != "settle_instruction", let text = value.stringValue else { continue }
                extras.metadata.append((name, text))
            }
        case .payout:
            if case .object(let metadata)? = params["metadata"] {
                for (key, value) in metadata where key != "settle_instruction" {
                    guard let text = value.stringValue else { continue }
                    extras.metadata.append((key, text))
                }
            }
            extras.payoutMethod = params["to"]?["payout_method"]?.stringValue
            extras.financialAccount = params["from"]?["financial_account"]?.stringValue
        }
        return extras
    }

    /// Why an instruction's request would not send exactly its own facts, or nil: the method
    /// and path its kind calls for, and parameters equal, key for key and in order, to those
    /// its facts give (an edited amount, an added parameter or a changed payee is refused).
    public static func mismatch(_ instruction: Instruction) -> String? {
        let kind = instruction.kind
        let (method, path, params) = (instruction.method, instruction.path, instruction.params)
        let target = kind == .reversal ? Instruction.reversalTarget(path) ?? "" : ""
        let expectedPath = Self.path(kind: kind, target: target)
        guard path == expectedPath, method == "POST" else { return "calls \(method) \(path), not POST \(expectedPath)" }
        // Transfers are created on the platform account: a context would move another account's money.
        guard instruction.stripeContext == nil else { return "names a Stripe-Context; settle sends none" }
        let keyRoot = IdempotencyKey.make(instruction: instruction.id, attempt: 1).dropLast()
        guard instruction.idempotencyKey.hasPrefix(keyRoot),
            let attempt = Int(instruction.idempotencyKey.dropFirst(keyRoot.count)), attempt >= 1,
            instruction.idempotencyKey == IdempotencyKey.make(instruction: instruction.id, attempt: attempt)
        else { return "has an idempotency key that is not settle's for its id" }
        let expected = make(
            id: instruction.id, kind: kind, group: instruction.group, payee: instruction.payee,
            charge: instruction.charge, currency: instruction.currency, amountMinor: instruction.amountMinor,
            extras: extras(of: params, kind: kind))
        guard params == expected else {
            return "has parameters that are not those its facts give (amount, currency, payee, charge, group)"
        }
        return nil
    }
}
