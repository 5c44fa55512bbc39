import Foundation
import SettleApply
import SettleCore
import SettleDigest
import SettleLedger
import SettlePlanFolder
import SettleRead
import SettleWrite

/// Writes the plan folder (README, "Output folder"; docs/PLAN-FORMAT.md) and checks conservation before the run exits.
struct PlanOutputs {
    let folder: String
    let options: Options

    struct Written {
        var files: [(String, String, Int)] = []  // name, sha256, rows
        var exit: ExitCode = .ok
        var counts: [LineStatus: Int] = [:]
        var instructions = 0
        /// What the plan knows of the ledger dates from (its snapshot began), to the
        /// millisecond (`planned_at_ms`): a payout sent after it was "made after this plan".
        var plannedAt: Date
        /// The run's id (manifest, ledger, summary.csv, charges.csv, report.html).
        var runID = RunID.make()

        init(plannedAt: Date = Date()) { self.plannedAt = plannedAt }
    }

    /// - Parameters:
    ///   - ledger: the ledger the plan read (its path, recorded in the manifest, and the store,
    ///     inside the plan's snapshot), or nil when it had none.
    ///   - facts: what Stripe said before planning (`run`, `plan --online`), sealed in the
    ///     manifest so the plan can be reviewed; nil for a plan made offline.
    ///   - runID: the run's id when it has one already (`run` records itself in the ledger
    ///     before it plans); else a new one.
    func write(
        _ plan: SettlementPlan, inputs: [InputReport], mode: String, log: Log,
        ledger: (path: String, store: LedgerStore)?,
        facts: LookedUpFacts?, plannedAt: Date = Date(), runID: String? = nil
    ) throws(CommandFailure) -> Written {
        let started = Date()
        let progress = Progress(options.progressMode, log: log)
        defer {
            progress.finish()
            log(
                .debug, event: "plan_folder_written", "wrote the plan folder in \(Pipeline.elapsed(since: started))",
                fields: [.durationMS(Pipeline.milliseconds(since: started))])
        }
        let batch = plan.batch
        var written = Written(plannedAt: plannedAt)
        if let runID { written.runID = runID }
        written.instructions = plan.instructions.count
        for line in batch.lines { written.counts[line.status, default: 0] += 1 }
        written.exit = PlanOutputs.exitCode(counts: written.counts, inputs: inputs)
        // The second core writes instructions.jsonl (the largest file), then errors.csv and
        // deferred.csv, from here on (the plan is only read from now), while this thread sums
        // the charges and writes results.csv and the rest: about equal shares at full size.
        let instructionsPath = path("instructions.jsonl")
        let layout = CorrectionLayout(files: batch.files)
        let spoolFiles = Dictionary(inputs.enumerated().compactMap { i, input in input.spool.map { (i, $0) } }) {
            a, _ in a
        }
        let folder = self.folder
        let corrections = (errors: path("errors.csv"), deferred: path("deferred.csv"))
        // Every file goes into place together, the manifest and its seal last (``FileSet``): a
        // plan stopped while writing leaves no folder that looks planned with files missing
        // (audit 32 N1: killed between manifest.json and its seal, apply said the manifest
        // "changed since settle wrote it").
        let files = FileSet(folder: folder)
        let secondCore = BackgroundJob { () throws(WriteFailure) in
            let instructions = try InstructionsFile.write(path: instructionsPath, plan: plan, into: files)
            // errors.csv and deferred.csv side by side, in input order: one forward pass over
            // each gzip spool reads their records, and none is kept in memory.
            let records = SpoolRecords(folder: folder, files: spoolFiles)
            let errors = try CorrectionFile.Writer(path: corrections.errors, layout: layout)
            let deferred = try CorrectionFile.Writer(path: corrections.deferred, layout: layout)
            // A plan's failed lines are those the ledger reports (a payout that came back, a
            // refusal another folder's apply learned): errors.csv holds them with the rejected.
            for line in batch.lines where line.status == .rejected || line.status == .failed || line.status == .deferred
            {
                let row = CorrectionRow(
                    file: Int(line.file), spoolOffset: line.spoolOffset, spoolLength: line.spoolLength,
                    reasonCode: batch.reasonCode(of: line), reason: batch.reasonText(of: line),
                    source: batch.source(of: line))
                try (line.status == .deferred ? deferred : errors).add(row, records: records)
            }
            return (
                instructions: instructions, errors: try errors.commit(into: files),
                deferred: try deferred.commit(into: files)
            )
        }
        // Also when another file fails: the job must not write on after the command ended.
        defer { _ = try? secondCore.wait() }
        let charges: PlanCharges
        let sums: ControlSums
        do throws(CommandFailure) {
            charges = try PlanOutputs.chargeRows(plan, runID: written.runID, store: ledger?.store)
            sums = ControlSums.of(plan, charges: charges, runID: written.runID)
            try PlanOutputs.checkConservation(plan, sums: sums)
        } catch {
            // No plan folder holds instructions (or corrections) that failed the sums.
            _ = try? secondCore.wait()
            files.discard()
            throw error
        }
        // Counted in rows, so the ETA weighs results.csv and the line index as they weigh.
        let rowsToWrite =
            2 * batch.lines.count + (written.counts[.rejected] ?? 0) + (written.counts[.deferred] ?? 0)
            + plan.instructions.count + 1
        var rowsWritten = 0
        progress.phase("writing \(folder)", total: rowsToWrite, unit: "rows")
        do {
            let results = try ResultsFile.write(path: path("results.csv"), plan: plan, into: files)
            written.files.append(("results.csv", results.sha256, results.rows))
            rowsWritten += results.rows
            progress.update(done: rowsWritten)
            let summary = try sums.write(path: path("summary.csv"), into: files)
            let chargesFile = try ChargesFile.write(
                path: path("charges.csv"), countedPath: path(ChargesFile.countedName), runID: written.runID,
                rows: charges, into: files)
            let intents = try ChargesFile.writeIntents(path: path(ChargesFile.intentsName), rows: charges, into: files)
            // report.html: the same sums as summary.csv, for finance.
            let page = try ReportPage.write(
                path: path("report.html"),
                facts: PlanReport.facts(
                    runID: written.runID, asOf: plan.options.asOf, mode: mode, exit: written.exit, inputs: inputs),
                sums: sums, counts: written.counts, reasons: PlanReport.reasonGroups(plan), into: files)
            let index = try LineIndex.write(
                path: path(LineIndex.name), plan: plan, chargeOfLine: charges.chargeOfLine, into: files)
            rowsWritten += index.rows
            // The lines that netted to zero: the apply records them in the ledger (no call does).
            let netted = try NettedLines.write(path: path(NettedLines.name), plan: plan, into: files)
            progress.update(done: rowsWritten)
            let second = try secondCore.wait()
            for file in [second.errors, second.deferred, second.instructions] { rowsWritten += file.rows }
            progress.update(done: rowsWritten)
            written.files.append(("errors.csv", second.errors.sha256, second.errors.rows))
            written.files.append(("deferred.csv", second.deferred.sha256, second.deferred.rows))
            written.files.append(("instructions.jsonl", second.instructions.sha256, second.instructions.rows))
            written.files.append(("summary.csv", summary.sha256, summary.rows))
            written.files.append(("charges.csv", chargesFile.charges.sha256, chargesFile.charges.rows))
            written.files.append((ChargesFile.countedName, chargesFile.counted.sha256, chargesFile.counted.rows))
            written.files.append((ChargesFile.intentsName, intents.sha256, intents.rows))
            written.files.append((LineIndex.name, index.sha256, index.rows))
            written.files.append((NettedLines.name, netted.sha256, netted.rows))
            written.files.append(("report.html", page.sha256, page.rows))
            // The spool is sealed too: apply copies failed lines' strings from it.
            var spool: [(String, JSON)] = []
            // The checksums are the ones taken while writing (an input's own, for its bytes).
            for input in inputs {
                guard let file = input.spool else { continue }
                spool.append(
                    (
                        file.name,
                        .object([("sha256", .string(input.spoolSHA256)), ("format", .string(file.format.rawValue))])
                    ))
            }
            var manifest = PlanOutputs.manifest(
                plan: plan, inputs: inputs, layout: layout, sums: sums,
                written: written, mode: mode, options: options)
            if case .object(var pairs) = manifest {
                pairs.append(("spool", .object(spool)))
                pairs.append(("ledger", ledger.map { JSON.string($0.path) } ?? .null))
                pairs.append(("facts", facts?.manifestJSON(online: true) ?? .object([("online", .bool(false))])))
                manifest = .object(pairs)
            }
            try Manifest.write(manifest, folder: folder, into: files)
            CrashPoint.reach("plan_prepared")
            try files.publish(between: { CrashPoint.reach("plan_publishing") })
            progress.update(done: rowsToWrite)
        } catch {
            _ = try? secondCore.wait()
            files.discard()
            throw CommandFailure(.outputUnwritable, "cannot write \(error.path): \(error.message)")
        }
        options.record.recordLines(counts: written.counts, sums: sums)
        var estimate = ApplyEstimate(plan: plan)
        // A plan made online carries Stripe's facts: its apply looks nothing up again.
        if facts != nil { estimate.lookups = 0 }
        log(
            .info, event: "apply_estimate", estimate.text(rate: options.rate),
            fields: [Log.Field("instructions", estimate.instructions), Log.Field("requests", estimate.requests)])
        return written
    }

