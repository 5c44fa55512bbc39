import Dispatch
import Foundation
import Glibc

/// SIGTERM, SIGINT or SIGHUP once an apply may send (a deploy stopping the job, Ctrl-C at 3 a.m.):
/// the first one stops sending. The calls in flight finish and their answers are recorded, the
/// calls not yet sent are released as never sent, the outcome files are written, and the run
/// exits 75; `settle apply` of the folder sends the rest. A second signal ends the process at
/// once, as without settle's handling (the ledger is durable at every step).
///
/// Once taken (``shared``), it holds the signals to the end of the process, through the rewrite
/// of the outcome files and the metrics after the send: a stop there waits for them, and the
/// run ends with its own exit status (audit 65 F1/F2: a signal among the rewrite's files ended
/// the process at once, leaving the folder's plan files, every line `planned`, for money Stripe
/// had moved; the next run said so once, and no day's summary counted it).
public final class Interruption: @unchecked Sendable {
    private let lock = NSLock()
    private var caught: Int32 = 0
    private var sources: [any DispatchSourceSignal] = []
    private static let numbers = StopSignals.numbers

    /// The process's one handler, from the first use to the end of the process.
    public static let shared = Interruption()

    private init() {
        for number in Interruption.numbers {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.received(number) }
            source.resume()
            sources.append(source)
        }
    }

    private func received(_ number: Int32) {
        lock.lock()
        let first = caught == 0
        if first { caught = number }
        lock.unlock()
        guard !first else { return }
        Glibc.signal(number, SIG_DFL)
        raise(number)
    }

    /// The signal that asked the run to stop, or nil.
    public var caughtSignal: Int32? {
        lock.lock()
        defer { lock.unlock() }
        return caught == 0 ? nil : caught
    }

    /// The signal caught by a process that took this handler, or nil (also when it never did).
    public static var caughtInProcess: Int32? { taken ? shared.caughtSignal : nil }
    nonisolated(unsafe) private static var taken = false

    /// For ``CrashPoint``'s stop signals: waits (up to 2 s) for a signal the process just sent
    /// itself to be noted (its dispatch source runs on another thread), so that the stop lands
    /// at the crash point, not some time after it. Returns at once in a process that never
    /// took the signals over (the handler before the send ends the process itself).
    static func waitUntilCaught() {
        guard taken else { return }
        var waited = 0
        while shared.caughtSignal == nil, waited < 2000 {
            usleep(1000)
            waited += 1
        }
    }

    /// Takes the signals over for the rest of the process (idempotent).
    static func take() -> Interruption {
        taken = true
        return shared
    }
}

/// Before the send (reading, the look-ups, planning, writing the plan's files): SIGTERM,
/// SIGINT or SIGHUP ends the process at once with 75, "run again later". Nothing is half-done
/// that matters: every file is written under a temporary name and renamed, and the ledger
/// commits whole transactions (an interrupted one is rolled back). From the apply on,
/// ``Interruption`` takes over to the end of the process (the calls in flight are answered
/// and recorded, and the outcome files written, first).
public enum StopSignals {

    /// SIGTERM (a deploy, `kill`), SIGINT (Ctrl-C) and SIGHUP (the terminal of a run by hand
    /// went away: audit 54 F9, it ended the process mid-send with 129 and no word).
    static let numbers = [SIGTERM, SIGINT, SIGHUP]

    public static func install() {
        // A parent may have started us with them blocked (a mask is inherited): unblocked
        // here, the process's first thread takes them.
        var set = sigset_t()
        sigemptyset(&set)
        for number in numbers {
            sigaddset(&set, number)
            Glibc.signal(number, stopHandler)
        }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }
}

extension StopSignals {
    /// The metrics file a stop writes (`--metrics-file`), made ready before anything can
    /// stop: the handler cannot format text or allocate, so it has the file's text in three
    /// parts and writes the two values only the moment of the stop gives (the end timestamp
    /// and the duration) with its own digits (audit 54 F1: a stop before the send left the
    /// previous run's file, so the exit status monitoring saw was the last run's).
    struct StopMetrics {
        var path: UnsafeMutablePointer<CChar>
        var temporary: UnsafeMutablePointer<CChar>
        /// Plain pointers only, so the handler copies nothing it must retain.
        var head: UnsafeMutableBufferPointer<UInt8>
        var middle: UnsafeMutableBufferPointer<UInt8>
        var tail: UnsafeMutableBufferPointer<UInt8>
        var startMillis: Int64
        var mode: mode_t
        var digits: UnsafeMutablePointer<UInt8>
    }

