import Foundation
import SettleApply
import SettleCore
import SettleLedger
import SettlePlanFolder
import SettleWrite

/// The commands of the README, "Usage".
struct Commands {
    let options: Options
    let log: Log

    func plan() throws(CommandFailure) -> ExitCode {
        var lookUp: ApplyConfiguration?
        if options.online {
            // Read-only calls: the key and the API base are checked before any input is read.
            let applier = Applier(options: options, log: log)
            lookUp = try applier.configuration(key: try applier.credentials())
        }
        let (folder, written) = try planToFolder(mode: "plan", lookUp: lookUp)
        report(written, folder: folder)
        return written.exit
    }

    /// Plans into `--out`; shared by `plan` and `run`.
    /// With `ledger`, plans against that (locked) ledger, as `run` does; else reads the ledger
    /// without a lock.
    /// With `lookUp`, Stripe's facts are looked up (read-only) after reading and before
    /// planning, and sealed in the plan (`run`, `plan --online`).
    /// `beforeWriting`: a check of the plan before any of its files is written (run: what
    /// apply will need), so that a refusal leaves no plan folder that says all is planned.
    func planToFolder(
        mode: String, ledger: LedgerStore? = nil, lookUp: ApplyConfiguration? = nil, runID: String? = nil,
        beforeWriting: (SettlementPlan) throws(CommandFailure) -> Void = { _ in }
    )
        throws(CommandFailure) -> (String, PlanOutputs.Written)
    {
        guard !options.inputs.isEmpty else {
            throw CommandFailure(.usage, "\(options.command) needs at least one INPUT")
        }
        guard let folder = options.out else { throw CommandFailure(.usage, "\(options.command) needs --out DIR") }
        try Pipeline.checkInputsOpen(options.inputs)
        // The ledger is checked before the folder is touched: a refused ledger writes nothing.
        let history: LedgerHistory?
        if let ledger {
            history = LedgerHistory(store: ledger)
        } else {
            history = try LedgerHistory.openForPlanning(path: options.ledger)
            // A plan only reads the ledger: the lines of a killed run are taken over by the
            // next `run` or `apply`, not by this plan.
            if let store = history?.store {
                // A run of this very folder that never ended: its folder is its only record
                // (its lines are in no ledger until a run or an apply takes them over), and this
                // plan would write over it (audit 33 O9: its lines were then lost, silently).
                if let own = Applier.runsNotEnded(store, except: "").first(where: { $0.folder == folder }) {
                    // `apply` can finish only a plan written whole (or being put in place);
                    // else the next `run` says to run its inputs again (audit 35 P5).
                    let planned = ["manifest.json", FileSet.journalName].contains {
                        FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent($0))
                    }
                    throw CommandFailure(
                        .outputUnwritable,
                        "--out \(folder) holds run \(own.id), which \(PlanFolder.neverEnded): its lines are in no ledger "
                            + (planned
                                ? "yet. `settle run` into it, or `settle apply \(folder)`, takes them over; or plan into "
                                    + "another folder (the next run or apply takes them over)"
                                : "yet, and its plan was not written whole: the next `settle run` (into it or another "
                                    + "folder) ends it and says so; run its inputs again"))
                }
                let open = Applier.runsNotEnded(store, except: folder)
                if !open.isEmpty {
                    log(
                        .warning, event: "runs_not_ended",
                        "\(open.count) earlier run(s) \(PlanFolder.neverEnded): "
                            + open.map { "\($0.id) in \($0.folder ?? "")" }.joined(separator: ", ")
                            + "; this plan does not carry their lines: the next `settle run` or `settle apply` "
                            + "takes them over",
                        fields: [Log.Field("runs", open.count)])
                }
            }
            if history == nil {
                log(
                    .warning,
                    "no ledger at \(options.ledger): planning without what earlier runs settled (the manifest records it); "
                        + "apply needs one (settle ledger init)")
            }
        }
        try onPlanFolder { () throws(SettleError) in try OutputFolder.prepare(folder) }
        let lookup = FactsStep(
            configuration: lookUp, log: log, folder: folder, asOf: options.ruleOptions.asOf, history: history)
        let factsStep: ((Batch) throws(CommandFailure) -> StripeFacts)? =
            lookUp == nil ? nil : { (batch: Batch) throws(CommandFailure) -> StripeFacts in try lookup.facts(batch) }
        // One snapshot of the ledger for the whole plan: what waits, what was settled, what
        // each charge funded before, as of one moment.
        let plannedAt = Date()
        try history?.beginSnapshot()
        defer { history?.endSnapshot() }
        // What the ledger holds for later runs comes back by itself (nothing carried by hand);
        // a ledger that cannot say stops the run (75) rather than leave those lines out.
        let held: [HeldLine]
        do {
            held = try history?.store.heldLines([.waiting, .returned, .unresolved]) ?? []
        } catch {
            throw CommandFailure(.tryAgain, "reading the lines the ledger holds failed: \(error)")
        }
        lookup.waiting = Set(held.lazy.filter { $0.state == .waiting }.map(\.lineID))
        let (plan, inputs) = try Pipeline(options: options, log: log).plan(
            history: history, spoolFolder: folder, facts: factsStep, held: held,
            cancelled: try Self.cancelledLines(history), notCarried: try Self.linesNotCarried(history))
        try history?.checkReads()
        try beforeWriting(plan)
        let written = try PlanOutputs(folder: folder, options: options).write(
            plan, inputs: inputs, mode: mode, log: log, ledger: history.map { (options.ledger, $0.store) },
            facts: lookUp == nil ? nil : lookup.looked, plannedAt: plannedAt, runID: runID)
        return (folder, written)
    }

    /// The lines `settle cancel` dropped (``HeldInputs/rejectCancelled(_:checker:)``).
    static func cancelledLines(_ history: LedgerHistory?) throws(CommandFailure) -> [HeldLine] {
        do {
            return try history?.store.cancelledContents() ?? []
        } catch {
            throw CommandFailure(.tryAgain, "reading the lines settle cancel dropped failed: \(error)")
        }
    }

    /// The lines a ledger rebuild stopped carrying (``HeldInputs/rejectPartsOfOrdersNotCarried(_:checker:aliases:)``).
    static func linesNotCarried(_ history: LedgerHistory?) throws(CommandFailure) -> [HeldLine] {
        do {
            return try history?.store.waitingLinesRebuildsDropped() ?? []
        } catch {
            throw CommandFailure(.tryAgain, "reading the lines the ledger does not carry failed: \(error)")
        }
    }

    func validate() throws(CommandFailure) -> ExitCode {
        guard !options.inputs.isEmpty else { throw CommandFailure(.usage, "validate needs at least one INPUT") }
        let history = try LedgerHistory.openForPlanning(path: options.ledger)
        try history?.beginSnapshot()
        defer { history?.endSnapshot() }
        // validate counts the instructions: it needs neither their ids nor their attempts.
        let (plan, inputs) = try Pipeline(options: options, log: log).plan(
            history: history, spoolFolder: nil, cancelled: try Self.cancelledLines(history),
            notCarried: try Self.linesNotCarried(history), identifies: false)
        try history?.checkReads()
        let batch = plan.batch
        var counts: [LineStatus: Int] = [:]
        var reasons: [String: Int] = [:]
        for line in batch.lines {
            counts[line.status, default: 0] += 1
            if line.reason != .none { reasons[batch.reasonCode(of: line), default: 0] += 1 }
        }
        var text = "settle validate: \(batch.lines.count) lines in \(inputs.count) file(s)\n"
        for input in inputs {
            if let rejection = input.rejection {
                text +=
                    "  \(input.path): rejected whole: \(rejection.code.rawValue) at \(rejection.position): \(rejection.message)\n"
            } else {
                text += "  \(input.path): \(input.lines) lines (\(input.format.rawValue))\n"
            }
        }
        for status in LineStatus.allCases where counts[status] != nil {
            text += "  \(status.name): \(counts[status]!)\n"
        }
        for (code, count) in reasons.sorted(by: { $0.key < $1.key }) { text += "  reason \(code): \(count)\n" }
        let shown = batch.lines.lazy.filter { $0.status == .rejected }.prefix(20)
        for line in shown {
            text +=
                "  \(batch.source(of: line)): \(batch.text(line.lineID)): \(batch.reasonCode(of: line)): \(batch.reasonText(of: line))\n"
        }
        text += "  instructions that would be sent: \(plan.instructions.count)\n"
        print(text, terminator: "")
        return PlanOutputs.exitCode(counts: counts, inputs: inputs)
    }

    func apply() throws(CommandFailure) -> ExitCode {
        guard options.inputs.count == 1 else { throw CommandFailure(.usage, "apply needs exactly one plan folder") }
        return try Applier(options: options, log: log).apply(folder: options.inputs[0])
    }

    func run() throws(CommandFailure) -> ExitCode {
        // A bad command line is 64 before anything else is asked (audit 14: no INPUT said 78, no key).
        guard !options.inputs.isEmpty else { throw CommandFailure(.usage, "run needs at least one INPUT") }
        guard options.out != nil else { throw CommandFailure(.usage, "run needs --out DIR") }
        // Check what apply needs before planning, so a missing key stops the run before any work,
        // and hold the ledger from plan to apply so no other process settles in between.
        let applier = Applier(options: options, log: log)
        let key = try applier.credentials()
        let configuration = try applier.configuration(key: key)
        // The ledger is configuration too (SPEC: configuration is checked before any input is
        // read): a missing or damaged one is 78 also when an input cannot be opened (66), and
        // so is one of the other Stripe mode than the key's.
        let ledger = try LedgerHistory.openToSettle(path: options.ledger)
        try Applier.checkMode(ledger, key: key)
        try Pipeline.checkInputsOpen(options.inputs)
        try onPlanFolder { () throws(SettleError) in try OutputFolder.checkUsable(options.out ?? "") }
        // A new ledger where settle paid before is refused before anything is read or written
        // (audit 19: it was found at the first send, after the plan folder said all planned).
        if let earlierLedger = try applier.earlierLedgerCheck(ledger, configuration: configuration) {
            do throws(ApplyError) {
                try earlierLedger()
            } catch {
                throw Self.tookNothing(Applier.failure(error, folder: options.out ?? "", ledger: options.ledger))
            }
        }
        let out = options.out ?? ""
        let unfollowed: Int
        let outExisted: Bool
        let runID = RunID.make()
        do throws(CommandFailure) {
            // Payouts Stripe accepted earlier are followed first: those that came back are part
            // of this run's errors.csv.
            unfollowed = try applier.followPayouts(configuration: configuration, ledger: ledger, folder: out)
            // The lines of a run that was killed are part of this one (the ledger takes them
            // over), also one killed in this very folder, before this run plans over it (audit 33
            // O9: it was ended silently, and its lines were lost).
            try applier.adoptRunsNotEnded(ledger, except: "", configuration: configuration)
            outExisted = FileManager.default.fileExists(atPath: out)
            // The run is in the ledger before it plans: one killed while planning (most of a
            // large run's time) is named by the next run, which takes its lines over once its plan
            // is whole, or says nothing was sent and its inputs must be run again (audit 32 N1:
            // such a run left no trace, and the next day's run went on without its lines).
            do throws(LedgerError) {
                try ledger.recordRun(
                    LedgerRun(
                        id: runID, command: "run", asOf: CivilDate.format(options.ruleOptions.asOf), folder: out,
                        startedAt: Date()))
            } catch {
                throw LedgerHistory.failure(error, path: options.ledger)
            }
        } catch {
            throw Self.tookNothing(error)
        }
        let planned: (String, PlanOutputs.Written)
        do throws(CommandFailure) {
            planned = try planRun(
                ledger: ledger, configuration: configuration, runID: runID, out: out, outExisted: outExisted)
        } catch {
            // Nothing was sent and no plan was written whole: the run leaves no record.
            do {
                try ledger.forgetRun(runID)
            } catch let failure {
                log(
                    .warning, event: "run_record_failed",
                    "the ledger could not remove the record of run \(runID), which sent nothing (\(failure)); "
                        + "the next run names it as never ended",
                    fields: [Log.Field("run", runID)])
            }
            throw Self.tookNothing(error)
        }
        let (folder, written) = planned
        let plannedLines = written.counts[.planned] ?? 0
        log(
            .info, event: "plan_ready",
            "planned \(HumanFormat.count(plannedLines)) lines in \(HumanFormat.count(written.instructions)) instructions; applying them",
            fields: [.lines(plannedLines), Log.Field("instructions", written.instructions)])
        return try applier.apply(
            folder: folder, ledger: ledger, mode: "run", ledgerProbed: true, followedUnavailable: unfollowed)
    }

    /// A passing failure (75) of a `run` that stopped before its plan was written (Stripe's facts
    /// or the new ledger's probe unanswered, the ledger failing): no folder and no ledger names
    /// its inputs later, so it says so itself (audit 84 F2: "the ledger failed" alone, and the
    /// next day's run went on without this day's export; audit 86 F3: "run again later" alone
    /// when the look-ups before planning got no answer).
    static func tookNothing(_ error: CommandFailure) -> CommandFailure {
        guard error.code == .tryAgain else { return error }
        return CommandFailure(
            .tryAgain,
            error.message + "; this run took none of its inputs and moved nothing: run it again once that is put right")
    }

    /// `run`'s plan, with the checks of what apply would refuse at once before the folder says "planned".
    private func planRun(
        ledger: LedgerStore, configuration: ApplyConfiguration, runID: String, out: String, outExisted: Bool
    ) throws(CommandFailure) -> (String, PlanOutputs.Written) {
        try planToFolder(mode: "run", ledger: ledger, lookUp: configuration, runID: runID) {
            (plan) throws(CommandFailure) in
            // What apply would refuse at once (78) is refused before the folder says "planned";
            // a folder this run made (holding only the spool of what it read) goes too.
            if (configuration.financialAccount ?? "").isEmpty, plan.instructions.contains(where: { $0.kind == .payout })
            {
                if !outExisted { try? FileManager.default.removeItem(atPath: out) }
                throw CommandFailure(
                    .configuration,
                    "the batch pays payouts, and no financial account is configured to pay them from "
                        + "(--financial-account or financial_account in the config file); no plan was written and nothing was sent"
                )
            }
        }
    }

    func status() throws(CommandFailure) -> ExitCode {
        try StatusCommand(options: options).run()
    }

    func report(_ written: PlanOutputs.Written, folder: String) {
        let counts = LineStatus.allCases.compactMap { status in
            written.counts[status].map { "\(HumanFormat.count($0)) \(status.name)" }
        }.joined(separator: ", ")
        log(
            .info, event: "plan_written", "plan written to \(folder): \(counts.isEmpty ? "no lines" : counts)",
            fields: [.file(folder), .lines(written.counts.values.reduce(0, +))])
        for (name, _, rows) in written.files {
            let path = (folder as NSString).appendingPathComponent(name)
            log(
                .info, event: "file_written", "  \(path) (\(rows) rows)",
                fields: [.file(path), Log.Field("rows", rows)])
        }
        if written.exit == .linesRejected {
            // 65 with no row in errors.csv: an input was rejected whole (its reason is in the
            // manifest, not in errors.csv; audit 72 F5: the warning sent the reader to an empty file).
            let rows = written.files.first { $0.0 == "errors.csv" }?.2 ?? 0
            let see =
                rows > 0
                ? "some lines were rejected: see \(folder)/errors.csv"
                : "an input was rejected whole: see its reason in \(folder)/manifest.json"
            log(
                .warning, event: "lines_rejected", see,
                fields: [.lines((written.counts[.rejected] ?? 0) + (written.counts[.failed] ?? 0))])
        }
    }
}

