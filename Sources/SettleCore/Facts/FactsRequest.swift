/// The look-ups at Stripe a plan depends on (README, "Stripe's facts before the plan"): every payout method the batch pays
/// to, and every named charge whose export columns do not settle the question: pending,
/// asynchronous (a bank debit) and not yet succeeded, with no charge columns at all, or with
/// transfers on it and no `charge_amount` (audit 46 F3: over-allocation cannot be checked
/// without the charge's amount, and Stripe refused the second transfer of an order after
/// the first moved).
///
/// Lines the rules already rejected, and every line of a group such a line sinks, need no
/// look-up: nothing Stripe says can move them.
public struct FactsRequest: Sendable, Equatable {
    /// Sorted by recipient, then method; each once.
    public var payoutMethods: [StripeFacts.PayoutMethodKey]
    /// Charge ids, sorted by their bytes; each once.
    public var charges: [String]

    public init(payoutMethods: [StripeFacts.PayoutMethodKey] = [], charges: [String] = []) {
        self.payoutMethods = payoutMethods
        self.charges = charges
    }

    public var isEmpty: Bool { payoutMethods.isEmpty && charges.isEmpty }

    /// Adds the charges earlier runs' look-ups found failed (`remembered`, with their payment
    /// intents) that this batch names, by id or by intent: the plan asks Stripe again, and
    /// plans with its answer (a charge put right since is forgotten; README, "A charge Stripe
    /// said failed stays failed").
    public mutating func askAgain(_ remembered: [(charge: String, paymentIntent: String?)], in batch: Batch) {
        guard !remembered.isEmpty else { return }
        var chargeNamed: [String: String] = [:]
        for (charge, intent) in remembered {
            chargeNamed[charge] = charge
            if let intent, chargeNamed[intent] == nil { chargeNamed[intent] = charge }
        }
        // Each distinct charge or intent of the batch once (a bit a symbol), its text made only
        // then: the symbol table's index is let go after reading.
        var seen = [UInt64](repeating: 0, count: batch.symbols.count / 64 + 1)
        var asked = Set(charges)
        func visit(_ symbol: Symbol) {
            let raw = Int(symbol.raw)
            guard !symbol.isNone, seen[raw >> 6] & (1 << UInt64(raw & 63)) == 0 else { return }
            seen[raw >> 6] |= 1 << UInt64(raw & 63)
            if let charge = chargeNamed[batch.text(symbol)], asked.insert(charge).inserted { charges.append(charge) }
        }
        for line in batch.lines {
            visit(line.charge)
            visit(line.paymentIntent)
        }
        charges.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// What to look up for a checked batch (after the readers, before the planner).
    ///
    /// `asOf`: the settlement date. An order whose transfer waits for a later `transfer_on`
    /// while its payout moves now gets its charges looked up too, whatever the export says
    /// of them: the transfer that would find a failed charge comes only later, and the
    /// courier must not be paid today for an order whose money will never move.
    ///
    /// `waiting`: the ids of the lines the ledger held waiting (deferred). The charge a waiting
    /// line that is now due draws on is asked again, whether the ledger's copy comes back or a
    /// newer export's copy replaced it: the columns are as old as the run that deferred it, or
    /// are the export's word where Stripe's was taken (audit 46 M3: Stripe's 100.00 let the
    /// order pass whole; on its date the dated transfer met the export's 50.00 and was rejected
    /// `over_allocated`, the order in part; audit 53 H2: a re-export saying `succeeded` moved an
    /// order Stripe had said waited for a pending debit). Lines sent already (unresolved) are
    /// Stripe's to settle by their own objects. So is every charge in ``Batch/chargesToAsk``.
    public static func needed(
        for batch: Batch, asOf: Int32? = nil, waiting: Set<String> = []
    ) -> FactsRequest {
        let lines = batch.lines
        // Groups with a line the per-line rules rejected are lost whatever Stripe says.
        var sunk = Set<Symbol>()
        for line in lines where line.status == .rejected && !LineChecker.staysOutsideGroup(line) && !line.group.isNone {
            sunk.insert(line.group)
        }
        func alive(_ line: OrderLine) -> Bool { line.status == .planned && !sunk.contains(line.group) }

        var methods = Set<StripeFacts.PayoutMethodKey>()
        var methodPairs = Set<[Int32]>()
        // What the export says of each named charge, merged over the lines naming it.
        struct Seen {
            var columns = false
            var pending = false
            var succeeded = false
            var bankDebit = false
            /// A line states `charge_amount`.
            var amount = false
            /// A transfer line draws on it.
            var transfers = false
            /// A transfer line the ledger held draws on it.
            var held = false
        }
        var charges: [Symbol: Seen] = [:]
        for line in lines where alive(line) {
            if line.kind == .payout, !line.payee.isNone, !line.payoutMethod.isNone,
                methodPairs.insert([line.payee.raw, line.payoutMethod.raw]).inserted
            {
                methods.insert(
                    StripeFacts.PayoutMethodKey(
                        recipient: batch.text(line.payee), method: batch.text(line.payoutMethod)))
            }
            guard !line.charge.isNone else { continue }
            var seen = charges[line.charge] ?? Seen()
            if line.givesChargeFacts || line.chargeFee >= 0 { seen.columns = true }
            if line.chargeStatus == .pending { seen.pending = true }
            if line.chargeStatus == .succeeded { seen.succeeded = true }
            if !line.paymentMethodType.isNone, batch.isBankDebit(line.paymentMethodType) { seen.bankDebit = true }
            if line.chargeAmount >= 0 { seen.amount = true }
            if line.kind == .transfer { seen.transfers = true }
            // Only a waiting line that is due: one still waiting for its date is asked on its day.
            if batch.chargesToAsk.contains(line.charge)
                || (!waiting.isEmpty && (line.transferOn == .min || asOf.map({ line.transferOn <= $0 }) ?? true)
                    && waiting.contains(batch.text(line.lineID)))
            {
                seen.held = true
            }
            charges[line.charge] = seen
        }
        // Orders that pay out now while a transfer of theirs waits for its date: their
        // transfers' charges.
        var scheduledCharges = Set<Symbol>()
        if let asOf {
            var waiting: [Symbol: [Symbol]] = [:]
            var payingNow = Set<Symbol>()
            for line in lines where alive(line) && !line.group.isNone {
                let later = line.transferOn != .min && line.transferOn > asOf
                if line.kind == .transfer, later, !line.charge.isNone {
                    waiting[line.group, default: []].append(line.charge)
                } else if line.kind == .payout, !later {
                    payingNow.insert(line.group)
                }
            }
            for (group, groupCharges) in waiting where payingNow.contains(group) {
                scheduledCharges.formUnion(groupCharges)
            }
        }
        let needed = charges.compactMap { symbol, seen -> String? in
            let asynchronousUnsettled = seen.bankDebit && !seen.succeeded
            let unmeasured = seen.transfers && !seen.amount
            return !seen.columns || seen.pending || asynchronousUnsettled || unmeasured || seen.held
                || scheduledCharges.contains(symbol)
                ? batch.text(symbol) : nil
        }
        return FactsRequest(
            payoutMethods: methods.sorted(),
            charges: needed.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }
}
