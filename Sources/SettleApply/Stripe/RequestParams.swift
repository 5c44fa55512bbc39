public import SettleCore

/// The request parameters of an instruction, built from its facts: the one place that knows
/// the shape of each call settle sends (plan format 2 stores the facts, not the parameters).
/// The same facts give the same parameters, byte for byte, as settle has always sent and the
/// ledger has always stored.
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

    /// v1 (transfer, reversal): the flat form keys, in the order settle sends them; v2
    /// (payout): the JSON body. `from.financial_account` is null when the plan has none
    /// (apply then sends its own `--financial-account`).
    public static func make(
        id: String, kind: Instruction.Kind, group: String, payee: String, charge: String, currency: String,
        amountMinor: Int64, extras: Extras
    ) -> JSON {
        var pairs: [(String, JSON)] = []
        switch kind {
        case .transfer, .reversal:
            pairs.append(("amount", .string(String(amountMinor))))
            if kind == .transfer {
                pairs.append(("currency", .string(currency)))
                pairs.append(("destination", .string(payee)))
                if !charge.isEmpty { pairs.append(("source_transaction", .string(charge))) }
                pairs.append(("transfer_group", .string(group)))
            }
            if let description = extras.description { pairs.append(("description", .string(description))) }
            pairs.append(("metadata[settle_instruction]", .string(id)))
            for (key, value) in extras.metadata where key != "settle_instruction" {
                pairs.append(("metadata[\(key)]", .string(value)))
            }
        case .payout:
            pairs.append(
                (
                    "from",
                    .object([
                        ("financial_account", extras.financialAccount.map(JSON.string) ?? .null),
                        ("currency", .string(currency)),
                    ])
                ))
            pairs.append(
                (
                    "to",
                    .object([
                        ("recipient", .string(payee)), ("payout_method", .string(extras.payoutMethod ?? "")),
                        ("currency", .string(currency)),
                    ])
                ))
            pairs.append(("amount", .object([("value", .int(amountMinor)), ("currency", .string(currency))])))
            pairs.append(("delivery_options", .object([("speed", .string("instant"))])))
            if let description = extras.description { pairs.append(("description", .string(description))) }
            var metadata: [(String, JSON)] = [("settle_instruction", .string(id))]
            for (key, value) in extras.metadata where key != "settle_instruction" {
                metadata.append((key, .string(value)))
            }
            pairs.append(("metadata", .object(metadata)))
        }
        return .object(pairs)
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

    /// Why an instruction's request would not send its own facts, or nil: the method and
    /// path its kind calls for, and parameters carrying its amount, currency, payee and id.
    public static func mismatch(_ instruction: Instruction) -> String? {
        let kind = instruction.kind
        let (method, path, params) = (instruction.method, instruction.path, instruction.params)
        let target = kind == .reversal ? Instruction.reversalTarget(path) ?? "" : ""
        let expectedPath = Self.path(kind: kind, target: target)
        guard path == expectedPath, method == "POST" else { return "calls \(method) \(path), not POST \(expectedPath)" }
        if instruction.isV2 {
            guard params["amount"]?["value"]?.intValue == instruction.amountMinor,
                params["amount"]?["currency"]?.stringValue == instruction.currency,
                params["to"]?["recipient"]?.stringValue == instruction.payee,
                params["metadata"]?["settle_instruction"]?.stringValue == instruction.id
            else { return "has parameters that do not send its amount, currency and recipient" }
        } else {
            guard params["amount"]?.stringValue == String(instruction.amountMinor),
                params["metadata[settle_instruction]"]?.stringValue == instruction.id,
                kind == .reversal
                    || (params["currency"]?.stringValue == instruction.currency
                        && params["destination"]?.stringValue == instruction.payee)
            else { return "has parameters that do not send its amount, currency and destination" }
        }
        return nil
    }
}
