import SettleCore
import Testing

/// docs/RULES.md, Group rules: a charge's amount and fee are in the charge's currency, which a
/// line may leave to another (audit 15, F1); a line a line rule rejected still states its
/// charge's facts, and moves nothing (audit 15, F2).
@Suite struct ChargeFactsTests {
    static let header = [
        "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination", "source_transaction",
        "payment_intent", "charge_amount", "charge_currency", "charge_status", "charge_fee", "payment_method_type",
        "destination_country", "recipient", "payout_method",
    ]

    /// A KRW transfer and a USD payout of one order, on one charge.
    static func krwOrder(
        transferCharge: String, payoutCharge: String, transferCurrency: String = "krw", fee: String = "",
        charge: String = "ch_1", intent: String = ""
    ) -> TestExport {
        TestExport(header)
            .add([
                "line_id": "1-1", "order_id": "1", "kind": "transfer", "amount": "3000", "currency": "krw",
                "transfer_group": "ORD1", "destination": "acct_a", "source_transaction": charge,
                "payment_intent": intent, "charge_amount": transferCharge, "charge_currency": transferCurrency,
                "charge_status": "succeeded", "payment_method_type": "card",
            ])
            .add([
                "line_id": "1-2", "order_id": "1", "kind": "payout", "amount": "10.00", "currency": "usd",
                "transfer_group": "ORD1", "source_transaction": charge, "payment_intent": intent,
                "charge_amount": payoutCharge, "charge_status": "succeeded", "charge_fee": fee,
                "payment_method_type": "card", "recipient": "acct_r", "payout_method": "pm_ap_1",
            ])
    }

    @Test func anAmountWithoutItsCurrencyIsReadInTheCharges() throws {
        // 5541 on the USD payout is 5541 KRW, the charge's: the lines agree.
        let plan = Self.krwOrder(transferCharge: "5541", payoutCharge: "5541", fee: "120").plan()
        #expect(plan.outcome("1-1") == (.planned, ""))
        #expect(plan.outcome("1-2") == (.planned, ""))
        let charge = try #require(plan.charges.first)
        #expect(plan.charges.count == 1)
        #expect(charge.currency == Currency("krw") && charge.amount == 5541 && charge.fee == 120)
    }

    @Test func amountsCompareAsNumbers() {
        // 5541 KRW and 55.41 disagree, whatever the payout line's own currency.
        let plan = Self.krwOrder(transferCharge: "5541", payoutCharge: "55.41").plan()
        #expect(plan.outcome("1-1") == (.rejected, "charge_mismatch"))
        #expect(plan.outcome("1-2") == (.rejected, "charge_mismatch"))
        // 5541 and 5541.000 are one number.
        let same = Self.krwOrder(transferCharge: "5541", payoutCharge: "5541.000").plan()
        #expect(same.outcome("1-1") == (.planned, ""))
        #expect(same.outcome("1-2") == (.planned, ""))
    }

    @Test func theOnlyAmountMayBeOnALineOfAnotherCurrency() throws {
        // Named by its payment intent only; the charge is KRW (the transfer says so): "60" is
        // 60 KRW, which a 3000 KRW transfer overdraws (it was read as 60.00 USD, 6000).
        let over = Self.krwOrder(transferCharge: "", payoutCharge: "60", charge: "", intent: "pi_1").plan()
        #expect(over.outcome("1-1") == (.rejected, "over_allocated"))
        #expect(over.outcome("1-2") == (.rejected, "group_rejected"))
        #expect(over.reason("1-1").contains("more than the charge's 60"))
        let charge = try #require(over.charges.first)
        #expect(charge.currency == Currency("krw") && charge.amount == 60)
        let enough = Self.krwOrder(transferCharge: "", payoutCharge: "3000", charge: "", intent: "pi_1").plan()
        #expect(enough.outcome("1-1") == (.planned, ""))
        #expect(enough.charges.first?.amount == 3000)
    }

    @Test func withNoStatedCurrencyTheTransfersIsTheCharges() throws {
        // No line states charge_currency: the transfer's currency is the charge's (SPEC: equal).
        let plan = Self.krwOrder(transferCharge: "", payoutCharge: "2999", transferCurrency: "").plan()
        #expect(plan.outcome("1-1") == (.rejected, "over_allocated"))
        #expect(plan.reason("1-1").contains("more than the charge's 2999"))
    }

