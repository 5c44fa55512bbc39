public import SettleCore

/// Control sums per currency (README, "Output folder": summary.csv): lines and amounts by status; the
/// objects this run created at Stripe (planned ones in a plan-only run), at their amounts
/// as sent; the charges' gross and fees, each charge counted once; what the platform keeps.
public struct ControlSums: Sendable {
    public struct PerCurrency: Sendable {
        public var lines = 0
        public var amount: Int64 = 0
        public var byStatus: [LineStatus: (lines: Int, amount: Int64)] = [:]
        /// Stripe objects (one per API call) and their amounts as sent: a transfer with
        /// reversals netted into it counts once, at its net amount.
        public var transfers = 0
        public var transferred: Int64 = 0
        public var payouts = 0
        public var paidOut: Int64 = 0
        public var reversals = 0
        public var reversed: Int64 = 0
        /// Reversal lines netted into a transfer of this run (never counted as reversed).
        public var nettedReversals = 0
        public var netted: Int64 = 0
        /// Lines this run reports failed because their payout, made by an earlier run (or an
        /// earlier apply), came back: money back in the financial account. Not a term of
        /// `retained` (SPEC's formula is of this run's moves); the days' `paid_out` less
        /// their `payouts_returned` is what stayed paid out.
        public var returnedLines = 0
        public var returned: Int64 = 0
        /// Charges counted in this run (first allocation), their gross and fees.
        public var charges = 0
        public var chargesGross: Int64 = 0
        public var chargesFees: Int64 = 0
        /// Charges an earlier run counted, pending, failed, or touched but not allocated from:
        /// shown on their own rows at their gross, never in `chargesGross`.
        public var chargesBy: [ChargeRow.Counting: (count: Int, gross: Int64)] = [:]

        mutating func add(amount: Int64, status: LineStatus) {
            lines += 1
            self.amount += amount
            let previous = byStatus[status] ?? (0, 0)
            byStatus[status] = (previous.lines + 1, previous.amount + amount)
        }

        mutating func addObject(kind: LineKind, amount: Int64) {
            switch kind {
            case .transfer:
                transfers += 1
                transferred += amount
            case .payout:
                payouts += 1
                paidOut += amount
            case .reversal:
                reversals += 1
                reversed += amount
            }
        }

        mutating func addCharge(gross: Int64, fee: Int64, counting: ChargeRow.Counting) {
            if counting == .thisRun {
                charges += 1
                chargesGross += gross
                chargesFees += max(0, fee)
            } else {
                let previous = chargesBy[counting] ?? (0, 0)
                chargesBy[counting] = (previous.count + 1, previous.gross + gross)
            }
        }

        /// gross − fees − transferred − paid out + reversed.
        public var retained: Int64 { chargesGross - chargesFees - transferred - paidOut + reversed }
    }

    public var currencies: [String: PerCurrency] = [:]
    /// Lines whose amount or currency did not parse (counted, no amount).
    public var linesWithoutAmount: [LineStatus: Int] = [:]
    /// The run these sums are of, and its as-of date (`YYYY-MM-DD`).
    public var runID = ""
    public var asOf = ""
    /// A plan not applied: the moves are planned, not made.
    public var planOnly = false

    public init(runID: String = "", asOf: String = "", planOnly: Bool = false) {
        self.runID = runID
        self.asOf = asOf
        self.planOnly = planOnly
    }

    /// One line, by status.
    public mutating func add(kind: LineKind?, currency: String, amount: Int64, status: LineStatus) {
        guard amount > 0, !currency.isEmpty else {
            linesWithoutAmount[status, default: 0] += 1
            return
        }
        // In place: a copy of the sums out and back would copy `byStatus` on every line.
        currencies[currency, default: PerCurrency()].add(amount: amount, status: status)
    }

    /// One Stripe object this run created (or, in a plan, would create), at its amount as sent.
    public mutating func addObject(kind: LineKind, currency: String, amount: Int64) {
        currencies[currency, default: PerCurrency()].addObject(kind: kind, amount: amount)
    }

    /// A reversal line netted into a transfer of this run (or cancelled with it: `netted`).
    /// `lines`: how many lines `amount` adds up (netted into one transfer together).
    public mutating func addNetted(currency: String, amount: Int64, lines: Int = 1) {
        var sums = currencies[currency] ?? PerCurrency()
        sums.nettedReversals += lines
        sums.netted += amount
        currencies[currency] = sums
    }

    /// A line reported failed because its payout came back.
    public mutating func addReturned(currency: String, amount: Int64, lines: Int = 1) {
        guard amount > 0, !currency.isEmpty else { return }
        currencies[currency, default: PerCurrency()].returnedLines += lines
        currencies[currency, default: PerCurrency()].returned += amount
    }