    func path(_ name: String) -> String { (folder as NSString).appendingPathComponent(name) }

    /// The charges the plan touched, with what the ledger says of each: the run that counted
    /// it, what earlier runs transferred on it. The ledger is only read (nil: no ledger yet).
    static func chargeRows(_ plan: SettlementPlan, runID: String, store: LedgerStore?) throws(CommandFailure)
        -> PlanCharges
    {
        guard let store else { return ChargesFile.rows(of: plan, runID: runID, history: nil) }
        let history = LedgerHistory(store: store)
        let result = ChargesFile.rows(of: plan, runID: runID, history: history.charges)
        if let failure = history.failure {
            throw CommandFailure(.tryAgain, "reading the ledger's charges failed: \(failure)")
        }
        return result
    }

    static func exitCode(counts: [LineStatus: Int], inputs: [InputReport]) -> ExitCode {
        ExitCode.forLines(counts: counts, fileRejected: inputs.contains { $0.rejection != nil }, applied: false)
    }

    /// Every line exactly once, amounts conserved per currency; a violation is an internal error.
    static func checkConservation(_ plan: SettlementPlan, sums: ControlSums) throws(CommandFailure) {
        guard sums.conserved() else {
            throw CommandFailure(
                .internalError, "conservation check failed: amounts by status do not add up to the input")
        }
        if let problem = plan.conservationProblem {
            throw CommandFailure(.internalError, "conservation check failed: \(problem)")
        }
    }

