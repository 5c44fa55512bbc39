/// settle's exit statuses (README, "Exit status"), documented in `--help` and the README.
public enum ExitCode: Int32, Sendable {
    /// Every line is settled, planned, already settled, netted or deferred.
    case ok = 0
    /// Some lines were rejected or failed for good: see errors.csv.
    case linesRejected = 65
    /// Some outcomes are not known yet, or failed for a passing reason: run again later.
    case tryAgain = 75
    case usage = 64
    case inputUnreadable = 66
    case outputUnwritable = 73
    case configuration = 78
    case internalError = 70

    /// The exit status the lines of a run call for (README, "Exit status"), the one definition of the rule:
    /// 65 when a line was rejected or failed for good or a file was rejected whole; 75 when
    /// an outcome is not known yet or a planned line was not sent (after apply); 75 beats 65.
    public static func forLines(counts: [LineStatus: Int], fileRejected: Bool, applied: Bool) -> ExitCode {
        var code = ExitCode.ok
        if (counts[.rejected] ?? 0) + (counts[.failed] ?? 0) > 0 || fileRejected { code = .linesRejected }
        if (counts[.unknown] ?? 0) > 0 || (applied && (counts[.planned] ?? 0) > 0) {
            code = code.combined(with: .tryAgain)
        }
        return code
    }

    /// The worse of two outcomes of a run: 75 beats 65 beats 0.
    public func combined(with other: ExitCode) -> ExitCode {
        let rank: [ExitCode: Int] = [.ok: 0, .linesRejected: 1, .tryAgain: 2]
        return (rank[other] ?? 3) > (rank[self] ?? 3) ? other : self
    }
}
