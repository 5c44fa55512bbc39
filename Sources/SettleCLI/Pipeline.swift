import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder
import SettleRead
import SettleWrite

extension Pipeline {
    /// Metadata columns that are not sent, said once per file (audit 38 D10: they were
    /// dropped without a word): `metadata.` with no key, and settle's own key, whose value is
    /// the instruction id settle finds its objects by.
    func warnUnsentMetadata(_ batch: Batch) {
        for file in batch.files {
            for (name, role) in zip(file.layout.names, file.layout.roles) {
                let why: String
                switch role {
                case .metadata(let key) where key == "settle_instruction":
                    why = "it is settle's own key (settle sends the instruction id there and finds its objects by it)"
                case .extra where name.trimmingSpaces().lowercased() == metadataColumnPrefix:
                    why = "it names no key"
                default: continue
                }
                log(
                    .warning, event: "metadata_not_sent",
                    "\(file.name): column \(name) is not sent to Stripe: \(why); it stays in the files",
                    fields: [.file(file.name)])
            }
        }
    }
}

/// What happened to one input file.
struct InputReport {
    var path: String
    /// Lines the ledger held (waiting, returned payouts), brought back by this run.
    var held = false
    var format: InputFormat = .csv
    var bytes: UInt64 = 0
    var sha256 = ""
    /// The input's spool file in the plan folder (nil when nothing is spooled: validate).
    var spool: SpoolRecords.File? = nil
    var spoolSHA256 = ""
    var lines = 0
    var rejection: ReadFailure? = nil
}

/// read → check → plan: the offline part shared by `plan`, `run` and `validate`.
struct Pipeline {
    let options: Options
    let log: Log

