import SettleCore
import Testing

/// README, "Stripe's facts before the plan": Stripe's facts come before the plan.
@Suite struct StripeFactsTests {
    static func refused(_ recipient: String, _ method: String) -> StripeFacts {
        StripeFacts(payoutMethods: [
            StripeFacts.PayoutMethodKey(recipient: recipient, method: method): StripeFacts.PayoutMethod(
                verdict: .refused(reason: "archived"), requestID: "req_1", checkedAt: "2026-11-29T01:00:00Z")
        ])
    }

    static func charge(_ id: String, _ status: ChargeStatus, amount: Int64 = 10000, currency: String = "usd")
        -> StripeFacts
    {
        StripeFacts(charges: [
            id: StripeFacts.Charge(status: status, amount: amount, currency: Currency(currency)!, fee: 320)
        ])
    }

    @Test func refusedPayoutMethodRejectsItsGroupBeforePayoutsAreFormed() throws {
        let export = TestExport()
            .transfer("1", order: "1", amount: "10.00")
            .payout("2", order: "1", amount: "5.00", method: "pm_bad")
            .payout("3", order: "1", amount: "5.00")
            .payout("4", order: "2", amount: "7.00")
            .payout("5", order: "3", amount: "1.00", method: "pm_bad", extra: ["recipient": "acct_other"])
        let facts = Self.refused("acct_drv", "pm_bad")
        let plan = Planner(options: TestExport.options(), history: nil, facts: facts).plan(export.batch())
        #expect(plan.outcome("2") == (.rejected, "payout_method_unusable"))
        #expect(plan.batch.reasonText(of: plan.batch.lines[1]).hasSuffix(": archived"))
        #expect(plan.outcome("1") == (.rejected, "group_rejected"))
        #expect(plan.outcome("3") == (.rejected, "group_rejected"))
        // Another group paying the same recipient by the same method is aggregated alone.
        let payout = try #require(plan.instruction(of: "4"))
        #expect(plan.lineIDs(of: payout) == ["4"])
        #expect(payout.amount == 700)
        // The refusal is per recipient: the same method id of another recipient was not looked at.
        #expect(plan.outcome("5") == (.planned, ""))
        #expect(plan.instructions.count == 2)
        #expect(plan.facts == facts)
    }

    @Test func usablePayoutMethodPlans() {
        let facts = StripeFacts(payoutMethods: [
            StripeFacts.PayoutMethodKey(recipient: "acct_drv", method: "pm_ap_1"): StripeFacts.PayoutMethod(
                verdict: .usable)
        ])
        let plan = Planner(options: TestExport.options(), history: nil, facts: facts)
            .plan(TestExport().payout("1", order: "1", amount: "5.00").batch())
        #expect(plan.outcome("1") == (.planned, ""))
    }

