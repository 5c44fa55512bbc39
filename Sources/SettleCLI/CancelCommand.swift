import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder

/// `settle cancel LINE_ID... [--ledger FILE]`: drops lines that wait in the ledger
/// (deferred, or not carried since a rebuild) so that no later run brings them back. A line
/// whose payout came back is not cancelled: the next run reports the return.
///
/// Holds the ledger's process lock. Records the cancellation (`held_lines` state
/// `cancelled`, ended by a `cancel_…` run with its own `runs` row, in one transaction) and
/// prints each line it cancelled. A named line that is not waiting is reported and makes the exit 65; no id 64.
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
        // A ledger that cannot tell which lines are paid (a rebuild that did not finish) cannot
        // tell which wait either: refused as `run` refuses it, 78 (audit 62 F1: "not in the
        // ledger", 65, and a cancel run recorded in it).
        let store = try LedgerHistory.openToSettle(path: path)
        defer { store.close() }
        let started = Date()
        let runID = "cancel_" + RunID.make(now: started).dropFirst("run_".count)
        let asOf = CivilDate.format(CivilDate.day(fromUnixSeconds: Int(started.timeIntervalSince1970)))
        var run = LedgerRun(id: runID, command: "cancel", asOf: asOf, folder: nil, startedAt: started)
        do throws(LedgerError) {
            // Lines not carried (a rebuild over a ledger that lost commits stopped holding them)
            // may be cancelled too, their order whole as a waiting one's.
            let held = Dictionary(
                try (store.heldLines([.waiting]) + store.waitingLinesRebuildsDropped()).map {
                    ($0.lineID, $0)
                }, uniquingKeysWith: { a, _ in a })
            var refused: [(String, String)] = []
            for id in ids where held[id] == nil {
                refused.append((id, try store.lineHistory(id)?.status ?? "not_in_ledger"))
            }
            // A group moves whole or not at all: a waiting line whose order has other waiting
            // lines not named stays, or the rest of its order would move without it.
            let partial = Self.partialOrders(named: ids, held: held, aliases: options.columns)
            for id in ids {
                guard let why = partial[id] else { continue }
                log(
                    .error, event: "cancel_refused", "line \(id) was not cancelled: \(why)",
                    fields: [Log.Field("line_id", id), Log.Field("status", "waiting")])
            }
            let cancellable = ids.filter { held[$0] != nil && partial[$0] == nil }
            // The cancellation and the run that made it, started and ended, in one transaction.
            var code = ExitCode.ok
            let changed = try store.cancel(cancellable, run: run) { changed in
                code = refused.isEmpty && partial.isEmpty && changed == cancellable.count ? .ok : .linesRejected
                run.endedAt = Date()
                run.exitStatus = Int(code.rawValue)
                run.counts =
                    "{\"cancelled\":\(changed),\"not_waiting\":\(refused.count),\"order_not_whole\":\(partial.count)}"
                return run
            }
            for id in cancellable {
                guard let line = held[id] else { continue }
                print(
                    "cancelled \(id): \(StatusCommand.amount(line.amountMinor, line.currency)) to \(line.payee), "
                        + "\(line.state.rawValue) since \(StatusCommand.timestamp(line.sinceAt)) "
                        + "(\(line.reasonCode): \(line.reason))")
            }
            // A killed run's lines are in no ledger until a run takes it over (audit 85 F4: "not
            // in the ledger", and the next run took the killed run over and paid the line).
            let open = refused.contains { $0.1 == "not_in_ledger" } ? Applier.runsNotEnded(store, except: "") : []
            let notYet =
                open.isEmpty
                ? ""
                : "; \(open.map { "run \($0.id) (\($0.folder ?? ""))" }.joined(separator: ", ")) "
                    + "\(PlanFolder.neverEnded), and its lines are in no ledger until the next `settle run` or "
                    + "`settle apply` takes it over: cancel the line after that"
            for (id, status) in refused {
                let why =
                    status == "not_in_ledger"
                    ? "it is not in the ledger" + notYet
                    : status == HeldLine.State.returned.rawValue
                        ? "its payout came back: the next plan or run reports it failed, in its errors.csv (leave it "
                            + "out of what is fed back to leave it unpaid)"
                        : "it is \(status), not waiting"
                log(
                    .error, event: "cancel_refused", "line \(id) was not cancelled: \(why)",
                    fields: [Log.Field("line_id", id), Log.Field("status", status)])
            }
            log(
                .info, event: "cancelled", "\(changed) lines cancelled by \(runID) in \(path)",
                fields: [.lines(changed), .run(runID)])
            return code
        } catch {
            throw LedgerHistory.failure(error, path: path)
        }
    }

    /// Why each named waiting line whose order would not be cancelled whole stays: its group
    /// has other waiting lines not named, or its group cannot be read from its record. Groups
    /// are read from each line's own record and header, as the planner keys them
    /// (docs/RULES.md): `transfer_group`, else `group_<payment_intent>`, else `order:<order_id>`.
    static func partialOrders(named ids: [String], held: [String: HeldLine], aliases: [String: String])
        -> [String: String]
    {
        // A line not carried is a member of its order as a waiting one is: fed again, it moves
        // with it (audit 79 F4: one line of such an order was cancelled alone, and the rest of
        // the order, fed as status listed it, moved without it).
        guard ids.contains(where: { held[$0] != nil }) else { return [:] }
        var members: [String: [String]] = [:]
        var groupOf: [String: HeldGroup] = [:]
        for line in held.values {
            let group = HeldGroup(line, aliases: aliases)
            groupOf[line.lineID] = group
            if case .key(let key) = group { members[key, default: []].append(line.lineID) }
        }
        let named = Set(ids)
        var partial: [String: String] = [:]
        for id in ids {
            switch groupOf[id] {
            case .key(let key):
                let others = members[key, default: []].filter { !named.contains($0) }.sorted()
                guard !others.isEmpty else { continue }
                partial[id] =
                    "\(others.joined(separator: ", ")) of its order wait in the ledger too and would move without it; "
                    + "name every waiting line of the order to cancel it"
            case .unreadable:
                partial[id] =
                    "its order cannot be read from its record, so the rest of the order cannot be told apart "
                    + "(give the --config its export was read with)"
            case .alone, nil:
                continue
            }
        }
        return partial
    }
}

