import Foundation
import SettleApply
import SettleCore
import SettleWrite

/// What a run did, gathered as it goes, for `--metrics-file`. `Settle.run` writes the file
/// at the very end, with the exit status, also when the command stopped early (66, 73, 78…),
/// so monitoring sees a failed run as well as a good one.
///
/// Callers: the plan writer records the lines (`recordLines`); the apply side records its
/// outcome lines again after rewriting the folder; `Settle.run` records the HTTP counts of
/// the whole process (`recordRequests`, from `ProcessTally`) just before writing the file.
final class RunRecord: @unchecked Sendable {
    let started = Date()
    private let lock = NSLock()
    private var counts: [LineStatus: Int] = [:]
    private var sums: ControlSums?
    private var requests = 0
    private var retries = 0
    private var rateLimited = 0

    /// The lines by status and the control sums of summary.csv; a later call replaces an earlier one.
    func recordLines(counts: [LineStatus: Int], sums: ControlSums) {
        lock.lock()
        defer { lock.unlock() }
        self.counts = counts
        self.sums = sums
    }

    /// The process's HTTP counts (`ProcessTally`: look-ups, payouts followed and the apply).
    func recordRequests(requests: Int, retries: Int, rateLimited: Int) {
        lock.lock()
        defer { lock.unlock() }
        self.requests = requests
        self.retries = retries
        self.rateLimited = rateLimited
    }

    func metrics(exit: ExitCode, ended: Date = Date()) -> RunMetrics {
        lock.lock()
        defer { lock.unlock() }
        return RunMetrics(
            start: started.timeIntervalSince1970, end: ended.timeIntervalSince1970, exitStatus: exit.rawValue,
            counts: counts, sums: sums, requests: requests, retries: retries, rateLimited: rateLimited)
    }

    /// Makes a stop by signal outside the send (which ends the process at once, 75) write the
    /// metrics file too: its exit status and times, no lines or requests (audit 54 F1). The
    /// file keeps the permissions it has, 0644 when new, as ``writeMetrics(path:exit:log:)``.
    func writeMetricsOnStop(path given: String) {
        // A path the end's write refuses is not written at a stop either (that write says why).
        guard let path = try? MetricsFile.target(given) else { return }
        let parts = MetricsFile.stopTemplate(
            start: started.timeIntervalSince1970, exitStatus: ExitCode.tryAgain.rawValue)
        var existing = stat()
        let mode = stat(path, &existing) == 0 ? existing.st_mode & 0o7777 : 0o644
        StopSignals.writeMetricsOnStop(
            path: path, head: parts.head, middle: parts.middle, tail: parts.tail, start: started.timeIntervalSince1970,
            mode: mode)
    }

    /// Writes the metrics file; a failure is logged. The exit status the process ends with:
    /// `exit`, or 75 for a run that would have ended 0 (every write is checked: the collector
    /// keeps the previous run's file, and a 0 would mail no one; audit 61 F1). A status that
    /// is not 0 stands: it mails already and says what happened to the money.
    func writeMetrics(path: String, exit: ExitCode, log: Log) -> ExitCode {
        do {
            try MetricsFile.write(metrics(exit: exit), path: path)
            log(.debug, event: "metrics_written", "metrics written to \(path)", fields: [.file(path)])
            return exit
        } catch {
            let ending =
                exit == .ok
                ? "; every line is as results.csv says, run again later to write the metrics (nothing is paid twice; exit 75)"
                : ""
            log(
                .error, event: "metrics_unwritable", "cannot write --metrics-file \(path): \(error.message)\(ending)",
                fields: [.file(path)])
            return exit == .ok ? .tryAgain : exit
        }
    }
}
