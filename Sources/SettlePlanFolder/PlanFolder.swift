public import Foundation
import SettleApply
public import SettleCore
import SettleDigest
public import SettleLedger
public import SettleWrite

/// A plan folder as `apply` finds it: checked against the manifest's checksums, then
/// rewritten with the outcomes.
public struct PlanFolder {
    public let folder: String
    public let manifest: JSON
    /// instructions.jsonl, checked by ``open(_:)``, read one instruction at a time.
    let instructionStream: InstructionStream

    /// Opens a plan folder for `apply` and checks everything apply will read, before the
    /// first request: the manifest against its seal, then every file the manifest lists
    /// (outputs, line index, spool) against its SHA-256, and the row counts against each
    /// other. Any difference refuses the folder (exit 65, nothing sent).
    public static func open(_ folder: String) throws(SettleError) -> PlanFolder {
        func path(_ name: String) -> String { (folder as NSString).appendingPathComponent(name) }
        guard let manifestData = FileManager.default.contents(atPath: path("manifest.json")),
            let instructions = InstructionStream(path: path("instructions.jsonl"))
        else {
            throw SettleError(
                .notAPlanFolder, "\(folder) is not a plan folder (no manifest.json or instructions.jsonl)")
        }
        let manifest: JSON
        do throws(JSON.ParseError) {
            manifest = try JSON.parse(manifestData)
        } catch {
            throw SettleError(
                .planInvalid, "\(folder)/manifest.json is not valid JSON (\(error)); nothing was sent",
                at: .init(file: path("manifest.json"), byteOffset: error.offset))
        }
        let seal = (try? String(contentsOfFile: path(Manifest.sealName), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard seal == sha256(manifestData) else {
            throw SettleError(
                .planChanged, "\(folder)/manifest.json changed since settle wrote it; nothing was sent (plan again)")
        }
        let format = manifest["plan_format"]?.intValue
        guard format == Int64(InstructionsFile.format) else {
            let written = format.map { "plan format \($0)" } ?? "an older plan format (1)"
            throw SettleError(
                .planInvalid,
                "\(folder) was written by another settle in \(written); this settle applies plan format \(InstructionsFile.format) only; nothing was sent (plan again with this settle)",
                at: .init(file: path("manifest.json")))
        }
        var sealed: [(String, JSON)] = []
        if case .object(let outputs)? = manifest["outputs"] { sealed += outputs }
        if case .object(let spool)? = manifest["spool"] { sealed += spool }
        for required in ["instructions.jsonl", "results.csv", LineIndex.name]
        where !sealed.contains(where: { $0.0 == required }) {
            throw SettleError(
                .planChanged, "\(folder)/manifest.json does not seal \(required); nothing was sent (plan again)")
        }
        // What the engine must know of the whole plan comes from the sealed manifest; every
        // instruction is checked against its own content as it is read, before it is sent.
        guard let count = manifest["instructions"]?.intValue, count >= 0,
            let payouts = manifest["instruction_kinds"]?["payout"]?.intValue, payouts >= 0,
            let account = manifest["financial_account"], account == .null || account.stringValue != nil
        else {
            throw SettleError(
                .planInvalid,
                "\(folder)/manifest.json does not say how many instructions of each kind it holds; nothing was sent",
                at: .init(file: path("manifest.json")))
        }
        instructions.overview = PlanOverview(
            count: Int(count), unfundedPayouts: account == .null ? Int(payouts) : 0,
            fundingAccount: payouts > 0 ? account.stringValue : nil)
        // Every seal, on both cores, in bounded memory.
        let seals = sealed.compactMap { name, entry in entry["sha256"]?.stringValue.map { (name, $0) } }
        if let problem = PlanChecks.run(folder: folder, sealed: seals, instructions: instructions) {
            throw problem
        }
        let folderValue = PlanFolder(folder: folder, manifest: manifest, instructionStream: instructions)
        let rows = manifest["outputs"]?["results.csv"]?["rows"]?.intValue
        let indexed = manifest["outputs"]?[LineIndex.name]?["rows"]?.intValue
        guard rows != nil, rows == indexed else {
            throw SettleError(
                .planInvalid, "\(folder): results.csv and its line index disagree on the line count; nothing was sent"
            )
        }
        return folderValue
    }

    /// Whether the plan was made with Stripe's facts looked up (`run`, `plan --online`).
    /// The run id the plan was written under (re-applies of the folder keep it).
    public var runID: String { manifest["run_id"]?.stringValue ?? "" }
    /// Whether an apply of this plan began or ended (``OutputFolder/holdsAppliedRun(_:manifest:)``).
    public var wasApplied: Bool { OutputFolder.holdsAppliedRun(folder, manifest: manifest) }
    /// Whether the last apply of this plan that began never rewrote the folder (killed, or
    /// its ledger failed): what it learned at Stripe (charges its look-ups found failed,
    /// transfers refused `charge_failed`) was in the ledger only, in no file of the folder. True
    /// too for a folder re-applied before the mark named each apply (it cannot say).
    public var applyNeverEnded: Bool {
        guard let began = OutputFolder.applyingRun(folder) else { return false }
        return began != lastAppliedRunID
    }
    /// Whether what this plan decided binds the later runs: an apply of it began, or a `run`
    /// made it, whose plan is applied at once or, the run killed first, taken over by the next
    /// run (``adoptUnfinished(ledger:records:run:)`` records its decisions). An offline plan
    /// never applied binds nothing. `settle ledger rebuild` reads the decisions of these
    /// (audit 85 F3: a `run` killed before its apply was read as no record, and the order its
    /// plan rejected was paid).
    public var bindsLaterRuns: Bool { wasApplied || manifest["mode"]?.stringValue == "run" }
    /// When the plan was made, to the millisecond (`planned_at_ms`); nil for a folder written
    /// before the manifest kept it (its run id says the second).
    public var plannedAt: Date? {
        manifest["planned_at_ms"]?.intValue.map { Date(timeIntervalSince1970: TimeInterval($0) / 1000) }
    }

    /// When the apply whose rewrite the folder holds began (`apply.applied_at`, to the
    /// second): what its rows say of the ledger (a line `settle cancel` dropped) is as of then,
    /// whenever the plan was made. Nil before its first apply.
    public var appliedAt: Date? {
        manifest["apply"]?["applied_at"]?.stringValue.flatMap { ISO8601DateFormatter().date(from: $0) }
    }

    /// Which apply of this plan the next one is: 1, or one more than the manifest's last.
    /// The run id of the apply whose rewrite the folder holds (`run_…`, `run_….a2`), or nil
    /// before its first apply ended.
    public var lastAppliedRunID: String? {
        let attempt = nextAttempt - 1
        return attempt >= 1 ? runID(ofAttempt: attempt) : nil
    }
    /// The run id of an apply attempt of this folder: the plan's for the first, `<id>.aN` after.
    func runID(ofAttempt attempt: Int) -> String { attempt > 1 ? "\(runID).a\(attempt)" : runID }
    var nextAttempt: Int { Int(manifest["apply"]?["attempt"]?.intValue ?? (manifest["apply"] == nil ? 0 : 1)) + 1 }

    /// The ledger's record of the next apply of this folder (`settle status` lists it): the
    /// plan's run id, `.a<N>` for a re-apply, which continues the run. Not ended yet.
    public func applyRecord(mode: String, startedAt: Date) -> LedgerRun {
        let attempt = nextAttempt
        return LedgerRun(
            id: runID(ofAttempt: attempt), command: mode,
            asOf: manifest["as_of"]?.stringValue ?? "", folder: folder, startedAt: startedAt,
            continues: attempt > 1 ? runID : nil)
    }
    public var madeOnline: Bool { manifest["facts"]?["online"] == .bool(true) }

    /// The plan's instructions, each checked against its own content as it is read, before
    /// it can be sent: the id re-derived from kind, group, payee, charge or target, currency,
    /// amount and lines; the parameters equal to those the facts give; the lines adding up
    /// to the amount. ``open(_:)`` has checked every seal first; an instruction edited by
    /// hand under a recomputed seal stops the run at that instruction, unsent (exit 65).
    public func instructions() -> InstructionStream { instructionStream }

    /// The order (group) of each line of each aggregated payout, by instruction id then line
    /// id, from results.csv: an aggregated payout names no group of its own. What an apply
    /// needs to keep orders whole when some of a payout's orders may not move.
    ///
    /// - Parameter wanted: which rows to keep, by instruction id and order (memory follows
    ///   what is kept, not the plan).
    public func payoutOrders(where wanted: (String, String) -> Bool) throws(SettleError) -> [String: [String: String]] {
        typealias F = ResultsFile.Field
        var orders: [String: [String: String]] = [:]
        try eachResult { row, text in
            guard text(row[F.kind.rawValue]) == "payout", !row[F.instructionID.rawValue].isEmpty else { return }
            let (instruction, order) = (text(row[F.instructionID.rawValue]), text(row[F.group.rawValue]))
            guard wanted(instruction, order) else { return }
            orders[instruction, default: [:]][text(row[F.lineID.rawValue])] = order
        }
        return orders
    }

    /// The charges of the transfers this folder will report `settled` for another apply that
    /// found them made after their own run lost the outcome (the ledger's unreported outcomes
    /// of lines this plan lists as already settled), by instruction id: apply looks them up
    /// with the plan's facts, so that this folder counts their gross with them (audit 31 G5:
    /// the plan formed no instruction of them, and the gross was counted in no day).
    public func chargesOfUnreportedTransfers(ledger: LedgerStore) throws(SettleError) -> [String: String] {
        typealias F = ResultsFile.Field
        guard let unreported = try? ledger.unreportedOutcomes(), !unreported.isEmpty else { return [:] }
        // A few instructions: their lines from the ledger, then one pass over the rows with no
        // query per row.
        var transferOfLine: [String: (instruction: String, charge: String)] = [:]
        for id in unreported {
            guard let instruction = try? ledger.instruction(id), instruction.status == .settled,
                instruction.dispatch.kind == LineKind.transfer.name,
                case let charge = instruction.dispatch.charge, charge.hasPrefix("ch_") || charge.hasPrefix("py_"),
                let lines = try? ledger.lines(ofInstruction: id)
            else { continue }
            for line in lines { transferOfLine[line] = (id, charge) }
        }
        guard !transferOfLine.isEmpty else { return [:] }
        var charges: [String: String] = [:]
        try eachResult { row, text in
            guard text(row[F.status.rawValue]) == LineStatus.alreadySettled.name,
                let transfer = transferOfLine[text(row[F.lineID.rawValue])]
            else { return }
            charges[transfer.instruction] = transfer.charge
        }
        return charges
    }

    /// Each row of results.csv (header aside, with all its cells), and a cell's text without
    /// the formula guard.
    private func eachResult(_ body: ([[UInt8]], ([UInt8]) -> String) -> Void) throws(SettleError) {
        guard let reader = ResultsReader(path: path("results.csv")) else {
            throw SettleError(.notAPlanFolder, "\(folder) lacks results.csv")
        }
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self).trimmingFormulaGuard() }
        do {
            _ = try reader.next()  // the header
            while let row = try reader.next() {
                if row.count == ResultsFile.header.count { body(row, text) }
            }
        } catch {
            throw SettleError(.folderUnwritable, "cannot read \(error.path): \(error.message)")
        }
    }

