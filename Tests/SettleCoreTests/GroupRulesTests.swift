import SettleCore
import Testing

/// docs/RULES.md, Group rules.
@Suite struct GroupRulesTests {
    @Test func groupIsAtomic() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00")
            .transfer("2", order: "1", amount: "oops", destination: "acct_b")
            .payout("3", order: "1", amount: "5.00")
            .transfer("4", order: "2", amount: "10.00")
            .plan()
        #expect(plan.outcome("1") == (.rejected, "group_rejected"))
        #expect(plan.outcome("2") == (.rejected, "amount_invalid"))
        #expect(plan.outcome("3") == (.rejected, "group_rejected"))
        #expect(plan.outcome("4") == (.planned, ""))
        #expect(plan.instructions.count == 1)
    }

    @Test func chargeFactsMustAgree() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00", chargeAmount: "100")
            .transfer("2", order: "1", amount: "10.00", destination: "acct_b", chargeAmount: "100.00")
            .transfer("3", order: "2", amount: "10.00", chargeAmount: "100.00")
            .transfer("4", order: "2", amount: "10.00", destination: "acct_b", chargeAmount: "90.00")
            .payout("5", order: "2", amount: "1.00")
            .plan()
        #expect(plan.outcome("1").0 == .planned)
        #expect(plan.outcome("2").0 == .planned)
        #expect(plan.outcome("3") == (.rejected, "charge_mismatch"))
        #expect(plan.outcome("4") == (.rejected, "charge_mismatch"))
        #expect(plan.outcome("5") == (.rejected, "group_rejected"))
    }

    @Test func transferCurrencyMustMatchTheCharge() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00", extra: ["charge_currency": "eur"])
            .plan()
        #expect(plan.outcome("1") == (.rejected, "currency_mismatch"))
    }

    @Test func transfersOnAChargeMayNotExceedIt() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "60.00")
            .transfer("2", order: "1", amount: "30.00", destination: "acct_b", extra: ["transfer_on": "2026-12-24"])
            .transfer("3", order: "1", amount: "20.00", destination: "acct_c")
            .payout("4", order: "1", amount: "50.00")
            .transfer("5", order: "2", amount: "100.00")
            .plan()
        // 60 + 30 (deferred, still counted) + 20 = 110 > 100: every transfer on the charge.
        #expect(plan.outcome("1") == (.rejected, "over_allocated"))
        #expect(plan.outcome("2") == (.rejected, "over_allocated"))
        #expect(plan.outcome("3") == (.rejected, "over_allocated"))
        // Payouts do not count against the charge, but the group is atomic.
        #expect(plan.outcome("4") == (.rejected, "group_rejected"))
        #expect(plan.outcome("5") == (.planned, ""))
    }

    @Test func earlierRunsCountAgainstTheCharge() {
        let history = RecordedHistory()
        history.transferredByCharge["ch_1"] = 9500
        let plan = TestExport().transfer("1", order: "1", amount: "6.00").plan(history: history)
        #expect(plan.outcome("1") == (.rejected, "over_allocated"))
    }

    @Test func failedChargeRejectsItsLines() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00", extra: ["charge_status": "failed"])
            .payout("2", order: "1", amount: "5.00")
            .plan()
        #expect(plan.outcome("1") == (.rejected, "charge_failed"))
        #expect(plan.outcome("2") == (.rejected, "group_rejected"))
    }

    @Test func pendingChargesDeferTheWholeGroup() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00", extra: ["charge_status": "pending"])
            .payout("2", order: "1", amount: "5.00")
            .transfer(
                "3", order: "2", amount: "10.00", extra: ["payment_method_type": "sepa_debit", "charge_status": ""]
            )
            .transfer("4", order: "3", amount: "10.00", extra: ["payment_method_type": "au_becs_debit"])
            .transfer(
                "5", order: "4", amount: "10.00",
                extra: [
                    "payment_method_type": "us_bank_account", "charge_status": "pending", "transfer_on": "2027-01-01",
                ]
            )
            // The type in another case, or with spaces, is still a bank debit (audit 13: SEPA_DEBIT moved).
            .transfer(
                "6", order: "5", amount: "10.00", extra: ["payment_method_type": "SEPA_DEBIT", "charge_status": ""]
            )
            .transfer(
                "7", order: "6", amount: "10.00", extra: ["payment_method_type": " Bacs_Debit ", "charge_status": ""]
            )
            .plan()
        #expect(plan.outcome("1") == (.deferred, "charge_pending"))
        #expect(plan.outcome("2") == (.deferred, "charge_pending"))
        #expect(plan.outcome("3") == (.deferred, "charge_pending"))
        #expect(plan.outcome("6") == (.deferred, "charge_pending"))
        #expect(plan.outcome("7") == (.deferred, "charge_pending"))
        #expect(plan.outcome("4") == (.planned, ""))
        // charge_pending beats scheduled.
        #expect(plan.outcome("5") == (.deferred, "charge_pending"))
        #expect(plan.instructions.count == 1)
    }

    @Test func scheduledLinesWaitForTheirDay() {
        let plan = TestExport()
            .transfer("later", order: "1", amount: "10.00", extra: ["transfer_on": "2026-11-30"])
            .transfer("today", order: "1", amount: "10.00", destination: "acct_b", extra: ["transfer_on": "2026-11-29"])
            .plan()
        #expect(plan.outcome("later") == (.deferred, "scheduled"))
        #expect(plan.outcome("today") == (.planned, ""))
    }

    @Test func rejectionBeatsDeferral() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00", extra: ["charge_status": "pending"])
            .transfer("2", order: "1", amount: "x", destination: "acct_b", extra: ["charge_status": "pending"])
            .plan()
        #expect(plan.outcome("1") == (.rejected, "group_rejected"))
        #expect(plan.outcome("2") == (.rejected, "amount_invalid"))
    }

    @Test func groupKeyFallsBackToPaymentIntentThenOrder() {
        let plan = TestExport()
            .add([
                "line_id": "a", "order_id": "7", "amount": "1.00", "currency": "usd", "destination": "acct_a",
                "payment_intent": "pi_9",
            ])
            .add(["line_id": "b", "order_id": "8", "amount": "1.00", "currency": "usd", "destination": "acct_a"])
            .plan()
        #expect(plan.batch.text(plan.batch.lines[0].group) == "group_pi_9")
        #expect(plan.batch.text(plan.batch.lines[1].group) == "order:8")
    }
}
