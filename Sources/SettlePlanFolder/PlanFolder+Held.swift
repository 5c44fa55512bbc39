import Foundation
import SettleCore
import SettleLedger
import SettleWrite

extension PlanFolder {
    /// After apply: what the ledger holds for later runs. Deferred lines wait (with their
    /// original record, so the next run brings them back by itself); lines of payouts
    /// Stripe accepted are followed until Stripe posts them; every other line that was held
    /// leaves the queue (settled, rejected, reported failed, or fed again by an export).
    func updateHeldLines(
        rows: [[[UInt8]]], index: [LineIndex.Entry], layout: CorrectionLayout, ledger: LedgerStore,
        records: any SpoolRecordSource, run: String
    ) throws(SettleError) {
        typealias F = ResultsFile.Field
        func text(_ row: [[UInt8]], _ field: F) -> String {
            String(decoding: row[field.rawValue], as: UTF8.self).trimmingFormulaGuard()
        }
        let header = String(decoding: CorrectionFile.inputHeader(layout), as: UTF8.self)
        var hold: [HeldLine] = []
        var release: [String] = []
        // Only lines the ledger holds can leave the queue: one update each, not one per line.
        let heldNow: Set<String>
        do throws(LedgerError) {
            heldNow = try ledger.heldLineIDs([.waiting, .returned])
        } catch {
            throw SettleError(.ledgerFailed, "the ledger could not tell which lines wait: \(error)")
        }
        do {
            for (position, row) in rows.enumerated() where row.count == ResultsFile.header.count {
                let status = LineStatus(name: text(row, .status))
                let id = text(row, .lineID)
                let entry = index[position]
                func held(_ state: HeldLine.State, instruction: String? = nil) throws(WriteFailure) -> HeldLine {
                    let record = try CorrectionFile.inputRecord(
                        CorrectionRow(
                            file: entry.file, spoolOffset: entry.offset, spoolLength: entry.length,
                            reasonCode: "", reason: "", source: ""),
                        layout: layout, records: records)
                    return HeldLine(
                        lineID: id, state: state, payee: text(row, .payee),
                        amountMinor: Int64(text(row, .amountMinor)) ?? 0, currency: text(row, .currency),
                        reasonCode: text(row, .reasonCode), reason: text(row, .reason), source: text(row, .source),
                        header: header, record: record, instructionID: instruction, sinceRun: run)
                }
                switch status {
                case .deferred?:
                    hold.append(try held(.waiting))
                case .settled? where text(row, .kind) == LineKind.payout.name:
                    hold.append(try held(.following, instruction: text(row, .instructionID)))
                case .planned?, .unknown?:
                    break  // still on its way: neither waiting nor released
                default:
                    if heldNow.contains(id) { release.append(id) }
                }
            }
        } catch {
            throw SettleError(.folderUnwritable, "cannot read \(error.path): \(error.message)")
        }
        do throws(LedgerError) {
            try ledger.endHolding(release, to: .released, run: run)
            try ledger.hold(hold)
        } catch {
            throw SettleError(.ledgerFailed, "the ledger could not record the lines that wait: \(error)")
        }
    }
}
