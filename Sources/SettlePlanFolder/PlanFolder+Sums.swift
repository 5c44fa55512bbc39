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
    static func outcomeSums(
        rows: [[[UInt8]]], index: [LineIndex.Entry], charges planned: [ChargeRow], manifest: JSON,
        ledger: LedgerStore
    ) -> (
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
        var chargeOfLine: [Int?] = []
        chargeOfLine.reserveCapacity(rows.count)
        var objects = ControlSums.Objects()
        for (position, row) in rows.enumerated() where row.count == ResultsFile.header.count {
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
            chargeOfLine.append(position < index.count ? index[position].charge : nil)
        }
        sums.add(objects)
        for line in lines where line.kind == .reversal && line.amount > 0 {
            if line.status == .netted || (line.status == .settled && objects.isTransfer(line.instruction)) {
                sums.addNetted(currency: line.currency, amount: line.amount)
            }
        }
        var charges = planned
        for (position, line) in lines.enumerated() where line.status == .settled && line.amount > 0 {
            guard let kind = line.kind, let slot = chargeOfLine[position], slot < charges.count else { continue }
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

extension PlanFolder {
    /// The charges of the plan as charges.csv lists them, with no moves: charge, currency,
    /// status, gross, fee, what earlier runs transferred, and the run that counts it. The
    /// lines drawing on each name its row in the line index. A re-apply reads the file the
    /// last apply rewrote: those facts do not change, and the counting run is read from the
    /// ledger again.
    static func plannedCharges(_ bytes: [UInt8]) throws(SettleError) -> [ChargeRow] {
        func text(_ field: [UInt8]) -> String { String(decoding: field, as: UTF8.self).trimmingFormulaGuard() }
        var rows: [ChargeRow] = []
        for (number, record) in CSVField.records(bytes).dropFirst().enumerated() {
            let fields = CSVField.split(record)
            guard fields.count == ChargesFile.header.count else {
                if fields.count <= 1 && fields.first?.isEmpty != false { continue }
                throw SettleError(.planInvalid, "charges.csv row \(number + 2) has \(fields.count) fields")
            }
            let code = text(fields[2])
            guard let currency = Currency(code) else {
                throw SettleError(.planInvalid, "charges.csv row \(number + 2) has an unknown currency \(code)")
            }
            func amount(_ position: Int) throws(SettleError) -> Int64 {
                guard
                    case .success(let value) = MinorUnits.parse(
                        text(fields[position]), currency: currency, allowZero: true)
                else {
                    throw SettleError(
                        .planInvalid, "charges.csv row \(number + 2): \(ChargesFile.header[position]) is not an amount")
                }
                return value
            }
            var row = ChargeRow(
                charge: text(fields[1]), currency: code, status: text(fields[3]), gross: try amount(4),
                fee: try amount(5))
            row.transferredBefore = try amount(6)
            let counted = text(fields[11])
            row.firstRun = counted.isEmpty ? nil : counted
            rows.append(row)
        }
        return rows
    }
}
