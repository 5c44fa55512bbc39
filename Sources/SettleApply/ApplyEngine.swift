public import Foundation
public import SettleCore
import SettleHTTP
public import SettleLedger

/// Executes a plan against Stripe exactly once.
///
/// A run (1) resolves every instruction the ledger holds as in flight or unknown, from
/// this or an earlier run: it looks the object up by `metadata[settle_instruction]` first,
/// and only when Stripe's list proves it absent re-sends the stored request under the same
/// idempotency key (so no clock, local or Stripe's, decides anything); (2) skips what the
/// ledger already settled; (3) for a plan made offline, checks the payout methods and
/// charges it depends on: the orders that depend on a refused one (or a pending charge) are
/// not sent, whole (``OrderStops``); (4) sends the rest, recording each batch as in flight in the ledger before the requests leave and
/// each outcome as it arrives.
///
/// Once a request may have reached Stripe, only Stripe's answer about that object settles
/// it: a replay under the same key, or a look-up (``CreateVerdict``).
///
/// Use one engine from one thread.
public final class ApplyEngine {
    public let configuration: ApplyConfiguration
    private let ledger: LedgerStore
    private let api: StripeAPI
    private let client: HTTPClient
    private var limiter: RateLimiter
    private var counters = CallCounters()

    /// The plan's lines that netted to zero, recorded as settled once the plan may be sent
    /// (its facts checked), under ``runID``.
    public var netted: [LedgerStore.NettedLine] = []
    public var runID = ""
    /// Called once, right before the first request of the plan leaves (after every check that
    /// refuses the plan without a request); an error stops the run there, nothing sent
    /// (a new ledger asks Stripe whether settle paid from the account before,
    /// ``EarlierLedgerProbe``).
    public var beforeFirstSend: (() throws(ApplyError) -> Void)?
    /// When the plan was made (from its run id); nil when not known. A payout made after it
    /// that came back is not this plan's to send again (``cameBack(_:)``).
    public var plannedAt: Date?
    /// The orders of the plan another run took up after the plan was made (one of their lines
    /// settled, rejected, reported or cancelled by it), each with why: nothing of them is
    /// sent, so an old folder applied late or again never moves an order a later run has
    /// decided (audit 26 B1, B2: a re-apply paid such an order's payout, and its dated line,
    /// rejected by the later run, was never paid).
    public var takenUpOrders: [String: String] = [:]
    /// Lines whose holding another run ended since the plan (``reportedElsewhere(_:_:)``),
    /// asked of the ledger once, when a refused payout of this plan needs it.
    private var endedSincePlan: [String: HeldLineEnd]?
    /// Transfers another apply found made, which this plan's folder reports, by instruction
    /// id: their charges are looked up with the plan's facts (``checkFacts(_:)``).
    public var reportedCharges: [String: String] = [:]
    /// For a plan made offline: the orders of each aggregated payout's lines, by instruction
    /// id (an aggregated payout names no group), asked only when Stripe refuses a fact the
    /// plan depends on. Without it such a payout stands alone.
    ///
    /// Given which rows matter, `(instruction id, order) -> Bool`, it returns only those:
    /// memory follows the orders that stop, not the plan.
    public var payoutOrders: ((_ wanted: (String, String) -> Bool) throws(ApplyError) -> [String: [String: String]])?
    /// Of these instructions (an earlier run's, still open), the ones with a line of an order
    /// the plan stops (a line of it rejected in its results.csv), or that a run decided
    /// against after the instruction was sent (the ledger's decided orders), each with why:
    /// one that a look-up proves never made is not sent now, and its lines go again with
    /// their orders in a later plan (audit 32 N11: a payout left unknown was made by the run
    /// that rejected its order for a charge that had failed; audit 35 P2: when that run could
    /// not look it up, the next run, or a re-apply of the old folder, made it). Asked once,
    /// only when some are open. Given each open instruction's line ids and when it was sent.
    /// Each with the orders of its lines that may not move (its other lines wait for the
    /// next run: ``ApplyReport/waitingAfterStop``).
    public var stoppedInstructions:
        (
            (_ open: [String: (lines: [String], sentAt: Date)]) throws(ApplyError) -> [String: (
                why: String, orders: Set<String>
            )]
        )?
    /// The amount of each charge the plan's transfers draw on, as the plan knew it (its
    /// charges.csv), in minor units of its currency, by the key the ledger records a
    /// transfer's charge under. Asked only when other runs may have moved money on them
    /// since the plan counted what earlier runs moved (``stopOverAllocated(_:)``).
    public var chargeAmounts: (() throws(ApplyError) -> [String: (currency: String, gross: Int64)])?
    /// The orders of the plan with a line on a charge the ledger knows Stripe said failed (by
    /// an earlier run's look-up, or since this plan was made), with why.
    public var ordersOnFailedCharges: (() throws(ApplyError) -> [String: (charge: String, key: String, why: String)])?
    /// The plan's transfer lines that wait for their date (or their charge), by the charge
    /// each draws on: what the over-allocation check at apply counts beside what it sends.
    public var waitingTransfers:
        (() throws(ApplyError) -> [String: [(line: String, order: String, amount: Int64, currency: String)]])?
    /// Whether other runs may have moved money on the plan's charges since it was made: it
    /// was made without a ledger, or another run started after it. (A transfer an earlier run
    /// left open is not one: the plan carries its lines, ``LedgerStore/heldLines(_:)``.)
    public var ledgerMovedSincePlan = false
    private var stoppedByPlan: [String: (why: String, orders: Set<String>)] = [:]
    /// ``ApplyReport/waitingAfterStop``.
    private var waitingAfterStop: [String: Set<String>] = [:]

    // Per-run state.
    /// Every outcome of the run, on disk: memory holds the calls in flight, not the plan.
    private var outcomes: InstructionOutcomes
    private var resolved: [String: InstructionOutcome] = [:]
    /// The ledger's outcomes no folder reported yet (``LedgerStore/unreportedOutcomes()``),
    /// read once, after step 1 resolved what earlier runs left open.
    private var unreportedOutcomes: Set<String>?
    private var ledgerFailure: LedgerError?
    /// Set when Stripe refuses the key itself (HTTP 401): the run stops sending.
    private var keyRefused: String?
    /// SIGTERM or SIGINT during the run: it stops sending (``Interruption``).
    private var interruption: Interruption?
    private var stopSending: (() -> Void)?
    /// The plan could not be read again while sending (it changed on disk): the run stops.
    private var planFailure: ApplyError?
    /// What Stripe refused of a plan made offline, with the orders that may not move.
    private var cascade: OrderStops?
    private var obstacles = Obstacles()
    /// Payouts whose payout method Stripe refused, of orders whose money already moved (a
    /// re-apply, after a transfer of the order went): only the payout is refused, as when
    /// Stripe refuses it at creation; the rest of the order goes (``checkFacts(_:)``).
    private var refusedAlone: [String: OrderStops.Obstacle] = [:]
    /// The charges an offline plan's facts check found at Stripe, and the instructions that
    /// draw on each (``ApplyReport/lookedUpCharges``).
    private var lookedUpCharges: [ChargeFact] = []
    private var lookedUpMethods: [PayoutMethodFact] = []
    /// What Stripe said now of the charges the ledger remembered failed that the plan's orders
    /// draw on (``ApplyReport/recheckedCharges``).
    private var recheckedCharges: [ChargeFact] = []
    /// The charges of transfers Stripe refused `charge_failed` in this apply.
    private var refusedCharges: Set<String> = []
    /// Whether `settle cancel` dropped any line since the plan was made (asked once a run).
    private var cancelledSincePlan: Bool?
    /// When the ledger was last rebuilt (``cameBack(_:)``), asked once; a ledger that cannot
    /// say counts as rebuilt after every plan (nothing restored is sent again).
    private lazy var rebuiltAt: Date? = {
        do { return try ledger.rebuiltAt() } catch { return .distantFuture }
    }()
    private var chargeOfInstruction: [String: String] = [:]
    /// Transfers an earlier run left open that this run found made, with their charges: a plan
    /// made offline knows no facts of them, so its apply looks the charges up with its own,
    /// and its files count them (audit 29 F5: the charge's gross was counted by no run).
    private var resolvedCharges: [String: String] = [:]
    /// Per aggregated payout, the order of each of its lines of an order that stops
    /// (``payoutOrders``, read once, after every transfer was answered).
    private var payoutOrdersSeen: [String: [String: String]] = [:]
    /// Per order, this run's transfers and reversals of it that Stripe refused, by
    /// instruction id with the refusal: its payouts are not sent (an order moves whole or
    /// not at all; a payout never pays for an order whose money did not move, e.g. a charge
    /// that failed at Stripe though the export said it succeeded).
    private var unmoved: [String: [String: String]] = [:]
    /// Per order, this run's transfers and reversals of it whose outcome is not known, or that
    /// were never sent (every try rate-limited or unable to connect), by instruction id with
    /// what became of it ("has no known outcome yet (…)", "was not sent (…)"): the rest of the
    /// order waits for the next run, which resolves or sends them first.
    private var unsettled: [String: [String: String]] = [:]
    /// Per order, its transfers and reversals in flight (sent, not answered yet).
    private var flights: [String: Int] = [:]
    private var payoutOrdersRead = false
    /// Payouts the look-ups of ``resolveUnresolved()`` found made and back already: instruction,
    /// status, `status_details` reason.
    private var foundCameBack: [(String, String, String?)] = []
    /// Per order, a transfer or reversal of it the ledger has refused since the plan was made
    /// (by this run, by an earlier apply of this folder, or by the resolution of one an
    /// earlier run left open: not an instruction of this plan, so not in ``unmoved``): read
    /// once, when the first payout is reached.
    private var refusedInLedger: [String: (instruction: String, reason: String)]?
    /// Lines of an aggregated payout that another instruction settled (``decided(_:)``),
    /// by payout then line: the rest of the payout may still go (``hold(_:)``).
    private var settledElsewhere: [String: [String: (InstructionOutcome, instruction: String?)]] = [:]
    /// Outcomes of instructions not in the plan: payouts of some of an aggregated payout's
    /// lines (``PayoutSplit``) this run formed, or found come back.
    private var extraOutcomes = 0
    /// Ids marked in flight by this run whose answer is not in yet (the plan's duplicates).
    private var sending: Set<String> = []
    /// Answers waiting to be committed together (``flush()``): bounded by the calls in flight.
    private var pendingWrites: [LedgerStore.Write] = []
    private var pendingSince: ContinuousClock.Instant?

    /// Notes that Stripe refused the key (401/403 on any call) and stops every phase.
    private func noteKeyRefused(_ outcome: HTTPOutcome?) {
        guard case .response(let response)? = outcome, response.status == 401 || response.status == 403 else {
            return
        }
        guard keyRefused == nil else { return }
        let (code, message) = StripeAPI.error(response)
        keyRefused = "Stripe refused the API key (HTTP \(response.status), \(code)): \(message)"
        log(.error, keyRefused!)
        stopSending?()
    }

