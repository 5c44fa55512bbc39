/// The settings the rules depend on.
public struct RuleOptions: Sendable {
    /// The platform's 2-letter country (cross-border rules).
    public var platformCountry: String = "US"
    /// The settlement date, days since 1970-01-01.
    public var asOf: Int32
    public var payouts: PayoutGrouping = .perRecipient
    /// The financial account payouts are paid from, when known at plan time.
    public var financialAccount: String?

    public init(asOf: Int32) { self.asOf = asOf }
}

/// How payout lines become payouts.
public enum PayoutGrouping: String, Sendable {
    /// One payout per recipient, payout method and currency in the run (fewer fees).
    case perRecipient = "per-recipient"
    /// One payout per line.
    case perLine = "per-line"
}

/// What the ledger knows from earlier runs, as the rules need it.
///
/// Look-ups come in batches (at most ``Planner/lookUpBatch`` keys a call): a plan of millions
/// of lines asks about every line and every instruction, and the ledger answers a batch with
/// one statement. Each answer names the key by its position in the batch; a key the ledger
/// does not know gets no answer.
public protocol SettlementHistory: AnyObject {
    /// The lines of these line ids (their bytes) that the ledger holds: `found(position, line)`.
    func lines(_ ids: [UnsafeRawBufferPointer], found: (Int, HistoricLine) -> Void)
    /// Transfers settled (or still in flight) on each charge in its currency, in minor units:
    /// `found(position, amount)` for the charges that have some.
    func transferred(_ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], found: (Int, Int64) -> Void)
    /// The gross the run that counted each charge recorded, in that currency (minor units):
    /// `found(position, gross)` for the charges some run counted.
    func countedGross(_ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], found: (Int, Int64) -> Void)
    /// The charges earlier runs' lines named with these payment intents:
    /// `found(position, charge id)` for each link the ledger recorded.
    func chargesOfIntents(_ intents: [UnsafeRawBufferPointer], found: (Int, String) -> Void)
    /// The transfer settle recorded for a group and destination (with `charge`, funded by that
    /// charge), with what is left to reverse.
    func recordedTransfer(group: String, destination: String, currency: String, charge: String?) -> RecordedTransfer?
    /// The instruction id of a transfer for a group and destination (with `charge`, funded by
    /// that charge) that was sent and whose outcome is not known yet (in flight or unknown),
    /// nil when there is none.
    func unsettledTransfer(group: String, destination: String, currency: String, charge: String?) -> String?
    /// The transfers settle recorded under these Stripe ids (reversal lines naming them), with
    /// what is left to reverse: `found(position, transfer)`; none for a transfer settle did not make.
    func recordedTransfers(_ stripeIDs: [UnsafeRawBufferPointer], found: (Int, RecordedTransfer) -> Void)
    /// Attempts already made for each instruction (the next key uses attempts + 1):
    /// `found(position in the slice, attempts)` for the instructions sent before.
    func attempts(_ instructions: ArraySlice<PlanRow>, found: (Int, Int) -> Void)
    /// The charge as the run that counted it recorded it (its `charge` symbol left for the
    /// caller to set), nil when no run did.
    func countedCharge(_ charge: String) -> ChargeTotal?
    /// The charges earlier runs' look-ups found failed, each with its payment intent and the
    /// look-up (``StripeFacts/Charge/lookedUpBy`` set).
    func failedCharges() -> [(charge: String, paymentIntent: String?, fact: StripeFacts.Charge)]
    /// Of these orders (group keys), those an earlier run's files decided against, each with
    /// its latest decision: the line that decided it and why, with the run.
    func decidedOrders(_ groups: [String]) -> [String: (line: String, reason: String)]
}

extension SettlementHistory {
    public func chargesOfIntents(_ intents: [UnsafeRawBufferPointer], found: (Int, String) -> Void) {}
    public func countedGross(
        _ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], found: (Int, Int64) -> Void
    ) {}
    public func decidedOrders(_ groups: [String]) -> [String: (line: String, reason: String)] { [:] }
    public func countedCharge(_ charge: String) -> ChargeTotal? { nil }
    public func failedCharges() -> [(charge: String, paymentIntent: String?, fact: StripeFacts.Charge)] { [] }
    public func unsettledTransfer(group: String, destination: String, currency: String, charge: String?) -> String? {
        nil
    }
}

/// A line as the ledger recorded it.
public struct HistoricLine: Sendable {
    public enum State: Sendable { case settled, pending, failed }
    public var content: String
    public var state: State
    public var stripeID: String?
    public init(content: String, state: State, stripeID: String?) {
        self.content = content
        self.state = state
        self.stripeID = stripeID
    }
}

/// A transfer made by an earlier run.
public struct RecordedTransfer: Sendable {
    public var stripeID: String
    public var remaining: Int64
    /// Its funding charge, empty when it had none (charges.csv shows the reversal on it).
    public var charge: String
    /// The currency it moved in (lowercase code; empty when not known). A reversal takes no
    /// currency at Stripe: its amount is in this one, whatever the line says.
    public var currency: String
    /// The connected account it went to (empty when not known).
    public var destination: String
    public init(
        stripeID: String, remaining: Int64, charge: String = "", currency: String = "", destination: String = ""
    ) {
        self.stripeID = stripeID
        self.remaining = remaining
        self.charge = charge
        self.currency = currency
        self.destination = destination
    }
}

/// Countries between which Stripe allows cross-border transfers: the US, Canada, the UK,
/// the EEA and Switzerland.
public enum CrossBorder {
    public static let zone: Set<String> = [
        "US", "CA", "GB", "CH",
        "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT",
        "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE", "IS", "LI", "NO",
    ]

    public static func allowed(platform: String, destination: String) -> Bool {
        let (platform, destination) = (canonical(platform), canonical(destination))
        return platform == destination || (zone.contains(platform) && zone.contains(destination))
    }

    /// `UK` is how people (and SPEC) name the United Kingdom; ISO 3166 says `GB`. Read as the same.
    static func canonical(_ code: String) -> String { code == "UK" ? "GB" : code }

    static func code(_ value: UInt16) -> String {
        String(decoding: [UInt8(value >> 8), UInt8(value & 0xff)], as: UTF8.self)
    }
}

/// Bank debits settle days later: their lines wait until the charge has succeeded.
public let bankDebitTypes: Set<String> = [
    "sepa_debit", "au_becs_debit", "bacs_debit", "us_bank_account", "ach_debit", "acss_debit",
    "bacs_debit", "nz_bank_account", "ach_credit_transfer",
]
