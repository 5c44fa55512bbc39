import Foundation
import SettleCore
import SettleLedger
import SettleWrite

extension PlanFolder {
    /// After apply: what the ledger holds for later runs, given the rewritten rows one at a
    /// time. Deferred lines wait (with their original record, so the next run brings them
    /// back by itself); lines of payouts Stripe accepted are followed until Stripe posts
    /// them; every other line that was held leaves the queue (settled, rejected, reported
    /// failed, or fed again by an export).
    ///
    /// The ledger takes them in chunks of ``chunk`` as the rows stream (each chunk its own
    /// transaction; holding a line again is harmless, so a run that stops half-way and is
    /// applied again ends the same).
    struct HeldLines {
        typealias F = ResultsFile.Field
        static let chunk = 4096
        let layout: CorrectionLayout
        let ledger: LedgerStore
        let records: any SpoolRecordSource
        let run: String
        private let header: String
        /// Only lines the ledger holds can leave the queue: one update each, not one per line.
        /// Each held line: the run that began holding it, and when.
        private let heldNow: [String: (run: String, at: Date)]
        /// When this folder's plan was made: a line another run began holding after it is that
        /// run's, not this folder's to release (audit 25 A2: a re-applied old folder released
        /// the hold a later fed-back plan had put on a dated line, which was then lost).
        private let plannedAt: Date?
        private var hold: [HeldLine] = []
        private var release: [String] = []
        /// The ledger failed: nothing more is recorded (the run exits 75).
        private(set) var failure: SettleError?
        /// How the lines are recorded: held (``LedgerStore/hold(_:)``), or, by `settle ledger
        /// rebuild`, not carried (``LedgerStore/recordNotCarried(_:)``) or cancelled as the
        /// rows of run `by` say (``LedgerStore/recordCancelled(_:run:)``).
        enum Recording { case hold, notCarried, cancelled(by: String) }
        var recording = Recording.hold

        init(
            layout: CorrectionLayout, ledger: LedgerStore, records: any SpoolRecordSource, run: String,
            plannedAt: Date? = nil
        ) {
            self.plannedAt = plannedAt
            self.layout = layout
            self.ledger = ledger
            self.records = records
            self.run = run
            header = String(decoding: CorrectionFile.inputHeader(layout), as: UTF8.self)
            do throws(LedgerError) {
                heldNow = try ledger.heldLineStarts([.waiting, .returned, .unresolved])
            } catch {
                heldNow = [:]
                failure = SettleError(.ledgerFailed, "the ledger could not tell which lines wait: \(error)")
            }
        }

        /// One rewritten row and where its original record sits in the spool.
        ///
        /// - Throws: ``SettleError`` `folderUnwritable` when the spool cannot be read.
        ///
        /// `adopted`: the state to hold the line in, whatever its row's status (the lines of
        /// a folder whose apply never ended, ``adoptUnfinished(ledger:records:run:)``).
        ///
        /// `reportsReturn`: the row reports its payout's return (counted in this folder's
        /// payouts_returned): its holding ends here, whoever began it, so that no later run
        /// reports it again (audit 29 G2: counted twice).
        mutating func add(
            _ row: [[UInt8]], status: LineStatus?, entry: LineIndex.Entry, adopted: HeldLine.State? = nil,
            reportsReturn: Bool = false
        ) throws(SettleError) {
            guard failure == nil else { return }
            func text(_ field: F) -> String {
                String(decoding: row[field.rawValue], as: UTF8.self).trimmingFormulaGuard()
            }
            let id = text(.lineID)
            func held(_ state: HeldLine.State, instruction: String? = nil) throws(SettleError) -> HeldLine {
                let record: [UInt8]
                do {
                    record = try CorrectionFile.inputRecord(
                        CorrectionRow(
                            file: entry.file, spoolOffset: entry.offset, spoolLength: entry.length,
                            reasonCode: "", reason: "", source: ""),
                        layout: layout, records: records)
                } catch {
                    throw SettleError(.folderUnwritable, "cannot read \(error.path): \(error.message)")
                }
                return HeldLine(
                    lineID: id, state: state, payee: text(.payee),
                    amountMinor: Int64(text(.amountMinor)) ?? 0, currency: text(.currency),
                    reasonCode: text(.reasonCode), reason: text(.reason), source: text(.source),
                    header: header, record: record, instructionID: instruction, sinceRun: run)
            }
            if let adopted {
                hold.append(try held(adopted, instruction: text(.instructionID).isEmpty ? nil : text(.instructionID)))
                if hold.count >= Self.chunk { write() }
                return
            }
            switch status {
            case .deferred?:
                hold.append(try held(.waiting))
            case .settled? where text(.kind) == LineKind.payout.name:
                hold.append(try held(.following, instruction: text(.instructionID)))
            case .unknown?:
                // Sent, the outcome not known: the next run brings it back and reports it.
                hold.append(
                    try held(.unresolved, instruction: text(.instructionID).isEmpty ? nil : text(.instructionID)))
            case .planned?:
                break  // not sent (a plan not applied yet): neither held nor released
            default:
                // A copy that does not count (a later copy of the line_id, or an export's copy
                // that conflicts with the held line) leaves it held: the copy that counts has a
                // row of its own in this run, and says. (A later copy's release, a chunk after
                // the first copy held the line again, lost a waiting line.)
                if let start = heldNow[id], !ReasonCode.copyCodes.contains(text(.reasonCode)),
                    reportsReturn || start.run == run || plannedAt.map({ start.at < $0 }) ?? true
                {
                    release.append(id)
                }
            }
            if hold.count + release.count >= Self.chunk { write() }
        }

        /// Records what is queued; after a failure, nothing more.
        mutating func write() {
            guard failure == nil else { return }
            do throws(LedgerError) {
                try ledger.endHolding(release, to: .released, run: run)
                switch recording {
                case .hold: try ledger.hold(hold)
                case .notCarried: try ledger.recordNotCarried(hold)
                case .cancelled(let run): try ledger.recordCancelled(hold, run: run)
                }
            } catch {
                failure = SettleError(.ledgerFailed, "the ledger could not record the lines that wait: \(error)")
            }
            hold.removeAll(keepingCapacity: true)
            release.removeAll(keepingCapacity: true)
        }
    }
}
