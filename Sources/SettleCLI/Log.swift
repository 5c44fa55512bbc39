import Foundation
import Glibc
import SettleApply
import SettleCore
import SettleWrite

/// Log lines on standard error, as text or JSON, never carrying a secret.
///
/// Every line is an *event*: a stable name (`plan_written`, `input_rejected`, …), a message a
/// person reads, and typed fields. In JSON (`--log-format json`) each event is one object per
/// line — `time`, `level`, `event`, `message`, then its fields as top-level keys (integers as
/// numbers) — so a log pipeline can filter on `event` and sum `amount_minor` without parsing
/// prose. As text, fields follow the message as `key=value` at `-v` only.
final class Log: @unchecked Sendable {
    enum Level: Int, Sendable, Comparable {
        case debug = 0, info = 1, warning = 2, error = 3

        var name: String { ["debug", "info", "warning", "error"][rawValue] }

        /// The apply engine's levels, for its logger callback.
        init(_ level: ApplyLogLevel) {
            switch level {
            case .debug: self = .debug
            case .info: self = .info
            case .warning: self = .warning
            case .error: self = .error
            }
        }
        static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// A field's value: a string or an integer, so JSON keeps numbers as numbers.
    enum Value: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
        case string(String)
        case int(Int64)

        init(stringLiteral value: String) { self = .string(value) }
        init(integerLiteral value: Int64) { self = .int(value) }

        var text: String {
            switch self {
            case .string(let value): value
            case .int(let value): String(value)
            }
        }
    }

    /// One field of an event. The named constructors are the field names settle's events use.
    struct Field: Sendable, Equatable {
        let key: String
        let value: Value

        init(_ key: String, _ value: Value) {
            self.key = key
            self.value = value
        }
        init(_ key: String, _ value: String) { self.init(key, .string(value)) }
        init(_ key: String, _ value: Int) { self.init(key, .int(Int64(value))) }

        static func run(_ id: String) -> Field { Field("run", id) }
        static func instruction(_ id: String) -> Field { Field("instruction", id) }
        static func lines(_ count: Int) -> Field { Field("lines", count) }
        static func kind(_ kind: String) -> Field { Field("kind", kind) }
        static func amountMinor(_ amount: Int64) -> Field { Field("amount_minor", .int(amount)) }
        static func currency(_ code: String) -> Field { Field("currency", code) }
        static func httpStatus(_ status: Int) -> Field { Field("http_status", status) }
        static func stripeCode(_ code: String) -> Field { Field("stripe_code", code) }
        static func requestID(_ id: String) -> Field { Field("request_id", id) }
        static func attempt(_ number: Int) -> Field { Field("attempt", number) }
        static func durationMS(_ milliseconds: Int) -> Field { Field("duration_ms", milliseconds) }
        static func file(_ path: String) -> Field { Field("file", path) }
        static func line(_ number: Int) -> Field { Field("line", number) }