    /// - Throws: ``ApplyError/configuration(_:)`` for an API base that is not https (or
    ///   http on loopback) or a read-only ledger; ``ApplyError/transport(_:)`` when libcurl
    ///   cannot start.
    public init(configuration: ApplyConfiguration, ledger: LedgerStore) throws(ApplyError) {
        guard ledger.isWritable else { throw .configuration("the ledger was opened read-only") }
        guard configuration.rate > 0, configuration.concurrency > 0 else {
            throw .configuration("rate and concurrency must be positive")
        }
        self.configuration = configuration
        self.ledger = ledger
        api = try StripeAPI(configuration: configuration)
        client = try HTTPClient.forStripe(configuration)
        limiter = RateLimiter(rate: configuration.rate)
        outcomes = try Self.newOutcomes()
    }

    private static func newOutcomes() throws(ApplyError) -> InstructionOutcomes {
        do {
            return try InstructionOutcomes()
        } catch {
            throw .ledger(error)
        }
    }

    /// Keeps an instruction's outcome for the report; a spill that fails stops the run as
    /// the ledger's failure would.
    private func setOutcome(_ outcome: InstructionOutcome, for id: String) {
        do {
            try outcomes.set(outcome, for: id)
        } catch {
            fail(error)
        }
    }

    /// Runs the plan; see the type's documentation for the order of work.
    ///
    /// - Parameter checkFacts: look up the payout methods and charges the plan depends on
    ///   before sending (a plan made offline); a plan made online carries Stripe's facts.
    /// - Throws: ``ApplyError/configuration(_:)`` before anything is sent when a payout
    ///   has no financial account; ``ApplyError/factsUnavailable(_:)`` before anything of
    ///   the plan is sent.
    ///   A ledger failure during the run does not throw: the report carries it, with every
    ///   outcome the ledger could not record reported `unknown`.
    public func run(_ plan: [Instruction], checkFacts: Bool = true) throws(ApplyError) -> ApplyReport {
        try run(ArrayInstructionSource(plan), checkFacts: checkFacts)
    }

    /// Runs a plan read one instruction at a time: memory holds the instructions in flight,
    /// not the plan (the outcomes for the report wait on disk, ``InstructionOutcomes``).
    ///
    /// - Throws: as ``run(_:checkFacts:)``; ``ApplyError/planInvalid(line:message:)`` when the
    ///   source cannot be read again (changed since it was checked).
    public func run(_ plan: any InstructionSource, checkFacts: Bool = true) throws(ApplyError) -> ApplyReport {
        let started = ContinuousClock.now
        outcomes = try Self.newOutcomes()
        resolved = [:]
        ledgerFailure = nil
        keyRefused = nil
        planFailure = nil
        cascade = nil
        obstacles = Obstacles()
        lookedUpCharges = []
        lookedUpMethods = []
        recheckedCharges = []
        refusedCharges = []
        chargeOfInstruction = [:]
        resolvedCharges = [:]
        waitingAfterStop = [:]
        cancelledSincePlan = nil
        payoutOrdersSeen = [:]
        unmoved = [:]
        unsettled = [:]
        flights = [:]
        settledElsewhere = [:]
        extraOutcomes = 0
        payoutOrdersRead = false
        refusedInLedger = nil
        sending = []
        counters = CallCounters()

        let unfunded = plan.overview.unfundedPayouts
        if unfunded > 0, (configuration.financialAccount ?? "").isEmpty {
            throw .configuration(
                "the plan has \(unfunded) payout(s) from a financial account, but none is configured (--financial-account)"
            )
        }
        // The account a plan's payouts name was reviewed with the plan: another one on the
        // command line (or in the config) is a mistake to stop at, not an option to ignore.
        if let planned = plan.overview.fundingAccount, let configured = configuration.financialAccount,
            !configured.isEmpty, configured != planned
        {
            throw .configuration(
                "the plan pays its payouts from financial account \(planned), but \(configured) is configured (--financial-account or the config file); nothing was sent: apply with \(planned), or plan again with \(configured)"
            )
        }
        // Whatever this run records settled (its own sends, earlier ones it resolves) is its.
        ledger.writingRun = runID.isEmpty ? nil : runID
        let interruption = Interruption.take()
        self.interruption = interruption
        try resolveUnresolved()
        if keyRefused == nil, ledgerFailure == nil { try stopOrdersRefusedElsewhere(plan) }
        if keyRefused == nil, ledgerFailure == nil, checkFacts { try self.checkFacts(plan) }
        if keyRefused == nil, ledgerFailure == nil { try stopOrdersOnFailedCharges(plan) }
        if keyRefused == nil, ledgerFailure == nil { try stopOverAllocated(plan) }
        if keyRefused == nil, ledgerFailure == nil {
            do {
                // Not those of an order a refused fact stops: it moves nothing, netted or not.
                let refused = cascade?.refusedOrders ?? [:]
                let takenUp = takenUpOrders
                try ledger.recordNetted(
                    refused.isEmpty && takenUp.isEmpty
                        ? netted : netted.filter { refused[$0.group] == nil && takenUp[$0.group] == nil }, run: runID,
                    at: configuration.now())
            } catch {
                fail(error)
            }
        }
        if keyRefused == nil, ledgerFailure == nil, interruption.caughtSignal == nil { try send(plan) }
        if let planFailure { throw planFailure }
        lookUpRefusedCharges()

        if stopReason != nil || outcomes.count - extraOutcomes < plan.overview.count {
            try plan.rewind()
            while let instruction = try plan.next() {
                if (try? outcomes.contains(instruction.id)) != true {
                    let reason = stopReason ?? "the run stopped before it was sent"
                    setOutcome(.notSent(reason: reason), for: instruction.id)
                }
            }
        }
        var report = ApplyReport(
            outcomes: outcomes, resolved: resolved, requests: counters.requests, retries: counters.retries,
            rateLimited: counters.rateLimited, serverErrors: counters.serverErrors,
            transportErrors: counters.transportErrors, elapsed: started.duration(to: .now))
        report.notStripeAnswers = counters.notStripe
        report.keyRefused = keyRefused
        report.ledgerFailure = ledgerFailure.map { "\($0)" }
        report.interrupted = interruption.caughtSignal.map { "signal \($0)" }
        report.refusedOrders = cascade?.refusedOrders ?? [:]
        report.waitingAfterStop = waitingAfterStop
        report.stoppedBeforeSending = Set(report.refusedOrders.keys)
        report.lookedUpCharges = lookedUpCharges
        report.lookedUpMethods = lookedUpMethods
        report.recheckedCharges = recheckedCharges
        report.refusedCharges = refusedCharges.sorted()
        report.chargeOfInstruction = chargeOfInstruction
        for (order, refusals) in unmoved {
            guard let (id, refusal) = refusals.min(by: { $0.key < $1.key }) else { continue }
            report.refusedOrders[order] = "instruction \(id) of order \(order) failed at Stripe: \(refusal)"
        }
        // Its rows that wait (dated, pending) stop with it: never held again here.
        for (order, message) in takenUpOrders where report.refusedOrders[order] == nil {
            report.refusedOrders[order] = message
        }
        return report
    }

    /// Why the run stopped early, for the instructions it did not reach.
    private var stopReason: String? {
        if keyRefused != nil { return "not sent: the run stopped when Stripe refused the API key" }
        if let ledgerFailure { return "not sent: the run stopped when the ledger failed (\(ledgerFailure))" }
        if let signal = interruption?.caughtSignal {
            return "not sent: the run was interrupted (signal \(signal)); apply the folder again to send the rest"
        }
        return nil
    }

    /// What a scheduler does between calls: stop sending once a signal asked the run to
    /// stop, and record the answers that are due.
    private func tick(for scheduler: CallScheduler) -> (ContinuousClock.Instant) -> Void {
        { [unowned self, unowned scheduler] now in
            if self.interruption?.caughtSignal != nil { scheduler.stopped = true }
            self.flushIfDue(now)
        }
    }

    // MARK: - Parameters

    /// The parameters an instruction is sent with: a v2 payout gets the configured
    /// financial account when the plan has none (``PlanOverview/unfundedPayouts`` made sure
    /// there is one before anything was sent).
    private func parameters(_ instruction: Instruction) -> JSON {
        var params = instruction.params
        guard instruction.isV2, case .object? = params["from"],
            (params["from"]?["financial_account"] ?? .null) == .null, let account = configuration.financialAccount,
            !account.isEmpty
        else { return params }
        params["from"]?["financial_account"] = .string(account)
        return params
    }

    // MARK: - 1. Resolve what earlier runs left open

    /// Every instruction an earlier run left in flight or unknown: look it up first; only a
    /// list that proves it absent lets the stored request go again, under the same key.
    private func resolveUnresolved() throws(ApplyError) {
        let rows = try ledgerDo { () throws(LedgerError) in try ledger.unresolvedInstructions() }
        guard !rows.isEmpty else { return }
        if let stoppedInstructions {
            var open: [String: (lines: [String], sentAt: Date)] = [:]
            for row in rows {
                let lines = try ledgerDo { () throws(LedgerError) in try ledger.lines(ofInstruction: row.id) }
                open[row.id] = (lines, row.firstSentAt)
            }
            stoppedByPlan = try stoppedInstructions(open)
        }
        log(.info, "resolving \(rows.count) instruction(s) left in flight or unknown by an earlier run")
        let scheduler = makeScheduler()
        stopSending = { [unowned scheduler] in scheduler.stopped = true }
        defer { stopSending = nil }
        for row in rows {
            // The objects of the instruction's earlier attempts are not this attempt's.
            let earlier =
                row.dispatch.kind == "payout"
                ? try ledgerDo { () throws(LedgerError) in try ledger.earlierObjects(instruction: row.id) } : []
            enqueueLookup(row, scheduler: scheduler, after: nil, earlier: earlier)
        }
        scheduler.tick = tick(for: scheduler)
        foundCameBack = []
        client.run(source: scheduler)
        scheduler.finishStopped()
        flush()
        finish(scheduler)
        // A payout the look-up found failed, returned or canceled was made and came back:
        // recorded so (its lines failed, with Stripe's reason), it is reported failed by this
        // run, the one that learns it, not settled.
        // Each run's folder, read once for the warnings below.
        var folders: [String: String]?
        for (id, status, reason) in foundCameBack where ledgerFailure == nil {
            do {
                try ledger.recordPayoutStatus(instruction: id, status: status, reason: reason)
                let failed = try ledger.instruction(id)
                resolved[id] = .failed(
                    code: failed?.errorCode ?? "payout_\(status)", message: failed?.errorMessage ?? "came back")
                if let sender = failed?.sentBy, sender != runID, let payout = failed?.stripeID {
                    // The run that sent it never learned it was made: its folder counts the
                    // payout as paid out once applied again, and only then (audit 70 A70-4).
                    if folders == nil {
                        folders = try ledger.runFolders()
                    }
                    let folder = folders?[sender]
                    log(
                        .warning,
                        "\(id): the payout \(payout) that run \(sender) sent, whose outcome it never learned, was made "
                            + "at Stripe and came back (\(status)): this run reports the return; "
                            + (folder.map { "`settle apply \($0)`" } ?? "applying that run's folder again")
                            + " makes that folder count the payout as paid out")
                }
            } catch {
                fail(error)
            }
        }
        for row in rows {
            if resolved[row.id] == nil { resolved[row.id] = .unknown(message: "could not be resolved in this run") }
            if case .settled? = resolved[row.id], row.dispatch.kind == Instruction.Kind.transfer.name,
                row.dispatch.charge.hasPrefix("ch_") || row.dispatch.charge.hasPrefix("py_")
            {
                resolvedCharges[row.id] = row.dispatch.charge
            }
            // What is still not known (or refused) of an order stops the rest of it in this run
            // too: no payout for an order whose transfer may not exist.
            if let result = resolved[row.id] { noteMoved(row.dispatch, result) }
        }
    }

