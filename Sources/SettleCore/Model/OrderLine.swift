/// One input line as settle keeps it in memory: compact, every string interned.
///
/// About 100 bytes whatever the line's text, so memory grows with the number of lines,
/// not with their size. The original strings stay in the spool file (`spool` offsets) and
/// are read back only for the lines that go into `errors.csv` or `deferred.csv`.
public struct OrderLine: Sendable {
    // Fields are declared widest first so the record packs into 104 bytes.

    public var amount: Int64 = 0
    /// Charge amount in thousandths of a major unit, -1 when not given: the charge's currency
    /// (not the line's) may be known only once the plan sees every line of the charge, so the
    /// planner makes it minor units (docs/RULES.md, Group rules).
    public var chargeAmount: Int64 = -1
    /// Charge fee in thousandths of a major unit, -1 when not given.
    public var chargeFee: Int64 = -1
    /// Where the original record sits in the file's spool.
    public var spoolOffset: UInt64 = 0

    public var lineID: Symbol = .none
    public var orderID: Symbol = .none
    /// Group key: `transfer_group`, else `group_<payment_intent>`, else `order:<order_id>`.
    public var group: Symbol = .none
    /// Destination account (transfer, reversal) or recipient account (payout).
    public var payee: Symbol = .none
    public var payoutMethod: Symbol = .none
    /// The funding charge (`source_transaction`).
    public var charge: Symbol = .none
    /// For a reversal: the transfer it reverses, when named.
    public var transfer: Symbol = .none
    public var paymentMethodType: Symbol = .none
    /// `payment_intent`: names the charge of lines that give charge facts but no charge id.
    public var paymentIntent: Symbol = .none
    /// Index into ``Batch/extras`` (description, metadata), -1 when none.
    public var extras: Int32 = -1
    /// Index into ``Batch/messages`` for the human reason, -1 for the code's default text.
    public var message: Int32 = -1
    /// `transfer_on` as days since 1970-01-01, `Int32.min` when not given.
    public var transferOn: Int32 = .min
    /// Physical line (1-based) where the record starts.
    public var sourceLine: UInt32 = 0
    public var spoolLength: UInt32 = 0

    /// 2-letter country of the destination or recipient, 0 when not given.
    public var destinationCountry: UInt16 = 0
    public var currency: Currency = .usd
    /// The `charge_currency` the line states (see ``chargeCurrencyGiven``).
    public var chargeCurrency: Currency = .usd
    public var file: UInt16 = 0

    public var kind: LineKind = .transfer
    public var status: LineStatus = .planned
    public var reason: ReasonCode = .none
    public var chargeStatus: ChargeStatus = .unknown
    public var chargeCurrencyGiven: Bool = false
    /// A copy of a line that does not count, so it stays outside its group and cannot sink
    /// it: an export's copy of a line the ledger holds with other money content (rejected
    /// `line_conflict`; the held copy is the line). Later copies of a line_id are the other case.
    public var outsideGroup: Bool = false
    /// The record's `kind` is none settle knows (rejected `kind_invalid`): `kind` is only a
    /// placeholder, and results.csv shows no kind, also once a later copy of the line_id
    /// is rejected `duplicate_line_id` instead.
    public var kindInvalid: Bool = false

    public init() {}

    /// Whether the line states a fact of its charge (`charge_amount`, `charge_currency`,
    /// `charge_status` or `payment_method_type`); the charge rules then apply to it.
    public var givesChargeFacts: Bool {
        chargeAmount >= 0 || chargeCurrencyGiven || chargeStatus != .unknown || !paymentMethodType.isNone
    }
}

/// A charge's status as the export states it.
public enum ChargeStatus: UInt8, Sendable, CaseIterable {
    case unknown, succeeded, pending, failed

    public var name: String {
        switch self {
        case .unknown: ""
        case .succeeded: "succeeded"
        case .pending: "pending"
        case .failed: "failed"
        }
    }
}

/// The description and metadata of a line, kept aside because most lines have none.
public struct LineExtras: Sendable, Equatable {
    public var description: String?
    public var metadata: [(key: String, value: String)]

    public init(description: String? = nil, metadata: [(key: String, value: String)] = []) {
        self.description = description
        self.metadata = metadata
    }

    public static func == (lhs: LineExtras, rhs: LineExtras) -> Bool {
        lhs.description == rhs.description && lhs.metadata.elementsEqual(rhs.metadata, by: { $0 == $1 })
    }
}