    /// The end of the reason of a line whose payout this run made came back, and that a later
    /// run paid again (a re-apply counts that payout as made at every attempt).
    static let cameBackPaidAgain = " of this run came back; a later run paid the line again"
    /// The end of the reason of a row whose plan reported its payout's return, which a later
    /// run reported too before the plan was applied (that run counts it).
    static let returnCountedElsewhere = " after this plan, and counts it: it is not counted here"
    /// The reason of a deferred row whose line `settle cancel` dropped after the plan.
    static let droppedByCancel = "settle cancel dropped it after this plan: it does not wait in the ledger any more"

    /// Reason codes of rows that decide nothing about their order: a copy of a line (the line
    /// itself is elsewhere), or a line that follows its order's fate (the deciding line has
    /// its own code).
    static let copyOrFollower: Set<String> = ReasonCode.copyCodes.union([ReasonCode.groupRejected.code])

    /// Whether a row of results.csv decides its order against moving: a line rejected by a
    /// rule or refused by Stripe, not a copy or follower, not a payout Stripe refused or that
    /// came back (which stops no other line of its order; payouts go last).
    static func decidesItsOrder(status: LineStatus, reasonCode: String, group: String, kind: String) -> Bool {
        (status == .rejected || status == .failed) && !copyOrFollower.contains(reasonCode) && !group.isEmpty
            && !(status == .failed && kind == LineKind.payout.name)
    }

    /// Why an order with a line a rebuild over a ledger behind its mark stopped holding moves
    /// nothing: a `settle cancel` of it may be among the commits lost.
    static func droppedByRebuild(line: String) -> String {
        "settle ledger rebuild, over a ledger that had lost commits, stopped holding line \(line) of this "
            + "order after this plan (a settle cancel of it may be among those lost): nothing of it moves here; "
            + "feed it again to pay it"
    }

    /// What is said of a run the ledger has started and never ended: killed, or stopped by its
    /// ledger before its files (``ledgerStopped(_:folder:)``); its own output said which.
    public static let neverEnded = "never ended (killed, or its ledger failed?)"

    /// An apply whose ledger failed, during the requests or as the rewrite read it or recorded
    /// what waits: the folder's files stay as they are, and the run is not over (exit 75).
    static func ledgerStopped(_ failure: String, folder: String) -> SettleError {
        SettleError(
            .ledgerFailed,
            "the ledger failed (\(failure)): \(folder)'s files are left as they were and the run is not recorded as "
                + "ended; what Stripe answered is in the ledger. Run `settle apply \(folder)` once the ledger works: it "
                + "reports every line and sends nothing twice. The next run takes this one over if it comes first: "
                + "the lines this one did not send wait, and what it sent is in no results.csv until that apply")
    }

    /// The orders (groups) of this plan with a line another run took up after the plan was
    /// made (`taken`: line id → who: "run …" or "settle cancel"), each with why it may not move
    /// in this apply.
    public func ordersTakenUp(_ taken: [String: String]) throws(SettleError) -> [String: String] {
        typealias F = ResultsFile.Field
        guard !taken.isEmpty else { return [:] }
        var orders: [String: String] = [:]
        try eachResult { row, text in
            guard case let line = text(row[F.lineID.rawValue]), let run = taken[line],
                case let order = text(row[F.group.rawValue]), orders[order] == nil
            else { return }
            switch run {
            case "settle cancel":
                orders[order] =
                    "settle cancel dropped line \(line) of this order after this plan: nothing of it moves here"
            case LedgerStore.rebuildTakenUp:
                orders[order] = Self.droppedByRebuild(line: line)
            default:
                orders[order] =
                    "\(run) took up line \(line) of this order after this plan, so the order is that run's now "
                    + "(its files say what became of it): nothing of it moves here"
            }
        }
        return orders
    }

    /// The SHA-256 of bytes, in hex: how the manifest seals a file.
    public static func sha256(_ data: Data) -> String {
        let hasher = SHA256()
        data.withUnsafeBytes { hasher.update($0) }
        return hasher.hexDigest()
    }

    func path(_ name: String) -> String { (folder as NSString).appendingPathComponent(name) }

    /// Rewrites the outcome files (results.csv, errors.csv, deferred.csv, summary.csv,
    /// charges.csv, report.html, manifest.json and its seal) with what an apply did, records
    /// in the ledger what waits for later runs and the run itself, and returns the run's exit
    /// status with the counts and sums the files now hold.
    ///
    /// - Parameters:
    ///   - records: the original records of the spool, for errors.csv, deferred.csv and the
    ///     lines the ledger holds.
    ///   - reportFacts: the facts at the top of report.html, given the run's exit status.
    /// Runs a read of the folder's files; a failure is the folder's (`folderUnwritable`).
    static func reading<T>(_ body: () throws(WriteFailure) -> T) throws(SettleError) -> T {
        do {
            return try body()
        } catch {
            throw SettleError(.folderUnwritable, "cannot read \(error.path): \(error.message)")
        }
    }

