public import Foundation
public import SettleApply
public import SettleCore
public import SettleWrite

/// What one apply did, as the plan folder records it: the engine's report without the
/// engine, so the folder's rewrite can be tested on a given list of outcomes.
public struct AppliedRun: Sendable {
    /// What the lines of each instruction (by id) become: SettleApply's
    /// `InstructionOutcome.lineResult`, the one mapping from outcome to line status; nil
    /// for an instruction the run has no outcome of. A look-up (the engine keeps its
    /// outcomes on disk), asked once for each run of rows of one instruction.
    public var lineResult: @Sendable (String) -> LineResult?
    /// What the lines of an instruction the apply did not reach become.
    public var unreached: LineResult
    /// The instructions whose lines each have their own result (``lineResultOfLine``).
    public var splitInstructions: Set<String> = []
    /// A line's own result (line id, instruction id), for ``splitInstructions``, with the
    /// instruction that holds it when not the one listed (a payout of some of its lines).
    public var lineResultOfLine: @Sendable (String, String) -> (LineResult, instruction: String?)? = { _, _ in nil }
    /// Instructions an earlier run left open that this run confirmed or sent again.
    public var resolved: Set<String> = []
    /// Orders (group keys) the run stopped for good, with why: their lines the plan deferred
    /// are rejected `group_rejected`, not left to move later without the rest of the order.
    public var refusedOrders: [String: String] = [:]
    /// Those of ``refusedOrders`` stopped before anything was sent: their netted lines were
    /// not recorded as settled, and are rejected with the order.
    public var stoppedBeforeSending: Set<String> = []
    /// ``ApplyReport/waitingAfterStop``.
    public var waitingAfterStop: [String: Set<String>] = [:]
    /// Charges apply learned of that charges.csv does not list (an offline plan's charge with
    /// no facts), and the charge of each instruction drawing on one: counted like the others.
    public var lookedUpCharges: [ChargeRow] = []
    /// What apply's look-ups said of the charges (an offline plan's), for the ones that failed.
    public var checkedCharges: [ChargeFact] = []
    /// What the apply of an offline plan looked up before sending (``ApplyReport/lookedUpFacts``):
    /// the manifest's `apply.facts`; nil when it looked up nothing.
    public var lookedUpFacts: LookedUpFacts?
    /// The charges of the transfers Stripe refused `charge_failed` (remembered failed).
    public var refusedCharges: [String] = []
    public var chargeOfInstruction: [String: String] = [:]
    public var requests = 0
    public var retries = 0
    public var rateLimited = 0
    public var serverErrors = 0
    public var transportErrors = 0
    public var notStripeAnswers = 0
    /// Stripe refused the API key: the run stopped (exit 78).
    public var keyRefused: String?
    /// The ledger failed during the run (exit 75).
    public var ledgerFailure: String?
    /// A signal stopped the run's sending (exit 75).
    public var interrupted: String?
    /// Payouts of earlier runs Stripe could not be asked about now (exit 75: an outcome not
    /// known yet; the next run asks again).
    public var unfollowedPayouts = 0
    /// `apply` or `run`.
    public var mode: String
    public var apiBase: String
    /// The financial account the apply's payouts were paid from (`--financial-account` or
    /// the config), nil when none was given.
    public var financialAccount: String?
    /// When the run applied, as the manifest writes it.
    public var appliedAt: String
    public var startedAt: Date

    public init(
        lineResult: @escaping @Sendable (String) -> LineResult?, unreached: LineResult, mode: String,
        apiBase: String, appliedAt: String, startedAt: Date
    ) {
        self.lineResult = lineResult
        self.unreached = unreached
        self.mode = mode
        self.apiBase = apiBase
        self.appliedAt = appliedAt
        self.startedAt = startedAt
    }

    /// A run whose outcomes are given in memory (tests, small plans).
    public init(
        lineResults: [String: LineResult], unreached: LineResult, mode: String, apiBase: String, appliedAt: String,
        startedAt: Date
    ) {
        self.init(
            lineResult: { lineResults[$0] }, unreached: unreached, mode: mode, apiBase: apiBase,
            appliedAt: appliedAt, startedAt: startedAt)
    }
}

extension PlanFolder {
    /// What the rewritten files hold.
    public struct Rewritten {
        /// The run's exit status, as the manifest and report.html say it.
        public var exit: ExitCode
        /// Lines by status, as results.csv holds them.
        public var counts: [LineStatus: Int]
        /// The control sums of summary.csv.
        public var sums: ControlSums
        /// Why the run could not be recorded in the ledger's runs (`settle status`), or nil.
        public var runRecordProblem: String? = nil
        /// What the ledger could not note, and why: the orders this run decided against (the
        /// run exits 75), the outcomes other folders' applies learned that it reported; or nil.
        public var notesProblem: String? = nil
    }
}

/// The spool's original records as the rewrite reads them: all the records a file will need
/// are asked for first (one pass over a gzip spool), then one at a time.
public protocol SpoolRecordSource: OriginalRecords {
    func prefetch(_ wanted: some Sequence<(file: Int, offset: UInt64, length: UInt32)>) throws(WriteFailure)
}