        /// The process's resident memory now and at its peak so far, in MB (`/proc/self/status`),
        /// so a `-v` log shows which phase sets the peak; nothing where the system does not say.
        static func memory() -> [Field] {
            guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return [] }
            var fields: [Field] = []
            for line in status.split(separator: "\n") {
                for (name, key) in [("VmRSS:", "rss_mb"), ("VmHWM:", "peak_rss_mb")] where line.hasPrefix(name) {
                    let kilobytes = line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
                        .flatMap { Int($0) }
                    if let kilobytes { fields.append(Field(key, kilobytes / 1024)) }
                }
            }
            return fields
        }
    }

    /// The keys every JSON line has; a field with one of these names is written `field_<name>`.
    static let reservedKeys: Set<String> = ["time", "level", "event", "message"]

    let json: Bool
    let threshold: Level
    let verbose: Bool
    private let sink: @Sendable (String) -> Void
    private let clock: @Sendable () -> Date
    private let lock = NSLock()
    /// Set by ``Progress`` while it owns the terminal's last line: a log line clears it first.
    var clearsLiveLine = false

    init(
        format: String, verbosity: Int,
        sink: @escaping @Sendable (String) -> Void = { StandardError.write($0) },
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        json = format == "json"
        threshold = verbosity > 0 ? .debug : verbosity < 0 ? .warning : .info
        verbose = verbosity > 0
        self.sink = sink
        self.clock = clock
    }

    func enabled(_ level: Level) -> Bool { level >= threshold }

    /// Logs one event: `log(.info, event: "plan_written", "plan written to out", fields: [.lines(36)])`.
    func callAsFunction(_ level: Level, event: String, _ message: String, fields: [Field] = []) {
        guard enabled(level) else { return }
        let message = Log.withoutKeys(message)
        let fields = fields.map { field in
            guard case .string(let value) = field.value else { return field }
            return Field(field.key, .string(Log.withoutKeys(value)))
        }
        let line = json ? jsonLine(level, event: event, message, fields) : textLine(level, message, fields)
        lock.lock()
        defer { lock.unlock() }
        sink(clearsLiveLine ? "\r\u{1b}[K" + line : line)
    }

    /// A line without its own event name (event `log`), string fields only.
    func callAsFunction(_ level: Level, _ message: String, _ fields: [(String, String)] = []) {
        self(level, event: "log", message, fields: fields.map { Field($0.0, $0.1) })
    }

    /// Writes a line that is not a log event (the live progress line) under the same lock.
    func writeRaw(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        sink(text)
    }

    func jsonLine(_ level: Level, event: String, _ message: String, _ fields: [Field]) -> String {
        var out: [UInt8] = []
        out.append(
            contentsOf:
                "{\"time\":\"\(Log.timestamp(clock(), fractional: true))\",\"level\":\"\(level.name)\",\"event\":".utf8)
        JSON.appendString(event, to: &out)
        out.append(contentsOf: ",\"message\":".utf8)
        JSON.appendString(message, to: &out)
        for field in fields {
            out.append(UInt8(ascii: ","))
            JSON.appendString(Log.reservedKeys.contains(field.key) ? "field_" + field.key : field.key, to: &out)
            out.append(UInt8(ascii: ":"))
            switch field.value {
            case .string(let value): JSON.appendString(value, to: &out)
            case .int(let value): out.append(contentsOf: String(value).utf8)
            }
        }
        out.append(contentsOf: "}\n".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    func textLine(_ level: Level, _ message: String, _ fields: [Field]) -> String {
        var line = "settle: \(level == .info ? "" : level.name + ": ")\(message)"
        if verbose {
            for field in fields {
                let value = field.value.text
                let needsQuotes = value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" })
                line +=
                    " \(field.key)="
                    + (needsQuotes ? "\"\(value.replacingOccurrences(of: "\"", with: "\\\""))\"" : value)
            }
        }
        return line + "\n"
    }

    /// The text with anything shaped like a Stripe secret or restricted key (`sk_live_…`,
    /// `rk_test_…`) replaced by `[redacted]`: a key pasted where a value goes (a config value,
    /// an option) is echoed by the error that refuses it, whether or not it is the key in use.
    static func withoutKeys(_ text: String) -> String {
        guard text.contains("k_live_") || text.contains("k_test_") else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        func isKeyByte(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
        }
        while index < bytes.count {
            let rest = bytes[index...]
            if let prefix = ["sk_live_", "sk_test_", "rk_live_", "rk_test_"].first(where: {
                rest.starts(with: $0.utf8)
            }) {
                var end = index + prefix.utf8.count
                while end < bytes.count, isKeyByte(bytes[end]) { end += 1 }
                if end > index + prefix.utf8.count {
                    out.append(contentsOf: "[redacted]".utf8)
                    index = end
                    continue
                }
            }
            out.append(bytes[index])
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// ISO 8601 in UTC; log lines carry milliseconds, files whole seconds.
    static func timestamp(_ date: Date = Date(), fractional: Bool = false) -> String {
        let formatter = ISO8601DateFormatter()
        if fractional { formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds] }
        return formatter.string(from: date)
    }
}

/// Warnings about many similar things, said in one line instead of one line each:
/// `650 payout methods checked, 3 unusable: pm_a (archived), pm_b (…), pm_c (…)`.
///
/// Thread-safe: the apply engine may report from several threads. Call ``checked(_:)`` for
/// every thing looked at, ``add(_:reason:)`` for every bad one, then ``emit()`` once.
final class WarningGroup: @unchecked Sendable {
    let noun: String
    let verb: String
    let problem: String
    let event: String
    let log: Log
    static let shown = 5
    private var total = 0
    private var items: [(String, String)] = []
    private let lock = NSLock()

    /// - Parameters:
    ///   - noun: what is counted, plural (`payout methods`).
    ///   - verb: what was done to them (`checked`).
    ///   - problem: what the bad ones are (`unusable`).
    ///   - event: the log event name (`payout_methods_checked`).
    init(noun: String, verb: String = "checked", problem: String, event: String, log: Log) {
        self.noun = noun
        self.verb = verb
        self.problem = problem
        self.event = event
        self.log = log
    }

    func checked(_ count: Int = 1) {
        lock.lock()
        total += count
        lock.unlock()
    }

    func add(_ item: String, reason: String) {
        lock.lock()
        items.append((item, reason))
        lock.unlock()
    }

    /// Says the line: a warning when some are bad, else an info line (nothing when none was checked).
    func emit() {
        lock.lock()
        let (total, items) = (self.total, self.items)
        lock.unlock()
        guard total > 0 || !items.isEmpty else { return }
        let text = WarningGroup.line(total: total, noun: noun, verb: verb, problem: problem, items: items)
        log(
            items.isEmpty ? .info : .warning, event: event, text,
            fields: [Log.Field("checked", max(total, items.count)), Log.Field(problem, items.count)])
    }

    /// The one line, at most ``shown`` items named; pure, for tests.
    static func line(total: Int, noun: String, verb: String, problem: String, items: [(String, String)]) -> String {
        var text = "\(HumanFormat.count(max(total, items.count))) \(noun) \(verb)"
        guard !items.isEmpty else { return text + ", none \(problem)" }
        text += ", \(HumanFormat.count(items.count)) \(problem): "
        text += items.prefix(shown).map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
        if items.count > shown { text += " and \(HumanFormat.count(items.count - shown)) more" }
        return text
    }
}

/// Standard error, written with write(2). A reader that went away (`settle run … 2>&1 | head`)
/// makes a write fail with EPIPE, which is ignored (SIGPIPE is ignored from the start,
/// main.swift): the run goes on and exits with its own status. Foundation's FileHandle traps
/// on that error, and the default SIGPIPE ended the process with 141 (audit 35 C8).
enum StandardError {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
