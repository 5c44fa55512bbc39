/// What read-only look-ups at Stripe said before the plan (README, "Stripe's facts before the plan": "Stripe's facts come
/// before the plan"). The planner takes them as given: fetching them is the caller's job,
/// and so is sealing them in the plan.
///
/// A fact from Stripe overrides what the export says: a charge's status, amount and currency
/// replace the charge columns of every line naming that charge, and a refused payout method
/// rejects its lines (and their groups) before any instruction is formed.
public struct StripeFacts: Sendable, Equatable {
    /// A recipient's payout method: payout methods are looked up in the recipient's context.
    public struct PayoutMethodKey: Hashable, Sendable, Comparable {
        public var recipient: String
        public var method: String

        public init(recipient: String, method: String) {
            self.recipient = recipient
            self.method = method
        }

        public static func < (lhs: PayoutMethodKey, rhs: PayoutMethodKey) -> Bool {
            (lhs.recipient, lhs.method) < (rhs.recipient, rhs.method)
        }
    }

    /// Whether a payout method can receive an instant Apple Pay payout.
    public enum PayoutMethodVerdict: Sendable, Equatable {
        case usable
        /// Not usable; the reason is what a person reads (`archived`, `usage_status.payments
        /// is restricted`, …).
        case refused(reason: String)
    }

    /// One payout method as Stripe described it.
    public struct PayoutMethod: Sendable, Equatable {
        public var verdict: PayoutMethodVerdict
        /// Stripe's `Request-Id` of the look-up and when it was made, carried for the record.
        public var requestID: String
        public var checkedAt: String

        public init(verdict: PayoutMethodVerdict, requestID: String = "", checkedAt: String = "") {
            self.verdict = verdict
            self.requestID = requestID
            self.checkedAt = checkedAt
        }
    }

    /// One charge as Stripe described it (`GET /v1/charges/{id}?expand[]=balance_transaction`).
    public struct Charge: Sendable, Equatable {
        /// `succeeded`, `pending` or `failed` (never ``ChargeStatus/unknown``).
        public var status: ChargeStatus
        /// The amount transfers may draw on, in minor units of ``currency``.
        public var amount: Int64
        /// The balance transaction's currency: the currency transfers from the charge are in.
        public var currency: Currency
        /// Stripe's fee in minor units, when the balance transaction exists.
        public var fee: Int64?
        /// `payment_method_details.type`, for the record.
        public var paymentMethodType: String?
        public var requestID: String
        public var checkedAt: String
        /// Why Stripe gave no charge to draw on (`resource_missing: No such charge …`), when
        /// the look-up was refused: the charge is then `failed`, and its lines say why.
        public var refusal: String?
        /// The run whose look-up this is, when an earlier run made it (the ledger remembers the
        /// charges Stripe said failed); nil for this plan's own look-up.
        public var lookedUpBy: String?

        public init(
            status: ChargeStatus, amount: Int64, currency: Currency, fee: Int64? = nil,
            paymentMethodType: String? = nil, requestID: String = "", checkedAt: String = "", refusal: String? = nil,
            lookedUpBy: String? = nil
        ) {
            self.refusal = refusal
            self.lookedUpBy = lookedUpBy
            self.status = status
            self.amount = amount
            self.currency = currency
            self.fee = fee
            self.paymentMethodType = paymentMethodType
            self.requestID = requestID
            self.checkedAt = checkedAt
        }
    }

    public var payoutMethods: [PayoutMethodKey: PayoutMethod]
    /// Charges by id (`ch_…`, `py_…`).
    public var charges: [String: Charge]
    /// Failed charges by their payment intent (`pi_…`): lines that name only the intent draw
    /// on no money either.
    public var failedIntents: [String: Charge]
    /// The payment intent of each charge looked up, as Stripe names it: lines naming only the
    /// intent draw on that charge, and what earlier runs moved under the intent counts for it.
    public var intentOfCharge: [String: String] = [:]

    public init(
        payoutMethods: [PayoutMethodKey: PayoutMethod] = [:], charges: [String: Charge] = [:],
        failedIntents: [String: Charge] = [:]
    ) {
        self.payoutMethods = payoutMethods
        self.charges = charges
        self.failedIntents = failedIntents
    }

    /// Adds what earlier runs' look-ups found failed (`remembered`: by charge id, with the
    /// charge's payment intent), where this plan did not look the charge up itself: a failed
    /// charge never succeeds later, so Stripe's word then still stands (audit 38 Q5).
    public mutating func remember(_ remembered: [(charge: String, paymentIntent: String?, fact: Charge)]) {
        // A charge this plan looked up itself keeps this look-up's answer, for its intent too
        // (audit 42 F4: a charge put right still stopped the lines naming its intent).
        for (charge, intent, fact) in remembered where charges[charge] == nil {
            charges[charge] = fact
            if let intent, failedIntents[intent] == nil { failedIntents[intent] = fact }
        }
    }

    /// Why a line on a failed charge is rejected, `name` naming the charge as the plan knows it.
    public static func failure(of fact: Charge, name: String, id: String?) -> String {
        let earlier = fact.lookedUpBy.map { " when run \($0) looked it up (\(fact.checkedAt))" } ?? ""
        if let refusal = fact.refusal, let id {
            // A charge Stripe does not give (a mistyped id answers 404): funds nothing, and the
            // reason says so rather than a failed payment.
            return fact.lookedUpBy == nil
                ? "Stripe has no charge \(id) to draw on (\(refusal)); check the charge id"
                : "Stripe had no charge \(id) to draw on\(earlier) (\(refusal)); check the charge id"
        }
        return fact.lookedUpBy == nil ? "Stripe reports \(name) failed" : "Stripe reported \(name) failed\(earlier)"
    }

    /// No look-up was made: an offline plan.
    public static let empty = StripeFacts()

    public var isEmpty: Bool { payoutMethods.isEmpty && charges.isEmpty && failedIntents.isEmpty }

    public func payoutMethod(recipient: String, method: String) -> PayoutMethod? {
        payoutMethods[PayoutMethodKey(recipient: recipient, method: method)]
    }
}
