import SettleCore
import Testing

/// docs/RULES.md, Forming instructions.
@Suite struct PlannerTests {
    @Test func transfersOfOneGroupDestinationAndChargeAreSummed() throws {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "10.00")
            .transfer("tip", order: "1", amount: "2.50")
            .transfer("2", order: "1", amount: "5.00", destination: "acct_b")
            .plan()
        let summed = try #require(plan.instruction(of: "1"))
        #expect(summed.amount == 1250)
        #expect(plan.lineIDs(of: summed) == ["1", "tip"])
        #expect(plan.instruction(of: "2")?.amount == 500)
        #expect(plan.instructions.count == 2)
    }

    @Test func reversalNetsIntoTheSameRunsTransfer() throws {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "70.00")
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "10.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .plan()
        let transfer = try #require(plan.instruction(of: "1"))
        #expect(transfer.amount == 6000)
        #expect(transfer.kind == .transfer)
        #expect(plan.lineIDs(of: transfer) == ["1", "r"])
        #expect(plan.outcome("r") == (.planned, ""))
        #expect(plan.instructions.count == 1)
    }

    @Test func transferAndReversalThatCancelAreNetted() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "70.00")
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "70.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .plan()
        #expect(plan.outcome("1") == (.netted, ""))
        #expect(plan.outcome("r") == (.netted, ""))
        #expect(plan.instructions.isEmpty)
    }

    @Test func reversalLargerThanTheTransferRejectsTheGroup() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "70.00")
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "80.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .plan()
        #expect(plan.outcome("r") == (.rejected, "reversal_exceeds_transfer"))
        #expect(plan.outcome("1") == (.rejected, "group_rejected"))
        #expect(plan.instructions.isEmpty)
    }

    @Test func reversalWithoutATargetIsRejected() {
        let plan = TestExport()
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .plan()
        #expect(plan.outcome("r") == (.rejected, "reversal_target_unknown"))
    }

    @Test func reversalOfTheLedgersTransfer() throws {
        let history = RecordedHistory()
        history.transfers["ORDER1|acct_rest|usd"] = RecordedTransfer(stripeID: "tr_9", remaining: 7000)
        let plan = TestExport()
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .add([
                "line_id": "r2", "order_id": "2", "kind": "reversal", "amount": "90.00", "currency": "usd",
                "transfer_group": "ORDER2", "destination": "acct_rest",
            ])
            .plan(history: history)
        let reversal = try #require(plan.instruction(of: "r"))
        #expect(reversal.kind == .reversal)
        #expect(plan.batch.text(reversal.target) == "tr_9")
        #expect(reversal.amount == 500)
        #expect(plan.outcome("r2") == (.rejected, "reversal_target_unknown"))
    }

    @Test func reversalOfATransferLineThatWaitsWaitsWithIt() {
        let plan = TestExport()
            .transfer("1", order: "1", amount: "70.00", extra: ["transfer_on": "2026-12-03"])
            .transfer("2", order: "1", amount: "20.00", destination: "acct_other")
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .plan()
        #expect(plan.outcome("1") == (.deferred, "scheduled"))
        #expect(plan.outcome("r") == (.deferred, "scheduled"))
        // Scheduling is per line (SPEC): the order's line that is due moves today.
        #expect(plan.outcome("2") == (.planned, ""))
        #expect(plan.instructions.map(\.amount) == [2000])
    }

    /// A refund naming its charge waits for the order's transfer on that charge when that
    /// transfer's line is deferred in this run, though the ledger holds a transfer of the order
    /// on another charge (audit 88 F1: that one was reversed at once, and the transfer on the
    /// named charge went whole on its day). A refund naming the ledger's charge reverses it.
    @Test func aRefundNamingTheChargeOfADeferredTransferWaitsForIt() {
        let history = RecordedHistory()
        history.transfers["ORDER1|acct_rest|usd"] = RecordedTransfer(
            stripeID: "tr_a", remaining: 3000, charge: "ch_a", currency: "usd", destination: "acct_rest")
        let plan = TestExport()
            .transfer("2", order: "1", amount: "20.00", charge: "py_b", extra: ["transfer_on": "2026-12-03"])
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest", "source_transaction": "py_b",
            ])
            .add([
                "line_id": "s", "order_id": "1", "kind": "reversal", "amount": "1.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest", "source_transaction": "ch_a",
            ])
            .plan(history: history)
        #expect(plan.outcome("2") == (.deferred, "scheduled"))
        #expect(plan.outcome("r") == (.deferred, "scheduled"))
        #expect(plan.batch.reasonText(of: plan.batch.lines[1]).contains("(line 2) waits in this run"))
        #expect(plan.outcome("s") == (.planned, ""))
        #expect(plan.instructions.map { [$0.amount] } == [[100]])
    }

    @Test func reversalWhoseLedgerTransferIsUnknownWaitsForIt() {
        let history = RecordedHistory()
        history.unsettled["ORDER1|acct_rest|usd"] = "ins_sent"
        let plan = TestExport()
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER1", "destination": "acct_rest",
            ])
            .payout("p", order: "1", amount: "3.00")
            .add([
                "line_id": "r2", "order_id": "2", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER2", "destination": "acct_rest",
            ])
            .plan(history: history)
        #expect(plan.outcome("r") == (.deferred, "scheduled"))
        #expect(plan.outcome("p") == (.planned, ""))
        #expect(plan.reason("r").contains("ins_sent"))
        #expect(plan.outcome("r2") == (.rejected, "reversal_target_unknown"))
        #expect(plan.instructions.map(\.kind) == [.payout])
    }

    @Test func namedTransferIsItsOwnReversal() throws {
        let plan = TestExport()
            .add([
                "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer": "tr_42",
            ])
            .add([
                "line_id": "r2", "order_id": "1", "kind": "reversal", "amount": "1.00", "currency": "usd",
                "transfer": "tr_42",
            ])
            .plan()
        #expect(plan.instructions.count == 2)
        #expect(plan.batch.text(try #require(plan.instruction(of: "r")).target) == "tr_42")
        #expect(plan.batch.text(plan.batch.payee(of: plan.batch.lines[0])) == "tr_42")
    }

    /// A line naming a transfer settle made is never for more than the ledger says is left,
    /// counting this run's other reversals of it (in its group and in earlier groups); past
    /// it the whole group is rejected before anything is sent (an audit saw the rest of such
    /// a group sent and this line refused by Stripe: the order moved in part).
    @Test func namedTransferOfTheLedgerIsNeverReversedPastWhatIsLeft() throws {
        let history = RecordedHistory()
        history.transfers["ORDER9|acct_rest|usd"] = RecordedTransfer(stripeID: "tr_small", remaining: 100)
        history.transfers["ORDER8|acct_rest|usd"] = RecordedTransfer(stripeID: "tr_big", remaining: 7000)
        let plan = TestExport()
            // Order 1: one line aimed at the ledger's transfer of its group, one naming a
            // transfer with 1.00 left: 5.00 is too much, the group moves not at all.
            .add([
                "line_id": "v4", "order_id": "1", "kind": "reversal", "amount": "10.00", "currency": "usd",
                "transfer_group": "ORDER8", "destination": "acct_rest",
            ])
            .add([
                "line_id": "v5", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer_group": "ORDER8", "destination": "acct_rest", "transfer": "tr_small",
            ])
            // Orders 2 and 3 take 0.60 and 0.40 of tr_small: both fit; order 4's 0.01 does not.
            .add([
                "line_id": "a", "order_id": "2", "kind": "reversal", "amount": "0.60", "currency": "usd",
                "transfer": "tr_small",
            ])
            .add([
                "line_id": "b", "order_id": "3", "kind": "reversal", "amount": "0.40", "currency": "usd",
                "transfer": "tr_small",
            ])
            .add([
                "line_id": "c", "order_id": "4", "kind": "reversal", "amount": "0.01", "currency": "usd",
                "transfer": "tr_small",
            ])
            // A transfer settle did not make: only Stripe knows what is left.
            .add([
                "line_id": "d", "order_id": "5", "kind": "reversal", "amount": "99.00", "currency": "usd",
                "transfer": "tr_elsewhere",
            ])
            .plan(history: history)
        #expect(plan.outcome("v5") == (.rejected, "reversal_exceeds_transfer"))
        #expect(plan.outcome("v4") == (.rejected, "group_rejected"))
        #expect(plan.outcome("a") == (.planned, ""))
        #expect(plan.outcome("b") == (.planned, ""))
        #expect(plan.outcome("c") == (.rejected, "reversal_exceeds_transfer"))
        #expect(plan.batch.reasonText(of: plan.batch.lines[4]).contains("(0.00)"))
        #expect(plan.outcome("d") == (.planned, ""))
        #expect(plan.instructions.map(\.amount) == [60, 40, 9900])
    }

    /// A reversal takes no currency at Stripe: it reverses in the transfer's. A line naming a
    /// transfer settle made in another currency than its own would move another amount than
    /// it states (audit 46 F1: 5.000 KWD reversed 50.00 USD), so its order is rejected
    /// `currency_mismatch` before anything is sent; the same transfer reversed in its own
    /// currency goes.
    @Test func aReversalInAnotherCurrencyThanItsTransferIsRejected() throws {
        let history = RecordedHistory()
        history.transfers["ORDER7|acct_rest|usd"] = RecordedTransfer(
            stripeID: "tr_usd", remaining: 10000, currency: "usd")
        let plan = TestExport()
            .add([
                "line_id": "k", "order_id": "1", "kind": "reversal", "amount": "5.000", "currency": "kwd",
                "transfer": "tr_usd",
            ])
            .add([
                "line_id": "k2", "order_id": "1", "kind": "transfer", "amount": "3.000", "currency": "kwd",
                "destination": "acct_rest",
            ])
            .add([
                "line_id": "j", "order_id": "2", "kind": "reversal", "amount": "5", "currency": "JPY",
                "transfer": "tr_usd",
            ])
            .add([
                "line_id": "u", "order_id": "3", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "transfer": "tr_usd",
            ])
            .plan(history: history)
        #expect(plan.outcome("k") == (.rejected, "currency_mismatch"))
        #expect(plan.outcome("k2") == (.rejected, "group_rejected"))
        #expect(plan.outcome("j") == (.rejected, "currency_mismatch"))
        #expect(
            plan.batch.reasonText(of: plan.batch.lines[0])
                == "transfer tr_usd moved in USD and Stripe reverses it in that currency, not in KWD as this line says")
        #expect(plan.outcome("u") == (.planned, ""))
        #expect(plan.instructions.map(\.amount) == [500])
    }

    /// A reversal takes the money back from the account its transfer went to: a line naming a
    /// transfer settle made to another destination than its own would report a move from an
    /// account nothing was taken from (audit 87 F3: sent, `settled`, payee the line's account),
    /// so its order is rejected; the same transfer named with its destination, or with none,
    /// goes.
    @Test func aReversalNamingATransferToAnotherDestinationIsRejected() throws {
        let history = RecordedHistory()
        history.transfers["ORDER6|acct_two|usd"] = RecordedTransfer(
            stripeID: "tr_two", remaining: 10000, currency: "usd", destination: "acct_two")
        let plan = TestExport()
            .add([
                "line_id": "w", "order_id": "1", "kind": "reversal", "amount": "5.00", "currency": "usd",
                "destination": "acct_rest", "transfer": "tr_two",
            ])
            .add([
                "line_id": "w2", "order_id": "1", "kind": "transfer", "amount": "3.00", "currency": "usd",
                "destination": "acct_rest",
            ])
            .add([
                "line_id": "x", "order_id": "2", "kind": "reversal", "amount": "1.00", "currency": "usd",
                "destination": "acct_two", "transfer": "tr_two",
            ])
            .add([
                "line_id": "y", "order_id": "3", "kind": "reversal", "amount": "2.00", "currency": "usd",
                "transfer": "tr_two",
            ])
            .plan(history: history)
        #expect(plan.outcome("w") == (.rejected, "reversal_target_unknown"))
        #expect(plan.outcome("w2") == (.rejected, "group_rejected"))
        #expect(
            plan.batch.reasonText(of: plan.batch.lines[0])
                == "transfer tr_two went to acct_two, not to acct_rest as this line says: Stripe would take the money back from acct_two"
        )
        #expect(plan.outcome("x") == (.planned, ""))
        #expect(plan.outcome("y") == (.planned, ""))
        #expect(plan.instructions.map(\.amount) == [100, 200])
    }

    /// Reversals that together exceed the transfer they net into are all to blame, whatever
    /// the line order (the one that crossed the line carried the code, and which one that was
    /// depended on the order of the file: audit 17 F3). A reversal with nothing to take from
    /// keeps its own code.
    @Test func reversalsThatTogetherExceedTheirTransferAreBlamedAlike() {
        func reversal(_ id: String, _ amount: String, destination: String = "acct_rest") -> [String: String] {
            [
                "line_id": id, "order_id": "1", "kind": "reversal", "amount": amount, "currency": "usd",
                "transfer_group": "ORDER1", "destination": destination,
            ]
        }
        for order in [["a", "b", "z"], ["b", "a", "z"], ["z", "b", "a"]] {
            let export = TestExport().transfer("1", order: "1", amount: "100.00")
            let rows = [
                "a": reversal("a", "30.00"), "b": reversal("b", "80.00"),
                "z": reversal("z", "1.00", destination: "acct_none"),
            ]
            for id in order { export.add(rows[id]!) }
            let plan = export.plan()
            #expect(plan.outcome("a") == (.rejected, "reversal_exceeds_transfer"), "\(order)")
            #expect(plan.outcome("b") == (.rejected, "reversal_exceeds_transfer"), "\(order)")
            #expect(plan.outcome("z") == (.rejected, "reversal_target_unknown"), "\(order)")
            #expect(plan.outcome("1") == (.rejected, "group_rejected"), "\(order)")
            #expect(plan.reason("a") == "reversals of 110.00 net into a transfer of 100.00 to acct_rest: more than it")
            #expect(plan.instructions.isEmpty)
        }
    }

    @Test func payoutsAggregatePerRecipient() throws {
        let export = TestExport()
            .payout("a", order: "1", amount: "5.00")
            .payout("b", order: "2", amount: "7.50")
            .payout("c", order: "3", amount: "1.00", recipient: "acct_other", method: "pm_ap_2")
        let aggregated = export.plan()
        #expect(aggregated.instructions.count == 2)
        let payout = try #require(aggregated.instruction(of: "a"))
        #expect(payout.amount == 1250)
        #expect(payout.group == .none)
        #expect(aggregated.lineIDs(of: payout) == ["a", "b"])
        let perLine = export.plan(options: TestExport.options(payouts: .perLine))
        #expect(perLine.instructions.count == 3)
        #expect(perLine.instruction(of: "a")?.amount == 500)
    }

    @Test func executionOrderIsTransfersReversalsPayouts() {
        let plan = TestExport()
            .payout("p", order: "1", amount: "5.00")
            .add([
                "line_id": "r", "order_id": "2", "kind": "reversal", "amount": "1.00", "currency": "usd",
                "transfer": "tr_1",
            ])
            .transfer("t", order: "3", amount: "5.00")
            .plan()
        #expect(plan.instructions.map(\.kind) == [.transfer, .reversal, .payout])
    }

    @Test func instructionIDsAreDeterministic() {
        let first = TestExport().transfer("1", order: "1", amount: "10.00").transfer("2", order: "1", amount: "1.00")
            .plan()
        let reordered = TestExport().transfer("2", order: "1", amount: "1.00").transfer(
            "1", order: "1", amount: "10.00"
        ).plan()
        let other = TestExport().transfer("1", order: "1", amount: "10.01").transfer("2", order: "1", amount: "1.00")
            .plan()
        #expect(first.instructions[0].id == reordered.instructions[0].id)
        #expect(first.instructions[0].id != other.instructions[0].id)
        #expect(first.instructions[0].id.hasPrefix("ins_"))
        #expect(first.instructions[0].idempotencyKey == "settle-\(first.instructions[0].id)-a1")
    }

    @Test func failedAttemptsGetANewKey() throws {
        let export = TestExport().transfer("1", order: "1", amount: "10.00")
        let id = export.plan().instructions[0].id
        let history = RecordedHistory()
        history.attemptCounts[id] = 2
        #expect(try #require(export.plan(history: history).instructions.first).idempotencyKey == "settle-\(id)-a3")
    }
}

