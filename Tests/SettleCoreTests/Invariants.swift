import SettleCore

/// The properties every plan must have, checked from the generated rows (the truth the
/// generator wrote) and the plan.
enum Invariants {
    /// Lines whose charge columns state nothing: copies that do not count and records not read
    /// as their columns. Any other line states its charge's facts, rejected or not.
    static let statesNoChargeFacts: Set<ReasonCode> = [.duplicateLineID, .malformedRecord, .schemaInvalid]

    /// Codes of the line rules: such a line moves nothing, and its currency says least of its charge's.
    static let lineRules: Set<ReasonCode> = [
        .amountInvalid, .currencyUnsupported, .idInvalid, .kindInvalid, .dateInvalid, .fieldMissing,
        .fieldTooLong, .encodingInvalid, .malformedRecord, .schemaInvalid, .duplicateLineID, .lineConflict,
        .crossBorderUnsupported, .payoutCurrencyUnsupported, .payoutCountryUnsupported, .payoutMethodMissing,
        .chargeInvalid, .payoutMethodUnusable,
    ]

    /// The charge a row draws on, derived from its strings (docs/RULES.md, Group rules), independent of the planner.
    /// `chargeOfIntent`: the charge the rows that state charge facts name with each payment
    /// intent (nil: named with two charges, no link).
    static func chargeKey(_ row: GeneratedRow, chargeOfIntent: [String: String?]) -> String? {
        if !row["source_transaction"].isEmpty { return "named:" + row["source_transaction"] }
        let givesFacts = ["charge_amount", "charge_currency", "charge_status", "payment_method_type"].contains {
            !row[$0].isEmpty
        }
        guard givesFacts else { return nil }
        if row["payment_intent"].isEmpty { return "group:" + row.groupKey }
        if case let charge?? = chargeOfIntent[row["payment_intent"]] { return "named:" + charge }
        return "pi:" + row["payment_intent"]
    }

