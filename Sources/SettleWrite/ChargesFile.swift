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
    /// Earlier runs' payouts of the charge's orders (the ledger's `charge_payouts`): not a
    /// column, but part of what is retained so far.
    public var paidOutBefore: Int64 = 0
    /// The run that counted the charge's gross (the ledger's, or this run), nil when none.
    public var firstRun: String?
    /// Whether some line of the charge moves in this run (planned in a plan, settled after apply).
    public var moves = false
    /// The payment intent the plan's lines named with the charge (``ChargesFile/intentsName``):
    /// earlier runs may have recorded the charge under it.
    public var intent: String?

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
        ChargeRow.retained(
            inYet: status != ChargeStatus.failed.name && status != ChargeStatus.pending.name, gross: gross, fee: fee,
            transferredBefore: transferredBefore, transferred: transferred, paidOut: paidOutBefore + paidOut,
            reversed: reversed)
    }

    /// ``retained`` from its parts; `inYet` false for a pending or failed charge.
    @inline(__always)
    static func retained(
        inYet: Bool, gross: Int64, fee: Int64, transferredBefore: Int64, transferred: Int64, paidOut: Int64,
        reversed: Int64
    ) -> Int64 {
        inYet ? gross - fee - transferredBefore - transferred - paidOut + reversed : 0
    }

    /// How this run counts the charge, given the run the ledger says counted it.
    public func counting(runID: String) -> Counting {
        // Counted by this run at an earlier apply of its folder: it stays this run's, also when
        // what moved of it since came back (audit 24 N5: a re-apply after the only payout on
        // the charge came back dropped its gross from every day).
        ChargeRow.counting(
            status: status, countedEarlier: firstRun.map { $0 != runID } ?? false, moves: moves || firstRun == runID)
    }

    /// How a run counts a charge of this status: `countedEarlier` when another run counted it.
    static func counting(status: String, countedEarlier: Bool, moves: Bool) -> Counting {
        if status == ChargeStatus.failed.name { return .failed }
        if status == ChargeStatus.pending.name { return .pending }
        if countedEarlier { return .earlier }
        return moves ? .thisRun : .unallocated
    }

    /// Adds one line drawing on the charge (or of one of its orders) that moves in this run.
    /// `inTransfer`: the line belongs to a transfer instruction (a netted reversal).
    public mutating func add(kind: LineKind, amount: Int64, inTransfer: Bool) {
        moves = true
        ChargeRow.add(
            kind: kind, amount: amount, inTransfer: inTransfer, transferred: &transferred, reversed: &reversed,
            paidOut: &paidOut)
    }

    static func add(
        kind: LineKind, amount: Int64, inTransfer: Bool, transferred: inout Int64, reversed: inout Int64,
        paidOut: inout Int64
    ) {
        switch kind {
        case .transfer: transferred += amount
        case .reversal where inTransfer: transferred -= amount
        case .reversal: reversed += amount
        case .payout: paidOut += amount
        }
    }
}

/// The charges of a plan as the write phase holds them: 64 bytes a charge, no string (a plan
/// of the 1 GB export touches millions); a ``ChargeRow`` is made when a row is read.
public struct PlanCharges: RandomAccessCollection {
    /// One charge: its symbol, amounts and the run that counted it.
    struct Compact {
        var gross: Int64
        var fee: Int64
        var transferredBefore: Int64 = 0
        var paidOutBefore: Int64 = 0
        var transferred: Int64 = 0
        var reversed: Int64 = 0
        var paidOut: Int64 = 0
        var charge: Symbol
        /// Index into ``PlanCharges/runs``; -1: no run counted it; ``PlanCharges/thisRun``.
        var firstRun: Int32 = -1
        var currency: Currency
        var status: ChargeStatus
        var moves = false
        var feeKnown = true

        /// ``ChargeRow/add(kind:amount:inTransfer:)``.
        mutating func add(kind: LineKind, amount: Int64, inTransfer: Bool) {
            moves = true
            ChargeRow.add(
                kind: kind, amount: amount, inTransfer: inTransfer, transferred: &transferred, reversed: &reversed,
                paidOut: &paidOut)
        }