/// Line order must not change what a plan sends.
@Suite struct PlannerOrderTests {
    static let rows: [[String: String]] = [
        [
            "line_id": "a", "order_id": "1", "amount": "50.00", "currency": "usd", "transfer_group": "G",
            "destination": "acct_x", "source_transaction": "ch_2",
        ],
        [
            "line_id": "b", "order_id": "1", "amount": "30.00", "currency": "usd", "transfer_group": "G",
            "destination": "acct_x", "source_transaction": "ch_1",
        ],
        [
            "line_id": "r", "order_id": "1", "kind": "reversal", "amount": "10.00", "currency": "usd",
            "transfer_group": "G", "destination": "acct_x",
        ],
    ]

    @Test func aReversalWithoutAChargeNetsIntoTheSameTransferInAnyOrder() throws {
        var forward = TestExport()
        for row in Self.rows { forward = forward.add(row) }
        var backward = TestExport()
        for row in [Self.rows[1], Self.rows[0], Self.rows[2]] { backward = backward.add(row) }
        let first = forward.plan()
        let second = backward.plan()
        #expect(Set(first.instructions.map(\.id)) == Set(second.instructions.map(\.id)))
        // It nets into the transfer on the charge whose id sorts first.
        let netted = try #require(first.instruction(of: "r"))
        #expect(first.lineIDs(of: netted) == ["b", "r"])
        #expect(netted.amount == 2000)
    }
}
