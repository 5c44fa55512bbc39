public import Foundation
public import SettleLedger

/// How settle talks to Stripe while applying a plan.
public struct ApplyConfiguration: Sendable {
    /// The `Stripe-Version` pinned for v1 calls: the default of the official `stripe` Python
    /// SDK 16.1.0 on PyPI. The one definition of the versions.
    public static let pinnedStripeVersion = "2026-10-28.endive"
    /// The preview version v2 money-management calls need (Apple Pay payout methods changelog).
    public static let pinnedPreviewVersion = "2026-11-18.preview"

    /// `https://api.stripe.com`, or `http://` on a loopback address only.
    public var apiBase: String
    public var apiKey: APIKey
    public var stripeVersion: String
    public var previewVersion: String
    /// Most requests per second.
    public var rate: Double
    /// Most requests in flight.
    public var concurrency: Int
    /// The financial account payouts are paid from when the plan has none.
    public var financialAccount: String?
    public var connectTimeout: Duration
    public var totalTimeout: Duration
    /// Most tries of one request (the first included) before its outcome is `unknown`.
    public var maxTries: Int
    /// The first retry waits about this long; later ones double it, with jitter.
    public var retryBase: Duration
    /// The version in `User-Agent: settle/<version>`.
    public var settleVersion: String
    /// Where log lines go. Messages never hold the key or any header value.
    public var logger: @Sendable (ApplyLogLevel, String) -> Void
    /// Where structured events go (one per outcome, with its own fields); when nil, their
    /// message goes to ``logger``.
    public var events: (@Sendable (ApplyEvent) -> Void)? = nil
    /// Called as instructions finish.
    public var progress: @Sendable (ApplyProgress) -> Void
    /// The wall clock (idempotency windows); tests move it.
    public var now: @Sendable () -> Date

    public init(
        apiBase: String = "https://api.stripe.com", apiKey: APIKey,
        stripeVersion: String = ApplyConfiguration.pinnedStripeVersion,
        previewVersion: String = ApplyConfiguration.pinnedPreviewVersion, rate: Double = 20,
        concurrency: Int = 16, financialAccount: String? = nil, connectTimeout: Duration = .seconds(10),
        totalTimeout: Duration = .seconds(60), maxTries: Int = 5, retryBase: Duration = .milliseconds(250),
        settleVersion: String = "0.1.0",
        logger: @escaping @Sendable (ApplyLogLevel, String) -> Void = { _, _ in },
        progress: @escaping @Sendable (ApplyProgress) -> Void = { _ in },
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.apiBase = apiBase
        self.apiKey = apiKey
        self.stripeVersion = stripeVersion
        self.previewVersion = previewVersion
        self.rate = rate
        self.concurrency = concurrency
        self.financialAccount = financialAccount
        self.connectTimeout = connectTimeout
        self.totalTimeout = totalTimeout
        self.maxTries = maxTries
        self.retryBase = retryBase
        self.settleVersion = settleVersion
        self.logger = logger
        self.progress = progress
        self.now = now
    }
}

extension ApplyConfiguration {
    /// `https://` anywhere; `http://` only to a loopback host. Checked before any input is
    /// read or any file written.
    public static func checkAPIBase(_ base: String) throws(ApplyError) {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        try StripeAPI.checkBase(base)
    }
}

/// One thing that happened while applying, with its own fields (for `--log-format json`).
public struct ApplyEvent: Sendable {
    public enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
    }

    public var level: ApplyLogLevel
    /// `instruction_settled`, `instruction_failed`, `instruction_unknown`, `instruction_not_sent`, …
    public var name: String
    public var message: String
    /// `instruction`, `kind`, `lines`, `amount_minor`, `currency`, `http_status`, `stripe_code`,
    /// `request_id`, `attempt`, `duration_ms`, in that order when known.
    public var fields: [(key: String, value: Value)]
}

/// How much a log line matters.
public enum ApplyLogLevel: Int, Sendable, Comparable {
    case debug, info, warning, error
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Where the run stands.
public struct ApplyProgress: Sendable, Equatable {
    /// `resolve`, `preflight` or `send`.
    public var phase: String
    public var done: Int
    public var total: Int
}

/// What became of one instruction.
public enum InstructionOutcome: Sendable, Equatable {
    /// The Stripe object exists (made now, or found when resolving).
    case settled(stripeID: String)
    /// Stripe refused it for good: its error code and message. The lines are released.
    case failed(code: String, message: String)
    /// Sent (or possibly sent), outcome not known: the next run resolves it.
    case unknown(message: String)
    /// Not sent, by settle's own decision (pre-flight facts, an order that may not move):
    /// nothing moved. `charge_pending` and `scheduled` wait (deferred, held by the ledger).
    case rejected(code: String, message: String)
    /// The ledger had already settled it; nothing sent.
    case alreadySettled(stripeID: String)
    /// Never sent (the run stopped first, or every try failed before leaving): nothing can
    /// exist at Stripe, the lines stay planned and go in a later run.
    case notSent(reason: String)
}

/// The outcome of every instruction of a run, by instruction id, kept on disk in a
/// ``Spill`` (not in memory: a plan may hold millions of instructions).
public final class InstructionOutcomes: @unchecked Sendable {
    private let spill: Spill
    /// Per line, for the instructions whose lines do not share one outcome (an aggregated
    /// payout some of whose orders may not move): opened when first needed.
    private var lineSpill: Spill?
    /// The instructions with an outcome per line (few: aggregated payouts held back).
    public private(set) var splitInstructions: Set<String> = []