        var retained: Int64 {
            ChargeRow.retained(
                inYet: status != .failed && status != .pending, gross: gross, fee: fee,
                transferredBefore: transferredBefore, transferred: transferred, paidOut: paidOutBefore + paidOut,
                reversed: reversed)
        }

        init(_ total: ChargeTotal) {
            gross = total.amount
            fee = total.fee
            charge = total.charge
            currency = total.currency
            status = total.status
            feeKnown = total.feeKnown
        }
    }

    static let thisRun: Int32 = -2

    let batch: Batch
    let runID: String
    var rows: [Compact] = []
    /// The distinct runs the ledger says counted a charge.
    var runs: [String] = []
    /// For each line, the slot of the charge it draws on, -1 for none (lines.idx names it).
    public internal(set) var chargeOfLine: [Int32] = []

    init(batch: Batch, runID: String) {
        self.batch = batch
        self.runID = runID
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { rows.count }

    /// The run that counted a row's gross (``ChargeRow/firstRun``), nil when none.
    func firstRun(of compact: Compact) -> String? {
        switch compact.firstRun {
        case PlanCharges.thisRun: runID
        case let index where index >= 0: runs[Int(index)]
        default: nil
        }
    }

    /// How summary.csv counts a row (``ChargeRow/counting(runID:)``), without making the row.
    func counting(of compact: Compact) -> ChargeRow.Counting {
        ChargeRow.counting(
            status: compact.status.name, countedEarlier: firstRun(of: compact).map { $0 != runID } ?? false,
            moves: compact.moves)
    }

    /// Adds every charge to `sums` as ``ControlSums/addCharge(_:)`` would, with no string a charge.
    public func add(to sums: inout ControlSums) {
        for compact in rows {
            sums.addCharge(
                currency: compact.currency.code, gross: compact.gross, fee: compact.fee, counting: counting(of: compact)
            )
        }
    }

    public subscript(position: Int) -> ChargeRow {
        let compact = rows[position]
        var row = ChargeRow(
            charge: batch.text(compact.charge), currency: compact.currency.code, status: compact.status.name,
            gross: compact.gross, fee: compact.fee)
        row.transferredBefore = compact.transferredBefore
        row.paidOutBefore = compact.paidOutBefore
        row.transferred = compact.transferred
        row.reversed = compact.reversed
        row.paidOut = compact.paidOut
        row.moves = compact.moves
        row.firstRun = firstRun(of: compact)
        return row
    }
}

/// charges.csv: one row per charge the run touched, in SPEC's eleven columns; and beside it
/// `.settle/charges-counted.csv`, sealed with the plan: the run that counted each charge's
/// gross and fee (the ledger's, or this run), which `settle ledger rebuild` restores.
public enum ChargesFile {
    public static let header = [
        "run_id", "charge", "currency", "status", "gross", "fee", "transferred_before", "transferred", "reversed",
        "paid_out", "retained",
    ]
    /// charges.csv's columns before 2026-12-05, when the counting run was its twelfth
    /// column: an older folder is still read (by `ledger rebuild`) as it was written.
    public static let headerWithCountedIn = header + ["counted_in"]

    /// The sidecar: `charge, currency, counted_in`, a row per charge some run counted.
    public static let countedName = ".settle/charges-counted.csv"
    public static let countedHeader = ["charge", "currency", "counted_in"]

    /// The sidecar of the payment intent each charge's lines named with it: `charge, currency,
    /// intent`, a row per charges.csv row that has one. An earlier run may have counted the
    /// charge, moved money of it or paid out for it under the intent alone (lines that gave no
    /// charge id): the rewrite after apply reads what the ledger holds under both names
    /// (audit 53 H4).
    public static let intentsName = ".settle/charge-intents.csv"
    public static let intentsHeader = ["charge", "currency", "intent"]

