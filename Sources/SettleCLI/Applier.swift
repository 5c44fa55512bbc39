import Foundation
import SettleApply
import SettleCore
import SettleDigest
import SettleLedger
import SettlePlanFolder
import SettleWrite

/// `settle apply DIR`: executes exactly the plan in the folder, exactly once, and rewrites
/// results.csv, errors.csv, deferred.csv, summary.csv and manifest.json with the outcomes.
struct Applier {
    let options: Options
    let log: Log

    /// The secret key: `--api-key-file` (owner-only) or `STRIPE_API_KEY`. Never printed.
    func credentials() throws(CommandFailure) -> APIKey {
        var secret: String
        if let path = options.apiKeyFile {
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw CommandFailure(.configuration, "cannot read --api-key-file \(path)")
            }
            guard info.st_mode & 0o077 == 0 else {
                throw CommandFailure(
                    .configuration,
                    "--api-key-file \(path) is readable by group or others; chmod 600 it")
            }
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
            else {
                throw CommandFailure(.configuration, "cannot read --api-key-file \(path)")
            }
            secret = text
        } else if let value = ProcessInfo.processInfo.environment["STRIPE_API_KEY"] {
            secret = value
        } else {
            throw CommandFailure(.configuration, "no API key: set STRIPE_API_KEY or pass --api-key-file")
        }
        secret = secret.trimmingCharacters(in: .whitespacesAndNewlines)
        let key = APIKey(secret)
        guard key.isWellFormed else {
            throw CommandFailure(.configuration, "the API key is not a Stripe secret (sk_…) or restricted (rk_…) key")
        }
        if key.isLive && !options.live {
            throw CommandFailure(.configuration, "a live-mode key needs --live")
        }
        return key
    }

    /// How the engine talks to Stripe, from the options.
    func configuration(key: APIKey) throws(CommandFailure) -> ApplyConfiguration {
        let log = self.log
        var configuration = ApplyConfiguration(
            apiBase: options.apiBase, apiKey: key,
            stripeVersion: options.stripeVersion ?? ApplyConfiguration.pinnedStripeVersion,
            rate: Double(options.rate ?? (key.isLive ? 90 : 20)), concurrency: options.concurrency,
            financialAccount: options.financialAccount, settleVersion: Settle.version,
            logger: { level, message in
                let mapped: Log.Level =
                    [.debug: .debug, .info: .info, .warning: .warning, .error: .error][level] ?? .info
                log(mapped, message)
            },
            progress: ApplyProgressPrinter(mode: options.progressMode, log: log).callAsFunction)
        configuration.events = { event in
            log(
                Log.Level(event.level), event: event.name, event.message,
                fields: event.fields.map { field in
                    switch field.value {
                    case .string(let text): Log.Field(field.key, text)
                    case .int(let number): Log.Field(field.key, .int(number))
                    }
                })
        }
        do {
            try ApplyConfiguration.checkAPIBase(options.apiBase)
        } catch {
            throw Applier.failure(error, folder: "", ledger: options.ledger)
        }
        return configuration
    }

    /// The exit status and message of an engine error (the one place).
    static func failure(_ error: ApplyError, folder: String, ledger: String) -> CommandFailure {
        switch error {
        case .configuration(let message): return CommandFailure(.configuration, message)
        case .ledger(let problem): return LedgerHistory.failure(problem, path: ledger)
        case .planInvalid: return CommandFailure(.linesRejected, "\(folder): \(error)")
        case .transport(let message): return CommandFailure(.tryAgain, "HTTP: \(message)")
        case .keyRefused(let message):
            return CommandFailure(.configuration, "\(message); nothing of the plan was sent")
        case .factsUnavailable:
            return CommandFailure(
                .tryAgain,
                "\(folder): the payout methods and charges it depends on \(error); nothing of it was sent, run again later"
            )
        }
    }

    /// Asks Stripe for every payout the ledger holds as processing (SPEC: each run does so
    /// first): posted ones are done, those that came back are held as `returned` for the
    /// next plan's errors.csv. A payout Stripe cannot tell about now waits for the next run.
    /// Returns how many could not be checked now: the run then ends 75 (an outcome not known
    /// yet; cron mails), and the next run asks again.
    @discardableResult
    func followPayouts(configuration: ApplyConfiguration, ledger: LedgerStore, folder: String) throws(CommandFailure)
        -> Int
    {
        do {
            let followed = try PayoutFollow(configuration: configuration).run(ledger: ledger, runID: "follow")
            guard followed.checked + followed.unavailable > 0 else { return 0 }
            log(
                followed.cameBack.isEmpty ? .info : .warning, event: "payouts_followed",
                "\(followed.checked) earlier payout(s) checked at Stripe: \(followed.posted) posted, "
                    + "\(followed.cameBack.count) came back, \(followed.stillProcessing) still processing"
                    + (followed.unavailable > 0 ? ", \(followed.unavailable) could not be checked (next run)" : ""),
                fields: [Log.Field("checked", followed.checked), Log.Field("came_back", followed.cameBack.count)])
            return followed.unavailable
        } catch {
            throw Applier.failure(error, folder: folder, ledger: options.ledger)
        }
    }

    /// Warns of folders whose last apply never ended (the process was killed): what they
    /// did not send waits in no ledger until `settle apply` of that folder finishes them.
    /// The last apply of each folder but `folder`, where it never ended (killed), oldest first.
    /// Whether other runs may have moved money on the plan's charges since it counted what
    /// earlier runs moved (``ApplyEngine/ledgerMovedSincePlan``): it was made without a
    /// ledger, or a run other than this folder's own started after it was made.
    static func ledgerMayHaveMoved(since plan: PlanFolder, plannedAt: Date?, ledger: LedgerStore) throws(CommandFailure)
        -> Bool
    {
        guard let plannedAt, plan.manifest["ledger"]?.stringValue != nil else { return true }
        do {
            return try ledger.runs().contains {
                $0.id != plan.runID && $0.continues != plan.runID && $0.startedAt >= plannedAt
            }
        } catch {
            throw CommandFailure(
                .tryAgain, "the ledger could not list its runs (\(error)); nothing was sent, run again later")
        }
    }

    /// Refuses (78) a key of the other Stripe mode than the one the ledger settles with
    /// (``LedgerStore/claimMode(_:)``); the first key to settle on a ledger sets its mode.
    static func checkMode(_ ledger: LedgerStore, key: APIKey) throws(CommandFailure) {
        let mode = key.isLive ? "live" : "test"
        let held: String?
        do {
            held = try ledger.claimMode(mode)
        } catch {
            throw LedgerHistory.failure(error, path: ledger.path)
        }
        guard let held else { return }
        throw CommandFailure(
            .configuration,
            "the ledger \(ledger.path) settles in Stripe's \(held) mode, and the key is a \(mode)-mode key: "
                + "each mode needs a ledger of its own (settle ledger init), or its objects would pass for the "
                + "other's; nothing was read or sent")
    }

    /// The charges Stripe said failed that an apply of `plan` holds its orders to: what the
    /// ledger remembers, less what the plan's own look-ups found succeeded or pending since,
    /// and what those look-ups found failed.
    static func failedCharges(_ ledger: LedgerStore, _ plan: PlanFolder) throws(LedgerError) -> [FailedCharge] {
        let putRight = plan.lookedUpNotFailed
        return try ledger.failedCharges().filter { !putRight.contains($0.charge) } + plan.lookedUpFailed
    }

    static func runsNotEnded(_ ledger: LedgerStore, except folder: String) -> [LedgerRun] {
        guard let runs = try? ledger.runs() else { return [] }
        var last: [String: LedgerRun] = [:]
        for run in runs where run.command == "apply" || run.command == "run" {
            guard let path = run.folder else { continue }
            if let known = last[path], known.startedAt > run.startedAt { continue }
            last[path] = run
        }
        return last.values.filter { $0.endedAt == nil && $0.folder != folder }.sorted { $0.startedAt < $1.startedAt }
    }

    /// Earlier applies of this folder that never ended in the ledger: killed, or stopped among
    /// the renames of their rewrite (which locking the folder finished). This apply takes the
    /// folder over, so they have ended: now, with the manifest's exit status for the one whose
    /// rewrite the folder holds, none for one killed before its rewrite (audit 31 K1: the run
    /// stayed "not ended" in the ledger for good).
    func endEarlierAttempts(of plan: PlanFolder, ledger: LedgerStore) {
        guard let runs = try? ledger.runs() else { return }
        // `run` recorded this apply's run before it planned: it is this one, not an earlier one.
        let current = plan.applyRecord(mode: "", startedAt: Date()).id
        for run in runs where run.folder == plan.folder && run.endedAt == nil && run.id != current {
            guard run.command == "apply" || run.command == "run" else { continue }
            recordEnded(plan.ended(run), ledger: ledger)
        }
    }

    /// Ends an earlier run whose folder holds no plan to take its lines over from, and says why.
    private func endUnplanned(_ run: LedgerRun, ledger: LedgerStore, event: String, _ text: String) {
        var ended = run
        ended.endedAt = Date()
        recordEnded(ended, ledger: ledger)
        log(.warning, event: event, text, fields: [Log.Field("run", run.id), .file(run.folder ?? "")])
    }

    /// Records an earlier run as ended; a ledger that cannot say so is named in a warning
    /// (`settle status` then still shows the run "not ended", and the next run tries again).
    func recordEnded(_ run: LedgerRun, ledger: LedgerStore) {
        do {
            try ledger.recordRun(run)
        } catch {
            log(
                .warning, event: "run_record_failed",
                "the ledger could not record that run \(run.id) ended (\(error)); the next run records it",
                fields: [Log.Field("run", run.id)])
        }
    }

    /// The folders of earlier applies that never ended (killed: nothing rewrote their files):
    /// the ledger takes over what their lines need (``PlanFolder/adoptUnfinished(ledger:records:run:)``),
    /// so the daily loop carries them without anyone applying those folders by hand, and the
    /// run is recorded as ended. A folder that cannot be read is named in a warning instead,
    /// at every run until `settle apply FOLDER` finishes it.
    ///
    /// - Throws: 75 when Stripe cannot be asked again about the charges an apply that never
    ///   ended may have found failed (``recheckCharges(of:run:ledger:configuration:)``): nothing
    ///   of this run is sent, and that run stays not ended, for the next run to take over.
    func adoptRunsNotEnded(_ ledger: LedgerStore, except folder: String, configuration: ApplyConfiguration)
        throws(CommandFailure)
    {
        let open = Self.runsNotEnded(ledger, except: folder)
        var unread: [(LedgerRun, String)] = []
        var unasked: CommandFailure?
        for run in open {
            let path = run.folder ?? ""
            do throws(SettleError) {
                // Stopped among the renames of its rewrite: its files go into place first, as
                // `settle apply` of the folder would put them (audit 31 K1's known limit: the
                // folder could not be read, and was named at every run until applied by hand).
                try OutputFolder.finishStoppedRewrite(path)
                let plan = try PlanFolder.open(path)
                if plan.holdsRewrite(ofRun: run.id) {
                    // Stopped once its files were in place: they report every line, and the
                    // ledger holds what waits; what is left is what came after the files.
                    let marked = try plan.markReportedOutcomes(ledger: ledger)
                    let ended = plan.ended(run)
                    recordEnded(ended, ledger: ledger)
                    log(
                        .warning, event: "run_finished",
                        "run \(run.id) in \(path) was stopped after its last request, as it put its files in place "
                            + "(killed?): its files are whole and report every line"
                            + (marked > 0 ? " (\(marked) outcome(s) learnt from other runs, now marked reported)" : "")
                            + "; the run is recorded as ended with exit \(ended.exitStatus.map(String.init) ?? "unknown")",
                        fields: [Log.Field("run", run.id), .file(path)])
                    continue
                }
                do throws(CommandFailure) {
                    try recheckCharges(of: plan, run: run.id, ledger: ledger, configuration: configuration)
                } catch {
                    unasked = error
                    continue
                }
                let adopted = try plan.adoptUnfinished(
                    ledger: ledger, records: SpoolRecords(folder: plan.folder, manifest: plan.manifest), run: run.id)
                recordEnded(plan.ended(run), ledger: ledger)
                var text = "run \(run.id) in \(path) \(PlanFolder.neverEnded): "
                text +=
                    "\(adopted.waiting) line(s) it did not send wait in the ledger (sent by the next plan), "
                    + "\(adopted.refused) Stripe refused are reported failed by the next plan, "
                    + "\(adopted.unresolved) sent with no known outcome are resolved and reported by the next apply"
                if adopted.cameBack > 0 {
                    text +=
                        "; \(adopted.cameBack) of payouts it made that came back are reported failed by the next plan"
                }
                if adopted.decidedUnreported > 0 {
                    text +=
                        "; \(adopted.decidedUnreported) an earlier run left unknown, of orders its plan decided against, "
                        + "were found never made and are not sent: in no results.csv until `settle apply \(path)`"
                }
                if adopted.settledUnreported > 0 {
                    text +=
                        "; \(adopted.settledUnreported) it settled are in the ledger but in no results.csv until "
                        + "`settle apply \(path)`"
                }
                for (returns, how) in [
                    (adopted.returnsInUnappliedPlan, "its apply never began"),
                    (adopted.returnsInStoppedApply, "its apply stopped before its files"),
                ] where returns > 0 {
                    text +=
                        "; its plan reports \(returns) payout return(s) (`failed`, in \(path)/errors.csv) and \(how): "
                        + "`settle apply \(path)` makes that folder a day that reports and counts them"
                }
                log(
                    .warning, event: "run_adopted", text,
                    fields: [Log.Field("run", run.id), .file(path), .lines(adopted.total)])
            } catch {
                let sent =
                    OutputFolder.holdsAppliedRun(path) || (try? ledger.sentAnything(run: run.id)) != false
                if sent, FileManager.default.fileExists(atPath: path) {
                    unread.append((run, "\(error.message)"))
                } else if sent {
                    // Its folder is gone (removed or moved by hand) after it sent: what it sent
                    // is in the ledger, and the next apply resolves and reports it; what it
                    // never sent is in no ledger (audit 33 O8: the warning said nothing was sent).
                    endUnplanned(
                        run, ledger: ledger, event: "run_folder_gone",
                        "run \(run.id) \(PlanFolder.neverEnded) and its folder \(path) is gone: what it sent is in the "
                            + "ledger, and the next apply resolves and reports it; lines it never sent are in no "
                            + "ledger: run its inputs again (settle run INPUT… --out \(path))")
                } else {
                    // Stopped before its plan was whole (a `run` records itself before it plans),
                    // and before any request (the mark an apply writes first is not there): nothing
                    // was sent, and the ledger holds none of its lines. Its inputs must run again.
                    endUnplanned(
                        run, ledger: ledger, event: "run_not_planned",
                        "run \(run.id) (--out \(path)) was stopped before its plan was written whole (killed, or a "
                            + "signal): nothing was sent, and the ledger holds none of its lines: run its inputs again "
                            + "(settle run INPUT… --out \(path)) (\(error.message))")
                }
            }
        }
        if let unasked { throw unasked }
        guard !unread.isEmpty else { return }
        log(
            .warning, event: "runs_not_ended",
            "\(unread.count) earlier run(s) \(PlanFolder.neverEnded) and their folders cannot be read: "
                + unread.map { "\($0.0.id) in \($0.0.folder ?? "") (\($0.1))" }.joined(separator: ", ")
                + "; what they did not send waits until `settle apply FOLDER` finishes each",
            fields: [Log.Field("runs", unread.count)])
    }

    /// The charges an apply that never ended may have learned failed (its look-ups before
    /// sending, its transfers the ledger holds refused `charge_failed`:
    /// ``PlanFolder/chargesItsApplyMeets(refused:)``), asked about again, those Stripe says
    /// failed recorded as `run`'s: the apply wrote what it learned into the ledger as it
    /// learned it, and a ledger that failed there lost it (audit 85 F1: the next offline plan's
    /// apply paid a payout on a charge the look-up had found failed). Nothing to ask for a plan
    /// never applied.
    private func recheckCharges(
        of plan: PlanFolder, run: String, ledger: LedgerStore, configuration: ApplyConfiguration
    ) throws(CommandFailure) {
        guard plan.applyNeverEnded else { return }
        do throws(ApplyError) {
            let charges = try plan.chargesItsApplyMeets { instruction throws(ApplyError) in
                let known: LedgerInstruction?
                do throws(LedgerError) {
                    known = try ledger.instruction(instruction.id)
                } catch {
                    throw .ledger(error)
                }
                return known?.status == .failed && known?.errorCode == ReasonCode.chargeFailed.code
            }
            guard !charges.isEmpty else { return }
            let failed = try FactsLookup(configuration: configuration).charges(charges.sorted()).compactMap {
                FailedCharge($0, run: run)
            }
            do throws(LedgerError) {
                try ledger.recordFailedCharges(failed)
            } catch {
                throw ApplyError.ledger(error)
            }
            log(
                .info, event: "charges_rechecked",
                "asked Stripe again about the \(charges.count) charge(s) run \(run)'s apply may have found failed: "
                    + "\(failed.count) failed",
                fields: [Log.Field("run", run)])
        } catch {
            let failure = Applier.failure(error, folder: plan.folder, ledger: options.ledger)
            throw CommandFailure(
                failure.code,
                "run \(run) in \(plan.folder) \(PlanFolder.neverEnded), and Stripe could not be asked again about the "
                    + "charges its apply may have found failed (\(failure.message)): nothing was sent; its run is taken "
                    + "over by the next run")
        }
    }

    /// A folder applied before (its requests may have reached Stripe) is applied again only
    /// on the ledger that knows its run: on another one, or on a new ledger where a lost one
    /// was, its instructions would look unsent and go out again, and once Stripe's 24 h
    /// idempotency window has passed they would be paid twice (audit 16). 78, nothing sent;
    /// `ledger rebuild` with the folder makes the ledger know it.
    func refuseIfAppliedElsewhere(_ plan: PlanFolder, ledger: LedgerStore) throws(CommandFailure) {
        guard plan.wasApplied else { return }
        let known: Bool
        do {
            known = try ledger.knowsRun(plan.runID)
        } catch {
            throw LedgerHistory.failure(error, path: options.ledger)
        }
        guard !known else { return }
        throw CommandFailure(
            .configuration,
            "\(plan.folder) was applied before (run \(plan.runID)), but the ledger \(options.ledger) does not know "
                + "that run: it is not the ledger that applied it (another one, or a new one where a lost one was). "
                + "Nothing was sent: applied here, what it sent would look unsent and be paid again. Use the ledger "
                + "that applied it, or recover this one from Stripe with `settle ledger rebuild --since DATE "
                + "--ledger \(options.ledger) \(plan.folder)`")
    }

    /// A ledger that has sent nothing yet asks Stripe, right before its first request,
    /// whether settle paid from this account before, longer ago than Stripe's idempotency
    /// window (``EarlierLedgerProbe``): then this is a new ledger where another one settled (a
    /// lost one, its mark lost too), and everything would be paid again. 78, nothing sent.
    /// Stripe not answering the question stops the run too, 75, nothing sent: the run's own
    /// requests could not tell a key Stripe forgot (audit 21: an outage of the listing let a
    /// new ledger pay everything again). nil for a ledger that has sent before.
    func earlierLedgerCheck(_ ledger: LedgerStore, configuration: ApplyConfiguration) throws(CommandFailure)
        -> (() throws(ApplyError) -> Void)?
    {
        let fresh: Bool
        do {
            // A rebuilt ledger knows what Stripe holds: not new, even when it recorded nothing.
            let sent = try ledger.hasInstructions()
            let rebuilt = try ledger.wasRebuilt()
            fresh = !sent && !rebuilt
        } catch {
            throw LedgerHistory.failure(error, path: options.ledger)
        }
        guard fresh else { return nil }
        let path = options.ledger
        let log = self.log
        return { () throws(ApplyError) in
            let found: EarlierLedgerProbe.Found?
            do throws(ApplyError) {
                found = try EarlierLedgerProbe(configuration: configuration).earlierObject()
            } catch {
                if case .keyRefused = error { throw error }
                log(
                    .error, event: "earlier_ledger_unknown",
                    "could not ask Stripe whether settle paid from this account before this new ledger: \(error)")
                throw .transport(
                    "could not ask Stripe whether settle paid from this account before this new ledger (\(error)); "
                        + "nothing was sent, run again later")
            }
            guard let found else { return }
            throw .configuration(
                "the ledger \(path) is new (it has sent nothing), but settle already paid from this Stripe account "
                    + "(\(found.stripeID), made \(Log.timestamp(found.created))): that was another ledger, or a lost "
                    + "one. Nothing was sent: with this one, every line would look unpaid and be paid again (a key "
                    + "replays only the very same request, within a day). Use the ledger that paid them, or recover "
                    + "this one with `settle ledger rebuild --since DATE --ledger \(path) PLAN_FOLDER...`")
        }
    }

    /// `ledgerProbed`: `run` asked ``earlierLedgerCheck(_:configuration:)`` before planning;
    /// `followedUnavailable`: the payouts `run` could not check at Stripe before planning.
    func apply(
        folder: String, ledger givenLedger: LedgerStore? = nil, mode: String = "apply", ledgerProbed: Bool = false,
        followedUnavailable: Int = 0
    ) throws(CommandFailure)
        -> ExitCode
    {
        let started = Date()
        let key = try credentials()
        let configuration = try configuration(key: key)
        // The ledger is configuration (SPEC: checked before any input is read): a missing or
        // damaged one is 78 also when the plan folder is not there (audit 38 D9: 66 came
        // first). Held before the folder, in the order `run` takes them.
        let ledger: LedgerStore
        if let givenLedger {
            ledger = givenLedger
        } else {
            ledger = try LedgerHistory.openToSettle(path: options.ledger)
            try Applier.checkMode(ledger, key: key)
        }
        // A folder that is not there is no plan (66), not an output folder to create (audit 35
        // C14: `apply` of a mistyped folder said 73, "cannot create …/.settle").
        var info = stat()
        guard stat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw CommandFailure(.inputUnreadable, "\(folder) is not a plan folder (there is no such folder)")
        }
        // The folder is ours for the whole command: no re-plan can mix its files with ours.
        try onPlanFolder { () throws(SettleError) in try OutputFolder.lock(folder) }
        let plan = try onPlanFolder { () throws(SettleError) in try PlanFolder.open(folder) }
        try refuseIfAppliedElsewhere(plan, ledger: ledger)
        endEarlierAttempts(of: plan, ledger: ledger)
        try adoptRunsNotEnded(ledger, except: folder, configuration: configuration)
        // apply on its own follows the payouts too (run did before planning): those that came
        // back are held as returned, and the next plan or run reports them failed.
        var unfollowed = followedUnavailable
        if givenLedger == nil {
            unfollowed = try followPayouts(configuration: configuration, ledger: ledger, folder: folder)
        }
        let instructions = plan.instructions()
        let netted = try onPlanFolder { () throws(SettleError) in try NettedLines.read(folder: plan.folder) }
        let progressMode = options.progressMode
        // To the millisecond where the manifest says it (a payout sent earlier in the same
        // second is not "made after this plan": audit 12, a fix fed back at once was refused).
        let plannedAt = plan.madeAt
        // Orders a later run took up since this plan (a late apply, a re-apply after other
        // runs): that run decided them, and this apply moves nothing of them.
        var takenUpOrders: [String: String] = [:]
        if let plannedAt {
            let taken: [String: String]
            let decided: [String: String]
            do {
                taken = try ledger.linesTakenUp(since: plannedAt, notBy: plan.runID)
                decided = try ledger.ordersDecided(since: plannedAt, notBy: plan.runID)
            } catch {
                throw CommandFailure(
                    .tryAgain, "the ledger could not say what later runs decided (\(error)); nothing was sent")
            }
            takenUpOrders = try onPlanFolder { () throws(SettleError) in try plan.ordersTakenUp(taken) }
            takenUpOrders.merge(decided) { takenUp, _ in takenUp }
        }
        // An offline plan's folder that reports transfers another apply found made looks
        // their charges up with its facts (an online plan's facts have them).
        let reportedCharges =
            plan.madeOnline
            ? [:]
            : try onPlanFolder { () throws(SettleError) in try plan.chargesOfUnreportedTransfers(ledger: ledger) }
        let report: ApplyReport
        // The run is in the ledger before anything is sent (not ended): a killed run is listed
        // too, and the folder, once marked, is known to this ledger (``refuseIfAppliedElsewhere``).
        do {
            try ledger.recordRun(plan.applyRecord(mode: mode, startedAt: started))
        } catch {
            throw CommandFailure(
                .tryAgain, "the ledger could not record this run's start (\(error)); nothing was sent, run again later")
        }
        // From here the folder is this run's record, even if the process is killed.
        CrashPoint.reach("apply_starting")
        try onPlanFolder { () throws(SettleError) in
            try OutputFolder.markApplying(folder, runID: plan.applyRecord(mode: mode, startedAt: started).id)
        }
        let firstSendCheck = ledgerProbed ? nil : try earlierLedgerCheck(ledger, configuration: configuration)
        let movedSincePlan = try Applier.ledgerMayHaveMoved(since: plan, plannedAt: plannedAt, ledger: ledger)
        do {
            let engine = try ApplyEngine(configuration: configuration, ledger: ledger)
            engine.netted = netted
            engine.runID = plan.runID
            engine.beforeFirstSend = firstSendCheck
            engine.plannedAt = plannedAt
            engine.takenUpOrders = takenUpOrders
            engine.reportedCharges = reportedCharges
            engine.payoutOrders = { (wanted) throws(ApplyError) in
                do {
                    return try plan.payoutOrders(where: wanted)
                } catch {
                    throw .planInvalid(line: 0, message: "\(error)")
                }
            }
            engine.chargeAmounts = { () throws(ApplyError) in
                do {
                    return try plan.chargeAmounts()
                } catch {
                    throw .planInvalid(line: 0, message: "\(error)")
                }
            }
            engine.ordersOnFailedCharges = { () throws(ApplyError) in
                let failed: [FailedCharge]
                do throws(LedgerError) {
                    failed = try Self.failedCharges(ledger, plan)
                } catch {
                    throw .ledger(error)
                }
                do {
                    return try plan.ordersOnFailedCharges(failed)
                } catch {
                    throw .planInvalid(line: 0, message: "\(error)")
                }
            }
            engine.waitingTransfers = { () throws(ApplyError) in
                do {
                    return try plan.waitingTransfers().mapValues { lines in
                        lines.map { ($0.line, $0.order, $0.amount, $0.currency) }
                    }
                } catch {
                    throw .planInvalid(line: 0, message: "\(error)")
                }
            }
            engine.ledgerMovedSincePlan = movedSincePlan
            engine.stoppedInstructions = { (open) throws(ApplyError) in
                let earliest = open.values.map(\.sentAt).min() ?? .distantPast
                let decided: [String: (at: Date, reason: String)]
                let failed: [FailedCharge]
                do throws(LedgerError) {
                    decided = try ledger.decidedOrders(after: earliest)
                    failed = try Self.failedCharges(ledger, plan)
                } catch {
                    throw .ledger(error)
                }
                do {
                    // What was left open of an order on a charge Stripe said failed is not sent
                    // again either (audit 41 F4).
                    return try plan.stoppedInstructions(
                        open, decided: decided, onFailedCharges: plan.ordersOnFailedCharges(failed))
                } catch {
                    throw .planInvalid(line: 0, message: "\(error)")
                }
            }
            log(
                .info, event: "applying", "applying \(instructions.overview.count) instructions from \(folder)",
                fields: [Log.Field("instructions", instructions.overview.count), .file(folder)])
            report = try engine.run(instructions, checkFacts: !plan.madeOnline)
        } catch {
            let failure = Applier.failure(error, folder: folder, ledger: options.ledger)
            // Refused before anything was sent: the run ended there (the next run does not take
            // its folder's lines over as those of a killed run).
            switch error {
            case .configuration, .keyRefused, .factsUnavailable, .transport:
                var record = plan.applyRecord(mode: mode, startedAt: started)
                record.endedAt = Date()
                record.exitStatus = Int(failure.code.rawValue)
                recordEnded(record, ledger: ledger)
            default: break
            }
            throw failure
        }
        if progressMode == .terminal { StandardError.write("\r\u{1b}[K") }
        let exit = try plan.rewrite(
            outcomes: report.outcomes, ledger: ledger, report: report, mode: mode, options: options, log: log,
            startedAt: started, unfollowed: unfollowed)
        let seconds = report.elapsed.components.seconds
        log(
            .info, event: "applied",
            "applied: \(report.requests) requests, \(report.retries) retries, \(report.rateLimited) rate-limited, "
                + "\(report.serverErrors) server errors in \(report.elapsed)",
            fields: [
                Log.Field("requests", report.requests), Log.Field("retries", report.retries),
                Log.Field("rate_limited", report.rateLimited), Log.Field("server_errors", report.serverErrors),
                .durationMS(Int(seconds) * 1000 + Int(report.elapsed.components.attoseconds / 1_000_000_000_000_000)),
            ])
        if let refused = report.keyRefused {
            log(
                .error, event: "key_refused", "\(refused); the run stopped, nothing more was sent (exit 78)",
                fields: [Log.Field("exit_status", 78)])
        }
        if report.interrupted == nil, let signal = Interruption.caughtInProcess {
            log(
                .warning, event: "interrupted",
                "a stop signal (\(signal)) came after the send: the outcome files were written first; exit "
                    + "\(exit.rawValue) is the run's",
                fields: [.file(folder), Log.Field("exit_status", Int(exit.rawValue))])
        }
        if let signal = report.interrupted {
            log(
                .warning, event: "interrupted",
                "interrupted (\(signal)): the calls in flight were answered and recorded, the rest not sent; "
                    + "apply \(folder) again to send them (exit 75)",
                fields: [.file(folder), Log.Field("exit_status", 75)])
        }
        if let failure = report.ledgerFailure {
            log(
                .error, event: "ledger_failed",
                "the ledger \(options.ledger) failed during the run (\(failure)); it stopped, run again later (exit 75)",
                fields: [.file(options.ledger), Log.Field("exit_status", 75)])
        }
        log(
            .info, event: "applied_results", "results in \(folder)/results.csv; exit \(exit.rawValue)",
            fields: [.file("\(folder)/results.csv"), Log.Field("exit_status", Int(exit.rawValue))])
        return exit
    }
}
