import Foundation
import SettleCore
import SettleRead
import SettleWrite

/// What happened to one input file.
struct InputReport {
    var path: String
    var format: InputFormat = .csv
    var bytes: UInt64 = 0
    var sha256 = ""
    var lines = 0
    var rejection: ReadFailure? = nil
}

/// read → check → plan: the offline part shared by `plan`, `run` and `validate`.
struct Pipeline {
    let options: Options
    let log: Log

    /// Reads every input into a checked batch and plans it.
    /// `spoolFolder` nil: spool into nothing (validate writes nothing).
    func plan(history: (any SettlementHistory)?, spoolFolder: String?) throws(CommandFailure)
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
        for (position, source) in sources.enumerated() {
            let path = options.inputs[position]
            let name = path == "-" ? "stdin" : path
            var report = InputReport(path: name)
            let spoolPath = spoolFolder.map { OutputFolder.spoolPath($0, file: position) } ?? "/dev/null"
            let spool: SpoolWriter
            do {
                spool = try SpoolWriter(path: spoolPath)
            } catch {
                throw CommandFailure(.outputUnwritable, error.message)
            }
            var failure: ReadFailure? = nil
            do {
                let first = try source.peek()
                report.format = options.format ?? InputFormat.detect(first)
                if first == nil {
                    failure = ReadFailure(code: .emptyFile, message: "the file is empty", position: "\(name):1")
                }
            } catch {
                failure = error
            }
            if failure == nil {
                let before = checker.batch.lines.count
                progress.start(name: name, total: source.fileSize)
                switch report.format {
                case .csv:
                    failure = csv.read(name: name, source: source, spool: spool, sink: checker) {
                        progress.update(bytes: $0, lines: checker.batch.lines.count - before)
                    }
                case .xml:
                    failure = XMLInput.read(name: name, source: source, spool: spool, sink: checker) {
                        progress.update(bytes: source.bytesRead, lines: checker.batch.lines.count - before)
                    }
                }
                progress.finish()
                if failure != nil, checker.batch.files.count > reports.count,
                    !checker.batch.files[checker.batch.files.count - 1].discarded
                {
                    checker.discardFile(checker.batch.files.count - 1)
                }
                report.lines = checker.batch.lines.count - before
            }
            source.finishReading()
            if let problem = spool.finish() {
                throw CommandFailure(.outputUnwritable, "cannot write \(spoolPath): \(problem)")
            }
            // Keep file indices aligned with inputs: a file rejected before its header still gets a slot.
            while checker.batch.files.count <= position {
                var placeholder = Batch.InputFile(name: name, layout: FileLayout())
                placeholder.discarded = true
                checker.batch.files.append(placeholder)
            }
            report.bytes = source.bytesRead
            report.sha256 = source.sha256()
            if let failure {
                report.rejection = failure
                report.lines = 0
                log(
                    .error, "\(name) rejected whole: \(failure.code.rawValue): \(failure.message)",
                    [("position", failure.position)])
            } else {
                log(.debug, "\(name): \(report.lines) lines (\(report.format.rawValue))")
            }
            reports.append(report)
        }
        log(
            .debug,
            "read \(checker.batch.lines.count) lines in \(Pipeline.elapsed(since: started)) "
                + "(\(MemoryLayout<OrderLine>.stride) bytes a line record, \(checker.batch.symbols.count) interned strings)"
        )
        let planning = Date()
        let plan = Planner(options: options.ruleOptions, history: history).plan(checker.batch)
        log(.debug, "planned \(plan.instructions.count) instructions in \(Pipeline.elapsed(since: planning))")
        return (plan, reports)
    }
}

extension Pipeline {
    static func elapsed(since start: Date) -> String {
        String(format: "%.2f s", Date().timeIntervalSince(start))
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

/// Progress while reading: a live line on a terminal, a log line every 30 s otherwise
/// (so a long cron run still shows it is alive), or nothing.
final class Progress {
    enum Mode { case terminal, logLines, off }
    let mode: Mode
    let log: Log
    private var name = ""
    private var total: UInt64?
    private var started = Date()
    private var last = Date()

    init(_ mode: Mode, log: Log) {
        self.mode = mode
        self.log = log
    }

    func start(name: String, total: UInt64?) {
        self.name = name
        self.total = total
        started = Date()
        last = started
    }

    /// Called per input chunk with the bytes of the file read so far (compressed for gzip,
    /// like the total) and the lines checked so far.
    func update(bytes: UInt64, lines: Int) {
        guard mode != .off else { return }
        let now = Date()
        guard now.timeIntervalSince(last) >= (mode == .terminal ? 0.25 : 30) else { return }
        last = now
        let seconds = max(0.001, now.timeIntervalSince(started))
        var text = "reading \(name): \(String(format: "%.1f", Double(bytes) / 1_048_576)) MiB"
        if let total, total > 0 {
            text += " of \(String(format: "%.1f", Double(total) / 1_048_576)) MiB (\(bytes * 100 / total)%)"
        }
        text += ", \(lines) lines, \(Int(Double(lines) / seconds)) lines/s"
        if mode == .terminal {
            FileHandle.standardError.write(Data("\r\(text)   ".utf8))
        } else {
            log(.info, text)
        }
    }

    func finish() {
        guard mode == .terminal else { return }
        FileHandle.standardError.write(Data("\r\u{1b}[K".utf8))
    }
}
