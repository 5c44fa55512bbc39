import SettleApply
import SettleCore
import SettleTestSupport
import Testing

@testable import SettlePlanFolder

/// The instructions writer's short cuts give what the plain forms give.
@Suite struct InstructionsWriteTests {
    /// A plan whose instructions hold lines with one, several, partly agreeing and no extras.
    static func planWithExtras() -> SettlementPlan {
        let header = [
            "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination", "source_transaction",
            "charge_amount", "charge_currency", "charge_status", "payment_method_type", "description",
            "metadata.shift", "metadata.till",
        ]
        func row(_ id: String, order: String, amount: String, _ description: String, _ shift: String, _ till: String)
            -> [String: String]
        {
            [
                "line_id": id, "order_id": order, "amount": amount, "currency": "usd",
                "transfer_group": "ORDER\(order)",
                "destination": "acct_rest", "source_transaction": "ch_\(order)", "charge_amount": "100.00",
                "charge_currency": "usd", "charge_status": "succeeded", "payment_method_type": "card",
                "description": description, "metadata.shift": shift, "metadata.till": till,
            ]
        }
        let rows = [
            row("1-1", order: "1", amount: "10.00", "Order 1", "lunch", "3"),
            row("2-1", order: "2", amount: "10.00", "Order 2", "lunch", "3"),
            row("2-2", order: "2", amount: "5.00", "Order 2", "lunch", "4"),
            row("3-1", order: "3", amount: "10.00", "Order 3", "", ""),
            row("3-2", order: "3", amount: "5.00", "", "", ""),
            row("4-1", order: "4", amount: "10.00", "", "", ""),
            row("4-2", order: "4", amount: "5.00", "", "", ""),
            row("5-1", order: "5", amount: "10.00", "Order 5", "dinner", ""),
            row("5-2", order: "5", amount: "5.00", "Order five", "dinner", ""),
        ]
        var options = RuleOptions(asOf: CivilDate.parse("2026-11-29")!)
        options.platformCountry = "US"
        let batch = LineChecker(options: options).checkRows(rows, header: header)
        return Planner(options: options, history: nil).plan(batch)
    }

    /// What the lines agree on, the long way: every line's extras compared.
    static func agreedTheLongWay(_ lines: ArraySlice<Int32>, batch: Batch) -> (String?, [String]) {
        let extras = lines.map { index -> LineExtras in
            let slot = batch.lines[Int(index)].extras
            return slot >= 0 ? batch.extras[Int(slot)] : LineExtras()
        }
        guard let first = extras.first else { return (nil, []) }
        let description = extras.allSatisfy { $0.description == first.description } ? first.description : nil
        let metadata = first.metadata.filter { pair in
            extras.allSatisfy { $0.metadata.contains { $0.key == pair.key && $0.value == pair.value } }
        }
        return (description, metadata.map { "\($0.key)=\($0.value)" })
    }

    @Test func agreedExtrasAreWhatEveryLineAgreesOn() {
        let plan = Self.planWithExtras()
        #expect(plan.instructions.count == 5)
        var seen: [String: (String?, [String])] = [:]
        for instruction in plan.instructions {
            let lines = plan.lines(of: instruction)
            let (description, metadata) = InstructionsFile.agreedExtras(lines, batch: plan.batch)
            let expected = Self.agreedTheLongWay(lines, batch: plan.batch)
            #expect(description == expected.0)
            #expect(metadata.map { "\($0.key)=\($0.value)" } == expected.1)
            seen[plan.batch.symbols.string(instruction.group)] = (description, metadata.map { "\($0.key)=\($0.value)" })
        }
        // The cases the plan was made for, so the comparison above compares something.
        #expect(seen["ORDER1"]?.0 == "Order 1")
        #expect(seen["ORDER1"]?.1 == ["shift=lunch", "till=3"])
        #expect(seen["ORDER2"]?.0 == "Order 2")
        #expect(seen["ORDER2"]?.1 == ["shift=lunch"])
        #expect(seen["ORDER3"]?.0 == nil)
        #expect(seen["ORDER4"]?.0 == nil)
        #expect(seen["ORDER4"]?.1 == [])
        #expect(seen["ORDER5"]?.0 == nil)
        #expect(seen["ORDER5"]?.1 == ["shift=dinner"])
    }

    @Test func reversalPathWrittenInPlaceIsTheRequestsPath() {
        let header = ["line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination", "transfer"]
        let row = [
            "line_id": "9-1", "order_id": "9", "kind": "reversal", "amount": "3.00", "currency": "usd",
            "transfer_group": "ORDER9", "destination": "acct_rest", "transfer": "tr_9",
        ]
        var options = RuleOptions(asOf: CivilDate.parse("2026-11-29")!)
        options.platformCountry = "US"
        let batch = LineChecker(options: options).checkRows([row], header: header)
        let plan = Planner(options: options, history: nil).plan(batch)
        #expect(plan.instructions.map(\.kind) == [.reversal])
        let instruction = plan.instruction(at: 0)
        #expect(instruction.path == RequestParams.path(kind: .reversal, target: "tr_9"))
        #expect(instruction.path == "/v1/transfers/tr_9/reversals")
    }

    @Test func idempotencyKeyWrittenInPlaceIsTheKeysFormat() {
        var row = PlanRow(kind: .transfer, group: .none, payee: .none, currency: .usd)
        row.digestHigh = 0x0123_4567_89ab_cdef
        row.digestLow = 0xfedc_ba98
        for attempt in [1, 9, 10, 99, 12345, Int(Int32.max)] {
            row.attempt = attempt
            let written = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: PlanRow.idempotencyKeyCapacity) {
                buffer in
                let count = row.writeIdempotencyKey(to: buffer.baseAddress!)
                return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
            }
            #expect(written == IdempotencyKey.make(instruction: row.id, attempt: attempt))
            #expect(written == "settle-ins_0123456789abcdeffedcba98-a\(attempt)")
        }
    }
}