    static func manifest(
        plan: SettlementPlan, inputs: [InputReport], layout: CorrectionLayout, sums: ControlSums,
        written: Written, mode: String, options: Options
    ) -> JSON {
        let inputObjects: [JSON] = inputs.enumerated().map { position, input in
            var pairs: [(String, JSON)] = [
                ("path", .string(input.path)), ("format", .string(input.format.rawValue)),
                ("bytes", .int(Int64(input.bytes))), ("sha256", .string(input.sha256)),
                ("lines", .int(Int64(input.lines))),
            ]
            if let rejection = input.rejection {
                pairs += [
                    ("status", .string("rejected")), ("reason_code", .string(rejection.code.rawValue)),
                    ("reason", .string(rejection.message)), ("position", .string(rejection.position)),
                ]
            } else {
                pairs.append(("status", .string("read")))
            }
            // The lines the ledger held, brought back by this run (not a file given to it).
            if input.held { pairs.append(("held_by_ledger", .bool(true))) }
            let mapping = position < layout.mapping.count ? layout.mapping[position] : []
            pairs.append(("columns", .array(mapping.map { .int(Int64($0)) })))
            // An errors.csv fed back: which of its cells carry the formula guard (apply reads
            // its records back without it).
            if position < layout.guardedInputs.count, let guarded = layout.guardedInputs[position] {
                pairs.append(("guarded_columns", .array(guarded.map { .bool($0) })))
            }
            return .object(pairs)
        }
        return .object([
            ("tool", .string("settle")),
            ("plan_format", .int(Int64(InstructionsFile.format))),
            ("run_id", .string(written.runID)),
            ("planned_at_ms", .int(Int64((written.plannedAt.timeIntervalSince1970 * 1000).rounded(.down)))),
            ("version", .string(Settle.version)),
            ("mode", .string(mode)),
            ("as_of", .string(CivilDate.format(plan.options.asOf))),
            ("platform_country", .string(plan.options.platformCountry)),
            ("payouts", .string(plan.options.payouts.rawValue)),
            ("financial_account", plan.options.financialAccount.map(JSON.string) ?? .null),
            ("stripe_version", .string(options.stripeVersion ?? Settle.stripeVersion)),
            ("stripe_preview_version", .string(Settle.previewVersion)),
            ("inputs", .array(inputObjects)),
            (
                "outputs",
                .object(
                    written.files.map { ($0.0, .object([("sha256", .string($0.1)), ("rows", .int(Int64($0.2)))])) })
            ),
            ("counts", .object(LineStatus.allCases.map { ($0.name, .int(Int64(written.counts[$0] ?? 0))) })),
            ("instructions", .int(Int64(plan.instructions.count))),
            (
                "instruction_kinds",
                .object(
                    Instruction.Kind.allCases.map { kind in
                        (kind.name, .int(Int64(plan.instructions.lazy.filter { $0.kind == kind }.count)))
                    })
            ),
            ("control_sums", sums.json()),
            ("correction_columns", .array(layout.names.map(JSON.string))),
            ("exit_status", .int(Int64(written.exit.rawValue))),
        ])
    }
}