    /// An earlier run's open instruction this apply found made: marked in the ledger, with
    /// its outcome, until a folder reports its lines `settled` (this one, when it has their
    /// rows; else the next that does), so one day's sums count the object (audit 24 N8).
    private func noteUnreported(_ dispatch: LedgerDispatch) {
        enqueue(.unreported(instruction: dispatch.id, run: runID.isEmpty ? nil : runID))
    }

    /// Looks the instruction's object up by `metadata[settle_instruction]`, page by page.
    private func enqueueLookup(
        _ row: LedgerInstruction, scheduler: CallScheduler, after cursor: String?, earlier: Set<String>
    ) {
        let dispatch = row.dispatch
        let request = api.request(method: "GET", path: StripeLookup.path(for: dispatch, after: cursor))
        let call = Call(request: request, label: "\(dispatch.id) look-up") {
            [unowned self, unowned scheduler] outcome, ending in
            self.noteKeyRefused(outcome)
            switch StripeLookup.read(
                outcome, ending, instruction: dispatch.id, kind: dispatch.kind, api: self.api, earlier: earlier)
            {
            case .found(let id, let cameBack, let reason):
                if self.record(dispatch, .settled(stripeID: id), outcome: outcome, label: "lookup_found"),
                    cameBack == nil
                {
                    self.noteUnreported(dispatch)
                }
                self.resolved[dispatch.id] = .settled(stripeID: id)
                if let cameBack {
                    // Made, and back already: this run reports it (after the look-ups).
                    self.foundCameBack.append((dispatch.id, cameBack, reason))
                } else if dispatch.kind == "payout" {
                    self.notePayoutStatus(dispatch, nil)
                }
            case .nextPage(let next):
                self.enqueueLookup(row, scheduler: scheduler, after: next, earlier: earlier)
            case .absent:
                if let outcome { self.recordCall(dispatch, outcome: outcome, label: "lookup_absent") }
                if let (why, orders) = self.stoppedByPlan[dispatch.id] {
                    self.waitingAfterStop[dispatch.id] = orders
                    // Never made, and an order of it may not move now: not sent, its lines
                    // released (`failed` `group_rejected`; fed back, they go again with their
                    // orders). A late first try cannot make it: Stripe's list was read after
                    // every try had ended.
                    let result = InstructionOutcome.rejected(
                        code: ReasonCode.groupRejected.code,
                        message: "never made at Stripe (a look-up found none), and not sent now: \(why)")
                    self.record(dispatch, result, outcome: nil, label: "lookup_absent_order_stopped")
                    self.resolved[dispatch.id] = result
                    return
                }
                // Stripe's own list says it was never made: send the stored request again
                // under the same key (a request still running at Stripe answers 409, then
                // its saved result), so a late first try cannot make a second object.
                self.enqueueResend(row, scheduler: scheduler)
            case .failed(let message):
                let text = "look-up failed: \(message)"
                self.record(dispatch, .unknown(message: text), outcome: outcome, label: "lookup_failed")
                self.resolved[dispatch.id] = .unknown(message: text)
            }
        }
        call.onRetry = { [unowned self] outcome in self.recordCall(dispatch, outcome: outcome, label: "lookup_retry") }
        scheduler.enqueue(call)
    }

    private func enqueueResend(_ row: LedgerInstruction, scheduler: CallScheduler) {
        let dispatch = row.dispatch
        flush()
        do {
            // Only moves last_sent_at: the key and parameters stay those stored.
            try ledger.markInFlight([dispatch], at: configuration.now())
        } catch {
            fail(error)
            resolved[dispatch.id] = .unknown(message: "the ledger failed before the re-send: \(error)")
            return
        }
        let params =
            (try? JSON.parse(dispatch.params)) ?? .object([])
        let request = api.createRequest(
            method: dispatch.method, path: dispatch.path, params: params, idempotencyKey: row.idempotencyKey,
            context: dispatch.stripeContext)
        // The look-up just proved the object absent, so a fresh refusal is final.
        let call = Call(request: request, label: "\(row.id) re-send \(row.idempotencyKey)") {
            [unowned self] outcome, ending in
            self.noteKeyRefused(outcome)
            var verdict = CreateVerdict(outcome, ending)
            // Never sent now, but an earlier try may still be running at Stripe: stays unknown.
            if case .notSent(let text) = verdict { verdict = .unknown(text) }
            if case .keyRefused(let text, _) = verdict { verdict = .unknown(text) }
            let result = self.conclude(dispatch, verdict, outcome: outcome, label: "resend")
            if case .settled = result { self.noteUnreported(dispatch) }
            self.resolved[row.id] = result
        }
        call.onRetry = { [unowned self] outcome in self.recordCall(dispatch, outcome: outcome, label: "retry") }
        scheduler.enqueue(call)
    }

    // MARK: - 2. What the ledger already knows

    /// What the ledger says of one instruction: nil when it is to be sent, else its outcome.
    private func decided(_ instruction: Instruction) throws(LedgerError) -> InstructionOutcome? {
        if let row = try ledger.instruction(instruction.id) {
            switch row.status {
            case .settled:
                // Resolved by this run (its request had gone out before a crash):
                // settled now; otherwise an earlier run settled it.
                if case .settled(let id)? = resolved[instruction.id] { return .settled(stripeID: id) }
                // Settled by an earlier apply of this same plan (it stopped before its report):
                // this run made it, and this run's report counts it.
                if !runID.isEmpty, row.settledBy == runID { return .settled(stripeID: row.stripeID ?? "") }
                // Sent by this plan's run, which was killed before it learned the outcome, and
                // found made by another folder's apply that had no row of its lines: no folder
                // reported it yet, so this one does, and counts it (audit 55 r1: the re-apply
                // said `already_settled`, and no day's summary counted the transfer).
                if unreportedOutcomes == nil { unreportedOutcomes = try ledger.unreportedOutcomes() }
                if unreportedOutcomes?.contains(instruction.id) == true {
                    return .settled(stripeID: row.stripeID ?? "")
                }
                return .alreadySettled(stripeID: row.stripeID ?? "")
            case .inFlight, .unknown:
                return .unknown(
                    message:
                        "an earlier send (\(row.idempotencyKey)) is not resolved yet: \(row.errorMessage ?? "no answer")"
                )
            case .failed:
                // A payout this run made that came back since (failed, returned or canceled
                // after Stripe accepted it): a re-apply of its folder does not send it again
                // (the method may be the reason); its lines are failed, in errors.csv, for
                // finance to fix and feed back. A later plan of those lines sends it again,
                // under the next attempt's key.
                if instruction.kind == .payout, let back = cameBack(row) { return back }
                if let refusal = refusedElsewhere(row) { return refusal }
                if instruction.kind == .payout, let reported = try reportedElsewhere(row, instruction) {
                    return reported
                }
            }
        }
        // Lines another instruction holds. When others settled every line with the same
        // content (a later run paid what this plan lists), they are already settled; any other
        // case is a conflict: sending would pay some of them twice.
        var elsewhere: [(line: Instruction.Line, held: LedgerLine)] = []
        // Lines of an aggregated payout that this run paid in a payout of some of its lines,
        // which came back since: this folder never sends them again (as for a whole payout).
        var cameBack: [String: (InstructionOutcome, instruction: String?)] = [:]
        let aggregated = instruction.kind == .payout && instruction.group.isEmpty
        // Lines `settle cancel` dropped since the plan was made are never sent by it (audit 24
        // N7: a re-apply paid a cancelled payout line its first apply had held back). An
        // aggregated payout goes for its other lines; any other instruction waits whole.
        // Asked of the ledger once a run: no cancel since the plan (the usual case), no query a line.
        if cancelledSincePlan == nil { cancelledSincePlan = try ledger.anyCancelled(since: plannedAt) }
        let cancelled =
            cancelledSincePlan == true
            ? try ledger.cancelledLines(instruction.lines.map(\.lineID), since: plannedAt) : []
        if !cancelled.isEmpty {
            let dropped = InstructionOutcome.notSent(reason: "settle cancel dropped it after this plan")
            guard aggregated, cancelled.count < instruction.lines.count else { return dropped }
            for id in cancelled { cameBack[id] = (dropped, nil) }
        }
        for line in instruction.lines {
            guard let held = try ledger.line(line.lineID), held.instructionID != instruction.id else { continue }
            guard held.status == .failed else {
                elsewhere.append((line, held))
                continue
            }
            // A payout of the line that came back, or that another run sent again after this plan
            // and saw refused (audit 29 R1, aggregated: the re-apply paid the line in its
            // aggregated payout), is not sent again by this folder.
            if instruction.kind == .payout, let maker = try ledger.instruction(held.instructionID),
                maker.dispatch.kind == Instruction.Kind.payout.name,
                let back = self.cameBack(maker) ?? refusedElsewhere(maker)
            {
                cameBack[line.lineID] = (back, held.instructionID)
            }
        }
        guard let first = elsewhere.first else {
            guard !cameBack.isEmpty else { return nil }
            // A payout of one order (a line of it came back in another payout): not sent again.
            if !aggregated, cameBack.count == instruction.lines.count, let back = cameBack.values.first {
                return back.0
            }
            settledElsewhere[instruction.id] = cameBack
            return nil
        }
        let settledAsListed = elsewhere.allSatisfy { $0.held.status == .settled && $0.held.content == $0.line.content }
        if aggregated {
            // An aggregated payout: the lines settled elsewhere are reported so, a line another
            // instruction holds with other content is a conflict of its own, and the others may
            // still go as a payout of their own (``hold(_:)``): one line taken up by a later run
            // never holds back the other orders' pay (audit 26 B7: the whole payout was
            // line_conflict, after another order's transfer had gone).
            var done = cameBack
            for (line, held) in elsewhere {
                guard held.status == .settled, held.content == line.content else {
                    done[line.lineID] = (
                        .rejected(
                            code: "line_conflict",
                            message: "line \(line.lineID) is already \(held.status.rawValue) in instruction "
                                + "\(held.instructionID), with other content"), nil
                    )
                    continue
                }
                let stripeID = held.stripeID ?? ""
                let maker = try ledger.instruction(held.instructionID)
                let ours = !runID.isEmpty && maker?.settledBy == runID
                done[line.lineID] = (
                    ours ? .settled(stripeID: stripeID) : .alreadySettled(stripeID: stripeID), held.instructionID
                )
            }
            settledElsewhere[instruction.id] = done
            return nil
        }
        if elsewhere.count == instruction.lines.count, settledAsListed {
            return .alreadySettled(stripeID: first.held.stripeID ?? "")
        }
        if settledAsListed {
            // Some of its lines another plan settled as listed (an overlapping export applied
            // first), the others not: sent as planned it would pay those twice, and it cannot
            // be cut here. It waits: the next run reports the settled lines already settled and
            // plans the others alone (audit 23: all of them were line_conflict, in errors.csv).
            return .notSent(
                reason:
                    "line \(first.line.lineID) of it was settled by instruction \(first.held.instructionID) of another "
                    + "plan; the next run plans its other lines without it")
        }
        return .rejected(
            code: "line_conflict",
            message:
                "line \(first.line.lineID) is already \(first.held.status.rawValue) in instruction \(first.held.instructionID)"
        )
    }

