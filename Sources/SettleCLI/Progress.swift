import Foundation
import SettleApply

/// Progress from start to end, one phase at a time (reading, planning, writing, looking up,
/// sending): on a terminal a live line with done/total, rate and ETA, redrawn four times a
/// second; in a log (not a terminal) one line every 30 s, so a long cron run shows it is
/// alive; or nothing.
///
/// Plan and apply share it: `phase(_:total:unit:)` starts a phase, `update(done:)` moves it
/// (cheap, any thread), `finish()` ends it. The apply engine's ``ApplyProgress`` callback
/// goes through ``callAsFunction(_:)``.
final class Progress: @unchecked Sendable {
    enum Mode { case terminal, logLines, off }

    let mode: Mode
    let log: Log
    /// Seconds between two lines: 0.25 on a terminal, 30 in a log.
    let interval: Double
    private let clock: @Sendable () -> Double
    private let condition = NSCondition()
    private var ticking = false
    private var state: State?

    /// The phase being shown.
    struct State {
        var name: String
        var total: Int?
        var unit: String
        var bytes = false
        var done = 0
        /// Lines read so far, for a reading phase whose done/total are bytes.
        var count: Int?
        var started: Double
    }

    init(_ mode: Mode, log: Log, interval: Double? = nil, clock: @escaping @Sendable () -> Double = Progress.now) {
        self.mode = mode
        self.log = log
        self.interval = interval ?? (mode == .terminal ? 0.25 : 30)
        self.clock = clock
    }

    /// The apply side's name for it (kept so callers read as before).
    convenience init(mode: Mode, log: Log) { self.init(mode, log: log) }

    static let now: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    /// Starts a phase; `total` nil when its size is not known (then the line shows the time spent).
    func phase(_ name: String, total: Int?, unit: String = "") {
        start(State(name: name, total: total, unit: unit, started: clock()))
    }

    /// Starts reading a file of `bytes` bytes (compressed size for gzip, like what is counted).
    func phase(reading name: String, bytes: UInt64?) {
        start(
            State(
                name: "reading \(name)", total: bytes.map { Int(clamping: $0) }, unit: "", bytes: true, count: 0,
                started: clock()))
    }

    func update(done: Int) {
        guard mode != .off else { return }
        condition.lock()
        state?.done = done
        condition.unlock()
    }

    /// A reading phase: bytes read and lines checked so far.
    func update(bytes: UInt64, lines: Int) {
        guard mode != .off else { return }
        condition.lock()
        state?.done = Int(clamping: bytes)
        state?.count = lines
        condition.unlock()
    }

    /// Ends the phase and clears the live line.
    func finish() {
        guard mode != .off else { return }
        condition.lock()
        let wasShown = state != nil
        state = nil
        ticking = false
        condition.broadcast()
        condition.unlock()
        if mode == .terminal, wasShown {
            log.clearsLiveLine = false
            log.writeRaw("\r\u{1b}[K")
        }
    }

    /// The apply engine's callback: `resolve`, `preflight`, `send` become phases of their own.
    func callAsFunction(_ progress: ApplyProgress) {
        guard mode != .off else { return }
        let name = Progress.applyPhaseName(progress.phase)
        condition.lock()
        let current = state?.name
        condition.unlock()
        let unit = progress.phase == "look-up" || progress.phase == "preflight" ? "look-ups" : "instructions"
        if current != name { phase(name, total: progress.total, unit: unit) }
        update(done: progress.done)
        if progress.done >= progress.total { finish() }
    }

    static func applyPhaseName(_ phase: String) -> String {
        switch phase {
        case "resolve": "resolving earlier runs"
        case "preflight", "look-up": "looking up"
        case "send": "sending"
        default: phase
        }
    }

    private func start(_ new: State) {
        guard mode != .off else { return }
        condition.lock()
        state = new
        let startTicker = !ticking
        ticking = true
        condition.broadcast()
        condition.unlock()
        if mode == .terminal { draw() }
        if startTicker {
            let thread = Thread { [self] in tick() }
            thread.stackSize = 1 << 18
            thread.start()
        }
    }

    private func tick() {
        condition.lock()
        while ticking {
            _ = condition.wait(until: Date(timeIntervalSinceNow: interval))
            guard ticking else { break }
            condition.unlock()
            draw()
            condition.lock()
        }
        condition.unlock()
    }

    private func draw() {
        condition.lock()
        guard let state else {
            condition.unlock()
            return
        }
        condition.unlock()
        let now = clock()
        let text = Progress.line(state, now: now)
        if mode == .terminal {
            log.clearsLiveLine = true
            log.writeRaw("\r\u{1b}[K" + text)
        } else {
            var fields: [Log.Field] = [Log.Field("phase", state.name), Log.Field("done", state.done)]
            if let total = state.total { fields.append(Log.Field("total", total)) }
            if let count = state.count { fields.append(.lines(count)) }
            fields.append(.durationMS(Int((now - state.started) * 1000)))
            log(.info, event: "progress", text, fields: fields)
        }
    }

    /// The text of one progress line; pure, for tests.
    static func line(_ state: State, now: Double) -> String {
        let elapsed = max(0.001, now - state.started)
        var text = state.name + ": "
        guard let total = state.total, total > 0 else {
            if state.done > 0 { text += "\(HumanFormat.count(state.done)) \(state.unit), " }
            return text + HumanFormat.duration(seconds: elapsed)
        }
        let done = min(state.done, total)
        let percent = done * 100 / total
        if state.bytes {
            text += "\(HumanFormat.mebibytes(UInt64(done))) of \(HumanFormat.mebibytes(UInt64(total))) (\(percent)%)"
            if let lines = state.count, lines > 0 {
                text += ", \(HumanFormat.count(lines)) lines, \(HumanFormat.rate(Double(lines) / elapsed)) lines/s"
            }
        } else {
            text += "\(HumanFormat.count(done))/\(HumanFormat.count(total))"
            if !state.unit.isEmpty { text += " \(state.unit)" }
            text += " (\(percent)%)"
            if done > 0 { text += ", \(HumanFormat.rate(Double(done) / elapsed))/s" }
        }
        if done > 0, done < total {
            let remaining = Double(total - done) / (Double(done) / elapsed)
            text += ", ETA \(HumanFormat.duration(seconds: remaining))"
        } else {
            text += ", \(HumanFormat.duration(seconds: elapsed))"
        }
        return text
    }
}

/// The apply side's printer is the same type.
typealias ApplyProgressPrinter = Progress
