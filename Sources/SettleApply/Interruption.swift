import Dispatch
import Foundation
import Glibc

/// SIGTERM, SIGINT or SIGHUP while an apply sends (a deploy stopping the job, Ctrl-C at 3 a.m.): the
/// first one stops sending. The calls in flight finish and their answers are recorded, the
/// calls not yet sent are released as never sent, the outcome files are written, and the run
/// exits 75; `settle apply` of the folder sends the rest. A second signal ends the process at
/// once, as without settle's handling (the ledger is durable at every step).
final class Interruption: @unchecked Sendable {
    private let lock = NSLock()
    private var caught: Int32 = 0
    private var sources: [any DispatchSourceSignal] = []
    private static let numbers = StopSignals.numbers

    init() {
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
    var caughtSignal: Int32? {
        lock.lock()
        defer { lock.unlock() }
        return caught == 0 ? nil : caught
    }

    /// Gives the signals back the handling they had outside the send (``StopSignals``, else
    /// the default).
    func end() {
        for source in sources { source.cancel() }
        sources = []
        for number in Interruption.numbers { Glibc.signal(number, StopSignals.installed ? stopHandler : SIG_DFL) }
    }
}

/// Outside the send (reading, the look-ups, planning, writing the files): SIGTERM, SIGINT or
/// SIGHUP ends the process at once with 75, "run again later". Nothing is half-done that matters:
/// every file is written under a temporary name and renamed, and the ledger commits whole
/// transactions (an interrupted one is rolled back); what a send did is in the ledger, and
/// the next run or a re-apply goes on from it. While sending, ``Interruption`` takes over
/// (the calls in flight are answered and recorded first).
public enum StopSignals {
    nonisolated(unsafe) static var installed = false

    /// SIGTERM (a deploy, `kill`), SIGINT (Ctrl-C) and SIGHUP (the terminal of a run by hand
    /// went away: audit 54 F9, it ended the process mid-send with 129 and no word).
    static let numbers = [SIGTERM, SIGINT, SIGHUP]

    public static func install() {
        installed = true
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

private let stopMessage: StaticString =
    "settle: stopped by a signal (exit 75): nothing is lost and nothing will be paid twice; run again\n"

/// Async-signal-safe: one write(2), then _exit.
private func stopHandler(_ signal: Int32) {
    _ = stopMessage.withUTF8Buffer { write(2, $0.baseAddress, $0.count) }
    _exit(75)
}