extension Commands {
    /// One grouped line per kind of refusal, the full list in the files.
    static func reportRefusals(_ facts: LookedUpFacts, log: Log) {
        let methods = WarningGroup(
            noun: "payout methods", problem: "unusable", event: "payout_methods_checked", log: log)
        methods.checked(facts.payoutMethods.count)
        for method in facts.payoutMethods {
            if case .refused(let why) = method.verdict { methods.add(method.method, reason: why) }
        }
        methods.emit()
        let charges = WarningGroup(noun: "charges", problem: "not succeeded", event: "charges_checked", log: log)
        charges.checked(facts.charges.count)
        for charge in facts.charges {
            switch charge.verdict {
            case .refused(let why): charges.add(charge.charge, reason: why)
            case .pending: charges.add(charge.charge, reason: "pending")
            default: break
            }
        }
        charges.emit()
    }
}

/// The look-ups before the plan, remembering what Stripe said for the manifest.
final class FactsStep {
    let configuration: ApplyConfiguration?
    let log: Log
    let folder: String
    private(set) var looked = LookedUpFacts()

    let asOf: Int32
    /// The ledger: the charges it remembers failed are asked again.
    let history: LedgerHistory?
    /// The first file of the batch that holds the ledger's lines (after the inputs).
    /// The ids of the ledger's lines that waited (deferred): their charges are asked again.
    var waiting: Set<String> = []

    init(
        configuration: ApplyConfiguration?, log: Log, folder: String, asOf: Int32, history: LedgerHistory? = nil
    ) {
        self.configuration = configuration
        self.log = log
        self.folder = folder
        self.asOf = asOf
        self.history = history
    }

    func facts(_ batch: Batch) throws(CommandFailure) -> StripeFacts {
        guard let configuration else { return .empty }
        var request = FactsRequest.needed(for: batch, asOf: asOf, waiting: waiting)
        if let history { request.askAgain(history.failedCharges().map { ($0.charge, $0.paymentIntent) }, in: batch) }
        log(
            .info, event: "facts_lookup",
            "looking up \(request.payoutMethods.count) payout method(s) and \(request.charges.count) charge(s) before planning"
        )
        do {
            let (facts, raw) = try FactsLookup(configuration: configuration).facts(for: request)
            looked = raw
            Commands.reportRefusals(raw, log: log)
            return facts
        } catch {
            throw Applier.failure(error, folder: folder, ledger: history?.store.path ?? "")
        }
    }
}
