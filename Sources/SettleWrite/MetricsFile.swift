import Glibc
public import SettleCore

/// What one run did, for monitoring (`--metrics-file`).
public struct RunMetrics: Sendable, Equatable {
    public struct Amount: Sendable, Equatable {
        public var currency: String
        public var status: String
        public var minor: Int64
        public init(currency: String, status: String, minor: Int64) {
            self.currency = currency
            self.status = status
            self.minor = minor
        }
    }

    /// Unix seconds.
    public var start: Double
    public var end: Double
    public var exitStatus: Int32
    /// Lines by status name, every status listed (0 too) so no series vanishes between runs.
    public var lines: [(status: String, count: Int)]
    public var amounts: [Amount]
    /// HTTP calls made (every try counts); 0 for a plan.
    public var requests: Int
    public var retries: Int
    public var rateLimited: Int

    public init(
        start: Double, end: Double, exitStatus: Int32, lines: [(status: String, count: Int)] = [],
        amounts: [Amount] = [], requests: Int = 0, retries: Int = 0, rateLimited: Int = 0
    ) {
        self.start = start
        self.end = end
        self.exitStatus = exitStatus
        self.lines = lines
        self.amounts = amounts
        self.requests = requests
        self.retries = retries
        self.rateLimited = rateLimited
    }

    /// From the run's line counts and the control sums of summary.csv (nil: the run stopped
    /// before it had any).
    public init(
        start: Double, end: Double, exitStatus: Int32, counts: [LineStatus: Int], sums: ControlSums?,
        requests: Int = 0, retries: Int = 0, rateLimited: Int = 0
    ) {
        var amounts: [Amount] = []
        for code in (sums?.currencies.keys.sorted() ?? []) {
            let perCurrency = sums!.currencies[code]!
            for status in LineStatus.allCases {
                amounts.append(
                    Amount(currency: code, status: status.name, minor: perCurrency.byStatus[status]?.amount ?? 0))
            }
        }
        self.init(
            start: start, end: end, exitStatus: exitStatus,
            lines: LineStatus.allCases.map { ($0.name, counts[$0] ?? 0) }, amounts: amounts,
            requests: requests, retries: retries, rateLimited: rateLimited)
    }

    public static func == (lhs: RunMetrics, rhs: RunMetrics) -> Bool {
        lhs.start == rhs.start && lhs.end == rhs.end && lhs.exitStatus == rhs.exitStatus
            && lhs.lines.map(\.status) == rhs.lines.map(\.status) && lhs.lines.map(\.count) == rhs.lines.map(\.count)
            && lhs.amounts == rhs.amounts && lhs.requests == rhs.requests && lhs.retries == rhs.retries
            && lhs.rateLimited == rhs.rateLimited
    }
}

/// The run's metrics in the Prometheus text exposition format (0.0.4), written the way
/// node_exporter's textfile collector expects: to a temporary name in the same folder, then
/// renamed, so a scrape never reads half a file. The collector reads only `*.prom`, and the
/// temporary name (`….prom.tmp-<pid>`) does not end so.
///
/// Every value describes the last run, so every metric is a gauge, and none is named `_total`
/// (Prometheus' name for a counter that grows across runs; audit 38 D6).
public enum MetricsFile {
    /// The file's text; pure, for tests.
    public static func render(_ metrics: RunMetrics) -> String {
        var out = ""
        func family(_ name: String, _ help: String) {
            out += "# HELP \(name) \(escapeHelp(help))\n# TYPE \(name) gauge\n"
        }
        func sample(_ name: String, _ labels: [(String, String)] = [], _ value: String) {
            out += name
            if !labels.isEmpty {
                out += "{" + labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
            }
            out += " \(value)\n"
        }
        family("settle_last_run_start_timestamp_seconds", "When the last settle run started (Unix time).")
        sample("settle_last_run_start_timestamp_seconds", [], seconds(metrics.start))
        family("settle_last_run_end_timestamp_seconds", "When the last settle run ended (Unix time).")
        sample("settle_last_run_end_timestamp_seconds", [], seconds(metrics.end))
        family(
            "settle_last_run_exit_status",
            "Exit status of the last settle run (0 ok, 65 lines rejected or failed, 75 run again later, 64/66/73/78/70 stopped)."
        )
        sample("settle_last_run_exit_status", [], String(metrics.exitStatus))
        family("settle_run_duration_seconds", "How long the last settle run took.")
        sample("settle_run_duration_seconds", [], seconds(max(0, metrics.end - metrics.start)))
        family("settle_lines", "Input lines of the last run by status (results.csv).")
        for (status, count) in metrics.lines { sample("settle_lines", [("status", status)], String(count)) }
        family(
            "settle_amount_minor",
            "Amounts of the last run's lines by currency and status, in minor units (summary.csv).")
        for amount in metrics.amounts {
            sample(
                "settle_amount_minor", [("currency", amount.currency), ("status", amount.status)], String(amount.minor))
        }
        family("settle_last_run_requests", "HTTP requests the last run sent to Stripe (every try counts).")
        sample("settle_last_run_requests", [], String(metrics.requests))
        family("settle_last_run_retries", "Tries after the first in the last run.")
        sample("settle_last_run_retries", [], String(metrics.retries))
        family("settle_last_run_rate_limited", "HTTP 429 answers the last run met.")
        sample("settle_last_run_rate_limited", [], String(metrics.rateLimited))
        return out
    }

