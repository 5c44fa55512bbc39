import SettleCore
import SettleTestSupport

/// One generated case: an export (rows in header order), the options, what the fake ledger
/// knows and what Stripe said.
struct GeneratedCase {
    static let header = TestExport.standardHeader + ["note"]

    var seed: UInt64
    var rows: [GeneratedRow]
    var options: RuleOptions
    var facts: StripeFacts
    /// Earlier transfers per named charge.
    var ledgerCharges: [String: Int64]
    /// Recorded transfers by "group|destination|currency".
    var ledgerTransfers: [String: RecordedTransfer]
    /// Line ids the ledger knows: its state, and whether it recorded the same content.
    var ledgerLines: [String: (state: HistoricLine.State, sameContent: Bool)]
}

/// One generated record.
struct GeneratedRow {
    var values: [String: String]
    /// The amount in minor units when the generator wrote a valid amount in a valid currency.
    var minor: Int64?
    /// Rendered with one field missing (`malformed_record`).
    var malformed = false

    subscript(_ column: String) -> String {
        get { values[column] ?? "" }
        set { values[column] = newValue }
    }

    /// The group key of docs/RULES.md, Input.
    var groupKey: String {
        if !self["transfer_group"].isEmpty { return self["transfer_group"] }
        if !self["payment_intent"].isEmpty { return "group_" + self["payment_intent"] }
        return "order:" + self["order_id"]
    }
}