    /// Reads every input into a checked batch and plans it.
    /// `spoolFolder` nil: spool into nothing (validate writes nothing).
    /// `facts`: Stripe's facts for the checked batch (`run`, `plan --online`), asked for after
    /// reading and before planning, so a refused payout method or a failed charge rejects its
    /// groups before any instruction is formed.
    func plan(
        history: (any SettlementHistory)?, spoolFolder: String?,
        facts: ((Batch) throws(CommandFailure) -> StripeFacts)? = nil, held: [HeldLine] = [],
        cancelled: [HeldLine] = [], notCarried: [HeldLine] = [], identifies: Bool = true
    ) throws(CommandFailure)
        -> (SettlementPlan, [InputReport])
    {
        // Every input must open before anything is read: 66 stops the run.
        var sources: [ByteSource] = []
        for path in options.inputs {
            do {
                sources.append(try ByteSource(path: path))
            } catch {
                throw CommandFailure(.inputUnreadable, "\(path): \(error.message)")
            }
        }
        let started = Date()
        let checker = LineChecker(options: options.ruleOptions)
        // About 100 bytes an input line, gzip about 5:1.
        checker.reserve(
            lines: sources.reduce(0) { total, source in
                total + Int((source.fileSize ?? 0) * (source.isGzip ? 5 : 1) / 100)
            })
        let csv = CSVExportReader(aliases: options.columns)
        var reports: [InputReport] = []
        let progress = Progress(options.progressMode, log: log)
        var names = options.inputs.map { $0 == "-" ? "stdin" : $0 }
        var heldFiles: [HeldInputs.File] = []
        var position = 0
        while true {
            if position == options.inputs.count, !cancelled.isEmpty || !notCarried.isEmpty {
                HeldInputs.rejectCancelled(cancelled, checker: checker)
                let waitingForNoRun = HeldInputs.rejectPartsOfOrdersNotCarried(
                    notCarried, checker: checker, aliases: options.columns)
                if !waitingForNoRun.isEmpty {
                    // Each run says so: cron sees a log, and the rebuild's warning was said once
                    // (audit 79 F5: no run mentioned them).
                    log(
                        .warning, event: "lines_not_carried",
                        "\(waitingForNoRun.count) line(s) are not carried since settle ledger rebuild (first: "
                            + "\(waitingForNoRun[0].lineID)): no run pays them until they are fed again; settle status "
                            + "lists them (settle cancel those that were cancelled)",
                        fields: [.lines(waitingForNoRun.count)])
                }
            }
            if position == options.inputs.count, !held.isEmpty, heldFiles.isEmpty {
                // The lines the ledger holds come back as if in the input, each under the
                // file:line it first came from (after the inputs, so a newer export's copy wins).
                heldFiles = try HeldInputs.prepare(
                    held, checker: checker, aliases: options.columns, folder: spoolFolder, log: log)
                for file in heldFiles {
                    do {
                        sources.append(try ByteSource(path: file.path))
                    } catch {
                        throw CommandFailure(.outputUnwritable, "\(file.path): \(error.message)")
                    }
                    names.append(file.name)
                }
            }
            guard position < sources.count else { break }
            let source = sources[position]
            defer { position += 1 }
            let name = names[position]
            var report = InputReport(path: name)
            report.held = position >= options.inputs.count
            var failure: ReadFailure? = nil
            do {
                let first = try source.peek()
                report.format = options.format ?? InputFormat.detect(first)
                if first == nil {
                    failure = ReadFailure(code: .emptyFile, message: "the file is empty", position: "\(name):1")
                }
            } catch {
                failure = error.located(in: name)
            }
            let spool = try Pipeline.spool(source, format: report.format, folder: spoolFolder, file: position)
            report.spool = spool.file
            if failure == nil {
                let before = checker.lineCount
                progress.phase(reading: name, bytes: source.fileSize)
                switch report.format {
                case .csv:
                    failure = csv.read(name: name, source: source, sink: checker) {
                        progress.update(bytes: $0, lines: checker.lineCount - before)
                    }
                case .xml:
                    failure = XMLInput.read(name: name, source: source, spool: spool.writer, sink: checker) {
                        progress.update(bytes: source.bytesRead, lines: checker.lineCount - before)
                    }
                }
                progress.finish()
                if failure != nil, checker.batch.files.count > reports.count,
                    !checker.batch.files[checker.batch.files.count - 1].discarded
                {
                    checker.discardFile(checker.batch.files.count - 1)
                }
                report.lines = checker.lineCount - before
            }
            source.finishReading()
            // The bytes read, which an original-bytes spool holds; a file rejected before its
            // end is then read on into its checksum alone (``ByteSource/hashRest()``).
            let readSHA256 = source.sha256()
            if failure != nil { source.hashRest() }
            if let problem = spool.writer.finish() {
                throw CommandFailure(.outputUnwritable, "cannot write \(spool.writer.path): \(problem)")
            }
            // Keep file indices aligned with inputs: a file rejected before its header still gets a slot.
            while checker.batch.files.count <= position { checker.skipFile(name: name) }
            report.bytes = source.bytesRead
            report.sha256 = source.sha256()
            report.spoolSHA256 = spool.writer.sha256() ?? readSHA256
            if let failure {
                report.rejection = failure
                report.lines = 0
                log(
                    .error, event: "input_rejected",
                    "\(name) rejected whole at \(failure.position): \(failure.code.rawValue): \(failure.message)",
                    fields: [
                        .file(name), .line(Pipeline.lineNumber(of: failure.position)),
                        Log.Field("reason_code", failure.code.rawValue),
                    ])
            } else {
                log(
                    .debug, event: "input_read", "\(name): \(report.lines) lines (\(report.format.rawValue))",
                    fields: [.file(name), .lines(report.lines), Log.Field("format", report.format.rawValue)])
            }
            reports.append(report)
        }
        HeldInputs.markReturned(held, batch: checker.batch)
        try HeldInputs.markRefused(held, batch: checker.batch, ledger: (history as? LedgerHistory)?.store)
        warnUnsentMetadata(checker.batch)
        checker.finishReading()
        log(
            .debug, event: "inputs_read",
            "read \(checker.batch.lines.count) lines in \(Pipeline.elapsed(since: started)) "
                + "(\(MemoryLayout<OrderLine>.stride) bytes a line record, \(checker.batch.symbols.count) interned strings)",
            fields: [.lines(checker.batch.lines.count), .durationMS(Pipeline.milliseconds(since: started))]
                + Log.Field.memory())
        // The look-ups show their own progress line; planning starts when they are done.
        var stripeFacts = try facts?(checker.batch) ?? .empty
        // What earlier runs' look-ups found failed still stands (a failed charge stays failed).
        if let history { stripeFacts.remember(history.failedCharges()) }
        let planning = Date()
        // Group rules and instruction forming run as one call: the line shows the time spent.
        progress.phase("planning \(HumanFormat.count(checker.batch.lines.count)) lines", total: nil)
        var planner = Planner(options: options.ruleOptions, history: history, facts: stripeFacts)
        planner.identifies = identifies
        let plan = planner.plan(checker.batch)
        progress.finish()
        log(
            .debug, event: "planned",
            "planned \(plan.instructions.count) instructions in \(Pipeline.elapsed(since: planning))",
            fields: [
                Log.Field("instructions", plan.instructions.count), .durationMS(Pipeline.milliseconds(since: planning)),
            ] + Log.Field.memory())
        return (plan, reports)
    }
}