    nonisolated(unsafe) static var stopMetrics: UnsafeMutablePointer<StopMetrics>?

    /// Makes a stop by signal write `path` (Prometheus text, see `MetricsFile`): `head`, the
    /// end timestamp, `middle`, the duration, `tail`. Call once, before ``install()`` takes
    /// effect for the command; the text stays for the life of the process.
    public static func writeMetricsOnStop(
        path: String, head: String, middle: String, tail: String, start: Double, mode: UInt32
    ) {
        func bytes(_ text: String) -> UnsafeMutableBufferPointer<UInt8> {
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: text.utf8.count)
            _ = buffer.initialize(from: text.utf8)
            return buffer
        }
        let plan = UnsafeMutablePointer<StopMetrics>.allocate(capacity: 1)
        plan.initialize(
            to: StopMetrics(
                path: strdup(path), temporary: strdup("\(path).tmp-\(getpid())"),
                head: bytes(head), middle: bytes(middle), tail: bytes(tail),
                startMillis: Int64((start * 1000).rounded()),
                mode: mode, digits: .allocate(capacity: 32)))
        stopMetrics = plan
    }

    /// Unix milliseconds as `MetricsFile.seconds` writes them (whole seconds, then up to three
    /// decimals, trailing zeros dropped), into `digits` (at least 24 bytes), without
    /// allocating: the signal handler's formatter. Returns the bytes written. `millis` ≥ 0.
    static func formatSeconds(_ millis: Int64, into digits: UnsafeMutablePointer<UInt8>) -> Int {
        var count = 0
        var whole = millis / 1000
        repeat {
            digits[count] = UInt8(48 + whole % 10)
            whole /= 10
            count += 1
        } while whole > 0
        var low = 0
        var high = count - 1
        while low < high {
            (digits[low], digits[high]) = (digits[high], digits[low])
            low += 1
            high -= 1
        }
        var fraction = millis % 1000
        guard fraction != 0 else { return count }
        var places = 3
        while fraction % 10 == 0 {
            fraction /= 10
            places -= 1
        }
        digits[count] = 46  // "."
        for place in stride(from: places, through: 1, by: -1) {
            digits[count + place] = UInt8(48 + fraction % 10)
            fraction /= 10
        }
        return count + 1 + places
    }

    /// Async-signal-safe (open, write, fsync, rename; no allocation): writes the stop's
    /// metrics file when one was asked for. A failure leaves the previous file, as before.
    fileprivate static func writeStopMetrics() {
        guard let plan = stopMetrics?.pointee else { return }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let endMillis = Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
        let file = Glibc.open(plan.temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, plan.mode)
        guard file >= 0 else { return }
        fchmod(file, plan.mode)
        var complete = true
        func put(_ base: UnsafePointer<UInt8>?, _ count: Int) {
            var done = 0
            while complete, done < count {
                let wrote = write(file, base! + done, count - done)
                if wrote < 0, errno == EINTR { continue }
                if wrote <= 0 { complete = false } else { done += wrote }
            }
        }
        func putSeconds(_ millis: Int64) { put(plan.digits, formatSeconds(millis, into: plan.digits)) }
        put(plan.head.baseAddress, plan.head.count)
        putSeconds(endMillis)
        put(plan.middle.baseAddress, plan.middle.count)
        putSeconds(max(0, endMillis - plan.startMillis))
        put(plan.tail.baseAddress, plan.tail.count)
        if complete, fsync(file) == 0 {
            Glibc.close(file)
            rename(plan.temporary, plan.path)
        } else {
            Glibc.close(file)
            unlink(plan.temporary)
        }
    }
}

private let stopMessage: StaticString =
    "settle: stopped by a signal (exit 75): nothing is lost and nothing will be paid twice; run again\n"

/// Async-signal-safe: one write(2), the metrics file when one was asked for, then _exit.
private func stopHandler(_ signal: Int32) {
    _ = stopMessage.withUTF8Buffer { write(2, $0.baseAddress, $0.count) }
    StopSignals.writeStopMetrics()
    _exit(75)
}