/// Random batches that mix every rule of docs/RULES.md: shared destinations, recipients and charges,
/// charges near their limit, failed, pending and asynchronous charges with and without ids,
/// scheduled lines around the settlement date, cross-border countries, payout constraints,
/// reversals of every kind, duplicate ids, bad fields, a ledger and Stripe's facts.
struct BatchGenerator {
    static let asOf = "2026-11-29"
    var random: SplitMix64
    let seed: UInt64

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
    }

    static func format(_ minor: Int64, _ currency: Currency) -> String {
        switch currency.exponent {
        case .zero, .wholeTimesHundred: return "\(minor / (currency.exponent == .zero ? 1 : 100))"
        case .two:
            let cents = minor % 100
            return "\(minor / 100).\(cents < 10 ? "0" : "")\(cents)"
        case .three:
            let mills = minor % 1000
            return "\(minor / 1000).\(mills < 10 ? "00" : mills < 100 ? "0" : "")\(mills)"
        }
    }

    /// The smallest valid step in minor units.
    static func unit(_ currency: Currency) -> Int64 {
        switch currency.exponent {
        case .two, .zero: 1
        case .three: 10
        case .wholeTimesHundred: 100
        }
    }

    /// A random positive amount, valid in the currency.
    mutating func amount(_ currency: Currency, upTo maximum: Int64 = 6000) -> Int64 {
        let value = Int64(random.int(1...Int(maximum)))
        switch currency.exponent {
        case .two, .zero: return value
        case .three: return value * 10
        case .wholeTimesHundred: return value * 100
        }
    }

    mutating func generate() -> GeneratedCase {
        var options = RuleOptions(asOf: CivilDate.parse(Self.asOf)!)
        options.platformCountry = random.pick(["US", "US", "GB", "DE", "JP", "AU", "CA"])
        options.payouts = random.chance(50) ? .perRecipient : .perLine
        let currencies = ["usd", "usd", "usd", "eur", "jpy", "kwd", "isk"].map { Currency($0)! }
        let destinations = ["acct_d0", "acct_d1", "acct_d2", "acct_d3"]
        let namedCharges = ["ch_0", "ch_1", "ch_2", "py_3", "ch_4"]

        var rows: [GeneratedRow] = []
        // What each order's charge looks like, to size charge amounts once all lines exist.
        var chargeOfRow: [String?] = []
        // The currency of each row's charge: its order's charge_currency, else the order's
        // currency. A row may leave charge_currency empty (a USD payout of a JPY charge): its
        // charge_amount is still written in the charge's currency, as an export writes it.
        var chargeCurrencyOfRow: [Currency] = []
        // The charges of orders that state no charge columns (they get no charge_amount either).
        var factless: Set<String> = []
        let orders = random.int(1...8)
        for order in 0..<orders {
            var base = GeneratedRow(values: ["order_id": "\(order)"])
            switch random.int(0...9) {
            case 0...5: base["transfer_group"] = "G\(order)"
            case 6: base["transfer_group"] = "G\(order / 2)"  // two orders in one group
            default: break
            }
            if random.chance(50) { base["payment_intent"] = "pi_\(random.int(0...3))" }
            let currency = random.pick(currencies)
            base["currency"] = currency.code
            // The order's charge: named, unnamed with facts, or none (the platform's balance).
            let profile = random.int(0...3)
            var chargeKey: String? = nil
            if profile <= 1 {
                let charge = random.pick(namedCharges)
                base["source_transaction"] = charge
                chargeKey = "named:" + charge
            }
            // Now and then a named charge with no charge columns at all: an offline plan knows
            // nothing of it, and what moves on it is looked up first.
            let statesFacts = profile == 2 || (profile <= 1 && !random.chance(35))
            if !statesFacts, let chargeKey { factless.insert(chargeKey) }
            if statesFacts {
                base["charge_status"] = random.pick(["succeeded", "succeeded", "succeeded", "pending", "failed", ""])
                base["payment_method_type"] = random.pick(["card", "card", "card", "sepa_debit", "us_bank_account", ""])
                base["charge_currency"] = random.chance(10) ? random.pick(["eur", "usd"]) : currency.code
                if random.chance(10) { base["charge_currency"] = "" }
                if random.chance(50) {
                    // In the charge's currency, now and then in USD whatever the charge's is.
                    let feeCurrency = random.chance(90) ? Currency(base["charge_currency"]) ?? currency : .usd
                    base["charge_fee"] = Self.format(Int64(random.int(0...300)) * Self.unit(feeCurrency), feeCurrency)
                }
                if chargeKey == nil {
                    chargeKey =
                        base["payment_intent"].isEmpty ? "group:" + base.groupKey : "pi:" + base["payment_intent"]
                }
            }
            let orderChargeCurrency = Currency(base["charge_currency"]) ?? currency
            var orderDestinations: [String] = []
            for position in 0..<random.int(1...5) {
                var row = base
                var rowCharge = chargeKey
                row["line_id"] = "L\(order)-\(position)"
                let kind = random.int(0...19)
                if kind < 11 {
                    if random.chance(80) { row["kind"] = "transfer" }
                    row["destination"] = random.pick(destinations)
                    orderDestinations.append(row["destination"])
                    // A line may name another charge than its order's (a group on two charges).
                    if random.chance(15) {
                        row["source_transaction"] = random.pick(namedCharges)
                        rowCharge = "named:" + row["source_transaction"]
                    }
                    if random.chance(40) {
                        row["destination_country"] = random.pick(["US", "GB", "FR", "JP", "AU", "CA", "BR"])
                    }
                    // Now and then in another currency than its order's charge.
                    if random.chance(4) { row["currency"] = random.pick(["eur", "jpy"]) }
                } else if kind < 15 {
                    if random.chance(80) { row["kind"] = "payout" }
                    row["currency"] = random.chance(85) ? "usd" : "eur"
                    row["recipient"] = random.pick(["acct_r0", "acct_r1", "acct_r2"])
                    row["payout_method"] = random.chance(95) ? random.pick(["pm_0", "pm_1", "pm_2"]) : ""
                    if random.chance(30) { row["destination_country"] = random.pick(["US", "US", "CA"]) }
                } else if kind < 19 {
                    row["kind"] = "reversal"
                    switch random.int(0...3) {
                    case 0: row["transfer"] = "tr_\(random.int(0...2))"
                    case 1: row["destination"] = random.pick(destinations)  // maybe the ledger's
                    default: row["destination"] = orderDestinations.last ?? random.pick(destinations)
                    }
                    if random.chance(30) { row["source_transaction"] = "" }
                } else {
                    row["kind"] = random.pick(["refund", "Transfer"])
                    row["destination"] = random.pick(destinations)
                }
                let rowCurrency = Currency(row["currency"])!
                var minor: Int64? = amount(rowCurrency, upTo: row["kind"] == "reversal" ? 3000 : 6000)
                row["amount"] = Self.format(minor!, rowCurrency)
                if random.chance(4) {
                    row["amount"] = random.pick(["-5.00", "1,000.00", "7e1", "0", "12.345678", "", " 1.00"])
                    minor = nil
                }
                row.minor = minor
                if random.chance(25) {
                    row["transfer_on"] = random.pick([
                        "2026-11-28", Self.asOf, "2026-11-30", "2027-01-15", "29/11/2026",
                    ])
                }
                // Charge columns: an empty value never disagrees; now and then one does.
                for column in ["charge_status", "payment_method_type", "charge_currency"] where random.chance(10) {
                    row[column] = ""
                }
                if random.chance(3) {
                    row["charge_status"] = random.pick(["succeeded", "pending", "failed", "done"])
                }
                if random.chance(3) { row[random.pick(["destination", "recipient", "payment_intent"])] = "bad_id" }
                if random.chance(2) { row["currency"] = "xyz" }
                if random.chance(15) {
                    row["description"] = random.pick(["tip, thanks", "a \"quoted\" word", "two\nlines", "=1+1"])
                }
                if random.chance(10) { row["note"] = random.pick(["x", "y,z", "\"q\""]) }
                if random.chance(2) { row.malformed = true }
                rows.append(row)
                chargeOfRow.append(rowCharge)
                chargeCurrencyOfRow.append(orderChargeCurrency)
            }
        }
        // Charge amounts near the limit: the transfers on each charge, give or take.
        var transfersOfCharge: [String: Int64] = [:]
        for (index, row) in rows.enumerated() {
            let isTransfer = row["kind"] == "transfer" || (row["kind"].isEmpty && row["payout_method"].isEmpty)
            guard let key = chargeOfRow[index], isTransfer, let minor = row.minor else { continue }
            transfersOfCharge[key, default: 0] += minor
        }
        var amountOfCharge: [String: Int64] = [:]
        // The smallest step of each charge's currency, so that near-limit amounts stay valid.
        var unitOfCharge: [String: Int64] = [:]
        for (index, row) in rows.enumerated() {
            guard let key = chargeOfRow[index], unitOfCharge[key] == nil else { continue }
            unitOfCharge[key] = Self.unit(chargeCurrencyOfRow[index])
        }
        for (key, total) in transfersOfCharge {
            let unit = unitOfCharge[key] ?? 1
            let delta = Int64(random.pick([-50, -1, 0, 0, 1, 1, 1000, 100_000])) * unit
            amountOfCharge[key] = max(unit, (total + delta) / unit * unit)
        }
        for index in rows.indices {
            guard let key = chargeOfRow[index], !rows[index]["charge_status"].isEmpty || random.chance(70),
                !factless.contains(key) || !rows[index]["charge_status"].isEmpty
            else {
                continue
            }
            let chargeCurrency = chargeCurrencyOfRow[index]
            var amount = amountOfCharge[key] ?? self.amount(chargeCurrency)
            // Now and then one line disagrees with the others: charge_mismatch.
            if random.chance(4) { amount += Self.unit(chargeCurrency) }
            if random.chance(85) { rows[index]["charge_amount"] = Self.format(amount, chargeCurrency) }
        }
        // Duplicate line ids: exact copies or other content, anywhere in the batch.
        for _ in 0..<random.int(0...2) where !rows.isEmpty && random.chance(50) {
            var copy = random.pick(rows)
            if random.chance(50), let minor = copy.minor {
                copy.minor = minor + (Currency(copy["currency"])?.exponent == .two ? 1 : 100)
                copy["amount"] = Self.format(copy.minor!, Currency(copy["currency"]) ?? .usd)
            }
            rows.insert(copy, at: random.int(0...rows.count))
        }
        // A valid amount only counts in a currency that exists.
        for index in rows.indices where Currency(rows[index]["currency"]) == nil { rows[index].minor = nil }

        // Stripe's facts: some named charges and payout methods were looked up.
        var facts = StripeFacts()
        for charge in namedCharges where random.chance(30) {
            let known = amountOfCharge["named:" + charge] ?? Int64(random.int(1...5000))
            facts.charges[charge] = StripeFacts.Charge(
                status: random.pick([.succeeded, .succeeded, .pending, .failed]),
                amount: max(1, known + Int64(random.pick([-10, 0, 0, 5000]))),
                currency: random.chance(90) ? .usd : Currency("eur")!,
                fee: random.chance(50) ? Int64(random.int(0...100)) : nil, requestID: "req_\(charge)")
        }
        for recipient in ["acct_r0", "acct_r1", "acct_r2"] {
            for method in ["pm_0", "pm_1", "pm_2"] where random.chance(40) {
                facts.payoutMethods[.init(recipient: recipient, method: method)] = StripeFacts.PayoutMethod(
                    verdict: random.chance(60) ? .usable : .refused(reason: "archived"))
            }
        }
        // The ledger: earlier transfers on charges, transfers to reverse, lines it knows.
        var ledgerCharges: [String: Int64] = [:]
        for charge in namedCharges where random.chance(20) { ledgerCharges[charge] = Int64(random.int(0...3000)) }
        var ledgerTransfers: [String: RecordedTransfer] = [:]
        for row in rows where row["kind"] == "reversal" && !row["destination"].isEmpty && random.chance(50) {
            ledgerTransfers["\(row.groupKey)|\(row["destination"])|\(row["currency"])"] = RecordedTransfer(
                stripeID: "tr_ledger_\(random.int(0...9))", remaining: Int64(random.int(0...4000)))
        }
        var ledgerLines: [String: (state: HistoricLine.State, sameContent: Bool)] = [:]
        for row in rows where random.chance(8) {
            ledgerLines[row["line_id"]] = (random.pick([.settled, .pending, .failed]), random.chance(75))
        }
        return GeneratedCase(
            seed: seed, rows: rows, options: options, facts: facts, ledgerCharges: ledgerCharges,
            ledgerTransfers: ledgerTransfers, ledgerLines: ledgerLines)
    }
}