    public init() throws(LedgerError) { spill = try Spill() }

    private static func lineKey(_ line: String, _ instruction: String) -> String { instruction + "\u{1}" + line }

    /// Gives each line of an instruction its entry (``PayoutSplit``): its own outcome (and
    /// the instruction that settled it, if another), or sent as `sentAs`.
    public func set(
        lines: [(line: String, entry: PayoutSplit.Entry)], of instruction: String, sentAs derived: String?
    ) throws(LedgerError) {
        if lineSpill == nil { lineSpill = try Spill() }
        for (line, entry) in lines {
            switch entry {
            case .outcome(let outcome, let other):
                let (tag, first, second) = Self.encoded(outcome)
                try lineSpill?.put(Self.lineKey(line, instruction), first: first, second: second, numbers: [tag])
                if let other {
                    try lineSpill?.put(Self.lineKey(line, instruction) + "\u{2}", first: other, second: "", numbers: [])
                }
            case .sent:
                try lineSpill?.put(
                    Self.lineKey(line, instruction), first: derived ?? "", second: "", numbers: [Self.sentTag])
            }
        }
        splitInstructions.insert(instruction)
        try set(
            .notSent(
                reason: derived.map { "its lines that may go were sent as \($0); the others have their own outcome" }
                    ?? "each of its lines has its own outcome"), for: instruction)
    }

    private static let sentTag: Int64 = 9

    /// A line's own outcome and the instruction that holds it (when not the one listed), for
    /// an instruction in ``splitInstructions``; nil otherwise.
    public subscript(line line: String, of instruction: String) -> (outcome: InstructionOutcome?, instruction: String?)?
    {
        guard splitInstructions.contains(instruction), let lineSpill else { return nil }
        do {
            guard let entry = try lineSpill.get(Self.lineKey(line, instruction)) else { return nil }
            if entry.numbers[0] == Self.sentTag { return (self[entry.first], entry.first) }
            let other = try lineSpill.get(Self.lineKey(line, instruction) + "\u{2}")?.first
            return (Self.decoded(entry), other)
        } catch {
            return (
                .unknown(message: "its outcome could not be read back (\(error)); the ledger has it: run again"), nil
            )
        }
    }

    /// How many instructions have an outcome.
    public var count: Int { spill.count }

    /// The outcome of one instruction; nil when it has none. When the spill cannot be read
    /// back the outcome is `unknown` (never "not sent"): the ledger has it, and the next run
    /// resolves it from there.
    public subscript(id: String) -> InstructionOutcome? {
        let found: Spill.Entry?
        do {
            found = try spill.get(id)
        } catch {
            return .unknown(message: "its outcome could not be read back (\(error)); the ledger has it: run again")
        }
        return found.map(Self.decoded)
    }

    private static func decoded(_ entry: Spill.Entry) -> InstructionOutcome {
        switch entry.numbers[0] {
        case 0: return .settled(stripeID: entry.first)
        case 1: return .failed(code: entry.first, message: entry.second)
        case 2: return .unknown(message: entry.second)
        case 3: return .rejected(code: entry.first, message: entry.second)
        case 4: return .alreadySettled(stripeID: entry.first)
        default: return .notSent(reason: entry.second)
        }
    }

    private static func encoded(_ outcome: InstructionOutcome) -> (Int64, String, String) {
        switch outcome {
        case .settled(let stripeID): (0, stripeID, "")
        case .failed(let code, let message): (1, code, message)
        case .unknown(let message): (2, "", message)
        case .rejected(let code, let message): (3, code, message)
        case .alreadySettled(let stripeID): (4, stripeID, "")
        case .notSent(let reason): (5, "", reason)
        }
    }

    public func contains(_ id: String) throws(LedgerError) -> Bool { try spill.contains(id) }

    public func set(_ outcome: InstructionOutcome, for id: String) throws(LedgerError) {
        let (tag, first, second) = Self.encoded(outcome)
        try spill.put(id, first: first, second: second, numbers: [tag])
    }