extension Pipeline {
    /// Every input can be opened (66 otherwise), checked before the ledger, the output folder
    /// or Stripe are touched: a run that cannot read its inputs leaves nothing behind. Standard
    /// input is not touched (reading it would consume it).
    static func checkInputsOpen(_ paths: [String]) throws(CommandFailure) {
        for path in paths where path != "-" {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw CommandFailure(
                    .inputUnreadable, "\(path): cannot open \(path): \(String(cString: strerror(errno)))")
            }
            var info = stat()
            let isFolder = fstat(descriptor, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
            close(descriptor)
            if isFolder { throw CommandFailure(.inputUnreadable, "\(path): \(path) is a folder, not a file") }
        }
    }

    static func elapsed(since start: Date) -> String {
        HumanFormat.duration(seconds: Date().timeIntervalSince(start))
    }

    static func milliseconds(since start: Date) -> Int {
        Int(Date().timeIntervalSince(start) * 1000)
    }

    /// Opens input `file`'s spool in `folder` (nil: into nothing) once its format is known: a
    /// CSV input's bytes are tapped as read (the file is the input, gzip and all); an XML
    /// reader appends CSV records.
    static func spool(_ source: ByteSource, format: InputFormat, folder: String?, file: Int)
        throws(CommandFailure) -> (writer: SpoolWriter, file: SpoolRecords.File?)
    {
        let spoolFormat = SpoolFormat.of(format, gzip: source.isGzip)
        let name = OutputFolder.spoolName(file: file, format: spoolFormat)
        let writer: SpoolWriter
        do {
            writer = try SpoolWriter(
                path: folder.map { ($0 as NSString).appendingPathComponent(name) } ?? "/dev/null",
                hashing: folder != nil && !spoolFormat.isOriginal)
        } catch {
            throw CommandFailure(.outputUnwritable, error.message)
        }
        source.spool(into: folder != nil && spoolFormat.isOriginal ? writer : nil)
        return (writer, folder.map { _ in SpoolRecords.File(name: name, format: spoolFormat) })
    }

    /// The line number of a `file:line` position (0 when it has none).
    static func lineNumber(of position: String) -> Int {
        position.split(separator: ":").last.flatMap { Int($0) } ?? 0
    }
}

/// XML inputs: the streaming reader, validated against schemas/order-export.xsd as it goes.
enum XMLInput {
    static func read(
        name: String, source: ByteSource, spool: SpoolWriter, sink: LineChecker, progress: () -> Void
    ) -> ReadFailure? {
        let reader = XMLExportReader()
        let next = { () throws -> UnsafeRawBufferPointer? in
            progress()
            return try source.next()
        }
        guard let report = reader.read(name: name, next: next, spool: spool, sink: sink) else {
            return nil
        }
        return ReadFailure(code: report.code, message: report.message, position: "\(name):\(report.line)")
    }
}