    /// The file of a run stopped by a signal before it ends (``RunMetrics`` with no lines,
    /// requests or amounts: a stop is at once), cut around its two values only the moment of
    /// the stop gives: the text is `head`, the end timestamp, `middle`, the duration, `tail`.
    /// The signal handler writes it (it cannot format or allocate).
    public static func stopTemplate(start: Double, exitStatus: Int32) -> (head: String, middle: String, tail: String) {
        let sentinel = 4_102_444_800.999  // 2100-01-01, a value no run has
        let text = render(RunMetrics(start: start, end: sentinel, exitStatus: exitStatus, counts: [:], sums: nil))
        let endSample = "settle_last_run_end_timestamp_seconds "
        let durationSample = "\nsettle_run_duration_seconds "
        let endValue = seconds(sentinel) + "\n"
        let durationValue = seconds(max(0, sentinel - start)) + "\n"
        guard let endAt = text.range(of: endSample + endValue),
            let durationAt = text.range(of: durationSample + durationValue, range: endAt.upperBound..<text.endIndex)
        else { preconditionFailure("the metrics file has no end timestamp or duration") }
        let head = String(text[..<endAt.lowerBound]) + endSample
        let middle = "\n" + String(text[endAt.upperBound..<durationAt.lowerBound]) + durationSample
        let tail = "\n" + String(text[durationAt.upperBound...])
        return (head, middle, tail)
    }

    /// Writes the file atomically (temporary name in the same folder, fsync, rename). It is
    /// for a collector that may run as another user (node_exporter's textfile): it keeps the
    /// permissions the file has, 0644 when new; it holds no secret and no money detail.
    public static func write(_ metrics: RunMetrics, path given: String) throws(WriteFailure) {
        let path = try target(given)
        let file = try OutputFile(path: path)
        var existing = stat()
        file.setMode(stat(path, &existing) == 0 ? existing.st_mode & 0o7777 : 0o644)
        file.append(render(metrics))
        file.endRow()
        try file.commit()
    }

    /// The file the metrics go to: `path`, or the file a symlink there names (the link stays,
    /// and its file is replaced: a textfile collector's folder often links to it). Anything
    /// else already there that is not a regular file (a device, a pipe, a folder) is refused:
    /// the rename would replace it (audit 62 F2: a device node was replaced by a regular file,
    /// and a symlink by a copy, its target left stale).
    public static func target(_ path: String) throws(WriteFailure) -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else { return path }
        var resolved = path
        if info.st_mode & S_IFMT == S_IFLNK {
            guard let real = realpath(path, nil) else { return path }  // dangling: the link is replaced
            resolved = String(cString: real)
            free(real)
            guard stat(resolved, &info) == 0 else { return path }
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw WriteFailure(
                path: path,
                message:
                    "\(path) is not a regular file: the metrics are written beside it and renamed over it, which would replace it"
            )
        }
        return resolved
    }

    /// Label values: backslash, double quote and line feed are escaped.
    static func escapeLabel(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    /// HELP text: backslash and line feed are escaped.
    static func escapeHelp(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    /// Seconds with millisecond precision, without a float's noise (`1764374400.25`).
    static func seconds(_ value: Double) -> String {
        let millis = Int64((value * 1000).rounded())
        let whole = millis / 1000
        let fraction = millis % 1000
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        while digits.count < 3 { digits = "0" + digits }
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
