import Foundation
public import SettleCore
import SettleLedger
import SettleWrite

extension PlanFolder {
    /// The control sums and the charges of an applied plan, from its rewritten results rows
    /// (given one at a time, ``add(_:status:charge:)``) and the charges charges.csv lists
    /// (``plannedCharges(_:)``), each line's row among them from the line index: moved is
    /// what settled in this run, by Stripe object; a charge is counted when this run is the
    /// first to move money of it, and the ledger records it so that no later run counts it
    /// again.
    ///
    /// What is kept per instruction (its moves, and each charge's lines by instruction)
    /// waits in a ``Spill`` on disk, so memory does not follow the plan.
    struct OutcomeSums {
        typealias F = ResultsFile.Field
        let runID: String
        var sums: ControlSums
        var charges: [ChargeRow]
        /// The charges (rows of ``charges``) a settled transfer of the folder drew on.
        private var paidFrom: Set<Int> = []
        /// Per instruction: currency; transfer, reversal and payout amounts settled, and the
        /// number of its settled reversal lines.
        private let objects: Spill
        /// Per (charge slot, instruction): the instruction, the slot; transfer, reversal and
        /// payout amounts settled.
        private let chargeLines: Spill

        init(manifest: JSON, charges: [ChargeRow]) throws(LedgerError) {
            runID = manifest["run_id"]?.stringValue ?? ""
            sums = ControlSums(runID: runID, asOf: manifest["as_of"]?.stringValue ?? "")
            // Payouts that came back are learned before the plan; apply does not change them.
            if case .object(let currencies)? = manifest["control_sums"] {
                for (code, measures) in currencies {
                    let returned = measures["payouts_returned"]
                    if let amount = returned?["amount_minor"]?.intValue, amount > 0 {
                        sums.addReturned(
                            currency: code, amount: amount, lines: Int(returned?["count"]?.intValue ?? 0))
                    }
                }
            }
            self.charges = charges
            objects = try Spill()
            chargeLines = try Spill()
        }

        /// One row of the rewritten results.csv; `charge`: its row in charges.csv (line index);
        /// `madeAndBack`: a failed payout line whose object this run made (it came back since):
        /// the object counts as made, not on the charge.
        mutating func add(_ row: [[UInt8]], status: LineStatus, charge: Int?, madeAndBack: Bool = false)
            throws(LedgerError)
        {
            func text(_ field: F) -> String { String(decoding: row[field.rawValue], as: UTF8.self) }
            let kind = LineKind.allCases.first { $0.name == text(.kind) }
            let currency = text(.currency)
            let amount = Int64(text(.amountMinor)) ?? 0
            let instruction = text(.instructionID)
            sums.add(kind: kind, currency: currency, amount: amount, status: status)
            // Stripe refused a transfer because its charge failed (the export said it had
            // succeeded), or an offline plan's charge was found failed: the charge is failed.
            if status == .failed || status == .rejected, text(.reasonCode) == ReasonCode.chargeFailed.code,
                kind == .transfer, let slot = charge, slot < charges.count, !paidFrom.contains(slot)
            {
                charges[slot].status = ChargeStatus.failed.name
            }
            // Stripe accepted a transfer funded by it: whatever the plan knew, the charge has not
            // failed (put right since, and the folder applied again). Its gross counts, in the run
            // that moves money from it (audit 26 B4: it stayed failed, and no day counted it). So
            // does a payout of its order this run made: the charge this run counted stays counted
            // (audit 29 G4: a re-apply after a later refusal `charge_failed` dropped its gross).
            if status == .settled || madeAndBack, kind == .transfer || kind == .payout, let slot = charge,
                slot < charges.count,
                paidFrom.insert(slot).inserted, charges[slot].status == ChargeStatus.failed.name
            {
                charges[slot].status = ChargeStatus.succeeded.name
            }
            if kind == .reversal, amount > 0, status == .netted {
                sums.addNetted(currency: currency, amount: amount)
            }
            if madeAndBack, kind == .payout, amount > 0, !instruction.isEmpty {
                try objects.add(instruction, first: currency, numbers: [0, 0, amount, 0])
            }
            guard status == .settled, let kind, amount > 0 else { return }
            let moves: [Int64] =
                switch kind {
                case .transfer: [amount, 0, 0, 0]
                case .reversal: [0, amount, 0, 1]
                case .payout: [0, 0, amount, 0]
                }
            if !instruction.isEmpty { try objects.add(instruction, first: currency, numbers: moves) }
            // Only moves in the charge's currency are its money (PlanCharges, at plan time, alike).
            if let slot = charge, slot < charges.count, charges[slot].currency == currency {
                try chargeLines.add("\(slot) \(instruction)", first: instruction, second: String(slot), numbers: moves)
            }
        }