    /// How the inputs' records map to the columns of errors.csv and deferred.csv (and of the
    /// lines the ledger holds), as the manifest records it.
    var correctionLayout: CorrectionLayout {
        CorrectionLayout(
            names: manifest["correction_columns"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            mapping: manifest["inputs"]?.arrayValue?.map { input in
                input["columns"]?.arrayValue?.compactMap { $0.intValue.map(Int.init) } ?? []
            } ?? [],
            guardedInputs: manifest["inputs"]?.arrayValue?.map { input in
                input["guarded_columns"]?.arrayValue?.compactMap(\.boolValue)
            } ?? [],
            csvInputs: manifest["inputs"]?.arrayValue?.map { $0["format"]?.stringValue == "csv" } ?? [])
    }

    public func rewrite(
        _ report: AppliedRun, ledger: LedgerStore, records: any SpoolRecordSource,
        reportFacts: (ExitCode) -> ReportPage.Facts
    ) throws(SettleError) -> Rewritten {
        CrashPoint.reach("rewriting")
        // A run whose ledger failed is not over: its files are left as they are, as a run
        // killed here leaves them, and the next run takes it over from the ledger (the lines
        // it did not send wait, what it sent is resolved and reported) unless `settle apply`
        // of this folder finishes it first. Files that said the run was over would have it
        // recorded as ended while the ledger held none of the lines that wait, and the next
        // run would neither bring them back nor name them: lost, with exit 0.
        if let failure = report.ledgerFailure { throw Self.ledgerStopped(failure, folder: folder) }
        let ledgerMark = ledger.failureMark
        typealias F = ResultsFile.Field
        guard let reader = ResultsReader(path: path("results.csv")),
            let index = LineIndex.Reader(path: path(LineIndex.name))
        else {
            throw SettleError(.notAPlanFolder, "\(folder) lacks results.csv or its line index")
        }
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        func set(
            _ row: inout [[UInt8]], _ status: LineStatus, stripeID: String = "", code: String = "", reason: String = ""
        ) {
            row[F.status.rawValue] = Array(status.name.utf8)
            row[F.stripeID.rawValue] = CSVField.guarded(stripeID)
            row[F.reasonCode.rawValue] = CSVField.guarded(code)
            row[F.reason.rawValue] = CSVField.guarded(reason)
        }
        let layout = correctionLayout
        let run = manifest["run_id"]?.stringValue ?? "run_unknown"
        /// A line's own result when its instruction's lines each have one (a payout split at
        /// apply), naming in the row the instruction that holds it.
        func splitResult(_ row: inout [[UInt8]], of instruction: String) -> LineResult? {
            guard !report.splitInstructions.isEmpty, report.splitInstructions.contains(instruction),
                let own = report.lineResultOfLine(text(row[F.lineID.rawValue]).trimmingFormulaGuard(), instruction)
            else { return nil }
            if let holder = own.instruction { row[F.instructionID.rawValue] = Array(holder.utf8) }
            return own.0
        }
        /// The ledger's claim of a row's line when this plan's run paid it in another instruction
        /// than the one the row names: the row names the payout of some of its lines an earlier
        /// attempt sent (refused), and a re-apply sent the aggregated payout whole. The line is
        /// settled by that one (audit 26 B3: the folder said failed, in errors.csv, and its
        /// paid_out missed the line).
        func paidSince(_ row: [[UInt8]]) -> LedgerLine? {
            guard !row[F.instructionID.rawValue].isEmpty,
                let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                line.status == .settled, line.instructionID != text(row[F.instructionID.rawValue]),
                (try? ledger.instruction(line.instructionID))??.settledBy == run
            else { return nil }
            return line
        }
        /// Whether the refusal the ledger holds for a line was sent after this plan was made.
        func refusedSincePlan(_ line: LedgerLine) -> Bool {
            guard let plannedAt, let refused = try? ledger.instruction(line.instructionID) else { return true }
            return refused.lastSentAt >= plannedAt
        }
        /// An instruction whose lines other instructions settled (overlapping plans) is
        /// `already_settled` as a whole: each row names the object and instruction that hold
        /// its own line (audit 24 N6: every row named the first line's transfer).
        func ownObject(_ row: inout [[UInt8]], _ result: inout LineResult) {
            guard result.status == .alreadySettled,
                let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                line.status == .settled, let object = line.stripeID, !object.isEmpty, object != result.stripeID
            else { return }
            result.stripeID = object
            row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
        }
        /// The payout this plan's run made for a row's line that came back since, or nil: the
        /// instruction's last attempt is this run's payout, and failed; or a later run sent the
        /// line again under the same instruction (fed back with the same content) after this
        /// run's payout came back, and that attempt failed too (its payout came back: audit 28
        /// F4; or Stripe refused it at creation: audit 29 R1), `later` then. The row names it
        /// from then on, so that every later re-apply still knows it (audit 29 G1).
        func madeHereAndBack(_ row: [[UInt8]]) -> (made: String, later: Bool)? {
            guard text(row[F.kind.rawValue]) == LineKind.payout.name,
                let made = try? ledger.instruction(text(row[F.instructionID.rawValue])), made.status == .failed
            else { return nil }
            let object = made.stripeID ?? ""
            let own = text(row[F.stripeID.rawValue]).trimmingFormulaGuard()
            if made.settledBy == run, !object.isEmpty, own.isEmpty || own == object { return (object, false) }
            // Restored by `settle ledger rebuild`, which cannot say which run made it: this
            // folder's row names it, as the object its own run made (audit 55 R3: the re-apply
            // after a rebuild dropped it from paid_out, and no day counted the payout).
            if made.settledBy == nil, !object.isEmpty, own == object { return (object, false) }
            // Sent by this folder's run, which was killed with it in flight, and resolved by
            // another run that did not report it (no other run holds its line for it): this
            // folder's first apply counted it, and so does every re-apply (audit 69 F8: the
            // re-apply dropped it, and no day counted the payout).
            if made.sentBy == run, !object.isEmpty, own == object,
                !heldElsewhere(text(row[F.lineID.rawValue]).trimmingFormulaGuard(), for: made).elsewhere
            {
                return (object, false)
            }
            return own.isEmpty || own == object ? nil : (own, true)
        }
        /// Whether a run other than this folder's holds (or last held) a line for `instruction`,
        /// and whether the ledger ever held the line for `instruction` at all. A payout this
        /// folder's run sent that another run holds the line of was reported `settled` by that
        /// run's files (a run holds a payout's line from the row that reports it made:
        /// `following`; the take-over of a killed run holds its lines as that run's), which
        /// counted it in their `paid_out`. A hold under another instruction, or none (the line
        /// waited for its charge, or was a fix fed back, and this folder's run was killed before
        /// its hold moved to its payout), is from before the payout: no run reported the
        /// payout's return through it (audit 70 A70-5: taken for one, no day counted the return).
        func heldElsewhere(_ line: String, for instruction: LedgerInstruction) -> (elsewhere: Bool, ever: Bool) {
            // As the ledger held the line when the payout came back (the hold may be another's
            // since: a fix fed back, the line paid again).
            if let object = instruction.stripeID, let reporter = reporterOfMade(object, line) {
                return (reporter != run, true)
            }
            guard let hold = try? ledger.holding(of: line), hold.instruction == instruction.id else {
                return (false, false)
            }
            // Since this folder's attempt was sent: a hold from before is of an earlier attempt's
            // payout (the line fed back under the same instruction; audit 70 A70-2).
            return (hold.run != run && hold.since >= instruction.lastSentAt, true)
        }
        /// The run other than this folder's that reported the return a row of this plan reports
        /// (`failed`, its payout came back: the ledger held the line `returned` when the plan was
        /// made), or nil: the ledger's report of that return (``LedgerStore/returnReporter(_:reason:)``:
        /// kept whatever holds the line since, audit 69 F6), else the run that ended the line's
        /// holding since the plan with the same code (a ledger without the reports).
        func returnReportedElsewhere(_ row: [[UInt8]], reason: String) -> String? {
            let line = text(row[F.lineID.rawValue]).trimmingFormulaGuard()
            let code = text(row[F.reasonCode.rawValue]).trimmingFormulaGuard()
            if let reporter = (try? ledger.returnReporter(line, reason: reason.trimmingFormulaGuard())) ?? nil {
                return reporter != run && reporter != LedgerStore.rebuildRun ? reporter : nil
            }
            guard let end = endedElsewhere[line], end.state == .released, let reporter = end.endedRun,
                reporter != LedgerStore.rebuildRun, !end.reasonCode.isEmpty, end.reasonCode == code
            else { return nil }
            return reporter
        }
        /// The run whose files reported `payout` made for `line` (``LedgerStore/payoutReporter(_:line:)``).
        func reporterOfMade(_ payout: String, _ line: String) -> String? {
            guard !payout.isEmpty else { return nil }
            return (try? ledger.payoutReporter(payout, line: line)) ?? nil
        }
        /// The payout a row counts as made here though it came back (`madeAndBack`): named in
        /// its reason when a later payout settles the line, else its own.
        func madeObject(_ row: [[UInt8]]) -> String {
            let reason = text(row[F.reason.rawValue]).trimmingFormulaGuard()
            let prefix = "the payout "
            if reason.hasPrefix(prefix), reason.hasSuffix(Self.cameBackPaidAgain) {
                return String(reason.dropFirst(prefix.count).dropLast(Self.cameBackPaidAgain.count))
            }
            return text(row[F.stripeID.rawValue]).trimmingFormulaGuard()
        }
        /// The payout of a row its own folder left `unknown` (the answer was lost) that this
        /// folder's run sent, Stripe made, and came back: the row names it, and this folder
        /// counts it made (`paid_out`), as a payout its run made and reported; not when another
        /// run reported it made (``heldElsewhere(_:for:)``). Its return is counted by whichever
        /// run learned it first (audit 70 A70-4: the row said `failed` with no object, as for a
        /// payout never made, and no day counted the payout).
        func sentHereAndBack(_ line: LedgerLine, _ row: [[UInt8]]) -> String? {
            guard text(row[F.kind.rawValue]) == LineKind.payout.name,
                line.instructionID == text(row[F.instructionID.rawValue]),
                let made = try? ledger.instruction(line.instructionID), made.status == .failed, made.sentBy == run,
                let object = made.stripeID, !object.isEmpty, line.stripeID == object,
                !heldElsewhere(line.lineID, for: made).elsewhere
            else { return nil }
            return object
        }
        /// The payout of a row still `planned` (its run was killed before its files) that this
        /// folder's run sent, Stripe made, and came back: the payout; whether this folder
        /// reports its return (this apply learned it, or the ledger holds the line `returned`,
        /// or never held it at all: no run followed the payout, and the return was learned by
        /// this apply's look at the payouts first (audit 66 F7: no day counted it); not when
        /// another run reported it already); and whether this folder counts it made
        /// (`paid_out`): not when another run reported it `settled` (``heldElsewhere(_:for:)``:
        /// the run that took the killed run over, or a later one; audit 67 F2, audit 69 F1, F7:
        /// both counted it).
        func killedRunsPayoutBack(_ row: [[UInt8]], _ instruction: String)
            -> (object: String, reportsReturn: Bool, countsMade: Bool)?
        {
            guard text(row[F.kind.rawValue]) == LineKind.payout.name,
                let made = try? ledger.instruction(instruction), made.status == .failed, made.sentBy == run,
                let object = made.stripeID, !object.isEmpty
            else { return nil }
            let line = text(row[F.lineID.rawValue]).trimmingFormulaGuard()
            let held = heldElsewhere(line, for: made)
            if cameBack[line] != nil || report.resolved.contains(instruction) { return (object, true, !held.elsewhere) }
            return (object, !held.ever, !held.elsewhere)
        }
        /// A row this apply did not send: deferred; when it `waits` (still this folder's line),
        /// counted as unsent (the run exits 75) and said to wait in the ledger.
        func unsentResult(_ result: LineResult, waits: Bool) -> LineResult {
            if waits { unsent += 1 }
            return LineResult(
                status: .deferred, stripeID: "", reasonCode: ReasonCode.scheduled.code,
                reason: result.reason + (waits ? "; it waits in the ledger for the next run" : ""))
        }
        /// What Stripe said when it refused a line's instruction, as the ledger recorded it.
        func refusal(_ line: LedgerLine) -> (code: String, message: String) {
            let failed = try? ledger.instruction(line.instructionID)
            return (failed?.errorCode ?? "", failed?.errorMessage ?? "Stripe refused it")
        }
        // One pass over results.csv and its line index, row by row: each row gets its
        // outcome, goes to the new results.csv (renamed into place only after the ledger has
        // what waits), and adds to the counts, the sums, the corrections and the held lines.
        // Memory holds one row, the per-status counters and the rows of errors.csv and
        // deferred.csv; what is kept per instruction waits in a spill on disk.
        var planned = try plannedCharges()
        let intents = chargeIntents()
        for slot in planned.indices {
            planned[slot].intent = intents[planned[slot].charge + "\u{0}" + planned[slot].currency]
        }
        // Charges the plan named with no facts, which apply looked up: counted as if known (a
        // re-apply finds their rows in the charges.csv the first apply wrote).
        var slotOfLookedUp: [String: Int] = [:]
        for row in report.lookedUpCharges {
            if let slot = planned.firstIndex(where: { $0.charge == row.charge }) {
                slotOfLookedUp[row.charge] = slot
            } else {
                slotOfLookedUp[row.charge] = planned.count
                planned.append(row)
            }
        }
        for charge in Set(report.chargeOfInstruction.values) where slotOfLookedUp[charge] == nil {
            if let slot = planned.firstIndex(where: { $0.charge == charge }) { slotOfLookedUp[charge] = slot }
        }
        /// The charges.csv row of a line the plan tied to no charge: its instruction's, if apply looked it up.
        func lookedUpSlot(_ row: [[UInt8]]) -> Int? {
            guard !slotOfLookedUp.isEmpty,
                let charge = report.chargeOfInstruction[text(row[F.instructionID.rawValue])]
            else { return nil }
            return slotOfLookedUp[charge]
        }
        var sumsOfRows: OutcomeSums
        do throws(LedgerError) {
            sumsOfRows = try OutcomeSums(manifest: manifest, charges: planned)
        } catch {
            throw SettleError(.internalError, "\(folder): cannot open a scratch table for the sums: \(error)")
        }
        var held = HeldLines(layout: layout, ledger: ledger, records: records, run: run, plannedAt: plannedAt)
        // Orders with a transfer or reversal Stripe refused since the plan, as the ledger
        // stands (this attempt's, an earlier attempt's, another run's): they stay stopped
        // until that refusal is put right (audit 25: a re-apply that did not send the refused
        // transfer again took the order for moving, and a later run paid its dated line).
        let refusedInLedger: [String: String] =
            ((try? ledger.refusedOrders(since: plannedAt ?? .distantPast)) ?? [:]).mapValues {
                "instruction \($0.instruction) failed at Stripe: \($0.reason)"
            }
        // Lines whose holding another run took up, or `settle cancel` dropped, after the plan
        // was made: not this folder's to hold again. What ended before the plan is the plan's
        // own input (a line fed again, re-submitted after a cancel): it is this plan's to hold
        // (audit 24: a fresh run's own deferred line was not held, and was lost). A folder that
        // does not say when it was planned holds. One query, not one per deferred row.
        // So is a line another run began holding since (``LedgerStore/holdsBegun(since:notBy:)``).
        let endedElsewhere: [String: HeldLineEnd] =
            plannedAt.flatMap { since in
                guard var ended = try? ledger.holdsEnded(since: since, notBy: run),
                    let begun = try? ledger.holdsBegun(since: since, notBy: run)
                else { return nil }
                ended.merge(begun) { _, begun in begun }
                return ended
            } ?? [:]
        // Earlier runs' open instructions found made by an apply that did not report them.
        let unreported = (try? ledger.unreportedOutcomes()) ?? []
        var reportedNow: Set<String> = []
        // The orders this run decided against (a line rejected by a rule or refused by Stripe;
        // not a payout Stripe refused or that came back, which stops no other line of its order),
        // for older folders applied after it (``LedgerStore/ordersDecided(since:notBy:)``).
        var decidedOrders: [String: (line: String, reason: String)] = [:]
        // Payouts that came back (learned by this apply, or earlier and not reported yet)
        // whose lines this plan lists as already settled: this run is the one that reports them.
        var cameBack: [String: HeldLine] = [:]
        if let lines = try? ledger.heldLines([.returned]) {
            for line in lines { cameBack[line.lineID] = line }
        }
        var counts: [LineStatus: Int] = [:]
        // Lines the apply did not send (they wait in the ledger): the run is to be tried again.
        var unsent = 0
        var corrections: [LineStatus: [CorrectionRow]] = [.rejected: [], .deferred: []]
        var reasons = ReportPage.ReasonGroups()
        var lastInstruction: (id: String, result: LineResult)?
        let results = try Self.reading { () throws(WriteFailure) in try OutputFile(path: path("results.csv")) }
        var rowCount = 0
        do {
            results.withBuffer { CSVField.header(ResultsFile.header, to: &$0) }
            _ = try Self.reading { () throws(WriteFailure) in try reader.next() }  // the header
            while var row = try Self.reading({ () throws(WriteFailure) in try reader.next() }) {
                rowCount += 1
                var holdAgain = true
                // A payout this folder's run made that came back since: still an object this run
                // created (summary.csv's paid_out), though its line is failed now.
                var madeAndBack = false
                // The row reports its payout's return (payouts_returned): its holding ends here.
                var reportsReturn = false
                /// This row reports its payout's return: counted in payouts_returned, and its
                /// holding ends here (``HeldLines/add(_:status:entry:adopted:reportsReturn:)``).
                /// `amount`: what came back, when it is not the row's (a later payout of the line
                /// re-exported with another amount).
                func reportReturn(_ row: [[UInt8]], amount returned: Int64? = nil) {
                    let amount = returned ?? Int64(text(row[F.amountMinor.rawValue])) ?? 0
                    sumsOfRows.sums.addReturned(currency: text(row[F.currency.rawValue]), amount: amount)
                    reportsReturn = true
                }
                guard let entry = try Self.reading({ () throws(WriteFailure) in try index.next() }) else {
                    throw SettleError(
                        .internalError, "\(folder): results.csv has more rows than its line index (\(rowCount - 1))")
                }
                if row.count == ResultsFile.header.count {
                    let status = text(row[F.status.rawValue])
                    if status == LineStatus.planned.name {
                        let instruction = text(row[F.instructionID.rawValue])
                        var result: LineResult
                        if let last = lastInstruction, last.id == instruction {
                            result = last.result
                        } else {
                            result = report.lineResult(instruction) ?? report.unreached
                            lastInstruction = (instruction, result)
                        }
                        if let own = splitResult(&row, of: instruction) { result = own }
                        ownObject(&row, &result)
                        if result.status == .failed, let back = killedRunsPayoutBack(row, instruction) {
                            // This folder's run sent the payout and was killed before its files;
                            // Stripe made it and it came back: made here (paid_out) unless the
                            // run that took this one over reported it, and its return reported
                            // here when this apply learned it or the ledger holds the line to
                            // report it (audit 58 F2: the payout, or its return, was counted by
                            // no day).
                            madeAndBack = back.countsMade
                            result.stripeID = back.object
                            if back.reportsReturn { reportReturn(row) }
                        }
                        if result.status == .planned {
                            // Never sent (the run stopped, the key was refused, every try was
                            // rate-limited or could not connect): it waits in the ledger
                            // (deferred), and the next run sends it (or a re-apply of this folder
                            // does; the ledger's line claims keep it once). Not one `settle
                            // cancel` dropped since the plan, or another run took up: it does not
                            // wait (it is not held again, below; audit 50: its row said it did).
                            result = unsentResult(
                                result,
                                waits: endedElsewhere[text(row[F.lineID.rawValue]).trimmingFormulaGuard()] == nil)
                        }
                        set(
                            &row, result.status, stripeID: result.stripeID, code: result.reasonCode,
                            reason: result.reason)
                    } else if status == LineStatus.failed.name || status == LineStatus.rejected.name
                        || status == LineStatus.deferred.name || status == LineStatus.settled.name,
                        !row[F.instructionID.rawValue].isEmpty,
                        var result = report.lineResult(text(row[F.instructionID.rawValue])),
                        status != LineStatus.settled.name || result.status == .failed
                    {
                        if let own = splitResult(&row, of: text(row[F.instructionID.rawValue])) { result = own }
                        ownObject(&row, &result)
                        // A re-apply of this folder sent again what Stripe refused in an earlier
                        // attempt (under the next attempt's key), or what an earlier attempt
                        // did not send (its order's payout after a refused transfer, its order
                        // on a fact Stripe refused or held back), or a payout it made that came
                        // back since (settled before, failed now): its outcome now is this one.
                        // (The plan's own rejected and deferred lines have no instruction.)
                        if result.status == .planned {
                            // Not sent this time either: it waits, as in the first attempt; unless
                            // settle cancel dropped it since the plan (it is not held again).
                            result = unsentResult(
                                result,
                                waits: endedElsewhere[text(row[F.lineID.rawValue]).trimmingFormulaGuard()] == nil)
                        }
                        if result.status == .failed || result.status == .rejected, let line = paidSince(row) {
                            result = LineResult(
                                status: .settled, stripeID: line.stripeID ?? "", reasonCode: "", reason: "")
                            row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                        }
                        if result.status == .alreadySettled, status == LineStatus.failed.name,
                            text(row[F.kind.rawValue]) == LineKind.payout.name,
                            case let made = text(row[F.stripeID.rawValue]).trimmingFormulaGuard(), !made.isEmpty,
                            !result.stripeID.isEmpty, made != result.stripeID
                        {
                            // The payout this run made came back (an earlier attempt of this folder
                            // said so, and names it), and a later run paid the line again: still
                            // counted as made here (audit 29 G1: it was dropped from paid_out).
                            madeAndBack = true
                            result.reason = "the payout \(made)\(Self.cameBackPaidAgain)"
                        }
                        if result.status == .failed,
                            status == LineStatus.settled.name || status == LineStatus.failed.name,
                            let (made, sentAgain) = madeHereAndBack(row)
                        {
                            var later = sentAgain
                            // Counted as made, as the first apply counted it (at every re-apply:
                            // audit 28 F3, the second one dropped it); its return is counted by
                            // the run that reports it: this one when it is the first to (audit 24
                            // N4: the re-apply dropped it from paid_out after another run had
                            // counted the return, and the days' net was off by it).
                            madeAndBack = true
                            let lineID = text(row[F.lineID.rawValue]).trimmingFormulaGuard()
                            result.stripeID = made
                            if let back = cameBack[lineID] {
                                // The return this row reports may be of a later run's payout of
                                // the line (another instruction: its aggregated payout, or the
                                // line re-exported with another amount), not of the one this run
                                // made: the row says so, and counts what came back (audit 30 W1:
                                // it named only this run's payout; audit 31 W4: it counted the
                                // return at this row's amount).
                                if !later, let line = try? ledger.line(lineID),
                                    line.instructionID != text(row[F.instructionID.rawValue]),
                                    let paid = line.stripeID, !paid.isEmpty, paid != made
                                {
                                    reportReturn(row, amount: back.amountMinor)
                                    result.reasonCode = back.reasonCode
                                    result.reason = back.reason
                                    later = true
                                } else {
                                    reportReturn(row)
                                }
                            }
                            if later {
                                result.reason =
                                    "the payout \(made) came back; the line was sent again, and that failed too: "
                                    + result.reason
                            }
                            if let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                                line.status == .settled, let paid = line.stripeID, !paid.isEmpty, paid != made
                            {
                                // A later run paid the line again, alone (an aggregated payout's
                                // line fed back): settled by that payout (audit 29 F6b).
                                result = LineResult(
                                    status: .alreadySettled, stripeID: paid, reasonCode: "",
                                    reason: "the payout \(made)\(Self.cameBackPaidAgain)")
                            }
                        }
                        set(
                            &row, result.status, stripeID: result.stripeID, code: result.reasonCode,
                            reason: result.reason)
                    } else if status == LineStatus.failed.name, let line = paidSince(row) {
                        set(&row, .settled, stripeID: line.stripeID ?? "")
                        row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                    } else if status == LineStatus.settled.name, !row[F.instructionID.rawValue].isEmpty,
                        let result = report.lineResult(text(row[F.instructionID.rawValue])),
                        result.status == .alreadySettled || result.status == .settled, !result.stripeID.isEmpty,
                        case let made = text(row[F.stripeID.rawValue]).trimmingFormulaGuard(), !made.isEmpty,
                        made != result.stripeID, text(row[F.kind.rawValue]) == LineKind.payout.name
                    {
                        // The payout this folder's run made came back, and a later run paid the line
                        // again: it is settled by that payout, and the one this run made still
                        // counts as made (audit 24 N2: the row kept the payout that came back).
                        // `settled` when this apply is the first to learn that later payout (the
                        // later run's send was left unknown): this folder reports it, and counts
                        // it (audit 29 G3: no folder named it).
                        madeAndBack = true
                        set(
                            &row, result.status == .settled ? .settled : .alreadySettled, stripeID: result.stripeID,
                            reason: "the payout \(made)\(Self.cameBackPaidAgain)")
                    } else if status == LineStatus.settled.name || status == LineStatus.failed.name,
                        text(row[F.kind.rawValue]) == LineKind.payout.name,
                        case let instruction = text(row[F.instructionID.rawValue]), !instruction.isEmpty,
                        report.lineResult(instruction) == nil,
                        case let made = text(row[F.stripeID.rawValue]).trimmingFormulaGuard(), !made.isEmpty,
                        let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                        line.status == .settled, let paid = line.stripeID, !paid.isEmpty, paid != made
                    {
                        // As above, for a payout this apply does not list (the part of an
                        // aggregated payout an earlier attempt split off and sent): another
                        // payout holds the line (another instruction's, or a later attempt of
                        // this one, the line fed back alone), so this run's came back (audit 29
                        // F6: the row kept the payout that came back); also once an earlier
                        // attempt of this folder said `failed` (audit 31 G1b: the row stayed
                        // failed, and the folder dropped its payout from paid_out). Before the
                        // case below, which is for a line no payout holds now (audit 31 W3: a
                        // line paid again said `failed` with the return another run reported).
                        madeAndBack = true
                        set(
                            &row, .alreadySettled, stripeID: paid, reason: "the payout \(made)\(Self.cameBackPaidAgain)"
                        )
                    } else if status == LineStatus.settled.name || status == LineStatus.failed.name,
                        text(row[F.kind.rawValue]) == LineKind.payout.name,
                        case let instruction = text(row[F.instructionID.rawValue]), !instruction.isEmpty,
                        report.lineResult(instruction) == nil, let (made, _) = madeHereAndBack(row),
                        made == text(row[F.stripeID.rawValue]).trimmingFormulaGuard()
                    {
                        // A payout this folder reported settled (an earlier run's unknown, which this
                        // run's apply resolved or sent again), not in this folder's plan, that came
                        // back since: this folder's run made it (still counted), and it is the one
                        // to report the return when no run has yet (audit 30 H1: the row stayed
                        // settled, the line was followed again, and no run reported the return).
                        madeAndBack = true
                        let line = text(row[F.lineID.rawValue]).trimmingFormulaGuard()
                        if status == LineStatus.failed.name {
                            // Reported by an earlier attempt of this folder (its return counted
                            // there, and kept in the manifest's sums): still made here.
                        } else if let back = cameBack[line] {
                            set(&row, .failed, stripeID: made, code: back.reasonCode, reason: back.reason)
                            reportReturn(row)
                        } else {
                            let failed = try? ledger.instruction(instruction)
                            set(
                                &row, .failed, stripeID: made, code: failed?.errorCode ?? "",
                                reason: failed?.errorMessage ?? "the payout \(made) came back at Stripe")
                        }
                    } else if status == LineStatus.alreadySettled.name || status == LineStatus.settled.name,
                        text(row[F.kind.rawValue]) == LineKind.payout.name,
                        text(row[F.reason.rawValue]).hasSuffix(Self.cameBackPaidAgain)
                    {
                        // As the last attempt said (above): still counted as made (audit 28 F3).
                        madeAndBack = true
                    } else if status == LineStatus.deferred.name,
                        case let instruction = text(row[F.instructionID.rawValue]), !instruction.isEmpty,
                        report.lineResult(instruction) == nil,
                        let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                        line.status == .settled, line.instructionID != instruction,
                        let result = report.lineResult(line.instructionID), result.status == .settled
                    {
                        // The part of an aggregated payout an earlier attempt split off and never
                        // sent (stopped, or rate-limited on every try): this apply sent the payout
                        // whole, this line with it, and counts it (audit 32 N10: the row stayed
                        // deferred, and the folder counted the payout at its other lines' amount).
                        set(&row, .settled, stripeID: result.stripeID.isEmpty ? line.stripeID ?? "" : result.stripeID)
                        row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                    } else if status == LineStatus.deferred.name, row[F.instructionID.rawValue].isEmpty,
                        let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                        line.status == .settled || (line.status == .failed && refusedSincePlan(line))
                    {
                        // A line this plan deferred that a later run settled or sent and saw
                        // refused: not waiting any more (not held again, nor in deferred.csv).
                        // One released unsent by a stopped run still waits, and so does one
                        // refused before the plan (the plan's own input, exported again: audit
                        // 26 B9, it was reported refused and its order's payout waited alone).
                        if line.status == .settled {
                            set(&row, .alreadySettled, stripeID: line.stripeID ?? "", reason: "settled by a later run")
                            row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                        } else if case let (code, message) = refusal(line), code != LedgerOutcome.notSentCode {
                            set(&row, .failed, code: code, reason: "sent by a later run and refused: " + message)
                            row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                        }
                    } else if status == LineStatus.failed.name, row[F.instructionID.rawValue].isEmpty,
                        text(row[F.kind.rawValue]) == LineKind.payout.name,
                        case let reason = text(row[F.reason.rawValue]), !reason.hasSuffix(Self.returnCountedElsewhere),
                        let reporter = returnReportedElsewhere(row, reason: reason)
                    {
                        // A payout's return this plan reported (the ledger held the line
                        // `returned`), which a later run reported too, ending the holding, before
                        // this apply: that run counts it, this folder no longer does (audit 67 F4:
                        // both counted it). Still `failed` here, its reason saying where it is
                        // counted; once, as a re-apply finds the reason already said.
                        sumsOfRows.sums.removeReturned(
                            currency: text(row[F.currency.rawValue]),
                            amount: Int64(text(row[F.amountMinor.rawValue])) ?? 0)
                        set(
                            &row, .failed, code: text(row[F.reasonCode.rawValue]).trimmingFormulaGuard(),
                            reason: reason + "; run \(reporter) reported it" + Self.returnCountedElsewhere)
                    } else if status == LineStatus.deferred.name,
                        row[F.instructionID.rawValue].isEmpty
                            || report.lineResult(text(row[F.instructionID.rawValue])) == nil,
                        let end = endedElsewhere[text(row[F.lineID.rawValue]).trimmingFormulaGuard()]
                    {
                        // (A row with an instruction this apply does not list: the part of an
                        // aggregated payout an earlier attempt split off and did not send.)
                        // Dropped by `settle cancel`, or taken up by a later run (settled,
                        // rejected, reported) since this plan: it does not wait again (audit 22,
                        // 23: a re-apply held it again, and a later run paid a cancelled line or
                        // one a later run had rejected charge_failed).
                        holdAgain = false
                        set(
                            &row, .deferred, code: text(row[F.reasonCode.rawValue]).trimmingFormulaGuard(),
                            reason: end.state == .cancelled
                                ? Self.droppedByCancel
                                : end.endedRun == LedgerStore.rebuildRun
                                    ? Self.droppedByRebuild(line: text(row[F.lineID.rawValue]).trimmingFormulaGuard())
                                    : end.state == .released
                                        ? "run \(end.endedRun ?? "") took it up after this plan: it does not wait in the ledger any more"
                                        : "run \(end.endedRun ?? "") took it up after this plan: the ledger holds it for that run, "
                                            + "whose row counts"
                        )
                    } else if status == LineStatus.alreadySettled.name, !cameBack.isEmpty,
                        let back = cameBack[text(row[F.lineID.rawValue]).trimmingFormulaGuard()]
                    {
                        // Its payout came back: failed here, with Stripe's reason, for errors.csv
                        // (left as it was, the ledger released it and no run reported it: audit 18 F2).
                        set(&row, .failed, code: back.reasonCode, reason: back.reason)
                        reportReturn(row)
                    } else if status == LineStatus.alreadySettled.name, !unreported.isEmpty,
                        let line = try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                        line.status == .settled, unreported.contains(line.instructionID)
                    {
                        // Sent by an earlier run that never learned the outcome, found made by an
                        // apply of another plan that had no row of it: this folder is the first to
                        // report it, and counts it as moved (audit 24 N8: no day counted it).
                        set(&row, .settled, stripeID: line.stripeID ?? "")
                        row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                    } else if status == LineStatus.deferred.name || status == LineStatus.netted.name,
                        row[F.instructionID.rawValue].isEmpty,
                        !report.refusedOrders.isEmpty || !refusedInLedger.isEmpty,
                        case let group = text(row[F.group.rawValue]).trimmingFormulaGuard(),
                        let refusal = report.refusedOrders[group] ?? refusedInLedger[group],
                        status == LineStatus.deferred.name || report.stoppedBeforeSending.contains(group)
                    {
                        // Its order was stopped for good at apply: it does not move later alone
                        // (deferred); stopped before anything was sent, its netted lines were
                        // not recorded as settled either (after a send, what netted stays so).
                        let before = StoppedOrder.Before(
                            status: status, code: text(row[F.reasonCode.rawValue]).trimmingFormulaGuard(),
                            reason: text(row[F.reason.rawValue]).trimmingFormulaGuard())
                        set(
                            &row, .rejected, code: ReasonCode.groupRejected.code,
                            reason: StoppedOrder.reason(refusal, before: before))
                    } else if status == LineStatus.rejected.name, row[F.instructionID.rawValue].isEmpty,
                        case let group = text(row[F.group.rawValue]).trimmingFormulaGuard(),
                        report.refusedOrders[group] == nil, refusedInLedger[group] == nil,
                        let before = StoppedOrder.before(text(row[F.reason.rawValue]).trimmingFormulaGuard()),
                        let restored = LineStatus(name: before.status),
                        case let id = text(row[F.lineID.rawValue]).trimmingFormulaGuard(),
                        // Unknown to the ledger, or netted as the plan said (this apply records
                        // the netted lines of an order it no longer stops before this rewrite).
                        (try? ledger.line(id)).map({ $0.instructionID.isEmpty && before.status == "netted" }) ?? true,
                        endedElsewhere[id] == nil
                    {
                        // An earlier attempt stopped its order, and this one (a re-apply) did not:
                        // the order moves again, and this line is what the plan said it was
                        // (unless a later run took it up meanwhile, or settle cancel dropped it:
                        // then it stays as the stop left it, audit 22).
                        set(&row, restored, code: before.code, reason: before.reason)
                    } else if status == LineStatus.unknown.name,
                        case let instruction = text(row[F.instructionID.rawValue]), !instruction.isEmpty,
                        (try? ledger.line(text(row[F.lineID.rawValue]).trimmingFormulaGuard())) == .some(nil),
                        let own = splitResult(&row, of: instruction),
                        own.status != .settled, own.status != .alreadySettled
                    {
                        // Left unknown by an earlier attempt of this folder on a ledger that has
                        // lost it (rebuilt: the payout was never made), and split now: this line
                        // did not go, for its order's reason. Left `unknown`, it was held again,
                        // and the next run paid it for an order a newer run had rejected
                        // (audit 38 Q8).
                        set(&row, own.status, stripeID: own.stripeID, code: own.reasonCode, reason: own.reason)
                    } else if status == LineStatus.unknown.name {
                        // Sent by an earlier run: the engine resolved it first; the ledger has the answer.
                        let lineID = text(row[F.lineID.rawValue]).trimmingFormulaGuard()
                        if let line = try? ledger.line(lineID) {
                            switch line.status {
                            case .settled
                            where report.resolved.contains(line.instructionID)
                                || unreported.contains(line.instructionID)
                                || report.lineResult(line.instructionID)?.status == .settled:
                                // Sent by an earlier run that stopped; this run confirmed or re-sent it
                                // (or sent it again, under the next attempt's key, after another run
                                // learned the first was refused: audit 26 B5): it counts as moved by
                                // this run, under its instruction, so the days' summaries add up to
                                // what Stripe made.
                                set(&row, .settled, stripeID: line.stripeID ?? "")
                                row[F.instructionID.rawValue] = Array(line.instructionID.utf8)
                            case .settled:
                                set(
                                    &row, .alreadySettled, stripeID: line.stripeID ?? "",
                                    reason: "settled by an earlier run")
                            case .failed:
                                let group = text(row[F.group.rawValue]).trimmingFormulaGuard()
                                if let end = endedElsewhere[lineID], end.state == .cancelled {
                                    // Never made, and `settle cancel` dropped it since this plan
                                    // (it waited for another order's reason): not this folder's to
                                    // report failed, nor to list in errors.csv to be fed back
                                    // (audit 38 Q10: fed back, the cancelled line was paid).
                                    set(
                                        &row, .deferred, code: ReasonCode.scheduled.code,
                                        reason: Self.droppedByCancel)
                                } else if let stopped = report.waitingAfterStop[line.instructionID],
                                    !stopped.contains(group)
                                {
                                    // Never made, and not sent for another order it paid: this
                                    // line's own order may move, so it waits for the next run.
                                    set(
                                        &row, .deferred, code: ReasonCode.scheduled.code,
                                        reason: "not sent: its payout \(line.instructionID) was never made at Stripe, "
                                            + "and it also paid \(stopped.sorted().joined(separator: ", ")), which may "
                                            + "not move now; it waits in the ledger for the next run")
                                } else {
                                    let (code, message) = refusal(line)
                                    let made = sentHereAndBack(line, row)
                                    madeAndBack = made != nil
                                    set(&row, .failed, stripeID: made ?? "", code: code, reason: message)
                                }
                            case .inFlight, .unknown:
                                set(&row, .unknown, reason: "sent by an earlier run; the outcome is still not known")
                            }
                        }
                    }
                    // A row this apply turned `failed` for the return of a payout that the ledger
                    // holds the line to report (the run or apply that learned the return held it
                    // `returned`): this folder reports it, counted in its payouts_returned, and the
                    // holding ends here, so that no later run reports it again and a fix fed back
                    // is planned, not taken for the return once more (audit 50 N3, N5: a killed
                    // folder's re-apply reported it, and so did the next run). A row already
                    // `failed` was reported when it was written.
                    if !reportsReturn, status != LineStatus.failed.name, !cameBack.isEmpty,
                        row[F.status.rawValue].elementsEqual(LineStatus.failed.name.utf8),
                        let back = cameBack[text(row[F.lineID.rawValue]).trimmingFormulaGuard()],
                        back.reasonCode == text(row[F.reasonCode.rawValue]).trimmingFormulaGuard()
                    {
                        reportReturn(row)
                    }
                }
                ResultsReader.append(row, to: results)
                guard row.count == ResultsFile.header.count else { continue }
                let status = LineStatus(name: text(row[F.status.rawValue]))
                if status == .settled, !unreported.isEmpty,
                    case let instruction = text(row[F.instructionID.rawValue]), unreported.contains(instruction)
                {
                    reportedNow.insert(instruction)
                }
                // Whatever made it deferred, a line cancelled or taken up by another run since the
                // plan was made is not held again (audit 24 N7: one its apply held back).
                if holdAgain, status == .deferred,
                    endedElsewhere[text(row[F.lineID.rawValue]).trimmingFormulaGuard()] != nil
                {
                    holdAgain = false
                }
                if holdAgain { try held.add(row, status: status, entry: entry, reportsReturn: reportsReturn) }
                guard let status else { continue }
                // Counted as made only where it was reported made: not when another run's files
                // reported it (audit 69 F9: a re-apply, the line paid again since, counted the
                // payout the run taking this one over had counted).
                if madeAndBack,
                    let reporter = reporterOfMade(madeObject(row), text(row[F.lineID.rawValue]).trimmingFormulaGuard()),
                    reporter != run
                {
                    madeAndBack = false
                }
                do throws(LedgerError) {
                    try sumsOfRows.add(
                        row, status: status, charge: entry.charge ?? lookedUpSlot(row), madeAndBack: madeAndBack)
                } catch {
                    throw SettleError(.internalError, "\(folder): the scratch table for the sums failed: \(error)")
                }
                counts[status, default: 0] += 1
                let target: LineStatus? =
                    status == .rejected || status == .failed ? .rejected : status == .deferred ? .deferred : nil
                if let target {
                    func cell(_ field: F) -> String { text(row[field.rawValue]).trimmingFormulaGuard() }
                    Self.noteDecision(of: row, in: &decidedOrders)
                    corrections[target]!.append(
                        CorrectionRow(
                            file: entry.file, spoolOffset: entry.offset, spoolLength: entry.length,
                            reasonCode: cell(.reasonCode), reason: cell(.reason), source: cell(.source)))
                    if target == .rejected {
                        reasons.add(
                            status: status, code: cell(.reasonCode), currency: cell(.currency),
                            amountMinor: Int64(cell(.amountMinor)) ?? 0, lineID: cell(.lineID),
                            source: cell(.source), reason: cell(.reason))
                    }
                }
            }
            if try Self.reading({ () throws(WriteFailure) in try index.next() }) != nil {
                throw SettleError(
                    .internalError, "\(folder): the line index has more entries than results.csv's \(rowCount) rows")
            }
        }
        held.write()
        // Every answer the rows were decided on was the ledger's, and the ledger holds what waits.
        if let failure = held.failure?.message ?? ledger.failure(since: ledgerMark).map({ "\($0)" }) {
            throw Self.ledgerStopped(failure, folder: folder)
        }
        // Sums, conservation, files (the charges counted by this run go into the ledger: what
        // a later run counts and retains is read from them, so a failure stops the run too).
        let finished: (sums: ControlSums, charges: [ChargeRow], ledgerFailure: LedgerError?)
        do throws(LedgerError) {
            finished = try sumsOfRows.finish(ledger: ledger, reportedHere: reportedNow)
        } catch {
            throw SettleError(.internalError, "\(folder): the scratch table for the sums failed: \(error)")
        }
        if let failure = finished.ledgerFailure {
            throw Self.ledgerStopped("counting the charges: \(failure)", folder: folder)
        }
        let (sums, charges) = (finished.sums, finished.charges)
        guard sums.conserved() else {
            throw SettleError(
                .internalError, "conservation check failed after apply: amounts by status do not add up")
        }
        var exit = ExitCode.forLines(
            counts: counts,
            fileRejected: manifest["inputs"]?.arrayValue?.contains(where: { $0["status"]?.stringValue == "rejected" })
                == true,
            applied: true)
        // The files say what the process exits with, on every path.
        if report.interrupted != nil || unsent > 0 || report.unfollowedPayouts > 0 {
            exit = exit.combined(with: .tryAgain)
        }
        if report.keyRefused != nil { exit = .configuration }
        var outputs: [(String, JSON)] = []
        if case .object(let pairs)? = manifest["outputs"] { outputs = pairs }
        func record(_ name: String, _ written: (sha256: String, rows: Int)) {
            let value = JSON.object([("sha256", .string(written.sha256)), ("rows", .int(Int64(written.rows)))])
            if let slot = outputs.firstIndex(where: { $0.0 == name }) {
                outputs[slot].1 = value
            } else {
                outputs.append((name, value))
            }
        }
        // The orders this run decided against, before the files say the run is over: an older
        // folder applied after this one moves nothing of them. Not recorded, the run is not
        // over: the next run takes it over, or an apply of the folder records them from its rows.
        if let plannedAt {
            do throws(LedgerError) {
                try ledger.recordDecidedOrders(decidedOrders, run: run, at: plannedAt)
            } catch {
                throw Self.ledgerStopped("recording the orders this run decided against: \(error)", folder: folder)
            }
        }
        // The charges Stripe said failed, at the plan's look-ups, this apply's, or refusing a
        // transfer `charge_failed`: a later run rejects every line on them, whatever its export
        // says (audit 38 Q5). What the applies learned goes into the manifest too, for `ledger
        // rebuild` (an offline plan's facts say nothing of them).
        // A charge this apply's look-ups found succeeded or pending was put right since: what
        // the plan or an earlier apply said of it no longer holds, and the ledger forgets it.
        let putRight = Set(
            report.checkedCharges.compactMap { fact in
                switch fact.verdict {
                case .usable, .pending: fact.charge
                default: nil
                }
            })
        var learned = Self.learnedAtApply(manifest: manifest, run: run).filter { !putRight.contains($0.charge) }
        do throws(LedgerError) {
            for charge in report.checkedCharges.compactMap({ FailedCharge($0, run: run) })
                + report.refusedCharges.map({ FailedCharge(charge: $0, run: run, checkedAt: "", requestID: "") })
            where !learned.contains(where: { $0.charge == charge.charge }) {
                learned.append(charge)
            }
            let failed =
                Self.failedCharges(manifest: manifest, run: run).filter { !putRight.contains($0.charge) } + learned
            try ledger.recordFailedCharges(failed)
            try ledger.forgetFailedCharges(
                putRight.union(lookedUpNotFailed).subtracting(failed.map(\.charge)).sorted())
        } catch {
            // Not recorded, a later offline plan would take the charge for good: the run is not over.
            throw Self.ledgerStopped("recording the charges Stripe said failed: \(error)", folder: folder)
        }
        // A re-apply keeps the earlier attempt's outcome files beside the new ones.
        let attempt = nextAttempt
        if attempt > 1 {
            for name in OutputFolder.outcomeFiles where FileManager.default.fileExists(atPath: path(name)) {
                let kept = path("\(name).\(attempt - 1)")
                unlink(kept)
                guard link(path(name), kept) == 0 else {
                    throw SettleError(
                        .folderUnwritable, "cannot keep \(path(name)) as \(kept): \(String(cString: strerror(errno)))")
                }
            }
        }
        // The rewritten files go into place together (a journal covers their renames): a stop
        // among them leaves the folder for the next lock to finish, never half old, half new.
        let files = FileSet(folder: folder)
        do {
            record("results.csv", (try results.commit(into: files), results.rows))
            try records.prefetch(
                (corrections[.rejected]! + corrections[.deferred]!).lazy.map {
                    (file: $0.file, offset: $0.spoolOffset, length: $0.spoolLength)
                })
            record(
                "errors.csv",
                try CorrectionFile.write(
                    path: path("errors.csv"), layout: layout,
                    rows: corrections[.rejected]!, records: records, into: files))
            record(
                "deferred.csv",
                try CorrectionFile.write(
                    path: path("deferred.csv"), layout: layout,
                    rows: corrections[.deferred]!, records: records, into: files))
            record("summary.csv", try sums.write(path: path("summary.csv"), into: files))
            let chargesFiles = try ChargesFile.write(
                path: path("charges.csv"), countedPath: path(ChargesFile.countedName), runID: sums.runID,
                rows: charges, into: files)
            record("charges.csv", chargesFiles.charges)
            record(ChargesFile.countedName, chargesFiles.counted)
            // report.html from the same sums, with this apply's outcome.
            record(
                "report.html",
                try ReportPage.write(
                    path: path("report.html"), facts: reportFacts(exit),
                    sums: sums, counts: counts, reasons: reasons, into: files))
            var updated: [(String, JSON)] = []
            if case .object(let pairs) = manifest { updated = pairs }
            func put(_ key: String, _ value: JSON) {
                if let slot = updated.firstIndex(where: { $0.0 == key }) {
                    updated[slot].1 = value
                } else {
                    updated.append((key, value))
                }
            }
            put("mode", .string(report.mode))
            put("outputs", .object(outputs))
            put("counts", .object(LineStatus.allCases.map { ($0.name, .int(Int64(counts[$0] ?? 0))) }))
            put("control_sums", sums.json())
            let appliedFacts: JSON = report.lookedUpFacts?.manifestJSON(online: false) ?? .null
            put(
                "apply",
                .object([
                    ("attempt", .int(Int64(attempt))),
                    ("applied_at", .string(report.appliedAt)),
                    ("api_base", .string(report.apiBase)),
                    // What paid the payouts of a plan made without one (audit 35 C15: the
                    // manifest said only the plan's null).
                    ("financial_account", report.financialAccount.map(JSON.string) ?? .null),
                    ("requests", .int(Int64(report.requests))), ("retries", .int(Int64(report.retries))),
                    ("rate_limited", .int(Int64(report.rateLimited))),
                    ("server_errors", .int(Int64(report.serverErrors))),
                    ("transport_errors", .int(Int64(report.transportErrors))),
                    ("resolved_from_earlier_runs", .int(Int64(report.resolved.count))),
                    ("answers_not_from_stripe", .int(Int64(report.notStripeAnswers))),
                    ("key_refused", report.keyRefused.map(JSON.string) ?? .null),
                    ("failed_charges", Self.json(learned)),
                    ("charges_put_right", .array(putRight.sorted().map(JSON.string))),
                    // What an offline plan's apply looked up before sending (audit 47 S2: the
                    // manifest did not say what the money moved on); null when it looked up
                    // nothing (a plan made online carries its own `facts`).
                    ("facts", appliedFacts),
                ]))
            if attempt > 1, let run = manifest["run_id"]?.stringValue {
                put(
                    "continues",
                    .string("\(run) apply attempt \(attempt - 1) (its files: results.csv.\(attempt - 1), …)"))
            }
            put("exit_status", .int(Int64(exit.rawValue)))
            try Manifest.write(.object(updated), folder: folder, into: files)
            try files.publish(between: { CrashPoint.reach("publishing") })
        } catch {
            throw SettleError(.folderUnwritable, "cannot write \(error.path): \(error.message)")
        }
        let countsText = JSON.object(LineStatus.allCases.map { ($0.name, .int(Int64(counts[$0] ?? 0))) }).encoded()
        var rewritten = Rewritten(exit: exit, counts: counts, sums: sums)
        do throws(LedgerError) {
            // Reported now, in this folder's files: no later folder reports them again. (After
            // the files: a crash between the two may have a later folder report one again, in
            // its sums; before them, no folder would.)
            try ledger.markReported(reportedNow)
        } catch {
            rewritten.notesProblem = "outcomes this run reported (a later folder may report one again): \(error)"
        }
        do {
            var record = applyRecord(mode: report.mode, startedAt: report.startedAt)
            record.endedAt = Date()
            record.exitStatus = Int(exit.rawValue)
            record.counts = countsText
            try ledger.recordRun(record)
        } catch {
            // The outcomes are in the ledger and the folder: only `settle status` misses the run.
            rewritten.runRecordProblem = "\(error)"
        }
        return rewritten
    }
}

extension String {
    /// Drops the apostrophe the formula guard put before a cell (``CSVScanner/unguarded(_:)``).
    func trimmingFormulaGuard() -> String {
        guard hasPrefix("'") else { return self }
        var text = self
        return text.withUTF8 { String(decoding: CSVScanner.unguarded(UnsafeRawBufferPointer($0)), as: UTF8.self) }
    }
}

/// The reason of a line an order stop at apply rejected (deferred or netted in the plan),
/// with what the plan said of it, so that a re-apply that no longer stops the order gives
/// it back (the rewrite reads only the last results.csv).
enum StoppedOrder {
    struct Before: Equatable {
        var status: String
        var code: String
        var reason: String
    }

    static let prefix = "its order moves whole or not at all, and Stripe refused part of it: "
    static let marker = "; planned as "

    static func reason(_ refusal: String, before: Before) -> String {
        prefix + refusal + marker + before.status + "/" + before.code + ": " + before.reason
    }

    /// What the plan said of a line ``reason(_:before:)`` wrote; nil for any other reason.
    static func before(_ reason: String) -> Before? {
        guard reason.hasPrefix(prefix), let mark = reason.range(of: marker, options: .backwards) else { return nil }
        let rest = reason[mark.upperBound...]
        guard let colon = rest.range(of: ": "), let slash = rest[..<colon.lowerBound].firstIndex(of: "/") else {
            return nil
        }
        return Before(
            status: String(rest[..<slash]), code: String(rest[rest.index(after: slash)..<colon.lowerBound]),
            reason: String(rest[colon.upperBound...]))
    }
}