    /// What earlier runs' look-ups found failed (``StripeFacts/remember(_:)``): lines on the
    /// charge, or naming only its payment intent (with charge columns or without), are
    /// rejected `charge_failed` whatever the export says, their orders `group_rejected`; a
    /// charge this plan looked up itself keeps this look-up's answer; other charges plan.
    @Test func rememberedFailuresRejectTheLinesOfTheChargeAndOfItsIntent() {
        let export = TestExport()
            .transfer("1", order: "1", amount: "10.00", charge: "ch_bad")
            .payout("2", order: "1", amount: "5.00")
            .payout("3", order: "2", amount: "5.00", extra: ["payment_intent": "pi_bad", "charge_status": "succeeded"])
            .payout("4", order: "3", amount: "5.00", extra: ["payment_intent": "pi_bad"])
            .transfer("5", order: "4", amount: "10.00", charge: "ch_good")
            .transfer("6", order: "5", amount: "10.00", charge: "ch_again")
        let earlier = StripeFacts.Charge(
            status: .failed, amount: -1, currency: .usd, checkedAt: "Mon, 30 Nov 2026 01:00:00 GMT", lookedUpBy: "run_1"
        )
        var facts = Self.charge("ch_again", .succeeded)
        facts.remember([("ch_bad", "pi_bad", earlier), ("ch_again", nil, earlier)])
        let plan = Planner(options: TestExport.options(), history: nil, facts: facts).plan(export.batch())
        #expect(plan.outcome("1") == (.rejected, "charge_failed"))
        #expect(
            plan.batch.reasonText(of: plan.batch.lines[0])
                == "Stripe reported charge ch_bad failed when run run_1 looked it up (Mon, 30 Nov 2026 01:00:00 GMT)")
        #expect(plan.outcome("2") == (.rejected, "group_rejected"))
        #expect(plan.outcome("3") == (.rejected, "charge_failed"))
        #expect(plan.outcome("4") == (.rejected, "charge_failed"))
        #expect(
            plan.batch.reasonText(of: plan.batch.lines[3])
                == "Stripe reported the charge of payment intent pi_bad failed when run run_1 looked it up (Mon, 30 Nov 2026 01:00:00 GMT)"
        )
        #expect(plan.outcome("5") == (.planned, ""))
        #expect(plan.outcome("6") == (.planned, ""))
    }

    @Test func stripesChargeStatusOverridesTheExport() {
        let export = TestExport()
            .transfer("1", order: "1", amount: "10.00", charge: "ch_failed")
            .payout("2", order: "1", amount: "5.00")
            .transfer("3", order: "2", amount: "10.00", charge: "ch_pending")
            .transfer("4", order: "3", amount: "10.00", charge: "ch_ok", extra: ["charge_status": "pending"])
            .transfer(
                "5", order: "4", amount: "10.00", charge: "ch_debit",
                extra: ["charge_status": "", "payment_method_type": "sepa_debit"])
        var facts = Self.charge("ch_failed", .failed)
        facts.charges.merge(Self.charge("ch_pending", .pending).charges) { $1 }
        facts.charges.merge(Self.charge("ch_ok", .succeeded).charges) { $1 }
        facts.charges.merge(Self.charge("ch_debit", .succeeded).charges) { $1 }
        let plan = Planner(options: TestExport.options(), history: nil, facts: facts).plan(export.batch())
        #expect(plan.outcome("1") == (.rejected, "charge_failed"))
        #expect(plan.batch.reasonText(of: plan.batch.lines[0]) == "Stripe reports charge ch_failed failed")
        #expect(plan.outcome("2") == (.rejected, "group_rejected"))
        #expect(plan.outcome("3") == (.deferred, "charge_pending"))
        #expect(plan.outcome("4") == (.planned, ""))
        #expect(plan.outcome("5") == (.planned, ""))
    }

    @Test func stripesAmountAndCurrencyAreWhatTheRulesCheck() throws {
        let export = TestExport()
            // The export says 100.00; Stripe says 15.00.
            .transfer("1", order: "1", amount: "10.00", charge: "ch_small")
            .transfer("2", order: "1", amount: "10.00", destination: "acct_b", charge: "ch_small")
            // The export says usd; Stripe says eur.
            .transfer("3", order: "2", amount: "10.00", charge: "ch_eur")
            // The export's lines disagree; Stripe's answer replaces both.
            .transfer("4", order: "3", amount: "10.00", charge: "ch_mixed", chargeAmount: "20.00")
            .transfer(
                "5", order: "3", amount: "10.00", destination: "acct_b", charge: "ch_mixed", chargeAmount: "30.00"
            )
            // No charge columns at all: Stripe's facts stand in, so no look-up at apply.
            .add([
                "line_id": "6", "order_id": "6", "amount": "10.00", "currency": "usd", "destination": "acct_a",
                "source_transaction": "ch_bare",
            ])
        var facts = Self.charge("ch_small", .succeeded, amount: 1500)
        facts.charges.merge(Self.charge("ch_eur", .succeeded, currency: "eur").charges) { $1 }
        facts.charges.merge(Self.charge("ch_mixed", .succeeded, amount: 2000).charges) { $1 }
        facts.charges.merge(Self.charge("ch_bare", .succeeded).charges) { $1 }
        let plan = Planner(options: TestExport.options(), history: nil, facts: facts).plan(export.batch())
        #expect(plan.outcome("1") == (.rejected, "over_allocated"))
        #expect(plan.outcome("2") == (.rejected, "over_allocated"))
        #expect(plan.outcome("3") == (.rejected, "currency_mismatch"))
        #expect(plan.outcome("4") == (.planned, ""))
        #expect(plan.outcome("5") == (.planned, ""))
        #expect(plan.outcome("6") == (.planned, ""))
        #expect(try #require(plan.instruction(of: "6")).needsChargeLookup == false)
        #expect(plan.charges.map(\.amount).sorted() == [1500, 2000, 10000, 10000])
        // Offline, the same charge needs its look-up before sending.
        #expect(
            try #require(Planner(options: TestExport.options(), history: nil).plan(export.batch()).instruction(of: "6"))
                .needsChargeLookup)
    }

    /// Payout-only orders of one courier, offline: the one whose line names a charge nothing
    /// describes is its order's own payout, with the charge's look-up; the others aggregate
    /// per payout method as always, also after it (audit 33 O7: a payout on the courier's
    /// second method after such a payout trapped the planner).
    @Test func aPayoutThatLooksItsChargeUpStaysOutOfTheCouriersAggregates() throws {
        let plan = TestExport()
            .payout(
                "P0", order: "G0", amount: "5.00", recipient: "acct_c", method: "pm_a",
                extra: ["source_transaction": "ch_bare"]
            )
            .payout("P1", order: "G1", amount: "2.01", recipient: "acct_c", method: "pm_a")
            .payout("P4", order: "G4", amount: "5.04", recipient: "acct_c", method: "pm_b")
            .payout("P5", order: "G5", amount: "1.00", recipient: "acct_c", method: "pm_a")
            .plan()
        let own = try #require(plan.instruction(of: "P0"))
        #expect(own.needsChargeLookup && own.lookUpCharge.map(plan.batch.text) == "ch_bare")
        #expect(plan.batch.text(own.group) == plan.batch.text(plan.batch.lines[0].group))
        let aggregated = try #require(plan.instruction(of: "P1"))
        #expect(
            plan.instruction(of: "P5")?.id == aggregated.id && aggregated.amount == 301 && !aggregated.needsChargeLookup
        )
        let other = try #require(plan.instruction(of: "P4"))
        #expect(other.id != aggregated.id && other.amount == 504)
        #expect(plan.instructions.count == 3)
    }

    @Test func factsRequestListsWhatThePlanDependsOn() {
        let batch = TestExport()
            .payout("p1", order: "1", amount: "5.00", recipient: "acct_z", method: "pm_2")
            .payout("p2", order: "2", amount: "5.00", recipient: "acct_z", method: "pm_2")
            .payout("p3", order: "3", amount: "5.00", recipient: "acct_a", method: "pm_9")
            .payout("p4", order: "3", amount: "5.00", recipient: "acct_z", method: "pm_1")
            // A group with a rejected line: nothing to look up for it.
            .payout("p5", order: "5", amount: "5.00", recipient: "acct_dead", method: "pm_1")
            .transfer("t5", order: "5", amount: "x", charge: "ch_dead", extra: ["charge_status": "pending"])
            // A rejected payout line.
            .payout("p6", order: "6", amount: "5.00", recipient: "acct_eur", extra: ["currency": "eur"])
            .transfer("succeeded", order: "7", amount: "1.00", charge: "ch_card")
            .transfer("pending", order: "8", amount: "1.00", charge: "ch_pending", extra: ["charge_status": "pending"])
            .transfer(
                "debit", order: "9", amount: "1.00", charge: "ch_debit",
                extra: ["charge_status": "", "payment_method_type": "bacs_debit"]
            )
            .transfer(
                "debit ok", order: "10", amount: "1.00", charge: "ch_debit_ok",
                extra: ["payment_method_type": "bacs_debit"]
            )
            .add([
                "line_id": "bare", "order_id": "11", "amount": "1.00", "currency": "usd", "destination": "acct_a",
                "source_transaction": "ch_bare",
            ])
            .add([
                "line_id": "bare again", "order_id": "12", "amount": "1.00", "currency": "usd",
                "destination": "acct_a", "source_transaction": "ch_bare",
            ])
            // No charge id: nothing Stripe can be asked about.
            .add(["line_id": "unnamed", "order_id": "13", "amount": "1.00", "currency": "usd", "destination": "acct_a"])
            .batch()
        let request = FactsRequest.needed(for: batch)
        #expect(
            request.payoutMethods == [
                .init(recipient: "acct_a", method: "pm_9"), .init(recipient: "acct_z", method: "pm_1"),
                .init(recipient: "acct_z", method: "pm_2"),
            ])
        #expect(request.charges == ["ch_bare", "ch_debit", "ch_pending"])
        #expect(FactsRequest.needed(for: TestExport().transfer("1", order: "1", amount: "1.00").batch()).isEmpty)
    }

    /// A charge the export calls succeeded is asked about when its order's transfer waits for
    /// a later date and the order's payout moves now; not when the payout waits too, nor when
    /// the transfer moves now (it finds a failed charge itself, before the payout goes).
    @Test func aScheduledTransfersChargeIsAskedWhenItsPayoutMovesNow() {
        let asOf = CivilDate.parse("2026-11-29")!
        let batch = TestExport()
            .transfer("t1", order: "1", amount: "10.00", extra: ["transfer_on": "2026-12-05"])
            .payout("p1", order: "1", amount: "1.00")
            .transfer("t2", order: "2", amount: "10.00", extra: ["transfer_on": "2026-12-05"])
            .payout("p2", order: "2", amount: "1.00", extra: ["transfer_on": "2026-12-05"])
            .transfer("t3", order: "3", amount: "10.00")
            .payout("p3", order: "3", amount: "1.00")
            .batch()
        #expect(FactsRequest.needed(for: batch, asOf: asOf).charges == ["ch_1"])
        #expect(FactsRequest.needed(for: batch).charges.isEmpty)
    }
}