    /// The outcome of a payout Stripe accepted that came back since (failed, returned or
    /// canceled after it): when this plan's run made it, or it was made after this plan (a
    /// later run paid the plan's lines), this plan does not send those lines again (the
    /// method may be why, and the run that learned it reports them failed, for finance to
    /// fix and feed back: a plan made from that sends them under the next attempt's key).
    /// The clock only keeps lines from being sent here, never releases any.
    ///
    /// A payout a rebuild restored from Stripe (no run recorded it: its run is not known, and
    /// its time is Stripe's `created`, on Stripe's clock) keeps every folder planned before
    /// that rebuild from sending it again: with Stripe's clock behind ours, a payout live at
    /// the rebuild that came back after it looked older than its own run's plan, and that
    /// folder's re-apply paid it again (audit 52 G1). A plan made after the rebuild (a fix fed
    /// back) sends it.
    private func cameBack(_ payout: LedgerInstruction) -> InstructionOutcome? {
        guard payout.status == .failed, let made = payout.stripeID, !made.isEmpty else { return nil }
        let ours = !runID.isEmpty && payout.settledBy == runID
        let later = plannedAt.map { payout.firstSentAt >= $0 } ?? false
        let restoredAfterPlan =
            payout.settledBy == nil
            && (plannedAt.map { planned in rebuiltAt.map { planned < $0 } ?? true } ?? true)
        guard ours || later || restoredAfterPlan else { return nil }
        return .failed(
            code: payout.errorCode ?? ReasonCode.payoutFailed.code,
            message: payout.errorMessage ?? "the payout \(made) came back at Stripe")
    }

    /// An instruction of this plan that another run sent again after the plan was made (a
    /// later plan of the same lines with the same content makes the same instruction) and saw
    /// refused: that run decided it, and its files report it; this folder does not send it
    /// again (audit 29 R1: a re-apply sent a new payout for such a line, which no folder
    /// reported). A request that never left (`not_sent`) decides nothing.
    private func refusedElsewhere(_ row: LedgerInstruction) -> InstructionOutcome? {
        guard row.status == .failed, let sender = row.sentBy, !runID.isEmpty, sender != runID,
            let plannedAt, row.lastSentAt >= plannedAt, row.errorCode != LedgerOutcome.notSentCode
        else { return nil }
        return .failed(
            code: row.errorCode ?? "",
            message: "sent again by run \(sender) after this plan, and refused by Stripe: "
                + (row.errorMessage ?? "no reason given"))
    }

    /// A refusal of this folder's own payout that a later run reported: every line's holding
    /// ended there after this plan (the folder's run was killed before its files said so, and
    /// the next run took its lines over and reported them `failed`). The line goes again from
    /// that run's errors.csv, fed back, not by this folder (audit 50 N1: a re-apply sent it
    /// again while errors.csv asked finance to fix it). A refusal this folder's own files
    /// reported is sent again by its re-apply, as before.
    private func reportedElsewhere(_ row: LedgerInstruction, _ instruction: Instruction) throws(LedgerError)
        -> InstructionOutcome?
    {
        guard row.refusedByStripe, !runID.isEmpty, let plannedAt, !instruction.lines.isEmpty else { return nil }
        if endedSincePlan == nil { endedSincePlan = try ledger.holdsEnded(since: plannedAt, notBy: runID) }
        let ends = instruction.lines.map { endedSincePlan?[$0.lineID] }
        guard ends.allSatisfy({ $0?.state == .released }), let reporter = ends.first??.endedRun else { return nil }
        return .failed(
            code: row.errorCode ?? "",
            message: "refused by Stripe (\(row.errorMessage ?? "no reason given")), and reported failed by run "
                + "\(reporter) after this plan: feed back that run's errors.csv to send it again")
    }

    /// Whether this run already has the instruction (a plan that lists it twice sends it once).
    private func isDuplicate(_ id: String) -> Bool {
        sending.contains(id) || (try? outcomes.contains(id)) == true
    }

    // MARK: - 3. Stripe's facts, for a plan made offline

    /// What Stripe refused, or still holds back, of the facts a plan made offline depends on.
    private struct Obstacles {
        /// By `recipient/method`.
        var methods: [String: OrderStops.Obstacle] = [:]
        var charges: [String: OrderStops.Obstacle] = [:]
        /// Transfers refused at apply, by id: past their charge with what other runs moved on it
        /// since the plan, or on a charge Stripe said failed.
        var refused: [String: OrderStops.Obstacle] = [:]

        var isEmpty: Bool { methods.isEmpty && charges.isEmpty }

        /// The one key of a recipient's payout method, for the look-ups and their verdicts.
        static func key(recipient: String, method: String) -> String { recipient + "/" + method }

        static func methodKey(_ instruction: Instruction) -> String? {
            instruction.preflight.payoutMethod.map {
                key(recipient: instruction.preflight.recipient ?? instruction.payee, method: $0)
            }
        }

        /// What Stripe said of this instruction's own facts (a refused method first).
        func of(_ instruction: Instruction) -> OrderStops.Obstacle? {
            if let found = refused[instruction.id] { return found }
            if let key = Self.methodKey(instruction), let found = methods[key] { return found }
            if let charge = instruction.preflight.charge, let found = charges[charge] { return found }
            return nil
        }
    }

    /// Reads, once, the orders of the aggregated payouts' lines whose order stops now.
    private func readPayoutOrders() throws(ApplyError) {
        guard !payoutOrdersRead else { return }
        payoutOrdersRead = true
        let (cascade, unmoved, unsettled, refused) = (self.cascade, self.unmoved, self.unsettled, self.refusedInLedger)
        let takenUp = takenUpOrders
        payoutOrdersSeen =
            try payoutOrders? { _, order in
                cascade?.contains(order) == true || unmoved[order] != nil || unsettled[order] != nil
                    || refused?[order] != nil || takenUp[order] != nil
            } ?? [:]
    }

    /// The charges the folder's charges.csv gives facts of (``chargeAmounts``), read once.
    private var chargesOfFolder: Set<String>?

    /// Whether the folder's charges.csv has a row of `charge` (its facts known to the plan, or
    /// looked up by an earlier apply whose files were written).
    private func chargeKnownToFolder(_ charge: String) throws(ApplyError) -> Bool {
        if chargesOfFolder == nil { chargesOfFolder = Set((try chargeAmounts?() ?? [:]).keys) }
        return chargesOfFolder?.contains(charge) == true
    }

    /// Looks up every payout method and charge the plan's candidates depend on. An answer
    /// that is not Stripe's stops the run (nothing sent). When Stripe refuses one (or a
    /// charge is still pending), the orders that depend on it are not sent, whole
    /// (``OrderStops``): their instructions were formed without knowing it, and sending the
    /// rest of them would move an order in part. An aggregated payout that pays such an order
    /// goes for its other lines (``hold(_:)``).
    private func checkFacts(_ plan: any InstructionSource) throws(ApplyError) {
        var methods: [(recipient: String, method: String)] = []
        var charges: [String] = []
        var seenMethods: Set<String> = []
        var seenCharges: Set<String> = []
        try plan.rewind()
        while let instruction = try plan.next() {
            // Every instruction's, decided or not: a re-apply's files count the charge too.
            if let charge = instruction.preflight.charge { chargeOfInstruction[instruction.id] = charge }
            if let decision = try ledgerDo({ () throws(LedgerError) in try decided(instruction) }) {
                // Made by this folder's run, whose apply was killed before its files: the
                // charge an offline plan had no facts of is looked up again, so the files
                // count its gross and fee (audit 55 R2: the re-apply reported the transfer,
                // and no day's charges.csv or charges_gross had its charge).
                if case .settled = decision, let charge = instruction.preflight.charge,
                    !seenCharges.contains(charge), try !chargeKnownToFolder(charge)
                {
                    seenCharges.insert(charge)
                    charges.append(charge)
                }
                continue
            }
            if let method = instruction.preflight.payoutMethod, let key = Obstacles.methodKey(instruction),
                seenMethods.insert(key).inserted
            {
                methods.append((instruction.preflight.recipient ?? instruction.payee, method))
            }
            if let charge = instruction.preflight.charge, seenCharges.insert(charge).inserted {
                charges.append(charge)
            }
        }
        for (instruction, charge) in resolvedCharges.merging(reportedCharges, uniquingKeysWith: { own, _ in own })
            .sorted(by: { $0.key < $1.key })
        {
            chargeOfInstruction[instruction] = charge
            if seenCharges.insert(charge).inserted { charges.append(charge) }
        }
        guard !methods.isEmpty || !charges.isEmpty else { return }
        let lookup = FactsScheduler(configuration: configuration)
        defer { counters.add(lookup.counters) }
        let facts = try lookup.run(payoutMethods: methods, charges: charges)
        let unavailable = facts.unavailable
        if !unavailable.isEmpty { throw .factsUnavailable(unavailable) }
        lookedUpCharges = facts.charges
        lookedUpMethods = facts.payoutMethods
        // The charges found failed, in the ledger at once, as a refusal `charge_failed` goes: an
        // apply killed (or stopped) before its rewrite still remembers them (audit 85 F1: the
        // next offline plan paid a payout on one, the export saying it had succeeded).
        do {
            try ledger.recordFailedCharges(facts.charges.compactMap { FailedCharge($0, run: runID) })
        } catch {
            fail(error)
        }
        for fact in facts.payoutMethods {
            guard case .refused(let why) = fact.verdict else { continue }
            obstacles.methods[Obstacles.key(recipient: fact.recipient, method: fact.method)] = .refused(
                code: ReasonCode.payoutMethodUnusable.code,
                message: "payout method \(fact.method) of \(fact.recipient): \(why) (checked at apply: planned offline)"
            )
        }
        for fact in facts.charges {
            switch fact.verdict {
            case .refused(let why):
                obstacles.charges[fact.charge] = .refused(
                    code: ReasonCode.chargeFailed.code, message: "\(why) (checked at apply: planned offline)")
            case .pending:
                obstacles.charges[fact.charge] = .pending(
                    message: "charge \(fact.charge) is still pending at Stripe (checked at apply); its order waits")
            default: break
            }
        }
        guard !obstacles.isEmpty else { return }
        log(
            .warning,
            "this plan was made offline, and Stripe says: " + facts.refused.joined(separator: "; ")
                + ". The orders that depend on these are not sent (each order whole); the rest of the plan "
                + "goes, aggregated payouts without those orders' lines")
        var cascade = OrderStops()
        // Aggregated payouts whose payout method Stripe refused: every order they pay is refused.
        var refusedPayouts: [String: OrderStops.Obstacle] = [:]
        // Orders a transfer or reversal of which is settled already (an earlier apply of this
        // plan, or another instruction): their money moved, so a refused payout method refuses
        // the payout alone, as Stripe's refusal of it would. Payouts go last, and a payout's fate
        // stops no other line of its order (audit 27 "unkpay archive": a re-apply stopped such an
        // order, released its dated transfer, and the transfer never moved).
        var moved: Set<String> = []
        var refusedMethods: [(instruction: Instruction, obstacle: OrderStops.Obstacle)] = []
        try plan.rewind()
        while let instruction = try plan.next() {
            let decision = try ledgerDo { () throws(LedgerError) in try decided(instruction) }
            if instruction.kind != .payout, !instruction.group.isEmpty {
                switch decision {
                case .settled?, .alreadySettled?: moved.insert(instruction.group)
                default: break
                }
            }
            guard let obstacle = obstacles.of(instruction), decision == nil else { continue }
            if instruction.kind == .payout, instruction.preflight.charge.flatMap({ obstacles.charges[$0] }) == nil {
                refusedMethods.append((instruction, obstacle))
            } else {
                cascade.add(order: instruction.group, obstacle: obstacle)
            }
        }
        for (instruction, obstacle) in refusedMethods {
            if instruction.group.isEmpty {
                refusedPayouts[instruction.id] = obstacle
            } else if moved.contains(instruction.group) {
                refusedAlone[instruction.id] = obstacle
            } else {
                cascade.add(order: instruction.group, obstacle: obstacle)
            }
        }
        if !refusedPayouts.isEmpty {
            let found = try payoutOrders?({ id, _ in refusedPayouts[id] != nil }) ?? [:]
            for (payout, lines) in found {
                guard let obstacle = refusedPayouts[payout] else { continue }
                for order in Set(lines.values) where !moved.contains(order) {
                    cascade.add(order: order, obstacle: obstacle)
                }
            }
        }
        self.cascade = cascade
    }

