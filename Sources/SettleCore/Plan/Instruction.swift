/// One API call that moves money — a transfer, a transfer reversal or an outbound payment —
/// as `instructions.jsonl` holds it (docs/PLAN-FORMAT.md) and as apply records it in the
/// ledger and sends it. The one instruction type: the planner keeps its instructions as
/// compact ``PlanRow``s of the plan's table and materialises this value from them.
public struct Instruction: Sendable, Equatable {
    public enum Kind: UInt8, Sendable, Equatable, CaseIterable {
        case transfer, reversal, payout

        /// The name in instructions.jsonl and the ledger.
        public var name: String {
            switch self {
            case .transfer: "transfer"
            case .reversal: "reversal"
            case .payout: "payout"
            }
        }

        public init?(name: String) {
            guard let kind = Kind.allCases.first(where: { $0.name == name }) else { return nil }
            self = kind
        }
    }

    /// An input line the call settles.
    public struct Line: Sendable, Equatable {
        public var lineID: String
        public var kind: String
        public var amountMinor: Int64
        /// The planner's digest of the line's settlement content.
        public var content: String

        public init(lineID: String, kind: String, amountMinor: Int64, content: String) {
            self.lineID = lineID
            self.kind = kind
            self.amountMinor = amountMinor
            self.content = content
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
    /// What the ledger records as the charge of a transfer that names none but draws on one
    /// known by its payment intent (instructions.jsonl `charge_key`); empty otherwise.
    public var ledgerCharge = ""

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
    public var isV2: Bool { kind == .payout }
}

extension Instruction {
    /// Why the instruction does not hold together, or nil: its id must be the hash of its
    /// own facts (``InstructionID``) and its lines must add up to its amount. Whether its
    /// request sends those facts is Stripe's side (`RequestParams.mismatch` in SettleApply).
    public var inconsistency: String? {
        let target = kind == .reversal ? Self.reversalTarget(path) ?? "" : charge
        let derived = InstructionID.make(
            kind: kind.name, group: group, payee: payee, chargeOrTarget: target, currency: currency,
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
        return nil
    }

    /// `tr_…` of `/v1/transfers/tr_…/reversals`.
    public static func reversalTarget(_ path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count == 4, parts[0] == "v1", parts[1] == "transfers", parts[3] == "reversals" else { return nil }
        return String(parts[2])
    }
}
