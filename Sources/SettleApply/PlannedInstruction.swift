public import SettleCore

/// One API call of the plan, as `instructions.jsonl` holds it (docs/PLAN-FORMAT.md).
public struct PlannedInstruction: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable {
        case transfer, reversal, payout
    }

    /// An input line the call settles.
    public struct Line: Sendable, Equatable {
        public var lineID: String
        public var kind: String
        public var amountMinor: Int64
        /// The planner's digest of the line's settlement content.
        public var content: String
        /// `[file, offset, length]` of the line's original record in the plan folder's spool.
        public var spool: [Int64]?

        public init(lineID: String, kind: String, amountMinor: Int64, content: String, spool: [Int64]? = nil) {
            self.lineID = lineID
            self.kind = kind
            self.amountMinor = amountMinor
            self.content = content
            self.spool = spool
        }
    }

    /// What to check before sending.
    public struct Preflight: Sendable, Equatable {
        /// A charge to look up (`GET /v1/charges/{id}`): failed or pending → not sent.
        public var charge: String?
        /// A payout method to check, with its recipient.
        public var payoutMethod: String?
        public var recipient: String?

        public init(charge: String? = nil, payoutMethod: String? = nil, recipient: String? = nil) {
            self.charge = charge
            self.payoutMethod = payoutMethod
            self.recipient = recipient
        }
    }

    public var id: String
    public var kind: Kind
    public var method: String
    public var path: String
    /// The key the planner expected (attempt 1); `apply` recomputes it from the ledger.
    public var idempotencyKey: String
    public var stripeContext: String?
    /// v1: flat form keys to strings; v2: the JSON body.
    public var params: JSON
    public var lines: [Line]
    public var group: String
    public var payee: String
    public var charge: String
    public var currency: String
    public var amountMinor: Int64
    public var preflight: Preflight

    public init(
        id: String, kind: Kind, method: String = "POST", path: String, idempotencyKey: String? = nil,
        stripeContext: String? = nil, params: JSON, lines: [Line], group: String, payee: String,
        charge: String = "", currency: String, amountMinor: Int64, preflight: Preflight = Preflight()
    ) {
        self.id = id
        self.kind = kind
        self.method = method
        self.path = path
        self.idempotencyKey = idempotencyKey ?? IdempotencyKey.make(instruction: id, attempt: 1)
        self.stripeContext = stripeContext
        self.params = params
        self.lines = lines
        self.group = group
        self.payee = payee
        self.charge = charge
        self.currency = currency
        self.amountMinor = amountMinor
        self.preflight = preflight
    }

    /// Whether it is a v2 call (JSON body, preview `Stripe-Version`).
    public var isV2: Bool { path.hasPrefix("/v2/") }
}

extension PlannedInstruction {
    /// Why the instruction does not hold together, or nil: its id must be the hash of its
    /// own facts (``InstructionID``), its parameters must send those facts, and its lines
    /// must add up to its amount.
    public var inconsistency: String? {
        let target = kind == .reversal ? Self.reversalTarget(path) ?? "" : charge
        let derived = InstructionID.make(
            kind: kind.rawValue, group: group, payee: payee, chargeOrTarget: target, currency: currency,
            amountMinor: amountMinor, lineIDs: lines.map(\.lineID))
        guard derived == id else { return "does not match its content (its content hashes to \(derived))" }
        var net: Int64 = 0
        for line in lines {
            let (sum, overflow) = net.addingReportingOverflow(
                kind == .transfer && line.kind == "reversal" ? -line.amountMinor : line.amountMinor)
            guard !overflow else { return "has line amounts that overflow" }
            net = sum
        }
        guard net == amountMinor, amountMinor > 0 else { return "sends \(amountMinor) but its lines add up to \(net)" }
        let expectedPath: String
        switch kind {
        case .transfer: expectedPath = "/v1/transfers"
        case .reversal: expectedPath = "/v1/transfers/\(target)/reversals"
        case .payout: expectedPath = "/v2/money_management/outbound_payments"
        }
        guard path == expectedPath, method == "POST" else { return "calls \(method) \(path), not POST \(expectedPath)" }
        if isV2 {
            guard params["amount"]?["value"]?.intValue == amountMinor,
                params["amount"]?["currency"]?.stringValue == currency,
                params["to"]?["recipient"]?.stringValue == payee,
                params["metadata"]?["settle_instruction"]?.stringValue == id
            else { return "has parameters that do not send its amount, currency and recipient" }
        } else {
            guard params["amount"]?.stringValue == String(amountMinor),
                params["metadata[settle_instruction]"]?.stringValue == id,
                kind == .reversal
                    || (params["currency"]?.stringValue == currency && params["destination"]?.stringValue == payee)
            else { return "has parameters that do not send its amount, currency and destination" }
        }
        return nil
    }

    /// `tr_…` of `/v1/transfers/tr_…/reversals`.
    static func reversalTarget(_ path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count == 4, parts[0] == "v1", parts[1] == "transfers", parts[3] == "reversals" else { return nil }
        return String(parts[2])
    }
}