    /// Before the first payout: the orders with a line on a charge whose transfer Stripe refused
    /// `charge_failed` in this apply stop too, their payouts held back (audit 43 N3: another
    /// order's payout on the charge was paid in the same apply). Stripe has just answered for
    /// the charge: no look-up. An order a transfer of which moved on another charge stops as well
    /// (its payout does not go on a failed charge).
    private func stopOrdersOnChargesRefusedNow() throws(ApplyError) {
        guard !refusedCharges.isEmpty, let ordersOnFailedCharges else { return }
        // Their payment intents first: lines naming only the intent stop too.
        lookUpRefusedCharges()
        let orders = try ordersOnFailedCharges().filter { refusedCharges.contains($0.value.charge) }
        guard !orders.isEmpty else { return }
        var cascade = self.cascade ?? OrderStops()
        for (order, stop) in orders.sorted(by: { $0.key < $1.key }) {
            cascade.add(order: order, obstacle: .refused(code: ReasonCode.chargeFailed.code, message: stop.why))
        }
        self.cascade = cascade
    }

    /// Looks up the charges of the transfers Stripe refused `charge_failed`, for their payment
    /// intents: the ledger then remembers the charge by both (audit 42 F2: a line naming only
    /// the intent was paid). A look-up that gets no answer leaves the charge remembered by id.
    private func lookUpRefusedCharges() {
        let wanted = refusedCharges.subtracting(recheckedCharges.map(\.charge)).sorted()
        guard !wanted.isEmpty, keyRefused == nil else { return }
        let lookup = FactsScheduler(configuration: configuration)
        defer { counters.add(lookup.counters) }
        guard let facts = try? lookup.run(payoutMethods: [], charges: wanted) else { return }
        let answered = facts.charges.filter { fact in
            if case .unavailable = fact.verdict { return false }
            return true
        }
        recheckedCharges += answered
        // The intents into the ledger at once, as the refusals went.
        do {
            try ledger.recordFailedCharges(
                answered.compactMap { fact in
                    guard case .refused = fact.verdict, let intent = fact.paymentIntent else { return nil }
                    return FailedCharge(
                        charge: fact.charge, paymentIntent: intent, run: runID, checkedAt: fact.checkedAt ?? "",
                        requestID: fact.requestID ?? "")
                })
        } catch {
            fail(error)
        }
    }

    /// A charge Stripe said failed stays failed: the orders of the plan with a line on one the
    /// ledger knows of (an earlier run's look-up, or one made since this plan) are not sent,
    /// each whole, their lines `charge_failed` and `group_rejected` (audit 41 F2: a plan made
    /// before the failure was known, applied late, paid the courier). An order a transfer or
    /// reversal of which moved already (an earlier apply of this folder) goes on.
    private func stopOrdersOnFailedCharges(_ plan: any InstructionSource) throws(ApplyError) {
        guard let ordersOnFailedCharges else { return }
        let remembered = try ordersOnFailedCharges()
        guard !remembered.isEmpty else { return }
        // Stripe is asked again first: a charge put right since goes on, and the rewrite has
        // the ledger forget it (``ApplyReport/recheckedCharges``).
        let lookup = FactsScheduler(configuration: configuration)
        defer { counters.add(lookup.counters) }
        let facts = try lookup.run(
            payoutMethods: [], charges: Set(remembered.values.map(\.charge)).sorted())
        let unavailable = facts.unavailable
        if !unavailable.isEmpty { throw .factsUnavailable(unavailable) }
        recheckedCharges = facts.charges
        var stillFailed: Set<String> = []
        for fact in facts.charges {
            if case .refused = fact.verdict { stillFailed.insert(fact.charge) }
        }
        let orders = remembered.filter { stillFailed.contains($0.value.charge) }
        guard !orders.isEmpty else { return }
        var moved: Set<String> = []
        // The transfers on the charge itself carry its refusal, `charge_failed`, as a plan
        // gives them; the rest of the order `group_rejected` (audit 42 F8).
        var onCharge: [(id: String, order: String)] = []
        try plan.rewind()
        while let instruction = try plan.next() {
            guard instruction.kind != .payout, let stop = orders[instruction.group] else { continue }
            switch try ledgerDo({ () throws(LedgerError) in try decided(instruction) }) {
            case .settled?, .alreadySettled?: moved.insert(instruction.group)
            case nil:
                let key = instruction.charge.isEmpty ? instruction.ledgerCharge : instruction.charge
                if instruction.kind == .transfer, key == stop.key {
                    onCharge.append((instruction.id, instruction.group))
                }
            default: break
            }
        }
        var cascade = self.cascade ?? OrderStops()
        for (order, stop) in orders.sorted(by: { $0.key < $1.key }) where !moved.contains(order) {
            cascade.add(order: order, obstacle: .refused(code: ReasonCode.chargeFailed.code, message: stop.why))
        }
        for (id, order) in onCharge where !moved.contains(order) {
            obstacles.refused[id] = .refused(code: ReasonCode.chargeFailed.code, message: orders[order]?.why ?? "")
        }
        self.cascade = cascade
    }

