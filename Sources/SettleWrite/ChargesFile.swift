public import SettleCore

/// One charge a run touched (README, "Output folder": charges.csv), and how summary.csv counts it.
public struct ChargeRow: Sendable, Equatable {
    /// How summary.csv counts the charge's gross and fee.
    public enum Counting: String, Sendable, Equatable {
        /// Counted in this run: the first run that allocates from it.
        case thisRun = "this_run"
        /// An earlier run counted it (the ledger remembers); not in this run's gross.
        case earlier
        /// Nothing of it moves in this run and no run counted it yet.
        case unallocated
        /// Pending (or a bank debit not yet succeeded): its own row, not gross.
        case pending
        /// Failed: its own row, not gross.
        case failed
    }

    public var charge: String
    public var currency: String
    /// `succeeded`, `pending`, `failed`, or empty when neither the export nor Stripe said.
    public var status: String
    public var gross: Int64
    public var fee: Int64
    /// Earlier runs' settled transfers on the charge, less settle's settled reversals of them.
    public var transferredBefore: Int64 = 0
    /// This run's transfers on the charge at their net amount (netted reversals subtracted).
    public var transferred: Int64 = 0
    /// This run's reversals (own calls) of transfers on the charge.
    public var reversed: Int64 = 0
    /// This run's payouts of the charge's orders.
    public var paidOut: Int64 = 0
    /// The run that counted the charge's gross (the ledger's, or this run), nil when none.
    public var firstRun: String?
    /// Whether some line of the charge moves in this run (planned in a plan, settled after apply).
    public var moves = false

    public init(charge: String, currency: String, status: String, gross: Int64, fee: Int64) {
        self.charge = charge
        self.currency = currency
        self.status = status
        self.gross = gross
        self.fee = fee
    }

    /// gross − fee − transferred before − transferred − paid out + reversed; 0 for a pending
    /// or failed charge (no money of it is in yet).
    public var retained: Int64 {
        if status == ChargeStatus.failed.name || status == ChargeStatus.pending.name { return 0 }
        return gross - fee - transferredBefore - transferred - paidOut + reversed
    }

    /// How this run counts the charge, given the run the ledger says counted it.
    public func counting(runID: String) -> Counting {
        if status == ChargeStatus.failed.name { return .failed }
        if status == ChargeStatus.pending.name { return .pending }
        if let firstRun, firstRun != runID { return .earlier }
        return moves ? .thisRun : .unallocated
    }

    /// Adds one line drawing on the charge (or of one of its orders) that moves in this run.
    /// `inTransfer`: the line belongs to a transfer instruction (a netted reversal).
    public mutating func add(kind: LineKind, amount: Int64, inTransfer: Bool) {
        moves = true
        switch kind {
        case .transfer: transferred += amount
        case .reversal where inTransfer: transferred -= amount
        case .reversal: reversed += amount
        case .payout: paidOut += amount
        }
    }
}

/// charges.csv: one row per charge the run touched.
public enum ChargesFile {
    public static let header = [
        "run_id", "charge", "currency", "status", "gross", "fee", "transferred_before", "transferred", "reversed",
        "paid_out", "retained", "counted_in",
    ]

    /// The charges of a plan with the lines that draw on each: a line naming the charge in
    /// `source_transaction`, else a line of an order whose lines name it (its payouts).
    /// Moves are the planned lines; `firstRun` and `transferredBefore` read the ledger.
    public static func rows(
        of plan: SettlementPlan, runID: String, firstRun: (String) -> String?,
        transferredBefore: (_ charge: String, _ currency: String) -> Int64
    ) -> (rows: [ChargeRow], lines: [[Int]]) {
        let batch = plan.batch
        var rows: [ChargeRow] = []
        var slotOfCharge: [String: Int] = [:]
        for total in plan.charges where slotOfCharge[total.charge] == nil && !total.charge.isEmpty {
            slotOfCharge[total.charge] = rows.count
            var row = ChargeRow(
                charge: total.charge, currency: total.currency.code, status: total.status.name, gross: total.amount,
                fee: total.fee)
            row.firstRun = firstRun(total.charge)
            row.transferredBefore = transferredBefore(total.charge, total.currency.code)
            rows.append(row)
        }
        var lines = [[Int]](repeating: [], count: rows.count)
        guard !rows.isEmpty else { return (rows, lines) }
        // The charge of each order: the first one its lines name. Symbols are small dense
        // integers: a slot per symbol in a flat table (-1: none), no hashing per line.
        let symbolCount = batch.symbols.count + 1
        var slotOfSymbol = [Int32](repeating: -1, count: symbolCount)
        var symbolLooked = [Bool](repeating: false, count: symbolCount)
        var slotOfOrder = [Int32](repeating: -1, count: symbolCount)
        for line in batch.lines where !line.charge.isNone {
            let charge = Int(line.charge.raw)
            if !symbolLooked[charge] {
                symbolLooked[charge] = true
                if let slot = slotOfCharge[batch.text(line.charge)] { slotOfSymbol[charge] = Int32(slot) }
            }
            let slot = slotOfSymbol[charge]
            if slot >= 0, !line.orderID.isNone, slotOfOrder[Int(line.orderID.raw)] < 0 {
                slotOfOrder[Int(line.orderID.raw)] = slot
            }
        }
        for index in batch.lines.indices {
            let line = batch.lines[index]
            let found =
                line.charge.isNone
                ? slotOfOrder[Int(line.orderID.raw)] : slotOfSymbol[Int(line.charge.raw)]
            guard found >= 0, !line.orderID.isNone || !line.charge.isNone else { continue }
            let slot = Int(found)
            lines[slot].append(index)
            guard line.status == .planned else { continue }
            let owner = plan.instructionOfLine[index]
            let inTransfer = owner >= 0 && plan.instructions[Int(owner)].kind == .transfer
            rows[slot].add(kind: line.kind, amount: line.amount, inTransfer: inTransfer)
        }
        for slot in rows.indices where rows[slot].counting(runID: runID) == .thisRun {
            rows[slot].firstRun = runID
        }
        return (rows, lines)
    }

    /// Writes charges.csv. Amounts are canonical decimals; `gross`, `fee`, the moves and
    /// `transferred_before` are magnitudes, `retained` is signed.
    public static func write(path: String, runID: String, rows: [ChargeRow]) throws(WriteFailure) -> (
        sha256: String, rows: Int
    ) {
        let file = try OutputFile(path: path)
        file.withBuffer { CSVField.header(header, to: &$0) }
        for row in rows {
            let currency = Currency(row.currency) ?? .usd
            file.withBuffer { out in
                CSVField.append(runID, to: &out, guardFormula: true)
                out.append(0x2C)
                CSVField.append(row.charge, to: &out, guardFormula: true)
                out.append(0x2C)
                out.append(contentsOf: row.currency.utf8)
                out.append(0x2C)
                out.append(contentsOf: row.status.utf8)
                for amount in [
                    row.gross, row.fee, row.transferredBefore, row.transferred, row.reversed, row.paidOut,
                    row.retained,
                ] {
                    out.append(0x2C)
                    MinorUnits.append(amount, currency: currency, to: &out)
                }
                out.append(0x2C)
                if let first = row.firstRun { CSVField.append(first, to: &out, guardFormula: true) }
                out.append(0x0A)
            }
            file.endRow()
        }
        let sha = try file.commit()
        return (sha, file.rows)
    }
}
