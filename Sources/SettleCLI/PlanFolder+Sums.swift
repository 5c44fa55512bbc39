import SettleCore
import SettleLedger
import SettleWrite

extension PlanFolder {
    /// The control sums and the charges of an applied plan, from its rewritten results rows
    /// and the charges its manifest recorded: moved is what settled in this run, by Stripe
    /// object; a charge is counted when this run is the first to move money of it, and the
    /// ledger records it so that no later run counts it again.
    ///
    /// - Returns: the sums, the charges.csv rows, and the ledger failure if recording failed.
    static func outcomeSums(rows: [[[UInt8]]], manifest: JSON, ledger: LedgerStore) -> (
        sums: ControlSums, charges: [ChargeRow], ledgerFailure: LedgerError?
    ) {
        typealias F = ResultsFile.Field
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        let runID = manifest["run_id"]?.stringValue ?? ""
        var sums = ControlSums(runID: runID, asOf: manifest["as_of"]?.stringValue ?? "")
        struct Line {
            var lineID: String
            var kind: LineKind?
            var currency: String
            var amount: Int64
            var status: LineStatus
            var instruction: String
        }
        var lines: [Line] = []
        lines.reserveCapacity(rows.count)
        var objects = ControlSums.Objects()
        for row in rows where row.count == ResultsFile.header.count {
            guard let status = LineStatus(name: text(row[F.status.rawValue])) else { continue }
            let line = Line(
                lineID: text(row[F.lineID.rawValue]).trimmingFormulaGuard(),
                kind: LineKind.allCases.first { $0.name == text(row[F.kind.rawValue]) },
                currency: text(row[F.currency.rawValue]), amount: Int64(text(row[F.amountMinor.rawValue])) ?? 0,
                status: status, instruction: text(row[F.instructionID.rawValue]))
            sums.add(kind: line.kind, currency: line.currency, amount: line.amount, status: status)
            if status == .settled, let kind = line.kind, line.amount > 0, !line.instruction.isEmpty {
                objects.add(instruction: line.instruction, kind: kind, currency: line.currency, amount: line.amount)
            }
            lines.append(line)
        }
        sums.add(objects)
        for line in lines where line.kind == .reversal && line.amount > 0 {
            if line.status == .netted || (line.status == .settled && objects.isTransfer(line.instruction)) {
                sums.addNetted(currency: line.currency, amount: line.amount)
            }
        }
        var (charges, lineIDs) = ChargesFile.rows(manifest: manifest["charges"])
        var slotOfLine: [String: Int] = [:]
        for slot in lineIDs.indices {
            for id in lineIDs[slot] where slotOfLine[id] == nil { slotOfLine[id] = slot }
        }
        for line in lines where line.status == .settled && line.amount > 0 {
            guard let kind = line.kind, let slot = slotOfLine[line.lineID] else { continue }
            charges[slot].add(kind: kind, amount: line.amount, inTransfer: objects.isTransfer(line.instruction))
        }
        var failure: LedgerError?
        var counted: [(charge: String, currency: String, run: String, gross: Int64, fee: Int64, status: String)] = []
        for slot in charges.indices {
            do {
                charges[slot].firstRun = try ledger.chargeFirstRun(charges[slot].charge)
            } catch {
                if failure == nil { failure = error }
            }
            guard charges[slot].counting(runID: runID) == .thisRun else { continue }
            let row = charges[slot]
            charges[slot].firstRun = runID
            counted.append((row.charge, row.currency, runID, row.gross, row.fee, row.status))
        }
        do {
            try ledger.recordCharges(counted)
        } catch {
            if failure == nil { failure = error }
        }
        for row in charges { sums.addCharge(row) }
        return (sums, charges, failure)
    }
}
