import Foundation
import SettleApply
import SettleCore
import SettleLedger
import SettlePlanFolder

/// `settle ledger init | backup FILE | rebuild --since DATE`.
struct LedgerCommand {
    let options: Options
    let log: Log

    func run() throws(CommandFailure) -> ExitCode {
        var path = options.ledger
        switch options.inputs.first {
        case "init":
            guard options.inputs.count <= 2 else {
                throw CommandFailure(.usage, "usage: settle ledger init [FILE | --ledger FILE]")
            }
            // `settle ledger init FILE` names the ledger as `--ledger FILE` does (audit 86 F2:
            // SPEC's synopsis `ledger init|backup FILE|…` reads both ways).
            if options.inputs.count == 2 {
                let named = options.inputs[1]
                if options.given.contains("ledger"), options.ledger != named {
                    throw CommandFailure(
                        .usage,
                        "settle ledger init names two ledgers, \(named) and --ledger \(options.ledger): give one")
                }
                path = named
            }
            do {
                try LedgerStore.create(path: path).close()
            } catch {
                // A ledger that cannot be made where it was asked for (a missing or read-only
                // folder) is a file that cannot be written, 73, as a backup's (audit 32 N9: 78).
                if case .cannotOpen(_, let message) = error {
                    throw CommandFailure(.outputUnwritable, "cannot create the ledger \(path): \(message)")
                }
                // A ledger SQLite could not write whole (a full disk, a size limit): 73 too,
                // whichever write failed (audit 61 F5: 75 at most sizes, 73 at one).
                switch error {
                case .sqlite, .cannotWrite:
                    throw CommandFailure(.outputUnwritable, "cannot create the ledger \(path): \(error)")
                default: break
                }
                throw LedgerHistory.failure(error, path: path)
            }
            log(.info, "created the ledger \(path) (0600); back it up with `settle ledger backup FILE`")
            return .ok
        case "backup":
            guard options.inputs.count == 2 else {
                throw CommandFailure(.usage, "usage: settle ledger backup FILE [--ledger FILE]")
            }
            let destination = options.inputs[1]
            // Read-only and without the process lock: SQLite's online backup is consistent
            // while a run writes, so cron can call it at any time.
            do throws(LedgerError) {
                guard let store = try LedgerStore.openReadOnly(path: path) else {
                    throw .missing(path: path, hadMark: false)
                }
                try store.backup(to: destination)
                store.close()
            } catch {
                if case .alreadyExists = error {
                    throw CommandFailure(.outputUnwritable, "\(destination) exists: a backup never overwrites a file")
                }
                if case .cannotOpen(let target, let message) = error, target == destination {
                    throw CommandFailure(.outputUnwritable, "cannot write \(destination): \(message)")
                }
                throw LedgerHistory.failure(error, path: path)
            }
            log(.info, "backed up \(path) to \(destination)")
            return .ok
        case "rebuild":
            guard let since = options.since else {
                throw CommandFailure(
                    .usage, "usage: settle ledger rebuild --since DATE [--ledger FILE] [PLAN_FOLDER...]")
            }
            // The plan folders that made what Stripe holds: their instructions.jsonl name
            // each instruction's lines, which Stripe's objects do not carry.
            // Each folder once, however it is named (audit 38 Q9: a folder given twice counted
            // its netted and waiting lines twice in the messages).
            var folders: [String] = []
            var seen: Set<String> = []
            for folder in options.inputs.dropFirst() {
                let real = URL(fileURLWithPath: folder).standardizedFileURL.resolvingSymlinksInPath().path
                if seen.insert(real).inserted {
                    folders.append(folder)
                } else {
                    log(.warning, "\(folder) is given more than once: it is read once")
                }
            }
            let applier = Applier(options: options, log: log)
            let configuration = try applier.configuration(key: try applier.credentials())
            // Each folder opened once (its seals checked once): for its run and its payouts. An
            // apply stopped among the renames of its rewrite is put into place first, as `run`
            // and `apply` do (audit 50, beside N4: the rebuild called the folder changed, "plan
            // again", and the ledger stayed refused).
            let opened = folders.map { folder in
                Result { () throws(SettleError) in
                    try OutputFolder.finishStoppedRewrite(folder)
                    return try PlanFolder.open(folder)
                }
            }
            // A folder whose run began before the date made objects the listing would not see:
            // the rebuilt ledger would not know them, and their lines would be paid again
            // (audit 35 P6). Refused before anything is written.
            for case .success(let plan) in opened {
                guard let made = plan.madeAt,
                    made.timeIntervalSince1970 < Double(since) * 86_400
                else { continue }
                let day = String(
                    ISO8601DateFormatter.string(from: made, timeZone: .gmt, formatOptions: [.withFullDate]))
                throw CommandFailure(
                    .usage,
                    "\(plan.folder) holds run \(plan.runID), planned on \(day), before --since: what it made would "
                        + "not be listed, and its lines would be paid again; rebuild with --since \(day) or earlier")
            }
            let ledger: LedgerStore
            do {
                ledger = try LedgerStore.createForRebuild(path: path)
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            defer { ledger.close() }
            // The folders' runs made since the date: what they sent is listed below, so they
            // may be applied again on this ledger (an applied folder is refused on a ledger
            // that does not know its run).
            let runs = opened.compactMap { result -> String? in
                guard let plan = try? result.get(), !plan.runID.isEmpty,
                    let made = plan.madeAt,
                    made.timeIntervalSince1970 >= Double(since) * 86_400
                else { return nil }
                return plan.runID
            }
            // Lines that netted to zero: nothing was sent for them, so only the folders say they
            // settled; recorded under the run that applied them, as that apply did. Read before
            // anything is written: a folder that cannot say stops the rebuild.
            // So are the charges a run counted (each charge's gross and fee in one run only).
            var nettedOfFolders: [(run: String, lines: [LedgerStore.NettedLine])] = []
            var counted: [(charge: String, currency: String, run: String, gross: Int64, fee: Int64, status: String)] =
                []
            var paidOut: [(run: String, rows: [(charge: String, currency: String, amount: Int64)])] = []
            var intentLinks: [(run: String, links: [(charge: String, intent: String)])] = []
            for result in opened {
                let (plan, lines) = try onPlanFolder { () throws(SettleError) in
                    let plan = try result.get()
                    let charges = try plan.countedCharges()
                    counted += charges.counted
                    // The payment intent each charge's lines named with it, as its apply recorded.
                    if plan.wasApplied {
                        let links = plan.chargeIntents().map { key, intent in
                            (charge: String(key.prefix { $0 != "\u{0}" }), intent: intent)
                        }
                        if !links.isEmpty { intentLinks.append((plan.runID, links)) }
                    }
                    if !charges.paidOut.isEmpty { paidOut.append((plan.runID, charges.paidOut)) }
                    return (plan, try plan.nettedByItsApply())
                }
                if !lines.isEmpty { nettedOfFolders.append((plan.lastAppliedRunID ?? plan.runID, lines)) }
            }
            let report: LedgerRebuild.Report
            do {
                report = try LedgerRebuild(configuration: configuration).run(
                    ledger: ledger, since: Int64(since) * 86_400, runs: runs
                ) { wanted, amounts throws(ApplyError) in
                    try PlanFolder.instructionLines(of: wanted, in: folders, payoutAmounts: amounts)
                }
            } catch {
                throw Applier.failure(error, folder: path, ledger: path)
            }
            // What an apply that never ended learned of charges (its look-ups, transfers Stripe
            // refused `charge_failed`) was in the lost ledger only: Stripe is asked again about
            // the charges of its instructions Stripe holds no object of (a charge found failed
            // held back, or refused, at least one of them), and its answer is the newest word on
            // them (audit 85 F3: the rebuilt ledger forgot the failure, and a payout on the
            // charge was paid).
            var askedAgain: [ChargeFact] = []
            do {
                var unendedCharges: Set<String> = []
                for case .success(let plan) in opened where plan.applyNeverEnded {
                    unendedCharges.formUnion(try plan.chargesItsApplyMeets { !report.made.contains($0.id) })
                }
                askedAgain = try FactsLookup(configuration: configuration).charges(unendedCharges.sorted())
            } catch {
                throw Applier.failure(error, folder: path, ledger: path)
            }
            let failedNow = askedAgain.compactMap { FailedCharge($0, run: LedgerStore.rebuildRun) }
            if !askedAgain.isEmpty {
                log(
                    .info,
                    "looked up the \(askedAgain.count) charge(s) of the folders whose apply never ended: "
                        + "\(failedNow.count) failed")
            }
            // Payouts still processing are followed by the next runs: their lines are held as
            // the apply that sent them held them, with their records from the folders.
            var following = 0
            for result in opened where !report.processing.isEmpty {
                following += try onPlanFolder { () throws(SettleError) in
                    let plan = try result.get()
                    return try plan.holdFollowing(
                        report.processing, ledger: ledger,
                        records: SpoolRecords(folder: plan.folder, manifest: plan.manifest))
                }
            }
            // Payouts Stripe posted can still come back: the next runs watch them for a return
            // as they watch an apply's (their lines held, released, so that the run that learns
            // of a return reports them; audit 35 P8: a return after the rebuild was reported by
            // no run, and the recipient's money sat in the financial account unsaid).
            for result in opened where !report.posted.isEmpty {
                _ = try onPlanFolder { () throws(SettleError) in
                    let plan = try result.get()
                    return try plan.holdFollowing(
                        report.posted, ledger: ledger,
                        records: SpoolRecords(folder: plan.folder, manifest: plan.manifest), state: .released)
                }
            }
            // The orders each applied folder decided against, as its apply recorded them (when
            // its plan was made): an older folder applied again on this ledger moves nothing of
            // them (audit 38 Q8: the rebuilt ledger forgot them, and the re-apply its own warning
            // advised paid a payout of an order a newer folder had rejected `charge_failed`).
            // So do those of a `run` killed before its apply, as its take-over records them.
            for case .success(let plan) in opened where plan.bindsLaterRuns {
                let decided = try onPlanFolder { () throws(SettleError) in try plan.decidedOrders() }
                guard !decided.isEmpty, let at = plan.madeAt else { continue }
                do {
                    try ledger.recordDecidedOrders(decided, run: plan.lastAppliedRunID ?? plan.runID, at: at)
                } catch {
                    throw LedgerHistory.failure(error, path: path)
                }
            }
            // The charges each applied folder's plan found failed at Stripe: a later run rejects
            // their lines whatever the export says (audit 38 Q5).
            // Oldest folder first: a newer folder's look-up that found one put right wins (audit
            // 42 F6: the rebuilt ledger brought back a failure a later run had seen put right).
            var failed: [String: FailedCharge] = [:]
            let byTime = opened.compactMap { try? $0.get() }.sorted {
                ($0.madeAt ?? .distantPast) < ($1.madeAt ?? .distantPast)
            }
            for plan in byTime {
                let (folderFailed, putRight) = plan.chargeVerdicts
                for charge in putRight { failed[charge] = nil }
                for charge in folderFailed where failed[charge.charge] == nil { failed[charge.charge] = charge }
            }
            for fact in askedAgain { failed[fact.charge] = nil }
            for charge in failedNow { failed[charge.charge] = charge }
            do {
                try ledger.recordFailedCharges(failed.values.sorted { $0.charge < $1.charge })
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            // Which applied folder reported each payout that came back made (its `settled` rows,
            // counted in its paid_out), oldest first: no other folder counts it again (audit 70
            // A70-1: rebuilt over a backup from before the take-over that reported it, the hold
            // named the killed run, whose folder then counted the payout too).
            let cameBackPayouts = report.cameBackObjects
            var paidReports: [(payout: String, line: String, run: String)] = []
            for plan in byTime where plan.wasApplied && !cameBackPayouts.isEmpty {
                let found = try onPlanFolder { () throws(SettleError) in try plan.linesReportedPaid(cameBackPayouts) }
                paidReports += found.map { ($0.payout, $0.line, plan.runID) }
            }
            do {
                try ledger.recordPayoutReports(paidReports)
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            // Lines a folder left unknown whose object Stripe holds: held as unresolved, and
            // their outcome not reported yet, so the next run reports them settled (audit 38 Q1:
            // no run did, and the object was in no day's sums). Not those a folder given
            // reports settled already (a later apply of it, or another folder's).
            var settledInFolders: Set<String> = []
            for case .success(let plan) in opened where plan.wasApplied && !report.made.isEmpty {
                settledInFolders.formUnion(
                    try onPlanFolder { () throws(SettleError) in try plan.lines(withStatus: .settled) })
            }
            var unreported: Set<String> = []
            for case .success(let plan) in opened where !report.made.isEmpty {
                unreported.formUnion(
                    try onPlanFolder { () throws(SettleError) in
                        try plan.holdUnresolved(
                            report.made, ledger: ledger,
                            records: SpoolRecords(folder: plan.folder, manifest: plan.manifest),
                            reported: settledInFolders)
                    })
            }
            do {
                try ledger.commit(unreported.sorted().map { .unreported(instruction: $0, run: nil) })
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            // Payouts that came back while no ledger followed them: their lines are reported
            // failed by the next run, in its errors.csv, to be fed back (audit 35 P8: no run
            // reported them, and the days' sums did not join).
            // Not those a given folder reported already (the return was learned before the
            // ledger was lost): a return is reported once.
            var reported: [String: Set<String>] = [:]
            let lastPayouts = Set(report.cameBackPayout.values)
            for result in opened where !report.cameBack.isEmpty {
                let found = try onPlanFolder { () throws(SettleError) in
                    try result.get().linesReportedReturned(lastPayouts)
                }
                reported.merge(found) { $0.union($1) }
            }
            var returned = 0
            for result in opened where !report.cameBack.isEmpty {
                returned += try onPlanFolder { () throws(SettleError) in
                    let plan = try result.get()
                    return try plan.holdFollowing(
                        Set(report.cameBack.keys), ledger: ledger,
                        records: SpoolRecords(folder: plan.folder, manifest: plan.manifest), unlessSettled: true,
                        reported: reported, lastPayout: report.cameBackPayout)
                }
            }
            do {
                for (instruction, status) in report.cameBack.sorted(by: { $0.key < $1.key }) {
                    try ledger.recordPayoutStatus(
                        instruction: instruction, status: status, reason: report.cameBackReason[instruction])
                }
                // A hold the ledger rebuilt over had of a line whose return a folder reports (a
                // backup's `following`, made `returned` just above) ends: reported once (audit 64
                // F2: the next run reported it again, and the days counted it twice).
                // Only a hold for the payout reported: a later payout of the line that came back
                // too is still to report (audit 38 Q7).
                let reportedLines = try ledger.heldLines([.following, .returned]).filter { hold in
                    guard let instruction = hold.instructionID, let payout = report.cameBackPayout[instruction] else {
                        return false
                    }
                    return reported[hold.lineID]?.contains(payout) == true
                }.map(\.lineID)
                _ = try ledger.endHolding(
                    reportedLines, to: .released, run: LedgerStore.rebuildRun, from: [.following, .returned])
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            if returned > 0 {
                log(
                    .info,
                    "\(report.cameBack.count) payout(s) came back at Stripe: the next run reports their \(returned) "
                        + "line(s) failed, in its errors.csv")
            }
            // Lines that waited (deferred) or whose outcome was not known are not restored:
            // which of them a later run cancelled or took up is in no folder given for sure.
            // Said, with where they are (audit 35 P7: they were dropped silently). A deferred
            // line the ledger has no record of at all is recorded not carried under the newest
            // applied folder that deferred it: known to status and to later rebuilds, and no
            // folder applied again holds it waiting again (audit 77 H3, audit 78 F1).
            let notCarried: Set<String>
            do {
                notCarried = Set(try ledger.waitingLinesRebuildsDropped().map(\.lineID))
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            let (leftWaiting, decided, cancelled) = try Self.linesLeftWaiting(
                opened.compactMap { try? $0.get() }, notCarried: notCarried)
            for (plan, status, lines) in leftWaiting where status == .deferred {
                _ = try onPlanFolder { () throws(SettleError) in
                    try plan.recordNotCarried(
                        Set(lines), ledger: ledger, records: SpoolRecords(folder: plan.folder, manifest: plan.manifest))
                }
            }
            try warnOfLinesNotHeld(leftWaiting, decided: Set(decided.keys), ledger: ledger, path: path)
            if !report.processing.isEmpty {
                log(
                    .info,
                    "\(report.processing.count) payout(s) Stripe has not posted yet are followed by the next runs "
                        + "(\(following) of their lines held with their records)")
            }
            do {
                try ledger.recordCharges(counted)
                for (run, links) in intentLinks { try ledger.recordChargeIntents(links, run: run) }
                for (run, rows) in paidOut { try ledger.recordChargePayouts(rows, run: run) }
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            var netted = 0
            for (run, lines) in nettedOfFolders {
                do {
                    try ledger.recordNetted(lines, run: run)
                } catch {
                    throw LedgerHistory.failure(error, path: path)
                }
                netted += lines.count
            }
            if netted > 0 {
                log(.info, "\(netted) line(s) that netted to zero in the folders' applies are recorded as settled")
            }
            do {
                try ledger.finishRebuild()
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            // After the finish, which may stop carrying a backup's waiting line too: the cancels
            // the folders record, then who decided the lines not carried.
            for (plan, lines) in cancelled {
                _ = try onPlanFolder { () throws(SettleError) in
                    try plan.recordCancelled(
                        lines, ledger: ledger, records: SpoolRecords(folder: plan.folder, manifest: plan.manifest))
                }
            }
            do {
                try ledger.decidedByFolders(decided)
                var restored = 0
                for line in cancelled.flatMap(\.lines) {
                    if try ledger.holdState(of: line)?.state == .cancelled { restored += 1 }
                }
                if restored > 0 {
                    log(
                        .info,
                        "\(restored) line(s) the folders given say settle cancel dropped are cancelled in the rebuilt "
                            + "ledger: a copy fed again is rejected line_conflict")
                }
            } catch {
                throw LedgerHistory.failure(error, path: path)
            }
            log(
                .info,
                "rebuilt \(path) from Stripe: \(report.transfers) transfers, \(report.reversals) reversals, "
                    + "\(report.payouts) payouts made by settle (\(report.added) new to the ledger) in \(report.requests) requests"
            )
            if !report.withoutLines.isEmpty {
                throw CommandFailure(
                    .configuration,
                    "\(report.withoutLines.count) instruction(s) settled at Stripe have no lines in \(path) "
                        + "(first: \(report.withoutLines[0])): Stripe does not say which lines they paid, so plan, run "
                        + "and apply refuse this ledger until they are known. Run settle ledger rebuild again with the "
                        + "plan folders that made them (settle ledger rebuild --since DATE FOLDER...)")
            }
            return .ok
        default:
            throw CommandFailure(
                .usage, "usage: settle ledger init|backup FILE|rebuild --since DATE [--ledger FILE] [PLAN_FOLDER...]")
        }
    }

    /// The lines the folders that bind later runs (``PlanFolder/bindsLaterRuns``: applied, or
    /// a `run`'s never applied, whose `planned` rows are unknown) left waiting (deferred) or
    /// unknown, each under the newest
    /// folder that has a row of it, and only when that row says so (``PlanFolder/LineFate``):
    /// a line a newer folder reports otherwise (rejected, failed, settled, cancelled) was
    /// decided there, and is neither named nor recorded not carried (a rebuild named a line a
    /// later folder had rejected `charge_failed`). Newest folder first; per folder, deferred
    /// then unknown, each sorted. `decided`: those lines, and the lines of `notCarried` a folder
    /// decided, each with the run of the newest folder that has a row of it.
    ///
    /// A row saying `settle cancel` dropped the line speaks as of its folder's last apply, not
    /// its plan: it decides the line against every row of a folder applied before then
    /// (audit 79 F1: an older folder applied again after the cancel said so, a newer one
    /// applied before it still had the line deferred, and the line was named to be fed and
    /// paid). `cancelled`: those lines, under the folder whose rows say so.
    static func linesLeftWaiting(_ plans: [PlanFolder], notCarried: Set<String>) throws(CommandFailure) -> (
        left: [(plan: PlanFolder, status: LineStatus, lines: [String])], decided: [String: String],
        cancelled: [(plan: PlanFolder, lines: Set<String>)]
    ) {
        func planned(_ plan: PlanFolder) -> Date { plan.madeAt ?? .distantPast }
        func appliedAt(_ plan: PlanFolder) -> Date { plan.appliedAt ?? planned(plan) }
        let applied = plans.filter(\.bindsLaterRuns).sorted { planned($0) > planned($1) }
        var candidates = notCarried
        // Each line's newest cancel row, by when its folder was applied.
        var cancelledAt: [String: (plan: Int, at: Date)] = [:]
        for (index, plan) in applied.enumerated() {
            let fates = try onPlanFolder { () throws(SettleError) in
                try plan.lineFates { _, fate in fate != .decided }
            }
            for (line, fate) in fates {
                candidates.insert(line)
                guard fate == .cancelled, cancelledAt[line].map({ appliedAt(plan) > $0.at }) ?? true else { continue }
                cancelledAt[line] = (index, appliedAt(plan))
            }
        }
        var seen: Set<String> = []
        var decided: [String: String] = [:]
        var cancelled = Array(repeating: Set<String>(), count: applied.count)
        var left: [(plan: PlanFolder, status: LineStatus, lines: [String])] = []
        for plan in applied where !candidates.isEmpty {
            var fates = try onPlanFolder { () throws(SettleError) in
                try plan.lineFates { id, _ in candidates.contains(id) && !seen.contains(id) }
            }
            for (line, fate) in fates where fate != .decided {
                // A cancel recorded at or after this folder's apply (a tie: the cancel, which
                // moves nothing) decides the line.
                guard let cancel = cancelledAt[line], fate == .cancelled || cancel.at >= appliedAt(plan) else {
                    continue
                }
                cancelled[cancel.plan].insert(line)
                fates[line] = .decided
            }
            for (fate, status) in [(PlanFolder.LineFate.deferred, LineStatus.deferred), (.unknown, .unknown)] {
                left.append((plan, status, fates.filter { $0.value == fate }.keys.sorted()))
            }
            for (line, fate) in fates where fate == .decided { decided[line] = plan.runID }
            seen.formUnion(fates.keys)
        }
        for (index, lines) in cancelled.enumerated() {
            for line in lines { decided[line] = applied[index].runID }
        }
        return (left, decided, zip(applied, cancelled).filter { !$0.1.isEmpty }.map { ($0.0, $0.1) })
    }

    /// Warns (`waiting_not_restored`) of the lines the applied folders left waiting (deferred)
    /// or unknown that the rebuilt ledger does not hold, with where each is: the newest folder
    /// that has it, each line once (audit 75 F5: a line in two folders was counted twice).
    ///
    /// Not held: nothing the ledger knows pays it, and it keeps no holding of it, or this
    /// rebuild ends that holding (a ledger behind its mark: a `settle cancel` among the commits
    /// it lacks is in no plan folder, ``LedgerStore/rebuildDistrustsWaiting()``), or an earlier
    /// rebuild did and no run took the line up since (``LedgerStore/waitingLinesRebuildsDropped()``).
    /// A line the ledger still holds (waiting, followed, unresolved), one `settle cancel`
    /// dropped and one a run took up are not named (audit 75 F3: a rebuild over the live
    /// ledger named lines it held, and a cancelled one, to be fed again). Those of the
    /// holdings this rebuild or an earlier one ended that no folder given has are named by the
    /// folder of the run that deferred them (audit 75 F2: only the first was named; audit 76 G1:
    /// a second rebuild named none). Every line named is one whose history the ledger lost,
    /// `settle cancel`s included, so the warning always says to leave those out (audit 75 F1:
    /// it did only when the ledger rebuilt over held lines waiting). A rebuild over a ledger
    /// that lost commits also says that every folder since its last backup is needed: a run
    /// the ledger does not know is known from nothing else (audit 76 G2).
    private func warnOfLinesNotHeld(
        _ leftWaiting: [(plan: PlanFolder, status: LineStatus, lines: [String])], decided: Set<String>,
        ledger: LedgerStore, path: String
    ) throws(CommandFailure) {
        let folderLines = leftWaiting.map { (folder: $0.plan.folder, status: $0.status, lines: $0.lines) }
        // A line a folder given decided is named by none (``linesLeftWaiting``).
        var named = decided
        var waited: [String] = []
        var unknown: [String] = []
        var lostRuns = false
        do throws(LedgerError) {
            let distrusted = try ledger.rebuildDistrustsWaiting() + ledger.waitingLinesRebuildsDropped()
            let ending = Set(distrusted.map(\.lineID))
            func notHeld(_ id: String) throws(LedgerError) -> Bool {
                guard try ledger.line(id) == nil else { return false }
                return try ledger.holdState(of: id) == nil || ending.contains(id)
            }
            lostRuns = try ledger.rebuildLostCommits()
            for (folder, status, lines) in folderLines {
                var count = 0
                for id in lines where named.insert(id).inserted {
                    if try notHeld(id) { count += 1 }
                }
                guard count > 0 else { continue }
                if status == .deferred {
                    waited.append("\(count) in \(folder)/deferred.csv")
                } else {
                    unknown.append("\(count) of \(folder) (settle apply \(folder))")
                }
            }
            let folderOfRun = try ledger.runFolders()
            var byRun: [String: Int] = [:]
            var runs: [String] = []
            for hold in distrusted where !named.contains(hold.lineID) {
                guard try ledger.line(hold.lineID) == nil else { continue }
                if byRun[hold.sinceRun] == nil { runs.append(hold.sinceRun) }
                byRun[hold.sinceRun, default: 0] += 1
            }
            for run in runs {
                let count = byRun[run] ?? 0
                waited.append(
                    folderOfRun[run].map { "\(count) in \($0)/deferred.csv (run \(run), a folder not given)" }
                        ?? "\(count) deferred by run \(run), whose folder the ledger does not name")
            }
        } catch {
            throw LedgerHistory.failure(error, path: path)
        }
        if lostRuns {
            // The runs since its last backup are in no ledger: a run that only deferred lines
            // left nothing at Stripe either (audit 76 G2: its lines were named by no rebuild).
            log(
                .warning, event: "runs_not_known",
                "the ledger rebuilt lost its record of runs (it was behind its mark, or lost): the lines a run "
                    + "since its last backup deferred or left unknown are known only from that run's plan folder; "
                    + "give this rebuild every plan folder made since then, or a folder left out holds lines no run "
                    + "pays and no warning names")
        }
        guard !waited.isEmpty || !unknown.isEmpty else { return }
        log(
            .warning, event: "waiting_not_restored",
            "the rebuilt ledger does not hold the lines that waited for a later run or whose outcome was not "
                + "known, and Stripe holds nothing of them: "
                + (waited + unknown).joined(separator: ", ")
                + "; feed the newest deferred.csv that holds each waiting line to the next run, and apply "
                + "those folders again (a line a later run settled is already_settled then); the ledger lost "
                + "its record of them, and of any settle cancel of them too: leave out the lines cancelled "
                + "since its last backup"
                + (!waited.isEmpty
                    ? " (settle status lists the waiting ones as not carried until a run takes them up; settle "
                        + "cancel LINE_ID records a cancel the ledger lost)" : ""))
    }
}