    /// SPEC's over-allocation rule again at apply, for what the plan could not see: the plan
    /// counted what earlier runs moved on each charge as the ledger stood when it was made
    /// (nothing, when it had no ledger), and other runs may have moved money on the charge
    /// since (audit 35 C1: a plan made without a ledger, or before another run, moved 90.00 on
    /// an 80.00 charge). When what moved on a charge (every run's settled transfers less
    /// settle's reversals of them, this plan's own included) and what this apply would send on
    /// it add up to more than the charge, its transfers are not sent: their orders stop whole,
    /// the transfers `over_allocated`, their other lines `group_rejected` (an order a transfer
    /// or reversal of which moved already, in an earlier apply of this folder, goes on).
    ///
    /// The charges this apply looked up because the export gave no amount for them (an
    /// offline plan) are checked too, against Stripe's amount less what was refunded, whether
    /// or not other runs moved money since: the plan could not check them at all (audit 46 F3:
    /// an order's first transfer moved and Stripe refused its second, `amount_too_large`).
    private func stopOverAllocated(_ plan: any InstructionSource) throws(ApplyError) {
        var amounts: [String: (currency: String, gross: Int64)] = [:]
        if let chargeAmounts, ledgerMovedSincePlan { amounts = try chargeAmounts() }
        var fromStripe: Set<String> = []
        for fact in lookedUpCharges where fact.status == "succeeded" {
            guard let amount = fact.amountMinor, let currency = fact.currency?.lowercased() else { continue }
            let gross = amount - (fact.refundedMinor ?? 0)
            if let known = amounts[fact.charge], known.currency == currency, known.gross <= gross { continue }
            amounts[fact.charge] = (currency, gross)
            fromStripe.insert(fact.charge)
        }
        guard !amounts.isEmpty else { return }
        // What this apply would send on each charge, and the transfers and orders that send it.
        var sending: [String: (amount: Int64, transfers: [(id: String, order: String)])] = [:]
        var sendingLines: Set<String> = []
        try plan.rewind()
        while let instruction = try plan.next() {
            // Not an order something else stops already: nothing of it moves now, and what it
            // holds back is checked again by the run that brings it back (audit 43 N2).
            guard instruction.kind == .transfer, !instruction.group.isEmpty, orderStop(instruction.group) == nil
            else { continue }
            let charge = instruction.charge.isEmpty ? instruction.ledgerCharge : instruction.charge
            guard let limit = amounts[charge], limit.currency == instruction.currency,
                try ledgerDo({ () throws(LedgerError) in try decided(instruction) }) == nil
            else { continue }
            var entry = sending[charge] ?? (0, [])
            let (sum, overflow) = entry.amount.addingReportingOverflow(instruction.amountMinor)
            entry.amount = overflow ? .max : sum
            entry.transfers.append((instruction.id, instruction.group))
            sending[charge] = entry
            for line in instruction.lines { sendingLines.insert(line.lineID) }
        }
        guard !sending.isEmpty else { return }
        // The plan's own transfers that wait for their date on the same charges count too, as
        // the plan counted them (audit 38 Q11: the due transfer moved, and its order's dated
        // one was rejected `over_allocated` on its day: the order moved in part). Not those a
        // later run has sent since: the ledger counts them already.
        let waiting = try waitingTransfers?() ?? [:]
        // Not those `settle cancel` dropped: they never move (audit 42 F3).
        let waitingIDs = sending.keys.flatMap { waiting[$0]?.map(\.line) ?? [] }
        let cancelled =
            waitingIDs.isEmpty
            ? [] : try ledgerDo { () throws(LedgerError) in try ledger.cancelledLines(waitingIDs, since: nil) }
        var over: [(message: String, transfers: [(id: String, order: String)], orders: Set<String>)] = []
        for (charge, entry) in sending.sorted(by: { $0.key < $1.key }) {
            guard var limit = amounts[charge], let currency = Currency(limit.currency) else { continue }
            // What stands allocated on it, as the planner counts it; and the charge's amount as
            // the run that counted it recorded it, when smaller than the plan's: a newer
            // export's (a partial refund since; audit 38 Q6: the plan's older 100.00 let 100.00
            // move on a charge of 80.00).
            let (moved, counted) = try ledgerDo { () throws(LedgerError) in
                (
                    try ledger.transferredAmount(charge: charge, currency: limit.currency),
                    try ledger.countedCharge(charge)
                )
            }
            if let counted, counted.currency == limit.currency, counted.gross < limit.gross {
                limit.gross = counted.gross
            }
            var waits: Int64 = 0
            var waitingOrders: Set<String> = []
            // Not a line this apply sends now (a line an earlier apply of this folder did not send,
            // held to wait, is both: audit 59 F3 counted it twice).
            for line in waiting[charge] ?? []
            where line.currency == limit.currency && !cancelled.contains(line.line) && orderStop(line.order) == nil
                && !sendingLines.contains(line.line)
            {
                guard try ledgerDo({ () throws(LedgerError) in try ledger.line(line.line) }) == nil else { continue }
                waits = waits.addingReportingOverflow(line.amount).overflow ? .max : waits + line.amount
                if !line.order.isEmpty { waitingOrders.insert(line.order) }
            }
            let (sent, overflow) = moved.addingReportingOverflow(entry.amount)
            let (total, overflowWaiting) = sent.addingReportingOverflow(waits)
            guard overflow || overflowWaiting || total > limit.gross else { continue }
            func text(_ minor: Int64) -> String { "\(MinorUnits.format(minor, currency: currency)) \(limit.currency)" }
            over.append(
                (
                    "transfers on charge \(charge) add up to more than the charge (\(text(limit.gross))): "
                        + "\(text(moved)) moved on it by settle, and this plan would send \(text(entry.amount)) more"
                        + (waits > 0 ? " and \(text(waits)) on a later date" : "")
                        + (fromStripe.contains(charge)
                            ? " (checked at apply against the amount Stripe gives for the charge: the export gave none)"
                            : " (checked at apply: other runs moved money on the charge since this plan was made)"),
                    entry.transfers, waitingOrders
                ))
        }
        guard !over.isEmpty else { return }
        // Orders a transfer or reversal of which moved already go on (an earlier apply of this
        // folder sent them after the same check).
        let orders = Set(over.flatMap { $0.transfers.map(\.order) + $0.orders })
        var moved: Set<String> = []
        try plan.rewind()
        while let instruction = try plan.next() {
            guard instruction.kind != .payout, orders.contains(instruction.group) else { continue }
            switch try ledgerDo({ () throws(LedgerError) in try decided(instruction) }) {
            case .settled?, .alreadySettled?: moved.insert(instruction.group)
            default: break
            }
        }
        var cascade = self.cascade ?? OrderStops()
        for (message, transfers, waitingOrders) in over {
            log(.warning, message)
            let obstacle = OrderStops.Obstacle.refused(code: ReasonCode.overAllocated.code, message: message)
            for (id, order) in transfers where !moved.contains(order) {
                obstacles.refused[id] = obstacle
                cascade.add(order: order, obstacle: obstacle)
            }
            // An order whose transfers on the charge all wait stops too: its lines are rejected
            // now, not one by one on their dates.
            for order in waitingOrders where !moved.contains(order) { cascade.add(order: order, obstacle: obstacle) }
        }
        self.cascade = cascade
    }

    /// Notes what Stripe said of a transfer or reversal of an order (``unmoved``,
    /// ``unsettled``).
    private func noteMoved(_ dispatch: LedgerDispatch, _ result: InstructionOutcome) {
        // A transfer Stripe refused because its `source_transaction` failed: remembered like a
        // look-up's answer (the rewrite records it), sent now or resolved from an earlier run.
        if case .failed(let code, _) = result, code == ReasonCode.chargeFailed.code,
            dispatch.kind == Instruction.Kind.transfer.name,
            dispatch.charge.hasPrefix("ch_") || dispatch.charge.hasPrefix("py_"),
            refusedCharges.insert(dispatch.charge).inserted
        {
            // In the ledger at once: a run killed before its rewrite still remembers it.
            do {
                try ledger.recordFailedCharges([
                    FailedCharge(charge: dispatch.charge, run: runID, checkedAt: "", requestID: "")
                ])
            } catch {
                fail(error)
            }
        }
        guard dispatch.kind != Instruction.Kind.payout.name, !dispatch.group.isEmpty else { return }
        let order = dispatch.group
        func drop(_ table: inout [String: [String: String]]) {
            table[order]?[dispatch.id] = nil
            if table[order]?.isEmpty == true { table[order] = nil }
        }
        switch result {
        case .failed(let code, let message), .rejected(let code, let message):
            unmoved[order, default: [:]][dispatch.id] = "\(code): \(message)"
            drop(&unsettled)
        case .unknown(let message):
            unsettled[order, default: [:]][dispatch.id] = "has no known outcome yet (\(message))"
            drop(&unmoved)
        case .notSent(let reason):
            // Its money did not move, and it goes again next run: the rest of the order waits
            // for it (a payout of the order would otherwise be paid before its transfer).
            unsettled[order, default: [:]][dispatch.id] = "was not sent (\(reason))"
            drop(&unmoved)
        default:
            drop(&unmoved)
            drop(&unsettled)
        }
    }

    /// Orders with a transfer or reversal that another run sent after this plan was made and
    /// Stripe refused (not one of this plan's instructions, which this apply may retry): that
    /// run decided the order, and nothing of it moves here (audit 26 B6: a re-apply retried
    /// the order's other transfer, and the order moved in part). Added to ``takenUpOrders``.
    private func stopOrdersRefusedElsewhere(_ plan: any InstructionSource) throws(ApplyError) {
        guard let plannedAt else { return }
        let refusals = try ledgerDo { () throws(LedgerError) in try ledger.refusals(since: plannedAt) }
        guard !refusals.isEmpty else { return }
        var own: Set<String> = []
        var ownLines: Set<String> = []
        try plan.rewind()
        while let instruction = try plan.next() {
            guard refusals[instruction.group] != nil else { continue }
            own.insert(instruction.id)
            for line in instruction.lines { ownLines.insert(line.lineID) }
        }
        // What this apply resolved itself stops its order already (``noteMoved(_:_:)``), and
        // this run's files report it. A refused instruction whose every line this plan sends
        // in an instruction of its own is one this plan supersedes (a fix fed back, planned
        // while the old folder was applied again: audit 28 F1), not a decision against it.
        func superseded(_ id: String) throws(ApplyError) -> Bool {
            guard !ownLines.isEmpty else { return false }
            let lines = try ledgerDo { () throws(LedgerError) in try ledger.lines(ofInstruction: id) }
            return !lines.isEmpty && lines.allSatisfy { ownLines.contains($0) }
        }
        for (order, list) in refusals where takenUpOrders[order] == nil {
            var decisive: (instruction: String, reason: String)?
            // One of this plan's own instructions that another run sent again after the plan and
            // saw refused is that run's decision too (``refusedElsewhere(_:)``).
            for refusal in list
            where resolved[refusal.instruction] == nil
                && (!own.contains(refusal.instruction)
                    || (refusal.sentBy.map { $0 != runID } ?? false && !runID.isEmpty))
            {
                if !own.contains(refusal.instruction), try superseded(refusal.instruction) { continue }
                decisive = (refusal.instruction, refusal.reason)
                break
            }
            guard let (id, reason) = decisive else { continue }
            takenUpOrders[order] =
                "instruction \(id) of this order, sent by another run, was refused by Stripe after this plan was made "
                + "(\(reason)), so the order is that run's now (its files say what became of it): nothing of it moves here"
        }
    }

    /// Why an order may not move now, or nil: what Stripe said of a plan made offline
    /// (``OrderStops``), a transfer or reversal of it Stripe refused in this run, or one whose
    /// outcome is not known yet (the rest of the order waits for the next run to learn it).
    private func orderStop(_ order: String) -> OrderStops.OrderVerdict? {
        if let message = takenUpOrders[order] { return .takenUp(message: message) }
        if let verdict = cascade?.verdict(ofOrder: order) { return verdict }
        if let (id, refusal) = unmoved[order]?.min(by: { $0.key < $1.key }) {
            return .refused(message: "instruction \(id) of order \(order) failed at Stripe: \(refusal)")
        }
        if let (id, why) = unsettled[order]?.min(by: { $0.key < $1.key }) {
            return .unsettled(message: "instruction \(id) of order \(order) \(why)")
        }
        if let (id, refusal) = refusedInLedger?[order] {
            return .refused(message: "instruction \(id) of order \(order) failed at Stripe: \(refusal)")
        }
        return nil
    }

    /// What settle holds back of an instruction before sending it.
    private enum Hold {
        /// Its lines share this outcome.
        case whole(InstructionOutcome)
        /// An aggregated payout some of whose lines may not go now: each line's entry, and
        /// the payout of the lines that go (``PayoutSplit``), if any.
        case lines([(line: String, entry: PayoutSplit.Entry)], derived: Instruction?)
    }