    /// Writes ``intentsName`` for a plan's rows.
    public static func writeIntents(path: String, rows: PlanCharges, into set: FileSet? = nil) throws(WriteFailure)
        -> (sha256: String, rows: Int)
    {
        let file = try OutputFile(path: path)
        file.withBuffer { CSVField.header(intentsHeader, to: &$0) }
        let batch = rows.batch
        for compact in rows.rows {
            guard let intent = batch.intent(ofCharge: compact.charge) else { continue }
            file.withBuffer { out in
                CSVField.append(batch.symbols.bytes(compact.charge), to: &out, guardFormula: true)
                out.append(0x2C)
                out.append(contentsOf: compact.currency.code.utf8)
                out.append(0x2C)
                CSVField.append(batch.symbols.bytes(intent), to: &out, guardFormula: true)
                out.append(0x0A)
            }
            file.endRow()
        }
        return (try file.commit(into: set), file.rows)
    }

    /// What writing charges.csv and its sidecar gave: each file's digest and rows.
    public typealias Written = (charges: (sha256: String, rows: Int), counted: (sha256: String, rows: Int))

    /// Fills each row's `transferredBefore`, `paidOutBefore` and `firstRun` from the ledger, a batch at a time.
    private static func read(_ history: ChargeHistory, into charges: inout PlanCharges) {
        let batch = charges.batch
        var runIndex: [String: Int32] = [:]
        var keys: [(charge: UnsafeRawBufferPointer, currency: Currency)] = []
        // The row each key is of: a charge's own id, then the payment intent its lines name
        // with it, under which an earlier run may have recorded it (audit 53 H4).
        var rowOfKey: [Int] = []
        keys.reserveCapacity(Planner.lookUpBatch)
        var start = 0
        while start < charges.rows.count {
            let end = min(start + Planner.lookUpBatch, charges.rows.count)
            keys.removeAll(keepingCapacity: true)
            rowOfKey.removeAll(keepingCapacity: true)
            for slot in start..<end {
                let row = charges.rows[slot]
                keys.append((batch.symbols.bytes(row.charge), row.currency))
                rowOfKey.append(slot)
                if let intent = batch.intent(ofCharge: row.charge) {
                    keys.append((batch.symbols.bytes(intent), row.currency))
                    rowOfKey.append(slot)
                }
            }
            var firstRuns: [(Int, String)] = []
            // The rows that took a counting run's gross and fee (its own id is asked first).
            var adopted = Set<Int>()
            var before: [(Int, Int64)] = []
            var paidBefore: [(Int, Int64)] = []
            history(
                keys,
                { position, run, counted in
                    let slot = rowOfKey[position]
                    firstRuns.append((slot, run))
                    // A charge an earlier run counted shows the gross and fee that run counted,
                    // whatever this run's export or look-up says, so that its retained so far
                    // joins up from day to day (audit 53 H1: Stripe's fee on the days it was
                    // looked up, the export's on the others; audit 35 C5: a fee no line states
                    // now read 0.00).
                    let row = charges.rows[slot]
                    if counted.currency == row.currency.code, adopted.insert(slot).inserted {
                        charges.rows[slot].fee = counted.fee
                        charges.rows[slot].feeKnown = true
                        charges.rows[slot].gross = counted.gross
                    }
                }, { before.append((rowOfKey[$0], $1)) }, { paidBefore.append((rowOfKey[$0], $1)) })
            for (slot, amount) in before { charges.rows[slot].transferredBefore += amount }
            for (slot, amount) in paidBefore { charges.rows[slot].paidOutBefore += amount }
            // The first run found counts the charge (its own id is asked first).
            for (slot, first) in firstRuns where charges.rows[slot].firstRun < 0 {
                if let known = runIndex[first] {
                    charges.rows[slot].firstRun = known
                } else {
                    charges.rows[slot].firstRun = Int32(charges.runs.count)
                    runIndex[first] = Int32(charges.runs.count)
                    charges.runs.append(first)
                }
            }
            start = end
        }
    }

