public import SettleCore

/// Control sums per currency (SPEC §4 summary.csv): lines and amounts by status, money moved,
/// charges' gross and fees, and what the platform keeps.
public struct ControlSums: Sendable {
    public struct PerCurrency: Sendable {
        public var lines = 0
        public var amount: Int64 = 0
        public var byStatus: [LineStatus: (lines: Int, amount: Int64)] = [:]
        public var transferred: Int64 = 0
        public var paidOut: Int64 = 0
        public var reversed: Int64 = 0
        public var chargesGross: Int64 = 0
        public var chargesFees: Int64 = 0
        public var charges = 0

        /// gross − fees − transferred − paid out + reversed.
        public var retained: Int64 { chargesGross - chargesFees - transferred - paidOut + reversed }
    }

    public var currencies: [String: PerCurrency] = [:]
    /// Lines whose amount or currency did not parse (counted, no amount).
    public var linesWithoutAmount: [LineStatus: Int] = [:]

    public init() {}

    /// Money that moved or is about to: planned, settled, already settled.
    static func moves(_ status: LineStatus) -> Bool {
        status == .planned || status == .settled || status == .alreadySettled
    }

    public mutating func add(kind: LineKind?, currency: String, amount: Int64, status: LineStatus) {
        guard amount > 0, !currency.isEmpty else {
            linesWithoutAmount[status, default: 0] += 1
            return
        }
        var sums = currencies[currency] ?? PerCurrency()
        sums.lines += 1
        sums.amount += amount
        let previous = sums.byStatus[status] ?? (0, 0)
        sums.byStatus[status] = (previous.lines + 1, previous.amount + amount)
        if ControlSums.moves(status), let kind {
            switch kind {
            case .transfer: sums.transferred += amount
            case .payout: sums.paidOut += amount
            case .reversal: sums.reversed += amount
            }
        }
        currencies[currency] = sums
    }

    public mutating func addCharge(currency: String, gross: Int64, fee: Int64) {
        var sums = currencies[currency] ?? PerCurrency()
        sums.charges += 1
        sums.chargesGross += gross
        sums.chargesFees += max(0, fee)
        currencies[currency] = sums
    }

    /// Charges as a plan's manifest recorded them (apply recomputes the rest from results.csv).
    public mutating func addCharges(currency: String, count: Int, gross: Int64, fees: Int64) {
        var sums = currencies[currency] ?? PerCurrency()
        sums.charges += count
        sums.chargesGross += gross
        sums.chargesFees += fees
        currencies[currency] = sums
    }

    /// Sums over a plan's lines and the charges it saw.
    public static func of(_ plan: SettlementPlan) -> ControlSums {
        var sums = ControlSums()
        for line in plan.batch.lines {
            sums.add(
                kind: line.reason == .kindInvalid ? nil : line.kind,
                currency: line.amount > 0 ? line.currency.code : "",
                amount: line.amount, status: line.status)
        }
        for charge in plan.charges {
            sums.addCharge(currency: charge.currency.code, gross: charge.amount, fee: charge.fee)
        }
        return sums
    }

    /// Conservation (SPEC §4): per currency, the input amount equals the sum over statuses.
    public func conserved() -> Bool {
        currencies.values.allSatisfy { sums in
            sums.byStatus.values.reduce(0) { $0 + $1.amount } == sums.amount
                && sums.byStatus.values.reduce(0) { $0 + $1.lines } == sums.lines
        }
    }

    /// summary.csv: one row per currency and measure.
    public func write(path: String) throws(WriteFailure) -> (sha256: String, rows: Int) {
        let file = try OutputFile(path: path)
        file.withBuffer { CSVField.header(["currency", "measure", "lines", "amount", "amount_minor"], to: &$0) }
        for code in currencies.keys.sorted() {
            let sums = currencies[code]!
            let currency = Currency(code)!
            func row(_ measure: String, _ lines: Int?, _ amount: Int64) {
                file.withBuffer { out in
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
            row("input", sums.lines, sums.amount)
            for status in LineStatus.allCases {
                if let entry = sums.byStatus[status] { row("status:" + status.name, entry.lines, entry.amount) }
            }
            row("transferred", nil, sums.transferred)
            row("paid_out", nil, sums.paidOut)
            row("reversed", nil, sums.reversed)
            row("charges_gross", sums.charges, sums.chargesGross)
            row("charges_fees", nil, sums.chargesFees)
            row("platform_retained", nil, sums.retained)
        }
        for status in LineStatus.allCases {
            if let count = linesWithoutAmount[status] {
                file.withBuffer { $0.append(contentsOf: ",status:\(status.name),\(count),,\n".utf8) }
                file.endRow()
            }
        }
        let sha = try file.commit()
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
                pairs += [
                    ("transferred", .int(sums.transferred)), ("paid_out", .int(sums.paidOut)),
                    ("reversed", .int(sums.reversed)), ("charges", .int(Int64(sums.charges))),
                    ("charges_gross", .int(sums.chargesGross)), ("charges_fees", .int(sums.chargesFees)),
                    ("platform_retained", .int(sums.retained)),
                ]
                return (code, .object(pairs))
            })
    }
}