        /// The sums and the charges.csv rows once every row is in, and the ledger failure if
        /// recording the charges failed.
        /// `reportedHere`: the instructions another apply found made that this folder reports
        /// as moved by its run (not transferred "before" it, then).
        mutating func finish(ledger: LedgerStore, reportedHere: Set<String> = []) throws(LedgerError) -> (
            sums: ControlSums, charges: [ChargeRow], ledgerFailure: LedgerError?
        ) {
            var sums = self.sums
            var reportedOnCharge: [String: Int64] = [:]
            for id in reportedHere {
                // One this run found made is its own in the ledger already.
                guard let reported = try ledger.instruction(id), reported.status == .settled,
                    reported.dispatch.kind == LineKind.transfer.name, reported.settledBy != runID
                else { continue }
                reportedOnCharge[reported.dispatch.charge + "\u{0}" + reported.dispatch.currency, default: 0] +=
                    reported.dispatch.amountMinor
            }
            try objects.forEach { entry in
                let (transfer, reversal, payout) = (entry.numbers[0], entry.numbers[1], entry.numbers[2])
                if transfer > 0 {
                    sums.addObject(kind: .transfer, currency: entry.first, amount: transfer - reversal)
                    // Its settled reversal lines are netted into it.
                    if entry.numbers[3] > 0 {
                        sums.addNetted(currency: entry.first, amount: reversal, lines: Int(entry.numbers[3]))
                    }
                } else if reversal > 0 {
                    sums.addObject(kind: .reversal, currency: entry.first, amount: reversal)
                } else if payout > 0 {
                    sums.addObject(kind: .payout, currency: entry.first, amount: payout)
                }
            }
            var charges = self.charges
            let objects = self.objects
            // Each payout's share of each charge, by its Stripe object (a later run learns of
            // one that came back).
            var payoutShares: [(instruction: String, charge: String, currency: String, amount: Int64)] = []
            try chargeLines.forEach { (entry) throws(LedgerError) in
                guard let slot = Int(entry.second) else { return }
                let inTransfer = entry.first.isEmpty ? false : (try objects.get(entry.first)?.numbers[0] ?? 0) > 0
                for (kind, amount) in zip([LineKind.transfer, .reversal, .payout], entry.numbers) where amount > 0 {
                    charges[slot].add(kind: kind, amount: amount, inTransfer: inTransfer)
                }
                if entry.numbers[2] > 0, !entry.first.isEmpty {
                    payoutShares.append((entry.first, charges[slot].charge, charges[slot].currency, entry.numbers[2]))
                }
            }
            objects.close()
            chargeLines.close()
            var failure: LedgerError?
            var counted: [(charge: String, currency: String, run: String, gross: Int64, fee: Int64, status: String)] =
                []
            var paidOut: [(charge: String, currency: String, amount: Int64)] = []
            for slot in charges.indices {
                do {
                    // Under its id, and under the payment intent its lines named with it (what
                    // earlier runs knew of it by the intent alone: audit 53 H4).
                    let names = [charges[slot].charge] + (charges[slot].intent.map { [$0] } ?? [])
                    let currency = charges[slot].currency
                    var firstRun: String? = nil
                    var paidOutBefore: Int64 = 0
                    var transferredBefore: Int64 = 0
                    for name in names {
                        if firstRun == nil { firstRun = try ledger.chargeFirstRun(name) }
                        paidOutBefore += try ledger.paidOutBefore(charge: name, currency: currency, excluding: runID)
                        transferredBefore += try ledger.transferredBefore(
                            charge: name, currency: currency, excluding: runID)
                    }
                    charges[slot].firstRun = firstRun
                    charges[slot].paidOutBefore = paidOutBefore
                    // As the ledger stands now, not as it stood at plan time; what this folder
                    // reports as its own is not before it (audit 31 G5: counted twice there).
                    charges[slot].transferredBefore =
                        transferredBefore - names.reduce(0) { $0 + (reportedOnCharge[$1 + "\u{0}" + currency] ?? 0) }
                } catch {
                    if failure == nil { failure = error }
                }
                if charges[slot].paidOut > 0 {
                    paidOut.append((charges[slot].charge, charges[slot].currency, charges[slot].paidOut))
                }
                guard charges[slot].counting(runID: runID) == .thisRun else { continue }
                let row = charges[slot]
                charges[slot].firstRun = runID
                counted.append((row.charge, row.currency, runID, row.gross, row.fee, row.status))
            }
            do {
                try ledger.recordCharges(counted)
                try ledger.recordChargeIntents(
                    charges.compactMap { row in row.intent.map { (row.charge, $0) } }, run: runID)
                // This run's payouts per charge, for the retained so far of later runs.
                try ledger.recordChargePayouts(paidOut, run: runID)
                try ledger.recordPayoutCharges(payoutShares, run: runID)
            } catch {
                if failure == nil { failure = error }
            }
            for row in charges { sums.addCharge(row) }
            return (sums, charges, failure)
        }
    }
}