/// The cells of a held line, read from its own record and header (the columns mapped by the
/// `--config` its export was read with); nil when its header does not read as an export's.
struct HeldRecord {
    private let layout: FileLayout
    private let record: [[UInt8]]

    init?(_ line: HeldLine, aliases: [String: String]) {
        guard let header = CSVScanner.records(Array(line.header.utf8)).first,
            let record = CSVScanner.records(line.record).first,
            let layout = try? FileLayout.csv(
                header: header.map { String(decoding: $0, as: UTF8.self) }, aliases: aliases)
        else { return nil }
        self.layout = layout
        self.record = record
    }

    /// A column's value as the export wrote it (a guard settle added removed); empty when absent.
    func value(_ column: Column) -> String {
        guard let index = layout.index(of: column), index < record.count else { return "" }
        return record[index].withUnsafeBytes { bytes in
            let view = layout.guardedCells?[index] == true ? CSVScanner.unguarded(bytes) : bytes
            return String(decoding: view, as: UTF8.self)
        }
    }
}

/// The group of a held line, read from its own record and header.
enum HeldGroup: Equatable {
    case key(String)
    /// No transfer_group, payment_intent or order_id: a group of its own.
    case alone
    /// Its header does not read as an export's (a column mapped by a config not given).
    case unreadable

    init(_ line: HeldLine, aliases: [String: String]) {
        guard let record = HeldRecord(line, aliases: aliases) else {
            self = .unreadable
            return
        }
        if case let group = record.value(.transferGroup), !group.isEmpty {
            self = .key(group)
        } else if case let intent = record.value(.paymentIntent), !intent.isEmpty {
            self = .key("group_" + intent)
        } else if case let order = record.value(.orderID), !order.isEmpty {
            self = .key("order:" + order)
        } else {
            self = .alone
        }
    }
}
