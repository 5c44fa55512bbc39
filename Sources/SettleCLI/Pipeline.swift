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
        let csv = CSVExportReader(aliases: options.columns)
        var reports: [InputReport] = []
        let progress = Progress(enabled: options.progress == "on" || (options.progress == "auto" && isatty(2) == 1),
                                log: log)
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
                    failure = csv.read(name: name, source: source, spool: spool, sink: checker) { progress.update($0) }
                case .xml:
                    failure = XMLInput.read(name: name, source: source, spool: spool, sink: checker)
                }
                progress.finish()
                if failure != nil, checker.batch.files.count > reports.count,
                    !checker.batch.files[checker.batch.files.count - 1].discarded
                {
                    checker.discardFile(checker.batch.files.count - 1)
                }
                report.lines = checker.batch.lines.count - before
            }
            spool.flush()
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
                log(.error, "\(name) rejected whole: \(failure.code.rawValue): \(failure.message)",
                    [("position", failure.position)])
            } else {
                log(.debug, "\(name): \(report.lines) lines (\(report.format.rawValue))")
            }
            reports.append(report)
        }
        log(.debug, "read \(checker.batch.lines.count) lines in \(Pipeline.elapsed(since: started))")
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
    static func read(name: String, source: ByteSource, spool: SpoolWriter, sink: LineChecker) -> ReadFailure? {
        let reader = XMLExportReader()
        guard let report = reader.read(name: name, next: { try source.next() }, spool: spool, sink: sink) else {
            return nil
        }
        return ReadFailure(code: report.code, message: report.message, position: "\(name):\(report.line)")
    }
}

/// A progress line on standard error while reading, when it is a terminal.
final class Progress {
    let enabled: Bool
    let log: Log
    private var name = ""
    private var total: UInt64?
    private var started = Date()
    private var last = Date.distantPast

    init(enabled: Bool, log: Log) {
        self.enabled = enabled
        self.log = log
    }

    func start(name: String, total: UInt64?) {
        self.name = name
        self.total = total
        started = Date()
    }

    func update(_ bytes: UInt64) {
        guard enabled else { return }
        let now = Date()
        guard now.timeIntervalSince(last) >= 0.25 else { return }
        last = now
        let seconds = max(0.001, now.timeIntervalSince(started))
        let megabytes = Double(bytes) / 1_048_576
        var line = "\rreading \(name): \(String(format: "%.1f", megabytes)) MiB"
        if let total, total > 0 { line += " of \(String(format: "%.1f", Double(total) / 1_048_576)) MiB (\(bytes * 100 / total)%)" }
        line += ", \(String(format: "%.1f", megabytes / seconds)) MiB/s   "
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1b}[K".utf8))
    }
}