extension PlanFolder {
    /// The amount of each charge charges.csv lists, by the key the ledger records a transfer's
    /// charge under: ``ApplyEngine/chargeAmounts``.
    public func chargeAmounts() throws(SettleError) -> [String: (currency: String, gross: Int64)] {
        var found: [String: (currency: String, gross: Int64)] = [:]
        for row in try plannedCharges() where found[row.charge] == nil {
            found[row.charge] = (row.currency, row.gross)
        }
        return found
    }

    /// ``plannedCharges(_:withPaidOut:)`` of the folder's charges.csv as it is now (none when
    /// it has no such file).
    func plannedCharges() throws(SettleError) -> [ChargeRow] {
        try Self.plannedCharges(FileManager.default.contents(atPath: path("charges.csv")).map { [UInt8]($0) } ?? [])
    }

    /// The charges of the plan as charges.csv lists them, with no moves: charge, currency,
    /// status, gross, fee, what earlier runs transferred (and, in a folder written before the
    /// sidecar, the run that counts it: ``countedCharges()`` reads it from the sidecar). The
    /// lines drawing on each name its row in the line index. A re-apply reads the file the
    /// last apply rewrote: those facts do not change, and the counting run is read from the
    /// ledger again.
    ///
    /// - Parameter withPaidOut: also read each row's `paid_out` (what the run that wrote the
    ///   file paid out for the charge's orders), for `settle ledger rebuild`.
    static func plannedCharges(_ bytes: [UInt8], withPaidOut: Bool = false) throws(SettleError) -> [ChargeRow] {
        func text(_ field: [UInt8]) -> String { String(decoding: field, as: UTF8.self).trimmingFormulaGuard() }
        var rows: [ChargeRow] = []
        let records = CSVScanner.records(bytes)
        // A folder written before 2026-12-05 has the counting run as a twelfth column.
        let columns =
            records.first?.count == ChargesFile.headerWithCountedIn.count
            ? ChargesFile.headerWithCountedIn.count : ChargesFile.header.count
        for (number, fields) in records.dropFirst().enumerated() {
            guard fields.count == columns else {
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
            if withPaidOut { row.paidOut = try amount(9) }
            if columns > ChargesFile.header.count {
                let counted = text(fields[ChargesFile.header.count])
                row.firstRun = counted.isEmpty ? nil : counted
            }
            rows.append(row)
        }
        return rows
    }
}
