import SettleCore
import SettleTestSupport
import Testing

@testable import SettleWrite

/// summary.csv's sums: objects as sent, each charge once, pending and failed charges apart.
@Suite struct ControlSumsTests {
    static func charge(_ id: String, status: String = "succeeded", gross: Int64, fee: Int64) -> ChargeRow {
        ChargeRow(charge: id, currency: "usd", status: status, gross: gross, fee: fee)
    }

    /// A charge the lines describe without naming it (by payment intent, else by group) is
    /// counted once in the sums and has its row in charges.csv, its lines' moves on it
    /// (audit 13: it was left out, so retained was −20.00 for a 100.00 charge).
    @Test func aChargeGivenWithoutItsIDIsCountedUnderItsPaymentIntentOrGroup() {
        let header = [
            "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination", "payment_intent",
            "charge_amount", "charge_currency", "charge_status", "charge_fee", "recipient", "payout_method",
        ]
        func row(_ id: String, order: String, kind: String, amount: String, intent: String) -> [String: String] {
            let transfer = kind == "transfer"
            return [
                "line_id": id, "order_id": order, "kind": kind, "amount": amount, "currency": "usd",
                "transfer_group": "ORDER\(order)", "destination": transfer ? "acct_\(id)" : "",
                "payment_intent": intent, "charge_amount": transfer ? "100.00" : "",
                "charge_currency": transfer ? "usd" : "", "charge_status": transfer ? "succeeded" : "",
                "charge_fee": transfer ? "3.00" : "", "recipient": transfer ? "" : "acct_drv",
                "payout_method": transfer ? "" : "pm_ap_1",
            ]
        }
        let rows = [
            row("1", order: "1", kind: "transfer", amount: "10.00", intent: "pi_1"),
            row("2", order: "1", kind: "transfer", amount: "10.00", intent: "pi_1"),
            row("3", order: "1", kind: "payout", amount: "5.00", intent: ""),
            row("4", order: "2", kind: "transfer", amount: "30.00", intent: ""),
        ]
        var options = RuleOptions(asOf: CivilDate.parse("2026-11-29")!)
        options.platformCountry = "US"
        let plan = Planner(options: options, history: nil).plan(
            LineChecker(options: options).checkRows(rows, header: header))
        let charges = ChargesFile.rows(of: plan, runID: "run_a", history: nil)
        let byCharge = Dictionary(uniqueKeysWithValues: charges.map { ($0.charge, $0) })
        #expect(byCharge.keys.sorted() == ["ORDER2", "pi_1"])
        #expect(byCharge["pi_1"]?.gross == 10000 && byCharge["pi_1"]?.fee == 300)
        #expect(byCharge["pi_1"]?.transferred == 2000)
        // The order's payout names no charge: it is its order's charge's.
        #expect(byCharge["pi_1"]?.paidOut == 500)
        #expect(byCharge["ORDER2"]?.transferred == 3000)
        let usd = ControlSums.of(plan, charges: charges, runID: "run_a").currencies["usd"]!
        #expect(usd.charges == 2 && usd.chargesGross == 20000 && usd.chargesFees == 600)
        #expect(usd.retained == 20000 - 600 - 5000 - 500)
    }

    /// A charge's amount and fee are in the charge's currency, also on a line of another that
    /// leaves charge_currency empty (audit 15: "6000" on a USD payout of a KRW charge was
    /// 600000, 6000.00 read as USD, and the KRW charge's gross showed 100 times too large).
    @Test func aChargesGrossIsInItsOwnCurrencyWhicheverLineGivesIt() throws {
        let header = [
            "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination", "payment_intent",
            "charge_amount", "charge_currency", "charge_fee", "recipient", "payout_method",
        ]
        let rows = [
            [
                "line_id": "1", "order_id": "1", "kind": "transfer", "amount": "3000", "currency": "krw",
                "transfer_group": "ORDER1", "destination": "acct_a", "payment_intent": "pi_1", "charge_currency": "krw",
            ],
            [
                "line_id": "2", "order_id": "1", "kind": "payout", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER1", "payment_intent": "pi_1", "charge_amount": "6000", "charge_fee": "180",
                "recipient": "acct_drv", "payout_method": "pm_ap_1",
            ],
        ]
        var options = RuleOptions(asOf: CivilDate.parse("2026-11-29")!)
        options.platformCountry = "US"
        let plan = Planner(options: options, history: nil).plan(
            LineChecker(options: options).checkRows(rows, header: header))
        let charges = ChargesFile.rows(of: plan, runID: "run_a", history: nil)
        let row = try #require(charges.first)
        #expect(charges.count == 1)
        #expect(row.charge == "pi_1" && row.currency == "krw" && row.gross == 6000 && row.fee == 180)
        #expect(row.transferred == 3000 && row.retained == 6000 - 180 - 3000)
        let krw = try #require(ControlSums.of(plan, charges: charges, runID: "run_a").currencies["krw"])
        #expect(krw.chargesGross == 6000 && krw.chargesFees == 180)
    }