/// Runs a piece of work on its own thread; `wait()` returns its result or rethrows its error.
final class BackgroundJob<Value: Sendable, Failure: Error>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<Value, Failure>?

    init(_ work: @escaping @Sendable () throws(Failure) -> Value) {
        let thread = Thread { [self] in
            do throws(Failure) {
                result = .success(try work())
            } catch {
                result = .failure(error)
            }
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    func wait() throws(Failure) -> Value {
        done.wait()
        done.signal()  // a later wait returns at once
        return try result!.get()
    }
}

extension PlanFolder {
    /// When the plan was made: `planned_at_ms`, else the second its run id names.
    var madeAt: Date? { plannedAt ?? RunID.time(of: runID) }
}

/// A run's id: `run_<UTC time>_<8 random hex digits>`, sortable by time, unique across
/// machines that share a ledger.
enum RunID {
    static func make(now: Date = Date()) -> String {
        // Pinned for reproducible folders (make golden, tests): `run_` and up to 64 of [A-Za-z0-9_-].
        if let pinned = ProcessInfo.processInfo.environment["SETTLE_RUN_ID"], pinned.hasPrefix("run_"),
            pinned.count <= 68,
            pinned.utf8.allSatisfy({
                $0 == 0x5F || $0 == 0x2D || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                    || (0x61...0x7A).contains($0)
            })
        {
            return pinned
        }
        let random = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return "run_\(formatter.string(from: now))_\(String(repeating: "0", count: 8 - random.count))\(random)"
    }

    private static var formatter: DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter
    }

    /// When a run with this id was made (to the second, rounded down); nil for a pinned id.
    static func time(of id: String) -> Date? {
        let parts = id.split(separator: "_")
        guard parts.count >= 3, parts[0] == "run" else { return nil }
        return formatter.date(from: String(parts[1]))
    }
}
