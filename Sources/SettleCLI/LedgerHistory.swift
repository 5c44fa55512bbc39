import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder

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
        let store: LedgerStore?
        do {
            store = try LedgerStore.openReadOnly(path: path, sharing: true)
        } catch {
            throw failure(error, path: path)
        }
        guard let store else { return nil }
        try refuseIfLinesUnknown(store)
        return LedgerHistory(store: store)
    }

    /// A ledger rebuilt from Stripe without the lines of some instructions cannot tell which
    /// lines are paid: planning or applying on it could pay them again (78, nothing read or sent).
    static func refuseIfLinesUnknown(_ store: LedgerStore) throws(CommandFailure) {
        let missing: [String]
        let unfinished: Bool
        do {
            unfinished = try store.rebuildUnfinished()
            missing = try store.instructionsWithoutLines()
        } catch {
            throw failure(error, path: store.path)
        }
        if unfinished {
            throw CommandFailure(
                .configuration,
                "a settle ledger rebuild of \(store.path) started and did not finish, so it cannot tell which lines "
                    + "are paid; run settle ledger rebuild --since DATE again with the plan folders that made them "
                    + "(or restore a backup)")
        }
        guard let first = missing.first else { return }
        throw CommandFailure(
            .configuration,
            "the ledger \(store.path) was rebuilt from Stripe without the lines of \(missing.count) instruction(s) "
                + "(first: \(first)), so it cannot tell which lines are paid; run settle ledger rebuild --since DATE "
                + "again with the plan folders that made them")
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

    /// ``openExclusive(path:)`` for `run` and `apply`, which move money on what it says.
    static func openToSettle(path: String) throws(CommandFailure) -> LedgerStore {
        let store = try openExclusive(path: path)
        try refuseIfLinesUnknown(store)
        return store
    }

    /// The exit status and message of a ledger that cannot be used (the one place).
    static func failure(_ error: LedgerError, path: String) -> CommandFailure {
        switch error {
        case .busy:
            return CommandFailure(.tryAgain, "the ledger \(path) is in use by another settle process; run again later")
        case .notALedger, .schemaMismatch:
            return CommandFailure(.inputUnreadable, "\(error)")
        case .missing, .damaged, .behindMark, .alreadyExists, .cannotOpen, .linked:
            return CommandFailure(.configuration, "\(error)")
        default:
            // Reads and writes alike (audit 61 F5: a full disk was "cannot read").
            return CommandFailure(.tryAgain, "the ledger \(path) failed: \(error)")
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

    /// The keys of one batch look-up as the JSON array the ledger's statement reads (reused).
    private var keys = JSON.Writer()

    /// Writes one key of a batch. SQLite's JSON functions end a string at `\u0000`, so a key
    /// with a NUL byte is written `null`, which matches nothing: no such key is in a ledger
    /// (the line rules reject control characters in ids, Stripe's ids have none, and builds
    /// before text was bound with its length cut such keys at the NUL).
    private static func key(_ bytes: UnsafeRawBufferPointer, to keys: inout JSON.Writer) {
        if let base = bytes.baseAddress, memchr(base, 0, bytes.count) != nil {
            keys.null()
        } else {
            keys.string(bytes: bytes)
        }
    }

    /// Writes the JSON array of a batch's keys, then asks the ledger with it.
    private func lookUp(
        _ write: (inout JSON.Writer) -> Void, _ ask: (UnsafeRawBufferPointer) throws(LedgerError) -> Void
    ) {
        keys.removeAll()
        keys.openArray()
        write(&keys)
        keys.closeArray()
        let failed = keys.withBytes { json -> LedgerError? in
            do throws(LedgerError) {
                try ask(json)
                return nil
            } catch {
                return error
            }
        }
        if let failed, failure == nil { failure = failed }
    }

    func lines(_ ids: [UnsafeRawBufferPointer], found: (Int, HistoricLine) -> Void) {
        lookUp({ keys in LedgerHistory.write(ids, to: &keys) }) { json throws(LedgerError) in
            try store.lines(keys: json) { position, line in
                let state: HistoricLine.State
                switch line.status {
                case .settled: state = .settled
                case .failed: state = .failed
                case .inFlight, .unknown: state = .pending
                }
                found(position, HistoricLine(content: line.content, state: state, stripeID: line.stripeID))
            }
        }
    }

    func transferred(_ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], found: (Int, Int64) -> Void) {
        lookUp({ keys in LedgerHistory.writePairs(charges, to: &keys) }) { json throws(LedgerError) in
            try store.transferredAmounts(keys: json, found: found)
        }
    }

    func chargesOfIntents(_ intents: [UnsafeRawBufferPointer], found: (Int, String) -> Void) {
        lookUp({ keys in LedgerHistory.write(intents, to: &keys) }) { json throws(LedgerError) in
            try store.chargesOfIntents(keys: json, found: found)
        }
    }

    func countedGross(_ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], found: (Int, Int64) -> Void) {
        lookUp({ keys in LedgerHistory.writePairs(charges, to: &keys) }) { json throws(LedgerError) in
            try store.countedGross(keys: json, found: found)
        }
    }

    /// charges.csv's look-ups (``ChargesFile/ChargeHistory``): the run that counted each
    /// charge and what earlier runs transferred on it.
    func charges(
        _ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)],
        firstRun: (Int, String, (currency: String, fee: Int64, gross: Int64)) -> Void,
        transferredBefore: (Int, Int64) -> Void, paidOutBefore: (Int, Int64) -> Void
    ) {
        lookUp({ keys in LedgerHistory.write(charges.map(\.charge), to: &keys) }) { json throws(LedgerError) in
            try store.chargeFirstRuns(keys: json, found: firstRun)
        }
        lookUp({ keys in LedgerHistory.writePairs(charges, to: &keys) }) { json throws(LedgerError) in
            try store.transferredBefore(keys: json, found: transferredBefore)
        }
        lookUp({ keys in LedgerHistory.writePairs(charges, to: &keys) }) { json throws(LedgerError) in
            try store.paidOutBefore(keys: json, found: paidOutBefore)
        }
    }

    /// Keys as JSON strings.
    private static func write(_ ids: [UnsafeRawBufferPointer], to keys: inout JSON.Writer) {
        for id in ids { key(id, to: &keys) }
    }

    /// A transfer settle made, with what is left of it to reverse.
    private static func recorded(_ transfer: LedgerTransfer) -> RecordedTransfer {
        RecordedTransfer(
            stripeID: transfer.stripeID, remaining: transfer.amountMinor - transfer.reversedMinor,
            charge: transfer.charge, currency: transfer.currency, destination: transfer.destination)
    }

    /// `[charge, currency]` pairs, the keys of the look-ups by charge.
    private static func writePairs(
        _ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], to keys: inout JSON.Writer
    ) {
        for (charge, currency) in charges {
            keys.openArray()
            key(charge, to: &keys)
            keys.string(currency.code)
            keys.closeArray()
        }
    }

    func failedCharges() -> [(charge: String, paymentIntent: String?, fact: StripeFacts.Charge)] {
        // Asked twice a plan (the look-ups, then the planner), read once: one snapshot.
        if let remembered { return remembered }
        let found = read([]) { () throws(LedgerError) in try store.failedCharges() }.map {
            ($0.charge, $0.paymentIntent, $0.fact)
        }
        remembered = found
        return found
    }
    private var remembered: [(charge: String, paymentIntent: String?, fact: StripeFacts.Charge)]?

    func decidedOrders(_ groups: [String]) -> [String: (line: String, reason: String)] {
        read([:]) { () throws(LedgerError) in try store.latestDecisions(groups: groups) }
    }

    func countedCharge(_ charge: String) -> ChargeTotal? {
        read(nil) { () throws(LedgerError) -> ChargeTotal? in
            guard let counted = try store.countedCharge(charge), let currency = Currency(counted.currency) else {
                return nil
            }
            return ChargeTotal(
                currency: currency, amount: counted.gross, fee: counted.fee,
                status: ChargeStatus.allCases.first { $0.name == counted.status } ?? .unknown)
        }
    }

    func recordedTransfer(group: String, destination: String, currency: String, charge: String?) -> RecordedTransfer? {
        read(nil) { () throws(LedgerError) -> RecordedTransfer? in
            try store.transfer(group: group, destination: destination, currency: currency, charge: charge)
                .map(LedgerHistory.recorded)
        }
    }

    func unsettledTransfer(group: String, destination: String, currency: String, charge: String?) -> String? {
        read(nil) { () throws(LedgerError) -> String? in
            try store.unsettledTransfer(group: group, destination: destination, currency: currency, charge: charge)
        }
    }

    func recordedTransfers(_ stripeIDs: [UnsafeRawBufferPointer], found: (Int, RecordedTransfer) -> Void) {
        // Few lines name a transfer: the answers are matched to the keys by text.
        var positions: [String: [Int]] = [:]
        for (position, id) in stripeIDs.enumerated() {
            positions[String(decoding: id, as: UTF8.self), default: []].append(position)
        }
        lookUp({ keys in LedgerHistory.write(stripeIDs, to: &keys) }) { json throws(LedgerError) in
            try store.transfers(stripeIDs: json) { transfer in
                for position in positions[transfer.stripeID] ?? [] { found(position, LedgerHistory.recorded(transfer)) }
            }
        }
    }

    func attempts(_ instructions: ArraySlice<PlanRow>, found: (Int, Int) -> Void) {
        lookUp({ keys in
            for instruction in instructions { keys.string(maxCount: PlanRow.idCount) { instruction.writeID(to: $0) } }
        }) { json throws(LedgerError) in try store.attempts(keys: json, found: found) }
    }
}
