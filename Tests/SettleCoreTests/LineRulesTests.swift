import SettleCore
import Testing

/// docs/RULES.md, Line rules: each rule has its own case with the exact status and reason code.
@Suite struct LineRulesTests {
    @Test func seedExampleIsPlanned() {
        let plan = TestExport()
            .transfer("100-1", order: "100", amount: "70.00", extra: ["charge_fee": "3.20"])
            .payout("100-2", order: "100", amount: "20.00")
            .plan()
        #expect(plan.outcome("100-1") == (.planned, ""))
        #expect(plan.outcome("100-2") == (.planned, ""))
        #expect(plan.instructions.count == 2)
        #expect(plan.instructions.map(\.amount) == [7000, 2000])
    }

    static let lineCases: [(String, [String: String], String)] = [
        ("amount", ["amount": "70.001"], "amount_invalid"),
        ("negative", ["amount": "-70.00"], "amount_invalid"),
        ("exponent", ["amount": "7e1"], "amount_invalid"),
        ("currency", ["currency": "xyz", "charge_currency": ""], "currency_unsupported"),
        ("destination prefix", ["destination": "rest"], "id_invalid"),
        ("charge prefix", ["source_transaction": "pi_1"], "id_invalid"),
        ("payment intent prefix", ["payment_intent": "ch_1"], "id_invalid"),
        ("kind", ["kind": "refund"], "kind_invalid"),
        ("kind case", ["kind": "Transfer"], "kind_invalid"),
        ("date", ["transfer_on": "29/11/2026"], "date_invalid"),
        ("line id", ["line_id": ""], "field_missing"),
        ("order id", ["order_id": ""], "field_missing"),
        ("destination", ["destination": ""], "field_missing"),
        ("too long", ["destination": "acct_" + String(repeating: "x", count: 300)], "field_too_long"),
        ("charge amount", ["charge_amount": "lots"], "charge_invalid"),
        ("charge status", ["charge_status": "done"], "charge_invalid"),
        ("charge currency", ["charge_currency": "zzz"], "charge_invalid"),
        ("cross border", ["destination_country": "JP"], "cross_border_unsupported"),
    ]

    @Test(arguments: lineCases)
    func rejectsABadLineWithItsCode(_ name: String, _ change: [String: String], _ code: String) {
        let plan = TestExport().transfer("1", order: "1", amount: "10.00", extra: change).plan()
        #expect(plan.outcome(change["line_id"] == "" ? "" : "1") == (.rejected, code), "\(name)")
        #expect(plan.instructions.isEmpty)
        // A rejected line keeps its amount where the amount and currency themselves parse
        // (results.csv's amount cells, its currency's sums; audit 13: kind_invalid lost it).
        let line = plan.batch.lines[0]
        let amountParses = !["amount_invalid", "currency_unsupported"].contains(code)
        #expect((line.amount == 1000 && line.currency == .usd) == amountParses, "\(name): \(line.amount)")
    }

    /// A NUL in a line id would cut it short in the ledger (its C strings): "A\0B" and "A"
    /// would be one line there. Control characters in the ids no prefix rule checks are
    /// `id_invalid`; the line without one goes.
    @Test func controlCharactersInFreeIdsAreRejected() {
        let plan = TestExport()
            .transfer("A", order: "1", amount: "10.00")
            .transfer("A\u{0}B", order: "2", amount: "10.00")
            .transfer("C", order: "3\u{1}", amount: "10.00")
            .transfer("D", order: "4", amount: "10.00", extra: ["transfer_group": "G\t4"])
            .payout("E", order: "5", amount: "5.00", extra: ["payout_method": "pm_\u{7f}"])
            .plan()
        #expect(plan.outcome("A") == (.planned, ""))
        for id in ["A\u{0}B", "C", "D", "E"] { #expect(plan.outcome(id) == (.rejected, "id_invalid"), "\(id)") }
        #expect(plan.batch.reasonText(of: plan.batch.lines[1]).contains("line_id holds a control character (byte 0x0)"))
    }

    @Test func rejectedLineCarriesItsSource() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00")
            .transfer("2", order: "2", amount: "ten")
            .plan()
        let line = plan.batch.lines[1]
        #expect(plan.batch.source(of: line) == "test.csv:3")
        #expect(plan.batch.reasonText(of: line).contains("'ten'"))
    }