    /// Whether an instruction is held back, and how; nil when it may be sent. An order moves
    /// whole or not at all, and a payout never pays for an order whose money did not move.
    private func hold(_ instruction: Instruction) throws(ApplyError) -> Hold? {
        let done = settledElsewhere.removeValue(forKey: instruction.id) ?? [:]
        if case .refused(let code, let message)? = refusedAlone[instruction.id] {
            return .whole(.rejected(code: code, message: message))
        }
        if instruction.kind == .payout, refusedInLedger == nil {
            let since = plannedAt ?? .distantPast
            refusedInLedger = try ledgerDo { () throws(LedgerError) in try ledger.refusedOrders(since: since) }
        }
        guard
            cascade != nil || !unmoved.isEmpty || !unsettled.isEmpty || !done.isEmpty
                || refusedInLedger?.isEmpty == false || !takenUpOrders.isEmpty
        else { return nil }
        let own = obstacles.of(instruction)
        let isPayout = instruction.kind == .payout
        guard instruction.group.isEmpty, isPayout else {
            let order = instruction.group.isEmpty ? "\u{1}" + instruction.id : instruction.group
            guard let stop = orderStop(order) else { return nil }
            // One an earlier attempt of this plan sent and Stripe refused keeps that refusal: it
            // is not sent again, and "not sent" would hide that it was (audit 30 W2).
            if !isPayout, let row = try ledgerDo({ () throws(LedgerError) in try ledger.instruction(instruction.id) }),
                row.status == .failed, row.errorCode != LedgerOutcome.notSentCode
            {
                return .whole(.failed(code: row.errorCode ?? "", message: row.errorMessage ?? "refused by Stripe"))
            }
            return .whole(OrderStops.outcome(stop, own: own))
        }
        // Payouts come after every transfer was answered: which orders stop is known now.
        try readPayoutOrders()
        let orderOfLine = payoutOrdersSeen[instruction.id] ?? [:]
        // An aggregated payout: a line goes unless another instruction settled it, Stripe
        // refused its payout method, or its order may not move.
        var verdicts: [String: OrderStops.OrderVerdict?] = [:]
        func verdict(_ order: String) -> OrderStops.OrderVerdict? {
            if let known = verdicts[order] { return known }
            let found = orderStop(order)
            verdicts[order] = found
            return found
        }
        let methodRefused: OrderStops.OrderVerdict? =
            if case .refused(_, let message)? = own { .refused(message: message) } else { nil }
        if let methodRefused, done.isEmpty { return .whole(OrderStops.outcome(methodRefused, own: own)) }
        guard
            let (entries, free) = PayoutSplit.split(
                instruction.lines,
                stop: { line in
                    if let settled = done[line.lineID] { return settled }
                    guard let stop = methodRefused ?? orderOfLine[line.lineID].flatMap(verdict) else { return nil }
                    return (OrderStops.outcome(stop, own: own), nil)
                })
        else { return nil }
        return .lines(entries, derived: free.isEmpty ? nil : PayoutSplit.derived(from: instruction, lines: free))
    }

    /// Records what ``hold(_:)`` decided; returns the payout of the lines that may go, to send.
    private func setHeld(_ held: Hold, for instruction: Instruction) -> Instruction? {
        switch held {
        case .whole(let outcome):
            setOutcome(outcome, for: instruction.id)
            return nil
        case .lines(let entries, let derived):
            do {
                try outcomes.set(lines: entries, of: instruction.id, sentAs: derived?.id)
                // A payout of some of these lines that came back: the folder's rows that name it
                // become failed too.
                for case (_, .outcome(let outcome, let other?)) in entries where !(try outcomes.contains(other)) {
                    guard case .failed = outcome else { continue }
                    try outcomes.set(outcome, for: other)
                    extraOutcomes += 1
                }
            } catch {
                fail(error)
                return nil
            }
            if let derived {
                extraOutcomes += 1
                log(
                    .info,
                    "\(instruction.id): \(derived.lines.count) of its \(instruction.lines.count) lines go as payout "
                        + "\(derived.id) (\(derived.amountMinor) \(derived.currency)); the others may not go now")
            }
            return derived
        }
    }

    // MARK: - 4. Send

    /// Streams the plan: each refill reads the next instructions, settles what the ledger
    /// already knows, and commits the rest in flight (one transaction) before their
    /// requests leave.
    private func send(_ plan: any InstructionSource) throws(ApplyError) {
        try plan.rewind()
        emit(
            ApplyEvent(
                level: .info, name: "sending",
                message:
                    "sending the plan's \(plan.overview.count) instruction(s), skipping those the ledger has settled already",
                fields: [("instructions", .int(Int64(plan.overview.count)))]))
        let scheduler = makeScheduler()
        stopSending = { [unowned scheduler] in scheduler.stopped = true }
        defer { stopSending = nil }
        let batchSize = max(8, min(64, configuration.concurrency))
        var exhausted = false
        var lookahead: Instruction?
        var payoutsMayGo = false
        // Transfers and reversals of an order with one in flight wait here for its answer:
        // once Stripe refuses one, the rest of the order is not sent (``hold(_:)``).
        var parked: [Instruction] = []
        var done = 0
        let total = plan.overview.count
        let progress: () -> Void = { [configuration] in
            done += 1
            configuration.progress(ApplyProgress(phase: "send", done: done, total: total))
        }
        scheduler.tick = tick(for: scheduler)
        scheduler.refill = { [unowned self, unowned scheduler] in
            var calls: [Call] = []
            while calls.isEmpty, !exhausted || lookahead != nil || !parked.isEmpty, self.ledgerFailure == nil,
                self.planFailure == nil, !scheduler.stopped
            {
                // This run's answers first, so that the ledger reads below see them.
                self.flush()
                var batch: [Instruction] = []
                var batchOrders: Set<String> = []
                // Nothing more can go until answers come in (a parked order, the payout barrier).
                var barrier = false
                do throws(ApplyError) {
                    while batch.count < batchSize {
                        let free = parked.firstIndex {
                            self.flights[$0.group, default: 0] == 0 && !batchOrders.contains($0.group)
                        }
                        var read = free.map { parked.remove(at: $0) } ?? lookahead.take()
                        if read == nil, !exhausted {
                            read = try plan.next()
                            if read == nil { exhausted = true }
                        }
                        guard let instruction = read else {
                            barrier = !parked.isEmpty
                            break
                        }
                        // Payouts come after every transfer and reversal (the plan's order);
                        // the first one waits until they are all answered, so that a payout
                        // never pays for an order whose money did not move.
                        if instruction.kind == .payout, !payoutsMayGo {
                            guard self.sending.isEmpty, batch.isEmpty, parked.isEmpty else {
                                lookahead = instruction
                                barrier = true
                                break
                            }
                            payoutsMayGo = true
                            try self.stopOrdersOnChargesRefusedNow()
                        }
                        guard !self.isDuplicate(instruction.id), !batch.contains(where: { $0.id == instruction.id })
                        else { continue }
                        // One transfer or reversal of an order at a time: the next waits for
                        // Stripe's answer to the one before.
                        if instruction.kind != .payout, !instruction.group.isEmpty,
                            self.flights[instruction.group, default: 0] > 0 || batchOrders.contains(instruction.group)
                        {
                            parked.append(instruction)
                            continue
                        }
                        let known = try self.ledgerDo({ () throws(LedgerError) in try self.decided(instruction) })
                        if known == nil, let held = try self.hold(instruction) {
                            if let derived = self.setHeld(held, for: instruction) {
                                // The payout of the lines that may go, in this batch.
                                let knownDerived = try self.ledgerDo({ () throws(LedgerError) in
                                    try self.decided(derived)
                                })
                                if let outcome = knownDerived {
                                    self.setOutcome(outcome, for: derived.id)
                                } else if self.settledElsewhere.removeValue(forKey: derived.id) != nil {
                                    self.setOutcome(
                                        .rejected(
                                            code: ReasonCode.lineConflict.code,
                                            message: "a line of it was settled by another instruction meanwhile"),
                                        for: derived.id)
                                } else if !self.isDuplicate(derived.id), !batch.contains(where: { $0.id == derived.id })
                                {
                                    batch.append(derived)
                                }
                            }
                            progress()
                        } else if let outcome = known {
                            self.setOutcome(outcome, for: instruction.id)
                            progress()
                        } else {
                            batch.append(instruction)
                            if instruction.kind != .payout, !instruction.group.isEmpty {
                                batchOrders.insert(instruction.group)
                            }
                        }
                    }
                } catch {
                    if case .ledger(let problem) = error { self.fail(problem) } else { self.planFailure = error }
                    scheduler.stopped = true
                    return []
                }
                var dispatches: [LedgerDispatch] = []
                var params: [String: JSON] = [:]
                for instruction in batch {
                    let attempts: Int
                    do throws(LedgerError) {
                        attempts = try self.ledger.attempts(instruction: instruction.id)
                    } catch {
                        self.fail(error)
                        return []
                    }
                    params[instruction.id] = self.parameters(instruction)
                    dispatches.append(
                        self.dispatch(instruction, params: params[instruction.id]!, attempt: attempts + 1))
                }
                guard !dispatches.isEmpty else {
                    // At the barrier: the answers of the calls in flight come first.
                    if barrier { return [] }
                    continue
                }
                if let gate = self.beforeFirstSend {
                    self.beforeFirstSend = nil
                    do throws(ApplyError) {
                        try gate()
                    } catch {
                        if case .keyRefused(let message) = error {
                            self.keyRefused = message
                        } else {
                            self.planFailure = error
                        }
                        scheduler.stopped = true
                        return []
                    }
                }
                // In flight first, in one transaction; one by one if the batch is refused.
                var marked: [LedgerDispatch] = []
                do {
                    try self.ledger.markInFlight(dispatches, at: self.configuration.now())
                    marked = dispatches
                } catch {
                    for dispatch in dispatches {
                        do throws(LedgerError) {
                            try self.ledger.markInFlight([dispatch], at: self.configuration.now())
                            marked.append(dispatch)
                        } catch {
                            switch error {
                            case .lineClaimed, .instructionNotSendable:
                                let conflict = InstructionOutcome.rejected(
                                    code: "line_conflict", message: error.description)
                                self.setOutcome(conflict, for: dispatch.id)
                                self.noteMoved(dispatch, conflict)
                                progress()
                            default:
                                // Nothing of this batch left: the marked ones are released
                                // below as never sent; the rest were never recorded.
                                self.fail(error)
                                for unsent in marked {
                                    _ = self.conclude(
                                        unsent, .notSent("the ledger failed before it was sent"), outcome: nil,
                                        label: "not_sent")
                                }
                                return []
                            }
                        }
                    }
                }
                if !marked.isEmpty { CrashPoint.reach("in_flight_written") }
                for dispatch in marked {
                    self.sending.insert(dispatch.id)
                    if dispatch.kind != Instruction.Kind.payout.name, !dispatch.group.isEmpty {
                        self.flights[dispatch.group, default: 0] += 1
                    }
                    calls.append(
                        self.sendCall(dispatch, params: params[dispatch.id] ?? .object([]), progress: progress))
                }
            }
            return calls
        }
        client.run(source: scheduler)
        scheduler.finishStopped()
        flush()
        finish(scheduler)
    }

    private func dispatch(_ instruction: Instruction, params: JSON, attempt: Int) -> LedgerDispatch {
        LedgerDispatch(
            id: instruction.id, kind: instruction.kind.name, group: instruction.group, payee: instruction.payee,
            charge: instruction.charge.isEmpty ? instruction.ledgerCharge : instruction.charge,
            currency: instruction.currency, amountMinor: instruction.amountMinor,
            method: instruction.method, path: instruction.path, params: params.encoded(sortingKeys: true),
            stripeContext: instruction.stripeContext, attempt: attempt,
            idempotencyKey: IdempotencyKey.make(instruction: instruction.id, attempt: attempt),
            lines: instruction.lines.map {
                LedgerLineClaim(lineID: $0.lineID, kind: $0.kind, amountMinor: $0.amountMinor, content: $0.content)
            })
    }