    /// A line its plan reported failed because its payout came back, which a later run
    /// reported and counted before this plan was applied: no longer counted here.
    public mutating func removeReturned(currency: String, amount: Int64) {
        guard amount > 0, var sums = currencies[currency], sums.returnedLines > 0 else { return }
        sums.returnedLines -= 1
        sums.returned = max(0, sums.returned - amount)
        currencies[currency] = sums
    }

    /// A charge the run touched, counted as ``ChargeRow/counting(runID:)`` says.
    public mutating func addCharge(_ row: ChargeRow) {
        addCharge(currency: row.currency, gross: row.gross, fee: row.fee, counting: row.counting(runID: runID))
    }

    /// A charge the run touched, from its parts.
    public mutating func addCharge(currency: String, gross: Int64, fee: Int64, counting: ChargeRow.Counting) {
        currencies[currency, default: PerCurrency()].addCharge(gross: gross, fee: fee, counting: counting)
    }

    /// The moves of lines grouped by instruction: per instruction, a transfer when it holds
    /// a transfer line (its reversal lines netted, subtracted), else the kind of its lines.
    public struct Objects {
        var members: [String: (currency: String, transfer: Int64, reversal: Int64, payout: Int64)] = [:]

        public init() {}

        public mutating func add(instruction: String, kind: LineKind, currency: String, amount: Int64) {
            var entry = members[instruction] ?? (currency, 0, 0, 0)
            switch kind {
            case .transfer: entry.transfer += amount
            case .reversal: entry.reversal += amount
            case .payout: entry.payout += amount
            }
            members[instruction] = entry
        }

        /// Whether the instruction is a transfer (a reversal line in it is netted).
        public func isTransfer(_ instruction: String) -> Bool { (members[instruction]?.transfer ?? 0) > 0 }

        func add(to sums: inout ControlSums) {
            for entry in members.values {
                if entry.transfer > 0 {
                    sums.addObject(kind: .transfer, currency: entry.currency, amount: entry.transfer - entry.reversal)
                } else if entry.reversal > 0 {
                    sums.addObject(kind: .reversal, currency: entry.currency, amount: entry.reversal)
                } else if entry.payout > 0 {
                    sums.addObject(kind: .payout, currency: entry.currency, amount: entry.payout)
                }
            }
        }
    }

    public mutating func add(_ objects: Objects) { objects.add(to: &self) }

    /// Sums over a plan's lines, its instructions (planned, not sent) and the charges it touched.
    public static func of(_ plan: SettlementPlan, charges: some Sequence<ChargeRow>, runID: String) -> ControlSums {
        var sums = of(plan, runID: runID)
        for row in charges { sums.addCharge(row) }
        return sums
    }

    /// ``of(_:charges:runID:)`` for a plan's compact charges (no row made a charge).
    public static func of(_ plan: SettlementPlan, charges: PlanCharges, runID: String) -> ControlSums {
        var sums = of(plan, runID: runID)
        charges.add(to: &sums)
        return sums
    }

    /// The sums of a plan's lines and instructions, before its charges.
    static func of(_ plan: SettlementPlan, runID: String) -> ControlSums {
        var sums = ControlSums(runID: runID, asOf: CivilDate.format(plan.options.asOf), planOnly: true)
        let batch = plan.batch
        for index in batch.lines.indices {
            let line = batch.lines[index]
            let parsed = line.amount > 0 && !line.kindInvalid
            sums.add(
                kind: line.kindInvalid ? nil : line.kind,
                currency: line.amount > 0 ? line.currency.code : "",
                amount: line.amount, status: line.status)
            guard parsed, line.kind == .reversal else { continue }
            let owner = plan.instructionOfLine[index]
            if line.status == .netted || (owner >= 0 && plan.instructions[Int(owner)].kind == .transfer) {
                sums.addNetted(currency: line.currency.code, amount: line.amount)
            }
        }
        for index in batch.returnedPayoutLines {
            let line = batch.lines[Int(index)]
            sums.addReturned(currency: line.currency.code, amount: line.amount)
        }
        for instruction in plan.instructions {
            let kind: LineKind
            switch instruction.kind {
            case .transfer: kind = .transfer
            case .reversal: kind = .reversal
            case .payout: kind = .payout
            }
            sums.addObject(kind: kind, currency: instruction.currency.code, amount: instruction.amount)
        }
        return sums
    }

    /// Conservation (README, "Output folder"): per currency, the input amount equals the sum over statuses.
    public func conserved() -> Bool {
        currencies.values.allSatisfy { sums in
            sums.byStatus.values.reduce(0) { $0 + $1.amount } == sums.amount
                && sums.byStatus.values.reduce(0) { $0 + $1.lines } == sums.lines
        }
    }

