import Foundation
import SettleCore
import SettleLedger

/// `settle cancel LINE_ID... [--ledger FILE]`: drops lines that wait in the ledger
/// (deferred, or returned by their payout) so that no later run brings them back.
///
/// Holds the ledger's process lock. Records the cancellation (`held_lines` state
/// `cancelled`, ended by a `cancel_…` run with its own `runs` row) and prints each line it
/// cancelled. A named line that is not waiting is reported and makes the exit 65; no id 64.
struct CancelCommand {
    let options: Options
    let log: Log

    func run() throws(CommandFailure) -> ExitCode {
        var ids: [String] = []
        for id in options.inputs where !ids.contains(id) { ids.append(id) }
        guard !ids.isEmpty else {
            throw CommandFailure(.usage, "settle cancel needs the ids of the lines to cancel")
        }
        let path = options.ledger
        let store = try LedgerHistory.openExclusive(path: path)
        defer { store.close() }
        let started = Date()
        let runID = "cancel_" + RunID.make(now: started).dropFirst("run_".count)
        let asOf = CivilDate.format(CivilDate.day(fromUnixSeconds: Int(started.timeIntervalSince1970)))
        var run = LedgerRun(id: runID, command: "cancel", asOf: asOf, folder: nil, startedAt: started)
        do throws(LedgerError) {
            let held = Dictionary(
                try store.heldLines([.waiting, .returned]).map { ($0.lineID, $0) }, uniquingKeysWith: { a, _ in a })
            let cancellable = ids.filter { held[$0] != nil }
            var refused: [(String, String)] = []
            for id in ids where held[id] == nil {
                refused.append((id, try store.lineHistory(id)?.status ?? "not_in_ledger"))
            }
            // The run first: a cancellation is never recorded without the run that made it.
            try store.recordRun(run)
            let changed = try store.endHolding(cancellable, to: .cancelled, run: runID)
            for id in cancellable {
                guard let line = held[id] else { continue }
                print(
                    "cancelled \(id): \(StatusCommand.amount(line.amountMinor, line.currency)) to \(line.payee), "
                        + "\(line.state.rawValue) since \(StatusCommand.timestamp(line.sinceAt)) "
                        + "(\(line.reasonCode): \(line.reason))")
            }
            for (id, status) in refused {
                let why = status == "not_in_ledger" ? "it is not in the ledger" : "it is \(status), not waiting"
                log(
                    .error, event: "cancel_refused", "line \(id) was not cancelled: \(why)",
                    fields: [Log.Field("line_id", id), Log.Field("status", status)])
            }
            let code: ExitCode = refused.isEmpty && changed == cancellable.count ? .ok : .linesRejected
            run.endedAt = Date()
            run.exitStatus = Int(code.rawValue)
            run.counts = "{\"cancelled\":\(changed),\"not_waiting\":\(refused.count)}"
            try store.recordRun(run)
            log(
                .info, event: "cancelled", "\(changed) lines cancelled by \(runID) in \(path)",
                fields: [.lines(changed), .run(runID)])
            return code
        } catch {
            throw LedgerHistory.failure(error, path: path)
        }
    }
}