    private func sendCall(_ dispatch: LedgerDispatch, params: JSON, progress: @escaping () -> Void) -> Call {
        let request = api.createRequest(
            method: dispatch.method, path: dispatch.path, params: params,
            idempotencyKey: dispatch.idempotencyKey, context: dispatch.stripeContext)
        let call = Call(
            request: request, label: "\(dispatch.id) \(dispatch.method) \(dispatch.path) a\(dispatch.attempt)"
        ) {
            [unowned self] outcome, ending in
            CrashPoint.reach("answer_received")
            self.noteKeyRefused(outcome)
            self.setOutcome(
                self.conclude(dispatch, CreateVerdict(outcome, ending), outcome: outcome, label: "send"),
                for: dispatch.id)
            self.sending.remove(dispatch.id)
            if dispatch.kind != Instruction.Kind.payout.name, !dispatch.group.isEmpty {
                self.flights[dispatch.group, default: 0] -= 1
                if self.flights[dispatch.group] == 0 { self.flights[dispatch.group] = nil }
            }
            progress()
        }
        call.onRetry = { [unowned self] outcome in self.recordCall(dispatch, outcome: outcome, label: "retry") }
        return call
    }

    // MARK: - Outcomes

    /// Records what a create call's verdict means in the ledger and returns the outcome to
    /// report. An outcome the ledger could not record is reported `unknown`: the ledger
    /// still holds the instruction in flight, and the next run looks it up.
    private func conclude(_ dispatch: LedgerDispatch, _ verdict: CreateVerdict, outcome: HTTPOutcome?, label: String)
        -> InstructionOutcome
    {
        let result: InstructionOutcome
        switch verdict {
        case .created(let id): result = .settled(stripeID: id)
        case .refused(let code, let message): result = .failed(code: code, message: message)
        case .unknown(let message): result = .unknown(message: message)
        case .keyRefused(let message, let reached):
            result = reached ? .unknown(message: message) : .notSent(reason: "not sent: \(message)")
        // Why the run stopped, when it did (the key refused, the ledger failed, a signal).
        case .notSent(let message): result = .notSent(reason: stopReason ?? "not sent: \(message)")
        }
        guard record(dispatch, result, outcome: outcome, label: label) else {
            let unrecorded = InstructionOutcome.unknown(
                message: "Stripe answered, but the ledger could not record it; the next run looks it up")
            noteMoved(dispatch, unrecorded)
            return unrecorded
        }
        if case .settled = result, dispatch.kind == "payout" { notePayoutStatus(dispatch, outcome) }
        noteMoved(dispatch, result)
        return result
    }

    /// A payout Stripe accepted is followed until it is posted (``PayoutFollow``).
    private func notePayoutStatus(_ dispatch: LedgerDispatch, _ outcome: HTTPOutcome?) {
        var status = "processing"
        if let outcome, case .object(let body) = StripeAnswer(outcome), let given = body["status"]?.stringValue {
            status = given
        }
        enqueue(.payoutStatus(instruction: dispatch.id, status: status))
    }

    /// Commits an outcome (and the call that told it) to the ledger, and logs it; false when
    /// the ledger failed.
    @discardableResult
    private func record(_ dispatch: LedgerDispatch, _ result: InstructionOutcome, outcome: HTTPOutcome?, label: String)
        -> Bool
    {
        let ledgerOutcome: LedgerOutcome
        let event: (ApplyLogLevel, String, String)
        var code = ""
        switch result {
        case .settled(let id), .alreadySettled(let id):
            ledgerOutcome = .settled(stripeID: id)
            event = (.debug, "instruction_settled", "\(dispatch.id) settled: \(id) \(requestIDText(outcome))")
        case .failed(let failure, let message), .rejected(let failure, let message):
            ledgerOutcome = .failed(code: failure, message: message)
            code = failure
            event = (
                .warning, "instruction_failed",
                "\(dispatch.id) failed: \(failure): \(message) \(requestIDText(outcome))"
            )
        case .unknown(let message):
            ledgerOutcome = .unknown(message: message)
            event = (.warning, "instruction_unknown", "\(dispatch.id) unknown: \(message)")
        case .notSent(let reason):
            // Released: no object can exist. The next send uses a new attempt number.
            ledgerOutcome = .failed(code: LedgerOutcome.notSentCode, message: reason)
            event = (.info, "instruction_not_sent", "\(dispatch.id) \(reason)")
        }
        var fields: [(key: String, value: ApplyEvent.Value)] = [
            ("instruction", .string(dispatch.id)), ("kind", .string(dispatch.kind)),
            ("lines", .int(Int64(dispatch.lines.count))), ("amount_minor", .int(dispatch.amountMinor)),
            ("currency", .string(dispatch.currency)), ("attempt", .int(Int64(dispatch.attempt))),
            ("outcome", .string(label)),
        ]
        if case .response(let response)? = outcome {
            fields.append(("http_status", .int(Int64(response.status))))
            if let id = response.header("request-id") { fields.append(("request_id", .string(id))) }
        }
        if !code.isEmpty { fields.append(("stripe_code", .string(code))) }
        emit(ApplyEvent(level: event.0, name: event.1, message: event.2, fields: fields))
        let call = outcome.map { ledgerCall(dispatch, outcome: $0, label: label) }
        if CrashPoint.fails("ledger_record") {
            fail(.sqlite(code: 10, message: "injected ledger I/O error (SETTLE_CRASH_AT=ledger_record)"))
            return false
        }
        enqueue(.outcome(instruction: dispatch.id, ledgerOutcome, requestID: call?.requestID, call: call))
        return true
    }

    private func recordCall(_ dispatch: LedgerDispatch, outcome: HTTPOutcome, label: String) {
        enqueue(.call(ledgerCall(dispatch, outcome: outcome, label: label)))
        guard label.hasSuffix("retry") else { return }
        // A try that will be retried under the same key, with fields of its own for a log
        // pipeline (`--log-format json`): which call, what came back.
        var fields: [(key: String, value: ApplyEvent.Value)] = [
            ("instruction", .string(dispatch.id)), ("kind", .string(dispatch.kind)),
            ("attempt", .int(Int64(dispatch.attempt))), ("idempotency_key", .string(dispatch.idempotencyKey)),
            ("phase", .string(label)),
        ]
        let what: String
        switch outcome {
        case .response(let response):
            fields.append(("http_status", .int(Int64(response.status))))
            if let id = response.header("request-id") { fields.append(("request_id", .string(id))) }
            if let reason = response.header("stripe-rate-limited-reason") {
                fields.append(("rate_limited_reason", .string(reason)))
            }
            what = "HTTP \(response.status)"
        case .transportError(let kind, let message):
            fields.append(("transport_error", .string(kind.rawValue)))
            what = "\(kind.rawValue): \(message)"
        }
        emit(
            ApplyEvent(
                level: .debug, name: "request_retried",
                message: "\(dispatch.id) (\(dispatch.idempotencyKey)): \(what); retried with the same key",
                fields: fields))
    }

    // MARK: - Answers, committed together

    /// Answers wait at most this long (or this many) for the transaction that commits them.
    private static let flushDelay: Duration = .milliseconds(200)
    private static let flushCount = 64

    /// Queues what an answer told for the next ``flush()``. Safe to defer: the request's
    /// in-flight entry is committed already, so a crash before the flush leaves it in flight
    /// and the next run looks it up; nothing is sent on the strength of an unflushed answer.
    private func enqueue(_ write: LedgerStore.Write) {
        if pendingWrites.isEmpty { pendingSince = .now }
        pendingWrites.append(write)
    }

    private func flushIfDue(_ now: ContinuousClock.Instant) {
        guard let since = pendingSince else { return }
        if pendingWrites.count >= Self.flushCount || since + Self.flushDelay <= now { flush() }
    }

    /// Commits the queued answers in one transaction. When the ledger refuses it, none of
    /// them is recorded: their instructions stay in flight in the ledger and are reported
    /// `unknown`, and the run stops.
    private func flush() {
        guard !pendingWrites.isEmpty else { return }
        let writes = pendingWrites
        pendingWrites = []
        pendingSince = nil
        do {
            try ledger.commit(writes)
        } catch {
            fail(error)
            for case .outcome(let id, _, _, _) in writes {
                let unknown = InstructionOutcome.unknown(
                    message: "Stripe answered, but the ledger could not record it; the next run looks it up")
                if (try? outcomes.contains(id)) == true { try? outcomes.set(unknown, for: id) }
                if resolved[id] != nil { resolved[id] = unknown }
            }
        }
    }

    private func ledgerCall(_ dispatch: LedgerDispatch, outcome: HTTPOutcome, label: String) -> LedgerCall {
        var status: Int?
        var requestID: String?
        var stripeDate: String?
        if case .response(let response) = outcome {
            status = response.status
            requestID = response.header("request-id")
            stripeDate = response.header("date")
        }
        return LedgerCall(
            instructionID: dispatch.id, attempt: dispatch.attempt, idempotencyKey: dispatch.idempotencyKey,
            sentAt: configuration.now(), outcome: label, httpStatus: status, requestID: requestID,
            stripeDate: stripeDate)
    }

    private func requestIDText(_ outcome: HTTPOutcome?) -> String {
        if case .response(let response)? = outcome, let id = response.header("request-id") { return "(\(id))" }
        return ""
    }

    // MARK: - Helpers

    private func makeScheduler() -> CallScheduler {
        CallScheduler(configuration: configuration, limiter: limiter)
    }

    /// Carries the limiter (lowered by 429s) and the counters from one phase to the next.
    private func finish(_ scheduler: CallScheduler) {
        limiter = scheduler.rateLimiter
        counters.add(scheduler.counters)
    }

    /// A ledger failure stops every phase: nothing more is marked in flight or sent.
    private func fail(_ error: LedgerError) {
        if ledgerFailure == nil {
            ledgerFailure = error
            log(.error, "ledger: \(error)")
            stopSending?()
        }
    }

    private func ledgerDo<T>(_ body: () throws(LedgerError) -> T) throws(ApplyError) -> T {
        do {
            return try body()
        } catch {
            throw .ledger(error)
        }
    }

    /// A structured event: to ``ApplyConfiguration/events`` when set, else as a log line.
    private func emit(_ event: ApplyEvent) {
        let key = configuration.apiKey
        guard let events = configuration.events else {
            log(event.level, event.message)
            return
        }
        var event = event
        if key.occurs(in: event.message) { event.message = "[message withheld: it contained the API key]" }
        events(event)
    }

    /// Logs through the configuration, with the key scrubbed should anything echo it.
    private func log(_ level: ApplyLogLevel, _ message: String) {
        let key = configuration.apiKey
        configuration.logger(level, key.occurs(in: message) ? "[message withheld: it contained the API key]" : message)
    }
}

extension StripeAPI {
    /// The path and query of a `next_page_url` on this API's host; nil for another host,
    /// where the key must never go.
    func path(of url: String) -> String? {
        if url.hasPrefix("/") { return url }
        if url.hasPrefix(base + "/") { return String(url.dropFirst(base.count)) }
        return nil
    }
}