    @Test func aNettedTransferIsMovedOnceAtItsNetAmount() {
        var sums = ControlSums(runID: "run_b", asOf: "2026-11-29")
        var objects = ControlSums.Objects()
        objects.add(instruction: "tr1", kind: .transfer, currency: "usd", amount: 7000)
        objects.add(instruction: "tr1", kind: .transfer, currency: "usd", amount: 1000)
        objects.add(instruction: "tr1", kind: .reversal, currency: "usd", amount: 2500)
        objects.add(instruction: "rv1", kind: .reversal, currency: "usd", amount: 300)
        sums.add(objects)
        sums.addNetted(currency: "usd", amount: 2500)
        let usd = sums.currencies["usd"]!
        #expect(usd.transfers == 1)
        #expect(usd.transferred == 5500)
        #expect(usd.reversals == 1)
        #expect(usd.reversed == 300)
        #expect(usd.nettedReversals == 1 && usd.netted == 2500)
        #expect(objects.isTransfer("tr1") && !objects.isTransfer("rv1"))
    }

    @Test func alreadySettledLinesAreNeverMoved() {
        var sums = ControlSums(runID: "run_b", asOf: "2026-11-29")
        sums.add(kind: .transfer, currency: "usd", amount: 7000, status: .alreadySettled)
        sums.add(kind: .payout, currency: "usd", amount: 2000, status: .alreadySettled)
        let usd = sums.currencies["usd"]!
        #expect(usd.byStatus[.alreadySettled]! == (2, 9000))
        #expect(usd.transferred == 0 && usd.paidOut == 0 && usd.transfers == 0 && usd.payouts == 0)
        #expect(sums.conserved())
    }

    @Test func failedAndPendingChargesHaveTheirOwnRowsNotGross() throws {
        var sums = ControlSums(runID: "run_a", asOf: "2026-11-29")
        var moved = Self.charge("ch_1", gross: 10000, fee: 320)
        moved.add(kind: .transfer, amount: 7000, inTransfer: false)
        sums.addCharge(moved)
        sums.addCharge(Self.charge("ch_2", status: "pending", gross: 5000, fee: 0))
        sums.addCharge(Self.charge("ch_3", status: "failed", gross: 3000, fee: 0))
        sums.addCharge(Self.charge("ch_4", gross: 900, fee: 10))
        sums.addObject(kind: .transfer, currency: "usd", amount: 7000)
        let usd = sums.currencies["usd"]!
        #expect(usd.charges == 1 && usd.chargesGross == 10000 && usd.chargesFees == 320)
        #expect(usd.chargesBy[.pending]! == (1, 5000))
        #expect(usd.chargesBy[.failed]! == (1, 3000))
        #expect(usd.chargesBy[.unallocated]! == (1, 900))
        #expect(usd.retained == 10000 - 320 - 7000)
        let rows = sums.rows(usd).map { "\($0.measure),\($0.lines.map(String.init) ?? ""),\($0.amount)" }
        #expect(
            rows == [
                "input,0,0", "transferred,1,7000", "paid_out,0,0", "reversed,0,0", "reversals_netted,0,0",
                "payouts_returned,0,0", "charges_gross,1,10000", "charges_fees,,320", "charges_earlier,0,0",
                "charges_unallocated,1,900",
                "charges_pending,1,5000", "charges_failed,1,3000", "platform_retained,,2680",
            ])
        sums.planOnly = true
        let planned = sums.rows(usd).map(\.measure)
        #expect(planned.contains("planned_transfers") && !planned.contains("transferred"))
        #expect(planned.last == "platform_retained_planned")
    }

    @Test func aChargeIsCountedOnceAcrossTwoRuns() {
        var first = Self.charge("ch_1", gross: 10000, fee: 320)
        first.add(kind: .transfer, amount: 4000, inTransfer: false)
        #expect(first.counting(runID: "run_a") == .thisRun)
        var runA = ControlSums(runID: "run_a")
        runA.addCharge(first)
        #expect(runA.currencies["usd"]!.chargesGross == 10000)
        // The second run reads the ledger's first_run: the charge is counted already.
        var second = Self.charge("ch_1", gross: 10000, fee: 320)
        second.firstRun = "run_a"
        second.transferredBefore = 4000
        second.add(kind: .transfer, amount: 5000, inTransfer: false)
        #expect(second.counting(runID: "run_b") == .earlier)
        // Re-applying the first run's folder keeps it counted there.
        #expect(second.counting(runID: "run_a") == .thisRun)
        var runB = ControlSums(runID: "run_b")
        runB.addCharge(second)
        runB.addObject(kind: .transfer, currency: "usd", amount: 5000)
        let usd = runB.currencies["usd"]!
        #expect(usd.charges == 0 && usd.chargesGross == 0 && usd.chargesFees == 0)
        #expect(usd.chargesBy[.earlier]! == (1, 10000))
        #expect(usd.retained == -5000)
        #expect(second.retained == 10000 - 320 - 4000 - 5000)
    }

    @Test func retainedPerChargeIsGrossLessFeeNetTransfersAndItsOrdersPayouts() {
        var row = Self.charge("ch_1", gross: 10000, fee: 320)
        row.add(kind: .transfer, amount: 7000, inTransfer: false)
        row.add(kind: .reversal, amount: 1500, inTransfer: true)  // netted into the transfer
        row.add(kind: .payout, amount: 2000, inTransfer: false)
        #expect(row.transferred == 5500)
        #expect(row.reversed == 0)
        #expect(row.paidOut == 2000)
        #expect(row.retained == 10000 - 320 - 5500 - 2000)
        row.add(kind: .reversal, amount: 500, inTransfer: false)  // its own reversal call
        #expect(row.reversed == 500 && row.retained == 10000 - 320 - 5500 - 2000 + 500)
        #expect(Self.charge("ch_2", status: "pending", gross: 800, fee: 0).retained == 0)
    }
}