    @Test func payoutRules() {
        let plan = TestExport()
            .payout("p1", order: "1", amount: "5.00", extra: ["currency": "eur"])
            .payout("p2", order: "2", amount: "5.00", extra: ["destination_country": "CA"])
            .payout("p3", order: "3", amount: "5.00", extra: ["destination_country": "US"])
            .add([
                "line_id": "p4", "order_id": "4", "kind": "payout", "amount": "5.00", "currency": "usd",
                "recipient": "acct_drv",
            ])
            .add([
                "line_id": "p5", "order_id": "5", "amount": "5.00", "currency": "usd",
                "recipient": "acct_drv", "payout_method": "pm_ap_9",
            ])
            .plan()
        #expect(plan.outcome("p1") == (.rejected, "payout_currency_unsupported"))
        #expect(plan.outcome("p2") == (.rejected, "payout_country_unsupported"))
        #expect(plan.outcome("p3") == (.planned, ""))
        #expect(plan.outcome("p4") == (.rejected, "payout_method_missing"))
        // An empty kind with a payout method is a payout.
        #expect(plan.outcome("p5") == (.planned, ""))
        #expect(plan.instruction(of: "p5")?.kind == .payout)
    }

    @Test func crossBorderZone() {
        let zone = TestExport()
            .transfer("gb", order: "1", amount: "1.00", extra: ["destination_country": "GB"])
            .transfer("ch", order: "2", amount: "1.00", extra: ["destination_country": "ch"])
            .transfer("none", order: "3", amount: "1.00")
            .transfer("jp", order: "4", amount: "1.00", extra: ["destination_country": "JP"])
            .plan()
        #expect(zone.outcome("gb").0 == .planned)
        #expect(zone.outcome("ch").0 == .planned)
        #expect(zone.outcome("none").0 == .planned)
        #expect(zone.outcome("jp") == (.rejected, "cross_border_unsupported"))
        let japan = TestExport()
            .transfer(
                "jp", order: "1", amount: "100", currency: "jpy",
                extra: ["destination_country": "JP", "charge_amount": "1000"]
            )
            .transfer(
                "us", order: "2", amount: "100", currency: "jpy",
                extra: ["destination_country": "US", "charge_amount": "1000"]
            )
            .plan(options: TestExport.options(country: "JP"))
        #expect(japan.outcome("jp").0 == .planned)
        #expect(japan.outcome("us") == (.rejected, "cross_border_unsupported"))
        // "UK" is the United Kingdom, as GB is (audit 13: UK was rejected from a US platform).
        let uk = TestExport()
            .transfer("uk", order: "1", amount: "1.00", extra: ["destination_country": "UK"])
            .transfer("gb", order: "2", amount: "1.00", extra: ["destination_country": "GB"])
            .transfer("us", order: "3", amount: "1.00", extra: ["destination_country": "US"])
            .transfer("jp", order: "4", amount: "1.00", extra: ["destination_country": "JP"])
        #expect(uk.plan().outcome("uk").0 == .planned)
        let fromUK = uk.plan(options: TestExport.options(country: "UK"))
        #expect(fromUK.outcome("gb").0 == .planned)
        #expect(fromUK.outcome("us").0 == .planned)
        #expect(fromUK.outcome("jp") == (.rejected, "cross_border_unsupported"))
    }

    @Test func duplicateLineIDStaysOutsideItsGroup() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00")
            .payout("2", order: "1", amount: "5.00")
            .transfer("1", order: "1", amount: "bad")
            .plan()
        #expect(plan.outcomes("1").map(\.0) == [.planned, .rejected])
        #expect(plan.outcomes("1").map(\.1) == ["", "duplicate_line_id"])
        #expect(plan.outcome("2") == (.planned, ""))
    }

    @Test func ledgerKnowsTheLine() {
        let export = TestExport()
            .transfer("same", order: "1", amount: "10.00")
            .transfer("changed", order: "2", amount: "10.00")
            .transfer("inflight", order: "3", amount: "10.00")
            .transfer("retry", order: "4", amount: "10.00")
        let batch = export.batch()
        let history = RecordedHistory()
        func content(_ id: String) -> String {
            LineContent.digest(batch, batch.lines.first { batch.text($0.lineID) == id }!)
        }
        history.lines["same"] = HistoricLine(content: content("same"), state: .settled, stripeID: "tr_1")
        history.lines["changed"] = HistoricLine(content: "0000000000000000", state: .settled, stripeID: "tr_2")
        history.lines["inflight"] = HistoricLine(content: content("inflight"), state: .pending, stripeID: nil)
        history.lines["retry"] = HistoricLine(content: content("retry"), state: .failed, stripeID: nil)
        let plan = export.plan(history: history)
        #expect(plan.outcome("same") == (.alreadySettled, ""))
        #expect(plan.outcome("changed") == (.rejected, "line_conflict"))
        #expect(plan.outcome("inflight") == (.unknown, ""))
        #expect(plan.outcome("retry") == (.planned, ""))
        #expect(plan.knownStripeIDs.values.contains("tr_1"))
    }
}
