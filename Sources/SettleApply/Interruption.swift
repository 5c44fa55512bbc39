import Dispatch
import Foundation
import Glibc

/// SIGTERM or SIGINT while an apply sends (a deploy stopping the job, Ctrl-C at 3 a.m.): the
/// first one stops sending. The calls in flight finish and their answers are recorded, the
/// calls not yet sent are released as never sent, the outcome files are written, and the run
/// exits 75; `settle apply` of the folder sends the rest. A second signal ends the process at
/// once, as without settle's handling (the ledger is durable at every step).
final class Interruption: @unchecked Sendable {
    private let lock = NSLock()
    private var caught: Int32 = 0
    private var sources: [any DispatchSourceSignal] = []
    private static let numbers = [SIGTERM, SIGINT]

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

    /// Gives the signals back their default handling.
    func end() {
        for source in sources { source.cancel() }
        sources = []
        for number in Interruption.numbers { Glibc.signal(number, SIG_DFL) }
    }
}