    /// What the ledger says of a batch of charges (each a charge id's bytes and its currency;
    /// at most ``Planner/lookUpBatch``): `firstRun(position, run, counted)` for each charge a
    /// run counted, with the currency and fee it recorded, `transferredBefore(position, amount)` for each with earlier settled transfers,
    /// `paidOutBefore(position, amount)` for each whose orders earlier runs paid out.
    public typealias ChargeHistory = (
        _ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)],
        _ firstRun: (Int, String, (currency: String, fee: Int64, gross: Int64)) -> Void,
        _ transferredBefore: (Int, Int64) -> Void, _ paidOutBefore: (Int, Int64) -> Void
    ) -> Void

    /// The charges of a plan and the charge each line draws on: a line naming the charge in
    /// `source_transaction`, else a line of an order whose lines name it (its payouts).
    /// Moves are the planned lines; `history` (nil: no ledger) reads the ledger.
    public static func rows(of plan: SettlementPlan, runID: String, history: ChargeHistory?) -> PlanCharges {
        let batch = plan.batch
        var charges = PlanCharges(batch: batch, runID: runID)
        guard !plan.charges.isEmpty else {
            charges.chargeOfLine = [Int32](repeating: -1, count: batch.lines.count)
            return charges
        }
        // The row of each charge, and the charge of each order: the first one its lines name.
        let slotOfSymbol = SymbolSlots(expected: plan.charges.count)
        charges.rows.reserveCapacity(plan.charges.count)
        for total in plan.charges where !total.charge.isNone && slotOfSymbol[total.charge] < 0 {
            slotOfSymbol.set(total.charge, Int32(charges.rows.count))
            charges.rows.append(PlanCharges.Compact(total))
        }
        if let history { read(history, into: &charges) }
        // The charge a line draws on, as the planner's rules read it.
        func key(_ line: OrderLine) -> Symbol { Planner.ChargeKey(line, in: batch)?.symbol ?? .none }
        let slotOfOrder = SymbolSlots(expected: plan.charges.count)
        for line in batch.lines {
            let charge = key(line)
            guard !charge.isNone else { continue }
            let slot = slotOfSymbol[charge]
            if slot >= 0, !line.orderID.isNone, slotOfOrder[line.orderID] < 0 {
                slotOfOrder.set(line.orderID, slot)
            }
        }
        // An order whose lines name no charge takes the one of the ledger's transfer that its
        // reversal lines take from (a refund, and a payout paid again, days after it moved).
        for (index, charge) in plan.ledgerChargeOfLine.sorted(by: { $0.key < $1.key }) {
            let line = batch.lines[Int(index)]
            let slot = slotOfSymbol[charge]
            if slot >= 0, !line.orderID.isNone, slotOfOrder[line.orderID] < 0 {
                slotOfOrder.set(line.orderID, slot)
            }
        }
        var chargeOfLine = HugePages.array(repeating: Int32(-1), count: batch.lines.count)
        for index in batch.lines.indices {
            let line = batch.lines[index]
            let charge = key(line)
            var found = charge.isNone ? slotOfOrder[line.orderID] : slotOfSymbol[charge]
            // A reversal of a transfer the ledger recorded is that transfer's charge's money,
            // whatever charge the line names (audit 87 F1).
            if !plan.ledgerChargeOfLine.isEmpty, let reversed = plan.ledgerChargeOfLine[Int32(index)],
                slotOfSymbol[reversed] >= 0
            {
                found = slotOfSymbol[reversed]
            }
            guard found >= 0, !line.orderID.isNone || !charge.isNone else { continue }
            chargeOfLine[index] = found
            // A move in another currency than the charge's (a USD payout of an order paid in
            // EUR) is not the charge's money: its row would mix currencies.
            guard line.status == .planned, line.currency == charges.rows[Int(found)].currency else { continue }
            let owner = plan.instructionOfLine[index]
            let inTransfer = owner >= 0 && plan.instructions[Int(owner)].kind == .transfer
            charges.rows[Int(found)].add(kind: line.kind, amount: line.amount, inTransfer: inTransfer)
        }
        charges.chargeOfLine = chargeOfLine
        for slot in charges.rows.indices where charges.counting(of: charges.rows[slot]) == .thisRun {
            charges.rows[slot].firstRun = PlanCharges.thisRun
        }
        return charges
    }

    /// Writes charges.csv and its sidecar (``countedName``, at `countedPath`). Amounts are
    /// canonical decimals; `gross`, `fee`, the moves and `transferred_before` are magnitudes,
    /// `retained` is signed.
    public static func write(
        path: String, countedPath: String, runID: String, rows: some Sequence<ChargeRow>, into set: FileSet? = nil
    ) throws(WriteFailure) -> Written {
        let files = try Files(path: path, countedPath: countedPath)
        for row in rows {
            var charge = row.charge
            charge.withUTF8 { charge in
                files.append(
                    runID: runID, charge: UnsafeRawBufferPointer(charge), currencyText: row.currency,
                    currency: Currency(row.currency) ?? .usd, status: row.status,
                    amounts: (
                        row.gross, row.fee, row.transferredBefore, row.transferred, row.reversed, row.paidOut,
                        row.retained
                    ), firstRun: row.firstRun)
            }
        }
        return try files.commit(into: set)
    }

    /// Writes a plan's charges.csv and its sidecar straight from its compact rows (millions at
    /// full size): the same bytes as the rows it reads as, with no string made a charge.
    public static func write(
        path: String, countedPath: String, runID: String, rows: PlanCharges, into set: FileSet? = nil
    )
        throws(WriteFailure) -> Written
    {
        let files = try Files(path: path, countedPath: countedPath)
        let symbols = rows.batch.symbols
        for compact in rows.rows {
            files.append(
                runID: runID, charge: symbols.bytes(compact.charge), currencyText: compact.currency.code,
                currency: compact.currency, status: compact.status.name,
                amounts: (
                    compact.gross, compact.fee, compact.transferredBefore, compact.transferred, compact.reversed,
                    compact.paidOut, compact.retained
                ), firstRun: rows.firstRun(of: compact))
        }
        return try files.commit(into: set)
    }

    /// The two files being written, a row of each at a time.
    private struct Files {
        let charges: OutputFile
        let counted: OutputFile

        init(path: String, countedPath: String) throws(WriteFailure) {
            charges = try OutputFile(path: path)
            counted = try OutputFile(path: countedPath)
            charges.withBuffer { CSVField.header(header, to: &$0) }
            counted.withBuffer { CSVField.header(countedHeader, to: &$0) }
        }

        func append(
            runID: String, charge: UnsafeRawBufferPointer, currencyText: String, currency: Currency, status: String,
            amounts: (Int64, Int64, Int64, Int64, Int64, Int64, Int64), firstRun: String?
        ) {
            charges.withBuffer { out in
                appendRow(
                    runID: runID, charge: charge, currencyText: currencyText, currency: currency, status: status,
                    amounts: amounts, to: &out)
            }
            charges.endRow()
            guard let firstRun else { return }
            counted.withBuffer { out in
                CSVField.append(charge, to: &out, guardFormula: false)
                out.append(0x2C)
                out.append(contentsOf: currencyText.utf8)
                out.append(0x2C)
                CSVField.append(firstRun, to: &out, guardFormula: false)
                out.append(0x0A)
            }
            counted.endRow()
        }

        func commit(into set: FileSet?) throws(WriteFailure) -> Written {
            let chargesSHA = try charges.commit(into: set)
            let countedSHA = try counted.commit(into: set)
            return ((chargesSHA, charges.rows), (countedSHA, counted.rows))
        }
    }

    /// One row: `amounts` are gross, fee, transferred_before, transferred, reversed, paid_out, retained.
    @inline(__always)
    static func appendRow(
        runID: String, charge: UnsafeRawBufferPointer, currencyText: String, currency: Currency, status: String,
        amounts: (Int64, Int64, Int64, Int64, Int64, Int64, Int64), to out: inout [UInt8]
    ) {
        CSVField.append(runID, to: &out, guardFormula: true)
        out.append(0x2C)
        CSVField.append(charge, to: &out, guardFormula: true)
        out.append(0x2C)
        out.append(contentsOf: currencyText.utf8)
        out.append(0x2C)
        out.append(contentsOf: status.utf8)
        func amount(_ minor: Int64) {
            out.append(0x2C)
            MinorUnits.append(minor, currency: currency, to: &out)
        }
        amount(amounts.0)
        amount(amounts.1)
        amount(amounts.2)
        amount(amounts.3)
        amount(amounts.4)
        amount(amounts.5)
        amount(amounts.6)
        out.append(0x0A)
    }
}