    @Test func transfersInTwoCurrenciesOnAChargeOfNoStatedCurrencyMismatch() {
        // STRIPE.md: a transfer's currency must be its charge's balance-transaction currency.
        // With none stated, USD and EUR transfers on ch_2 cannot both be in it: Stripe would
        // refuse one and the order would move in part. Whatever the line order.
        func order(_ first: String, _ second: String, chargeCurrency: String = "") -> TestExport {
            TestExport(Self.header)
                .add([
                    "line_id": "2-1", "order_id": "2", "amount": "50.00", "currency": first, "destination": "acct_a",
                    "source_transaction": "ch_2", "charge_amount": "100.00", "charge_currency": chargeCurrency,
                    "charge_status": "succeeded",
                ])
                .add([
                    "line_id": "2-2", "order_id": "2", "amount": "40.00", "currency": second, "destination": "acct_b",
                    "source_transaction": "ch_2", "charge_amount": "100.00", "charge_status": "succeeded",
                ])
                .add([
                    "line_id": "2-3", "order_id": "2", "kind": "payout", "amount": "5.00", "currency": "usd",
                    "recipient": "acct_r", "payout_method": "pm_ap_1",
                ])
        }
        for (first, second) in [("usd", "eur"), ("eur", "usd")] {
            let plan = order(first, second).plan()
            #expect(plan.outcome("2-1") == (.rejected, "currency_mismatch"))
            #expect(plan.outcome("2-2") == (.rejected, "currency_mismatch"))
            #expect(plan.outcome("2-3") == (.rejected, "group_rejected"))
            #expect(plan.reason("2-1").contains("in more than one currency"))
            #expect(plan.instructions.isEmpty)
        }
        // One currency: the charge's, the order moves.
        let same = order("eur", "eur").plan()
        #expect(same.outcome("2-1") == (.planned, "") && same.outcome("2-2") == (.planned, ""))
        // Stated on a line: only the transfer in another currency is the mismatch.
        let stated = order("usd", "eur", chargeCurrency: "usd").plan()
        #expect(stated.outcome("2-1") == (.rejected, "group_rejected"))
        #expect(stated.outcome("2-2") == (.rejected, "currency_mismatch"))
        #expect(stated.reason("2-2") == "the transfer is in EUR but charge ch_2 is in USD")
    }

