import SettleCore

/// What applying a plan will take: instructions by kind, requests, and the time at the rate.
/// Printed after planning, so whoever runs a large batch knows before they start it.
struct ApplyEstimate: Equatable {
    var transfers = 0
    var reversals = 0
    var payouts = 0
    /// Read-only look-ups before sending: payout methods (once each) and charges without columns.
    var lookups = 0

    var instructions: Int { transfers + reversals + payouts }
    /// One call per instruction and per look-up, before any retry.
    var requests: Int { instructions + lookups }

    init(transfers: Int = 0, reversals: Int = 0, payouts: Int = 0, lookups: Int = 0) {
        self.transfers = transfers
        self.reversals = reversals
        self.payouts = payouts
        self.lookups = lookups
    }

    init(plan: SettlementPlan) {
        var methods = Set<Symbol>()
        var charges = Set<Symbol>()
        for instruction in plan.instructions {
            switch instruction.kind {
            case .transfer: transfers += 1
            case .reversal: reversals += 1
            case .payout:
                payouts += 1
                methods.insert(instruction.payoutMethod)
            }
            if let charge = instruction.lookUpCharge { charges.insert(charge) }
        }
        lookups = methods.count + charges.count
    }

    /// `apply estimate: 5,270,112 instructions (4.1 M transfers, 1.2 M payouts) ≈ 16 h 16 min at 90 requests/s`.
    /// With `rate` nil (the key is not known at plan time) both defaults are given: 20/s for a
    /// test key, 90/s for a live one.
    func text(rate: Int?) -> String {
        guard instructions > 0 else { return "apply estimate: nothing to send" }
        var parts: [String] = []
        for (count, noun) in [(transfers, "transfer"), (payouts, "payout"), (reversals, "reversal")] where count > 0 {
            parts.append("\(HumanFormat.compact(count)) \(noun)\(count == 1 ? "" : "s")")
        }
        var text = "apply estimate: \(HumanFormat.count(instructions)) instruction\(instructions == 1 ? "" : "s")"
        text += " (\(parts.joined(separator: ", ")))"
        if lookups > 0 { text += " + \(HumanFormat.count(lookups)) look-up\(lookups == 1 ? "" : "s")" }
        text += ", \(HumanFormat.count(requests)) requests"
        if let rate {
            text += " ≈ \(time(rate: rate)) at \(rate) requests/s"
        } else {
            text += " ≈ \(time(rate: 20)) at 20/s (test key) or \(time(rate: 90)) at 90/s (live key)"
        }
        return text
    }

    func time(rate: Int) -> String {
        HumanFormat.duration(seconds: Double(requests) / Double(max(1, rate)))
    }
}
