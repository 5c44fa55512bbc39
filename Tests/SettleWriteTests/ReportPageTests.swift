import SettleCore
import Testing

@testable import SettleWrite

/// report.html from the control sums (a real browser reads it in the end-to-end test).
@Suite struct ReportPageTests {
    static func sums(planOnly: Bool = true) -> ControlSums {
        var sums = ControlSums(planOnly: planOnly)
        sums.add(kind: .transfer, currency: "usd", amount: 7000, status: .planned)
        sums.add(kind: .payout, currency: "usd", amount: 2000, status: .planned)
        sums.add(kind: .transfer, currency: "usd", amount: 123_456_78, status: .rejected)
        sums.add(kind: .transfer, currency: "jpy", amount: 4200, status: .deferred)
        sums.addObject(kind: .transfer, currency: "usd", amount: 7000)
        sums.addObject(kind: .payout, currency: "usd", amount: 2000)
        var charge = ChargeRow(charge: "ch_1", currency: "usd", status: "succeeded", gross: 10000, fee: 320)
        charge.moves = true
        sums.addCharge(charge)
        return sums
    }

    static func page(reasons: ReportPage.ReasonGroups = .init(), mode: String = "plan", planOnly: Bool = true)
        -> String
    {
        let facts = ReportPage.Facts(
            runID: "run_<1>", asOf: "2026-11-29", mode: mode, exitStatus: 65, writtenAt: "2026-11-29T02:15:00Z",
            settleVersion: "0.1.0",
            rejectedFiles: [.init(path: "b<ad>.csv", code: "gzip_truncated", position: "b<ad>.csv:9", message: "cut")])
        return String(
            decoding: ReportPage.render(
                facts: facts, sums: sums(planOnly: planOnly), counts: [.planned: 2, .rejected: 1, .deferred: 1],
                reasons: reasons),
            as: UTF8.self)
    }

    @Test func moneyCellsCarryTheSumsOfSummaryCSV() {
        let html = Self.page()
        #expect(
            html.contains("data-currency=\"usd\" data-measure=\"planned_transfers\" data-minor=\"7000\">70.00 USD<"))
        #expect(html.contains("data-currency=\"usd\" data-measure=\"planned_payouts\" data-minor=\"2000\">20.00 USD<"))
        #expect(html.contains("data-currency=\"usd\" data-measure=\"charges_gross\" data-minor=\"10000\">100.00 USD<"))
        #expect(html.contains("data-currency=\"usd\" data-measure=\"charges_fees\" data-minor=\"320\">3.20 USD<"))
        #expect(
            html.contains(
                "data-currency=\"usd\" data-measure=\"platform_retained_planned\" data-minor=\"680\">6.80 USD<"))
        #expect(html.contains("data-measure=\"status:rejected\" data-minor=\"12345678\">123,456.78 USD<"))
        #expect(html.contains("data-currency=\"jpy\" data-measure=\"status:deferred\" data-minor=\"4200\">4,200 JPY<"))
        #expect(html.contains("data-status=\"all\" data-count=\"4\""))
    }

    /// Planned sums are never called moved, also on the page a `run` writes with its plan,
    /// before its apply ends (audit 65 F3); an apply's sums are.
    @Test func plannedSumsNeverSayTransferred() {
        #expect(!Self.page().contains(">Transferred<"))
        #expect(Self.page().contains("plan (nothing sent yet)"))
        let runPlanned = Self.page(mode: "run")
        #expect(!runPlanned.contains(">Transferred<"))
        #expect(runPlanned.contains(">Transfers planned<"))
        #expect(runPlanned.contains("run, planned: its apply has not ended (nothing counted as moved)"))
        let applied = Self.page(mode: "run", planOnly: false)
        #expect(applied.contains(">Transferred<"))
        #expect(applied.contains("data-measure=\"transferred\" data-minor=\"7000\""))
        #expect(!applied.contains("planned:"))
    }

    @Test func selfContained() {
        let html = Self.page()
        #expect(!html.contains("<script"))
        #expect(!html.contains("http://") && !html.contains("https://"))
        #expect(!html.contains("@import") && !html.contains("url("))
        #expect(!html.contains("<link"))
    }

    @Test func everyTextIsEscaped() {
        var reasons = ReportPage.ReasonGroups()
        reasons.add(
            status: .rejected, code: "amount_invalid", currency: "usd", amountMinor: 0,
            lineID: "<script>alert(1)</script>", source: "a&b.csv:3", reason: "amount '1,250.00' is \"bad\"")
        let html = Self.page(reasons: reasons)
        #expect(!html.contains("<script>alert"))
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(html.contains("a&amp;b.csv:3"))
        #expect(html.contains("amount &#39;1,250.00&#39; is &quot;bad&quot;"))
        #expect(html.contains("run_&lt;1&gt;"))
        #expect(html.contains("b&lt;ad&gt;.csv"))
    }

    @Test func reasonsGroupedWithCountsAmountsAndFirstFive() {
        var reasons = ReportPage.ReasonGroups()
        for index in 1...7 {
            reasons.add(
                status: .rejected, code: "over_allocated", currency: "usd", amountMinor: 1000, lineID: "L\(index)",
                source: "a.csv:\(index + 1)", reason: "too much")
        }
        reasons.add(
            status: .failed, code: "balance_insufficient", currency: "eur", amountMinor: 500, lineID: "F1",
            source: "a.csv:20", reason: "no money")
        reasons.add(
            status: .rejected, code: "amount_invalid", currency: "usd", amountMinor: 0, lineID: "B1",
            source: "a.csv:30", reason: "bad")
        let groups = reasons.sorted
        #expect(groups.map(\.code) == ["over_allocated", "amount_invalid", "balance_insufficient"])
        #expect(groups[0].count == 7 && groups[0].amounts == ["usd": 7000])
        #expect(groups[0].examples.map(\.source) == ["a.csv:2", "a.csv:3", "a.csv:4", "a.csv:5", "a.csv:6"])
        #expect(groups[1].amounts.isEmpty)
        let html = Self.page(reasons: reasons)
        #expect(html.contains("data-reason-code=\"over_allocated\" data-reason-status=\"rejected\""))
        #expect(html.contains("data-count=\"7\""))
        #expect(html.contains("<span data-currency=\"usd\" data-minor=\"7000\">70.00 USD</span>"))
        #expect(html.contains("and 2 more"))
    }

    @Test func escapeCoversTheFiveCharacters() {
        #expect(ReportPage.escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
    }
}