    @Test func anAmountNotExactInTheChargesCurrencyIsInvalid() {
        // 55.5 is a number, but not an amount in KRW, the charge's currency.
        let plan = Self.krwOrder(transferCharge: "", payoutCharge: "5541.5").plan()
        #expect(plan.outcome("1-2") == (.rejected, "charge_invalid"))
        #expect(plan.reason("1-2") == "charge_amount 5541.5 is not an amount in KRW, the currency of charge ch_1")
        #expect(plan.outcome("1-1") == (.rejected, "group_rejected"))
        let fee = Self.krwOrder(transferCharge: "5541", payoutCharge: "", fee: "1.20").plan()
        #expect(fee.outcome("1-2") == (.rejected, "charge_invalid"))
        #expect(fee.reason("1-2") == "charge_fee 1.2 is not an amount in KRW, the currency of charge ch_1")
        // What is an amount in no currency is rejected when read.
        for text in ["abc", "1.2345", "0", "-5"] {
            let bad = Self.krwOrder(transferCharge: "", payoutCharge: text).plan()
            #expect(bad.outcome("1-2") == (.rejected, "charge_invalid"), "\(text)")
        }
        #expect(
            Self.krwOrder(transferCharge: "", payoutCharge: "1.2345").plan().reason("1-2")
                == "charge_amount '1.2345' is not an amount in any currency")
        // With charge_currency the line's own amount is checked in it, as before.
        let stated = Self.krwOrder(transferCharge: "55.41", payoutCharge: "").plan()
        #expect(stated.outcome("1-1") == (.rejected, "charge_invalid"))
        #expect(stated.reason("1-1") == "charge_amount '55.41' is not an amount in KRW")
    }

    /// Two orders on one payment intent: A-1 states the charge's facts and is rejected for a
    /// line rule (cross-border), B-1 gives no status.
    static func twoOrders(_ a: [String: String], _ b: [String: String] = [:], currency: String = "usd") -> TestExport {
        var first = [
            "line_id": "A-1", "order_id": "A", "kind": "transfer", "amount": "10.00", "currency": currency,
            "transfer_group": "GA", "destination": "acct_a", "payment_intent": "pi_1", "charge_amount": "100.00",
            "charge_currency": currency, "charge_status": "succeeded", "payment_method_type": "card",
            "destination_country": "JP",
        ]
        first.merge(a) { $1 }
        var second = [
            "line_id": "B-1", "order_id": "B", "kind": "transfer", "amount": "20.00", "currency": currency,
            "transfer_group": "GB", "destination": "acct_b", "payment_intent": "pi_1", "charge_amount": "100.00",
            "charge_currency": currency,
        ]
        second.merge(b) { $1 }
        return TestExport(header).add(first).add(second)
    }

    @Test func aRejectedLinesFailedChargeFailsTheOthers() {
        let plan = Self.twoOrders(["charge_status": "failed"]).plan()
        #expect(plan.outcome("A-1") == (.rejected, "cross_border_unsupported"))
        #expect(plan.outcome("B-1") == (.rejected, "charge_failed"))
        #expect(plan.instructions.isEmpty)
        // Rejected before its charge columns were reached (amount_invalid) or for one of them
        // (charge_amount), a line still states the others.
        for broken in [["amount": "ten"], ["charge_amount": "abc"], ["charge_fee": "1,00"]] {
            let other = Self.twoOrders(broken.merging(["charge_status": "failed", "destination_country": ""]) { $1 })
                .plan()
            #expect(other.outcome("B-1") == (.rejected, "charge_failed"), "\(broken)")
        }
    }

    @Test func aRejectedLinesPendingBankDebitDefersTheOthers() {
        let plan = Self.twoOrders(
            ["charge_status": "pending", "payment_method_type": "sepa_debit"], ["charge_amount": ""], currency: "eur"
        )
        .plan()
        #expect(plan.outcome("A-1") == (.rejected, "cross_border_unsupported"))
        #expect(plan.outcome("B-1") == (.deferred, "charge_pending"))
        let debit = Self.twoOrders(["charge_status": "", "payment_method_type": "sepa_debit"], currency: "eur").plan()
        #expect(debit.outcome("B-1") == (.deferred, "charge_pending"))
    }

    @Test func aRejectedLinesAmountDisagreesButNeverCounts() throws {
        // Its charge_amount takes part in charge_mismatch: the facts disagree.
        let mismatch = Self.twoOrders(["charge_amount": "90.00"]).plan()
        #expect(mismatch.outcome("B-1") == (.rejected, "charge_mismatch"))
        // It moves nothing, so its amount is not allocated: 80.00 + 30.00 > 100.00 would be.
        let plan = Self.twoOrders(["amount": "80.00"], ["amount": "30.00"]).plan()
        #expect(plan.outcome("A-1") == (.rejected, "cross_border_unsupported"))
        #expect(plan.outcome("B-1") == (.planned, ""))
        #expect(plan.instruction(of: "B-1")?.amount == 3000)
        // Its charge_amount alone is the charge's (B-1 states none): 120.00 is over it.
        let limit = Self.twoOrders([:], ["amount": "120.00", "charge_amount": ""]).plan()
        #expect(limit.outcome("B-1") == (.rejected, "over_allocated"))
        // A charge only rejected lines draw on is not one the run touches (charges.csv).
        let untouched = Self.twoOrders([:], ["payment_intent": "pi_2"]).plan()
        #expect(untouched.charges.map { untouched.batch.text($0.charge) } == ["pi_2"])
    }

    @Test func copiesThatDoNotCountStateNothing() {
        // A later copy of a line_id stays outside its group: its failed charge fails nothing.
        let plan = Self.twoOrders(["destination_country": ""], ["line_id": "A-1", "charge_status": "failed"]).plan()
        #expect(plan.outcomes("A-1").map(\.1) == ["", "duplicate_line_id"])
        #expect(plan.outcome("A-1") == (.planned, ""))
    }

    @Test func whereLinesDisagreeTheStrictSideIsKeptWhateverTheirOrder() {
        // Z-1, settled by an earlier run, draws on ch_9, whose lines disagree on its status
        // (pending, failed): Z-2 of its group waits or not the same in either line order
        // (failed beats pending). The first line's status was kept: the order decided.
        func outcomes(_ reversed: Bool) -> [String] {
            var rows: [[String: String]] = [
                [
                    "line_id": "X-1", "order_id": "X", "kind": "transfer", "amount": "1.00", "currency": "usd",
                    "transfer_group": "GX", "destination": "acct_x", "source_transaction": "ch_9",
                    "charge_status": "pending",
                ],
                [
                    "line_id": "Y-1", "order_id": "Y", "kind": "transfer", "amount": "1.00", "currency": "usd",
                    "transfer_group": "GY", "destination": "acct_y", "source_transaction": "ch_9",
                    "charge_status": "failed",
                ],
            ]
            if reversed { rows.reverse() }
            rows += [
                [
                    "line_id": "Z-1", "order_id": "Z", "kind": "transfer", "amount": "1.00", "currency": "usd",
                    "transfer_group": "GZ", "destination": "acct_z", "source_transaction": "ch_9",
                ],
                [
                    "line_id": "Z-2", "order_id": "Z", "kind": "transfer", "amount": "2.00", "currency": "usd",
                    "transfer_group": "GZ", "destination": "acct_z", "source_transaction": "ch_8",
                ],
            ]
            let export = TestExport(Self.header)
            for row in rows { export.add(row) }
            let batch = export.batch()
            let history = RecordedHistory()
            let settled = batch.lines.first { batch.text($0.lineID) == "Z-1" }!
            history.lines["Z-1"] = HistoricLine(
                content: LineContent.digest(batch, settled), state: .settled, stripeID: "tr_z")
            let plan = Planner(options: TestExport.options(), history: history).plan(batch)
            return ["X-1", "Y-1", "Z-1", "Z-2"].map { "\(plan.outcome($0).0.name) \(plan.outcome($0).1)" }
        }
        #expect(
            outcomes(false) == [
                "rejected charge_mismatch", "rejected charge_mismatch", "already_settled ", "planned ",
            ])
        #expect(outcomes(true) == outcomes(false))
    }
}