    /// The measures of one currency, in summary.csv's order: (measure, lines or count, amount).
    public func rows(_ sums: PerCurrency) -> [(measure: String, lines: Int?, amount: Int64)] {
        var rows: [(String, Int?, Int64)] = [("input", sums.lines, sums.amount)]
        for status in LineStatus.allCases {
            if let entry = sums.byStatus[status] { rows.append(("status:" + status.name, entry.lines, entry.amount)) }
        }
        let names = ControlSums.moveNames(planOnly: planOnly)
        rows += [
            (names.transferred, sums.transfers, sums.transferred),
            (names.paidOut, sums.payouts, sums.paidOut),
            (names.reversed, sums.reversals, sums.reversed),
            ("reversals_netted", sums.nettedReversals, sums.netted),
            ("payouts_returned", sums.returnedLines, sums.returned),
            ("charges_gross", sums.charges, sums.chargesGross),
            ("charges_fees", nil, sums.chargesFees),
        ]
        for counting in [ChargeRow.Counting.earlier, .unallocated, .pending, .failed] {
            let entry = sums.chargesBy[counting] ?? (0, 0)
            rows.append(("charges_" + counting.rawValue, entry.count, entry.gross))
        }
        rows.append((names.retained, nil, sums.retained))
        return rows
    }

    /// The names of the moved measures: made by an apply, planned in a plan-only run.
    public static func moveNames(planOnly: Bool) -> (
        transferred: String, paidOut: String, reversed: String, retained: String
    ) {
        planOnly
            ? ("planned_transfers", "planned_payouts", "planned_reversals", "platform_retained_planned")
            : ("transferred", "paid_out", "reversed", "platform_retained")
    }

    public static let header = ["run_id", "as_of", "currency", "measure", "lines", "amount", "amount_minor"]

    /// summary.csv: one row per currency and measure.
    public func write(path: String, into set: FileSet? = nil) throws(WriteFailure) -> (sha256: String, rows: Int) {
        let file = try OutputFile(path: path)
        file.withBuffer { CSVField.header(ControlSums.header, to: &$0) }
        var prefix: [UInt8] = []
        CSVField.append(runID, to: &prefix, guardFormula: true)
        prefix.append(0x2C)
        prefix.append(contentsOf: asOf.utf8)
        prefix.append(0x2C)
        for code in currencies.keys.sorted() {
            let sums = currencies[code]!
            let currency = Currency(code)!
            for (measure, lines, amount) in rows(sums) {
                file.withBuffer { out in
                    out.append(contentsOf: prefix)
                    out.append(contentsOf: code.utf8)
                    out.append(0x2C)
                    out.append(contentsOf: measure.utf8)
                    out.append(0x2C)
                    if let lines { MinorUnits.appendDecimal(Int64(lines), to: &out) }
                    out.append(0x2C)
                    MinorUnits.append(amount, currency: currency, to: &out)
                    out.append(0x2C)
                    MinorUnits.appendDecimal(amount, to: &out)
                    out.append(0x0A)
                }
                file.endRow()
            }
        }
        // Lines whose amount or currency did not parse: an input row of their own (no amount),
        // so that for this bucket too the input is the sum over statuses.
        let withoutAmount = linesWithoutAmount.values.reduce(0, +)
        if withoutAmount > 0 {
            file.withBuffer { out in
                out.append(contentsOf: prefix)
                out.append(contentsOf: ",input,\(withoutAmount),,\n".utf8)
            }
            file.endRow()
        }
        for status in LineStatus.allCases {
            if let count = linesWithoutAmount[status] {
                file.withBuffer { out in
                    out.append(contentsOf: prefix)
                    out.append(contentsOf: ",status:\(status.name),\(count),,\n".utf8)
                }
                file.endRow()
            }
        }
        let sha = try file.commit(into: set)
        return (sha, file.rows)
    }

    public func json() -> JSON {
        .object(
            currencies.keys.sorted().map { code in
                let sums = currencies[code]!
                var pairs: [(String, JSON)] = [("lines", .int(Int64(sums.lines))), ("amount_minor", .int(sums.amount))]
                pairs.append(
                    (
                        "by_status",
                        .object(
                            LineStatus.allCases.compactMap { status in
                                sums.byStatus[status].map {
                                    (
                                        status.name,
                                        .object([("lines", .int(Int64($0.lines))), ("amount_minor", .int($0.amount))])
                                    )
                                }
                            })
                    ))
                for (measure, lines, amount) in rows(sums) where !measure.hasPrefix("status:") && measure != "input" {
                    var entry: [(String, JSON)] = [("amount_minor", .int(amount))]
                    if let lines { entry.insert(("count", .int(Int64(lines))), at: 0) }
                    pairs.append((measure, .object(entry)))
                }
                return (code, .object(pairs))
            })
    }
}
