import SettleCore
import Testing

/// docs/RULES.md, Group rules: the charge rules read a line's charge facts whether or not it names its charge.
/// Lines that give charge facts but no charge id share one charge per payment intent, else
/// per group.
@Suite struct UnnamedChargeTests {
    /// A transfer that states its charge's facts but not the charge's id.
    static func unnamed(_ id: String, order: String, amount: String, _ facts: [String: String]) -> [String: String] {
        var row: [String: String] = [
            "line_id": id, "order_id": order, "amount": amount, "currency": "usd",
            "transfer_group": "ORDER\(order)", "destination": "acct_\(id)",
        ]
        row.merge(facts) { $1 }
        return row
    }

    @Test func failedChargeWithoutAnIDRejectsTheGroup() {
        let plan = TestExport()
            .add(Self.unnamed("1", order: "1", amount: "10.00", ["charge_status": "failed"]))
            .payout("2", order: "1", amount: "5.00")
            .plan()
        #expect(plan.outcome("1") == (.rejected, "charge_failed"))
        #expect(plan.outcome("2") == (.rejected, "group_rejected"))
        #expect(plan.instructions.isEmpty)
    }

    @Test func failedBankDebitWithoutAnIDIsRejectedNotDeferred() {
        let plan = TestExport()
            .add(
                Self.unnamed(
                    "1", order: "1", amount: "10.00", ["charge_status": "failed", "payment_method_type": "sepa_debit"])
            )
            .plan()
        #expect(plan.outcome("1") == (.rejected, "charge_failed"))
    }

    @Test func currencyDifferingFromAnUnnamedChargeIsRejected() {
        let plan = TestExport()
            .add(Self.unnamed("1", order: "1", amount: "10.00", ["charge_currency": "eur"]))
            .plan()
        #expect(plan.outcome("1") == (.rejected, "currency_mismatch"))
    }

    @Test func linesOfOnePaymentIntentMustAgreeOnTheirCharge() {
        let plan = TestExport()
            // One payment intent across two orders: one charge.
            .add(Self.unnamed("1", order: "1", amount: "10.00", ["payment_intent": "pi_1", "charge_amount": "50.00"]))
            .add(Self.unnamed("2", order: "2", amount: "10.00", ["payment_intent": "pi_1", "charge_amount": "60.00"]))
            // Same amounts written differently agree.
            .add(Self.unnamed("3", order: "3", amount: "10.00", ["payment_intent": "pi_3", "charge_amount": "50"]))
            .add(Self.unnamed("4", order: "3", amount: "10.00", ["payment_intent": "pi_3", "charge_amount": "50.00"]))
            // Without a payment intent the group is the charge.
            .add(Self.unnamed("5", order: "5", amount: "10.00", ["charge_status": "succeeded"]))
            .add(Self.unnamed("6", order: "5", amount: "10.00", ["charge_status": "pending"]))
            .plan()
        #expect(plan.outcome("1") == (.rejected, "charge_mismatch"))
        #expect(plan.outcome("2") == (.rejected, "charge_mismatch"))
        #expect(plan.outcome("3") == (.planned, ""))
        #expect(plan.outcome("4") == (.planned, ""))
        #expect(plan.outcome("5") == (.rejected, "charge_mismatch"))
        #expect(plan.outcome("6") == (.rejected, "charge_mismatch"))
    }

    @Test func differentPaymentIntentsOfOneGroupAreDifferentCharges() {
        let plan = TestExport()
            .add(Self.unnamed("1", order: "1", amount: "10.00", ["payment_intent": "pi_1", "charge_amount": "50.00"]))
            .add(Self.unnamed("2", order: "1", amount: "10.00", ["payment_intent": "pi_2", "charge_amount": "60.00"]))
            .plan()
        #expect(plan.outcome("1") == (.planned, ""))
        #expect(plan.outcome("2") == (.planned, ""))
    }

    @Test func transfersOnAnUnnamedChargeMayNotExceedIt() {
        let plan = TestExport()
            .add(Self.unnamed("1", order: "1", amount: "30.00", ["payment_intent": "pi_1", "charge_amount": "50.00"]))
            .add(
                Self.unnamed(
                    "2", order: "2", amount: "30.00", ["payment_intent": "pi_1", "charge_status": "succeeded"])
            )
            .add(Self.unnamed("3", order: "3", amount: "30.00", ["charge_amount": "50.00"]))
            .add(Self.unnamed("4", order: "3", amount: "30.00", ["charge_currency": "usd"]))
            .add(Self.unnamed("5", order: "5", amount: "30.00", ["charge_amount": "60.00"]))
            .add(Self.unnamed("6", order: "5", amount: "30.00", ["charge_amount": "60.00"]))
            .plan()
        #expect(plan.outcome("1") == (.rejected, "over_allocated"))
        #expect(plan.outcome("2") == (.rejected, "over_allocated"))
        #expect(plan.outcome("3") == (.rejected, "over_allocated"))
        #expect(plan.outcome("4") == (.rejected, "over_allocated"))
        #expect(plan.outcome("5") == (.planned, ""))
        #expect(plan.outcome("6") == (.planned, ""))
    }

    @Test func aLineWithoutChargeFactsDrawsOnTheBalance() {
        let plan = TestExport()
            .add(Self.unnamed("1", order: "1", amount: "30.00", ["payment_intent": "pi_1", "charge_amount": "40.00"]))
            .add(Self.unnamed("2", order: "1", amount: "30.00", ["payment_intent": "pi_1"]))
            .plan()
        // Line 2 gives no charge facts: it is not counted against pi_1's charge.
        #expect(plan.outcome("1") == (.planned, ""))
        #expect(plan.outcome("2") == (.planned, ""))
    }

    /// A line naming a charge with its payment intent says which charge the intent's lines
    /// draw on: 30.00 by charge id and 30.00 by intent are 60.00 on one 40.00 charge. Before,
    /// they were two charges, and both moved (audit 53 H4). An intent named with two charges
    /// links neither: its lines stay a charge of their own.
    @Test(arguments: [false, true]) func aNamedChargeIsTheChargeOfItsPaymentIntent(twoCharges: Bool) {
        let export = TestExport()
            .add(
                Self.unnamed(
                    "1", order: "1", amount: "30.00",
                    ["payment_intent": "pi_1", "source_transaction": "ch_1", "charge_amount": "40.00"])
            )
            .add(Self.unnamed("2", order: "2", amount: "30.00", ["payment_intent": "pi_1", "charge_amount": "40.00"]))
        if twoCharges {
            _ = export.add(
                Self.unnamed(
                    "3", order: "3", amount: "5.00",
                    ["payment_intent": "pi_1", "source_transaction": "ch_2", "charge_amount": "40.00"]))
        }
        let plan = export.plan()
        let expected = twoCharges ? (LineStatus.planned, "") : (.rejected, "over_allocated")
        #expect(plan.outcome("1") == expected)
        #expect(plan.outcome("2") == expected)
    }
}
