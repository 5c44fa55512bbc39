/// The look-ups at Stripe a plan depends on (README, "Stripe's facts before the plan"): every payout method the batch pays
/// to, and every named charge whose export columns do not settle the question: pending,
/// asynchronous (a bank debit) and not yet succeeded, or with no charge columns at all.
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

    /// What to look up for a checked batch (after the readers, before the planner).
    public static func needed(for batch: Batch) -> FactsRequest {
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
            charges[line.charge] = seen
        }
        let needed = charges.compactMap { symbol, seen -> String? in
            let asynchronousUnsettled = seen.bankDebit && !seen.succeeded
            return !seen.columns || seen.pending || asynchronousUnsettled ? batch.text(symbol) : nil
        }
        return FactsRequest(
            payoutMethods: methods.sorted(),
            charges: needed.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }
}