    /// Every outcome in memory at once: for tests and small plans only.
    public var all: [String: InstructionOutcome] {
        var result: [String: InstructionOutcome] = [:]
        try? spill.forEach { entry in result[entry.key] = self[entry.key] }
        return result
    }
}

/// The result of ``ApplyEngine/run(_:)``.
public struct ApplyReport: Sendable {
    /// The outcome of every instruction of the plan, by instruction id.
    public var outcomes: InstructionOutcomes
    /// Ledger instructions from earlier runs that this run resolved first, by id (those
    /// also in the plan appear in `outcomes` too).
    public var resolved: [String: InstructionOutcome]
    /// HTTP calls made (every try counts).
    public var requests: Int
    /// Tries after the first.
    public var retries: Int
    /// 429 answers.
    public var rateLimited: Int
    /// 5xx answers.
    public var serverErrors: Int
    /// Transport failures (timeouts, broken connections).
    public var transportErrors: Int
    public var elapsed: Duration
    /// Set when Stripe refused the API key (HTTP 401/403): the run stopped sending (exit 78).
    public var keyRefused: String? = nil
    /// Set when the ledger failed during the run: it stopped (exit 75).
    public var ledgerFailure: String? = nil
    /// The signal that stopped the run's sending (SIGTERM, SIGINT), or nil (exit 75).
    public var interrupted: String? = nil
    /// Answers that were not Stripe's (redirects, HTML, unreadable bodies): all retried.
    public var notStripeAnswers = 0
    /// The orders (group keys) this run stopped for good: a fact Stripe refused, or a
    /// transfer or reversal Stripe refused; with why. Their lines the plan deferred do not
    /// wait for a later run: an order moves whole or not at all.
    public var refusedOrders: [String: String] = [:]
    /// Those of ``refusedOrders`` stopped before anything was sent (a fact Stripe refused of
    /// an offline plan): their netted lines were not recorded either.
    public var stoppedBeforeSending: Set<String> = []
    /// Instructions an earlier run left open that a look-up proved never made and that were
    /// not sent because some of their orders may not move (these, by group key): the lines
    /// of their other orders wait in the ledger for the next run, which pays them without
    /// the stopped ones (audit 35 P3: they were failed `group_rejected`).
    public var waitingAfterStop: [String: Set<String>] = [:]
    /// The charges an offline plan named with no facts, as Stripe described them when apply
    /// checked them, and the instructions that draw on each: charges.csv and summary.csv
    /// count them like the charges a plan knew (an offline plan knew nothing of them).
    public var lookedUpCharges: [ChargeFact] = []
    /// The payout methods an offline plan's facts check found at Stripe (the manifest's
    /// `apply.facts`, with ``lookedUpCharges``: what the money moved on; audit 47 S2).
    public var lookedUpMethods: [PayoutMethodFact] = []

    /// ``lookedUpMethods`` and ``lookedUpCharges`` together; nil when the apply looked up none.
    public var lookedUpFacts: LookedUpFacts? {
        guard !lookedUpMethods.isEmpty || !lookedUpCharges.isEmpty else { return nil }
        var facts = LookedUpFacts()
        facts.payoutMethods = lookedUpMethods
        facts.charges = lookedUpCharges
        return facts
    }
    /// What Stripe said at this apply of the charges the ledger remembered failed that the
    /// plan's orders draw on: failed still (their orders stopped) or put right (forgotten).
    public var recheckedCharges: [ChargeFact] = []
    /// The charges of the transfers Stripe refused `charge_failed` in this apply.
    public var refusedCharges: [String] = []
    public var chargeOfInstruction: [String: String] = [:]
}

/// Why a run could not start or had to stop.
public enum ApplyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Bad configuration (exit 78): an insecure API base, no financial account for payouts…
    case configuration(String)
    /// `instructions.jsonl` cannot be read or decoded, or changed while read (the 1-based
    /// line; 0 for another file of the plan, named in the message).
    case planInvalid(line: Int, message: String)
    /// The ledger failed; with `busy`, another process holds it (exit 75).
    case ledger(LedgerError)
    /// The HTTP client could not be set up.
    case transport(String)
    /// Stripe refused the API key (exit 78); nothing of the plan was sent.
    case keyRefused(String)
    /// A look-up the plan depends on could not complete (exit 75); nothing of it was sent.
    case factsUnavailable([String])

    public var description: String {
        switch self {
        case .configuration(let message): return "configuration: \(message)"
        case .planInvalid(let line, let message):
            return line == 0 ? message : "instructions.jsonl line \(line): \(message)"
        case .ledger(let error): return error.description
        case .transport(let message): return "HTTP: \(message)"
        case .keyRefused(let message): return message
        case .factsUnavailable(let list): return "could not be looked up: " + list.joined(separator: "; ")
        }
    }
}

extension FailedCharge {
    /// What the ledger remembers of a look-up that found `fact`'s charge failed (or no such
    /// charge: its refusal, with no status), as run `run`'s; nil for any other verdict.
    public init?(_ fact: ChargeFact, run: String) {
        guard case .refused(let why) = fact.verdict else { return nil }
        self.init(
            charge: fact.charge, paymentIntent: fact.paymentIntent, refusal: fact.status == nil ? why : nil,
            run: run, checkedAt: fact.checkedAt ?? "", requestID: fact.requestID ?? "")
    }
}