    static func check(_ generated: GeneratedCase, rows: [GeneratedRow], plan: SettlementPlan) -> [String] {
        let batch = plan.batch
        var problems: [String] = []
        func fail(_ text: String) { problems.append(text) }
        guard batch.lines.count == rows.count else {
            return ["\(rows.count) records but \(batch.lines.count) lines"]
        }
        func name(_ index: Int) -> String { batch.text(batch.lines[index].lineID) }

        // Every line has exactly one status, and a code that fits it.
        for (index, line) in batch.lines.enumerated() {
            if batch.text(line.lineID) != rows[index]["line_id"] { fail("line \(index) is not record \(index)") }
            switch line.status {
            case .planned, .netted, .alreadySettled, .unknown:
                if line.reason != .none { fail("\(name(index)) is \(line.status.name) with \(line.reason.code)") }
            case .deferred:
                if line.reason != .chargePending && line.reason != .scheduled {
                    fail("\(name(index)) deferred with \(line.reason.code)")
                }
            case .rejected:
                if line.reason == .none { fail("\(name(index)) rejected without a code") }
            case .settled, .failed:
                fail("\(name(index)) is \(line.status.name) in a plan")
            }
        }

        // Instructions carry planned lines only, each planned line exactly once.
        var carried = [Int](repeating: 0, count: batch.lines.count)
        for instruction in plan.instructions {
            let members = plan.lines(of: instruction).map(Int.init)
            if members.isEmpty { fail("instruction \(instruction.id) has no lines") }
            if instruction.amount <= 0 { fail("instruction \(instruction.id) moves \(instruction.amount)") }
            var signed: Int64 = 0
            for index in members {
                carried[index] += 1
                let line = batch.lines[index]
                if line.status != .planned { fail("instruction carries \(name(index)), \(line.status.name)") }
                if line.currency != instruction.currency {
                    fail("\(name(index)) in another currency than its instruction")
                }
                switch (instruction.kind, line.kind) {
                case (.transfer, .transfer), (.reversal, .reversal), (.payout, .payout): signed += line.amount
                case (.transfer, .reversal): signed -= line.amount
                default: fail("a \(line.kind.name) line in a \(instruction.kind.name) instruction")
                }
                if instruction.kind == .payout,
                    line.payee != instruction.payee || line.payoutMethod != instruction.payoutMethod
                {
                    fail("payout \(instruction.id) carries \(name(index)) of another recipient or method")
                }
            }
            if signed != instruction.amount {
                fail("instruction \(instruction.id) is \(instruction.amount) but its lines add up to \(signed)")
            }
        }
        for (index, line) in batch.lines.enumerated() {
            let expected = line.status == .planned ? 1 : 0
            if carried[index] != expected {
                fail("\(name(index)) (\(line.status.name)) is in \(carried[index]) instructions")
            }
        }

        // Groups: atomic; a rejected or charge_pending group moves nothing.
        var groups: [String: [Int]] = [:]
        for (index, line) in batch.lines.enumerated() where line.reason != .duplicateLineID {
            groups[batch.text(line.group), default: []].append(index)
        }
        for (group, members) in groups {
            let rejected = members.contains { batch.lines[$0].status == .rejected }
            let pending = members.contains { batch.lines[$0].reason == .chargePending }
            if rejected || pending {
                for index in members
                where carried[index] > 0 || batch.lines[index].status == .planned
                    || batch.lines[index].status == .netted
                {
                    fail("\(name(index)) of \(rejected ? "rejected" : "deferred") group \(group) moves")
                }
            }
            if pending, !rejected {
                for index in members
                where batch.lines[index].status == .deferred
                    && batch.lines[index].reason != .chargePending
                {
                    fail("\(name(index)) of a charge_pending group is deferred \(batch.lines[index].reason.code)")
                }
            }
        }

        // Charges: what is known of each, from the rows' own text (and Stripe's facts). Amounts
        // compare as numbers; they are minor units only in the charge's currency, which a row
        // may leave to another (docs/RULES.md, Group rules).
        struct Known {
            var lines: [Int] = []
            var numbers: Set<Int64> = []
            var currencies: Set<Currency> = []
            var statuses: Set<String> = []
            var transferCurrency: Currency? = nil
            var failed = false
            var pending = false
        }
        var charges: [String: Known] = [:]
        func statesFacts(_ index: Int) -> Bool {
            let line = batch.lines[index]
            return !(line.status == .rejected && statesNoChargeFacts.contains(line.reason) || line.outsideGroup)
        }
        var chargeOfIntent: [String: String?] = [:]
        for (index, row) in rows.enumerated() where !row.malformed && statesFacts(index) {
            let (charge, intent) = (row["source_transaction"], row["payment_intent"])
            guard !charge.isEmpty, !intent.isEmpty else { continue }
            if let known = chargeOfIntent[intent] {
                if known != charge { chargeOfIntent[intent] = .some(nil) }
            } else {
                chargeOfIntent[intent] = charge
            }
        }
        for (index, row) in rows.enumerated() {
            guard let key = chargeKey(row, chargeOfIntent: chargeOfIntent), !row.malformed else { continue }
            let line = batch.lines[index]
            if !statesFacts(index) { continue }
            var known = charges[key] ?? Known()
            known.lines.append(index)
            let stated = Currency(row["charge_currency"])
            if let stated { known.currencies.insert(stated) }
            if stated != nil || row["charge_currency"].isEmpty,
                case .success(let number) = MinorUnits.parseThousandths(row["charge_amount"])
            {
                known.numbers.insert(number)
            }
            if ["succeeded", "pending", "failed"].contains(row["charge_status"]) {
                known.statuses.insert(row["charge_status"])
            }
            if row["charge_status"] == "failed" { known.failed = true }
            if row["charge_status"] == "pending" { known.pending = true }
            if known.transferCurrency == nil, line.kind == .transfer,
                !(line.status == .rejected && lineRules.contains(line.reason))
            {
                known.transferCurrency = line.currency
            }
            charges[key] = known
        }
        for (key, var known) in charges {
            var earlier: Int64 = 0
            // The charge's amount in minor units of its currency: the one its rows state, else
            // its transfers' (nil: not known, or not an amount in it).
            var limit: Int64? = nil
            var currency = known.currencies.count == 1 ? known.currencies.first : known.transferCurrency
            if known.numbers.count == 1, let currency,
                case .success(let minor) = MinorUnits.minor(thousandths: known.numbers.first!, currency: currency)
            {
                limit = minor
            }
            var fromStripe = false
            if key.hasPrefix("named:") {
                let id = String(key.dropFirst("named:".count))
                earlier = generated.ledgerCharges[id] ?? 0
                if let fact = generated.facts.charges[id] {
                    limit = fact.amount
                    currency = fact.currency
                    known.failed = fact.status == .failed
                    known.pending = fact.status == .pending
                    fromStripe = true
                }
            }
            // Lines that agree (empty values never disagree, amounts as numbers) do not mismatch.
            if !fromStripe, known.numbers.count <= 1, known.currencies.count <= 1, known.statuses.count <= 1 {
                for index in known.lines where batch.lines[index].reason == .chargeMismatch {
                    fail("\(name(index)) is charge_mismatch but the lines on \(key) agree")
                }
            }
            let moving = known.lines.filter {
                let line = batch.lines[$0]
                return line.kind == .transfer && [.planned, .deferred, .netted].contains(line.status)
            }
            // A charge has one currency: every transfer that moves on it is in it (STRIPE.md).
            let movingCurrencies = Set(moving.map { batch.lines[$0].currency })
            if movingCurrencies.count > 1 || (currency != nil && movingCurrencies.contains { $0 != currency }) {
                fail(
                    "transfers on \(key) move in \(movingCurrencies.map(\.code).sorted()), charge in \(currency?.code ?? "?")"
                )
            }
            if let limit, let currency, moving.allSatisfy({ batch.lines[$0].currency == currency }) {
                // A charge the ledger already used up can only reject: nothing more may move.
                let moved = moving.reduce(Int64(0)) { $0 + batch.lines[$1].amount }
                if moved > 0, moved + earlier > limit {
                    fail("transfers on \(key) add up to \(moved) + \(earlier) earlier, more than \(limit)")
                }
            }
            if known.failed || known.pending {
                for index in known.lines where [.planned, .netted].contains(batch.lines[index].status) {
                    fail("\(name(index)) moves on \(known.failed ? "failed" : "pending") charge \(key)")
                }
            }
            if known.failed {
                for index in known.lines where batch.lines[index].status == .deferred {
                    fail("\(name(index)) waits on failed charge \(key): failed beats pending")
                }
                // The lines it rejected sink their groups (a line the ledger settled earlier is
                // not the charge's to reject).
                for index in known.lines where batch.lines[index].status == .rejected {
                    for member in groups[batch.text(batch.lines[index].group)] ?? [] where carried[member] > 0 {
                        fail("\(name(member)) moves in the group of failed charge \(key)")
                    }
                }
            }
        }

        // A line on a charge nothing says anything of (no row of it states an amount or a
        // status, and Stripe said nothing: a plan made offline) is sent only after the charge
        // is looked up, by its own instruction or by a transfer of its order on that charge,
        // so that a failed or pending charge stops its order at apply (audit 32 N4: a payout
        // of a payout-only order on such a charge had no look-up).
        for (key, known) in charges where key.hasPrefix("named:") {
            let id = String(key.dropFirst("named:".count))
            guard generated.facts.charges[id] == nil, known.numbers.isEmpty, known.statuses.isEmpty else { continue }
            for index in known.lines where carried[index] > 0 && batch.lines[index].kind != .reversal {
                let line = batch.lines[index]
                let own = plan.instructions[Int(plan.instructionOfLine[index])]
                let lookedUp = ([own] + plan.instructions.filter { $0.kind == .transfer && $0.group == line.group })
                    .contains { $0.lookUpCharge.map(batch.text) == id }
                if !lookedUp { fail("\(name(index)) is sent on \(key), which nothing looks up first") }
            }
        }

        // A refused payout method pays nothing.
        for (index, line) in batch.lines.enumerated() where line.kind == .payout && carried[index] > 0 {
            let fact = generated.facts.payoutMethod(
                recipient: batch.text(line.payee), method: batch.text(line.payoutMethod))
            if case .refused = fact?.verdict { fail("\(name(index)) is paid to a refused payout method") }
        }

        // Conservation: per currency, the input equals the sum over statuses; lines and
        // instructions move the same money; netted lines cancel out.
        var input: [String: Int64] = [:]
        var byStatus: [String: Int64] = [:]
        for (index, row) in rows.enumerated() {
            let line = batch.lines[index]
            if let minor = row.minor {
                if line.amount > 0, line.amount != minor {
                    fail("\(name(index)) amount \(line.amount), written \(minor)")
                }
                if line.amount == 0, line.status != .rejected { fail("\(name(index)) lost its amount") }
            } else if line.amount != 0 {
                fail("\(name(index)) has amount \(line.amount) from an invalid amount")
            }
            guard line.amount > 0, let minor = row.minor else { continue }
            input[line.currency.code, default: 0] += minor
            byStatus[line.currency.code, default: 0] += line.amount
        }
        if input != byStatus { fail("conservation: input \(input), by status \(byStatus)") }
        var linesMoved: Int64 = 0
        var netted: [String: Int64] = [:]
        for line in batch.lines {
            let signed = line.kind == .reversal ? -line.amount : line.amount
            if line.status == .planned { linesMoved += signed }
            if line.status == .netted {
                netted["\(batch.text(line.group))|\(batch.text(line.payee))|\(line.currency.code)", default: 0] +=
                    signed
            }
        }
        let instructionsMoved = plan.instructions.reduce(Int64(0)) {
            $0 + ($1.kind == .reversal ? -$1.amount : $1.amount)
        }
        if linesMoved != instructionsMoved { fail("lines move \(linesMoved), instructions \(instructionsMoved)") }
        for (key, sum) in netted where sum != 0 { fail("netted lines of \(key) add up to \(sum)") }
        return problems
    }
}
