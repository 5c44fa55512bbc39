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

        public init(
            status: ChargeStatus, amount: Int64, currency: Currency, fee: Int64? = nil,
            paymentMethodType: String? = nil, requestID: String = "", checkedAt: String = "", refusal: String? = nil
        ) {
            self.refusal = refusal
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

    public init(payoutMethods: [PayoutMethodKey: PayoutMethod] = [:], charges: [String: Charge] = [:]) {
        self.payoutMethods = payoutMethods
        self.charges = charges
    }

    /// No look-up was made: an offline plan.
    public static let empty = StripeFacts()

    public var isEmpty: Bool { payoutMethods.isEmpty && charges.isEmpty }

    public func payoutMethod(recipient: String, method: String) -> PayoutMethod? {
        payoutMethods[PayoutMethodKey(recipient: recipient, method: method)]
    }
}
