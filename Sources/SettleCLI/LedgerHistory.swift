import Foundation
import SettleCore
import SettleLedger

/// The ledger as the planner sees it (SettlementHistory over LedgerStore).
///
/// A read that fails is remembered and turns the run into exit 75 after planning: the plan
/// would otherwise be made without knowing what earlier runs settled.
final class LedgerHistory: SettlementHistory {
    let store: LedgerStore
    private(set) var failure: LedgerError?

    init(store: LedgerStore) { self.store = store }

    /// The ledger for `plan`/`validate`: read-only, no lock; nil when there is no ledger yet.
    static func openForPlanning(path: String) throws(CommandFailure) -> LedgerHistory? {
        do {
            return try LedgerStore.openReadOnly(path: path).map(LedgerHistory.init(store:))
        } catch {
            throw failure(error, path: path)
        }
    }

    /// The ledger for `apply`/`run`: it must exist and be whole (else 78, nothing sent); one
    /// process at a time (a second one exits 75).
    static func openExclusive(path: String) throws(CommandFailure) -> LedgerStore {
        do {
            return try LedgerStore.open(path: path)
        } catch {
            throw failure(error, path: path)
        }
    }

    /// The exit status and message of a ledger that cannot be used (the one place).
    static func failure(_ error: LedgerError, path: String) -> CommandFailure {
        switch error {
        case .busy:
            return CommandFailure(.tryAgain, "the ledger \(path) is in use by another settle process; run again later")
        case .notALedger, .schemaMismatch:
            return CommandFailure(.inputUnreadable, "\(error)")
        case .missing, .damaged, .behindMark, .alreadyExists, .cannotOpen:
            return CommandFailure(.configuration, "\(error)")
        default:
            return CommandFailure(.tryAgain, "cannot read the ledger \(path): \(error)")
        }
    }

    /// Reads from here on see one snapshot of the ledger (``LedgerStore/beginSnapshot()``).
    func beginSnapshot() throws(CommandFailure) {
        do {
            try store.beginSnapshot()
        } catch {
            throw LedgerHistory.failure(error, path: store.path)
        }
    }

    /// Ends the snapshot; a failure to end a read transaction loses nothing (the next
    /// statement or closing the store ends it).
    func endSnapshot() { try? store.endSnapshot() }

    func checkReads() throws(CommandFailure) {
        if let failure { throw CommandFailure(.tryAgain, "reading the ledger failed: \(failure)") }
    }

    private func read<T>(_ fallback: T, _ body: () throws(LedgerError) -> T) -> T {
        do {
            return try body()
        } catch {
            if failure == nil { failure = error }
            return fallback
        }
    }

    func line(_ lineID: String) -> HistoricLine? {
        read(nil) { () throws(LedgerError) -> HistoricLine? in
            guard let line = try store.line(lineID) else { return nil }
            let state: HistoricLine.State
            switch line.status {
            case .settled: state = .settled
            case .failed: state = .failed
            case .inFlight, .unknown: state = .pending
            }
            return HistoricLine(content: line.content, state: state, stripeID: line.stripeID)
        }
    }

    func transferred(charge: String, currency: String) -> Int64 {
        read(0) { () throws(LedgerError) -> Int64 in try store.transferredAmount(charge: charge, currency: currency) }
    }

    func recordedTransfer(group: String, destination: String, currency: String) -> RecordedTransfer? {
        read(nil) { () throws(LedgerError) -> RecordedTransfer? in
            guard let transfer = try store.transfer(group: group, destination: destination, currency: currency) else {
                return nil
            }
            return RecordedTransfer(
                stripeID: transfer.stripeID, remaining: transfer.amountMinor - transfer.reversedMinor)
        }
    }

    func attempts(instruction: String) -> Int {
        read(0) { () throws(LedgerError) -> Int in try store.attempts(instruction: instruction) }
    }
}
