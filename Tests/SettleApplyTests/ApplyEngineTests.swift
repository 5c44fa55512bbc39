import Foundation
import SettleApply
import SettleCore
import SettleLedger
import SettleTestSupport
import Testing

@Suite(
    "ApplyEngine against the Stripe sandbox")
struct ApplyEngineTests {
    @Test func cleanRunSettlesEachInstructionOnce() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan =
            (1...12).map { transferInstruction("ins_t\($0)", amount: Int64(1000 + $0)) }
            + (1...3).map { payoutInstruction("ins_p\($0)", amount: Int64(2000 + $0)) }
        let report = try runEngine(sandbox, plan)

        #expect(report.outcomes.count == 15)
        for instruction in plan {
            guard case .settled(let id) = report.outcomes[instruction.id] else {
                Issue.record("\(instruction.id): \(String(describing: report.outcomes[instruction.id]))")
                continue
            }
            #expect(id.hasPrefix(instruction.kind == .payout ? "obp_" : "tr_"))
        }
        #expect(report.requests == 16)  // 15 creates + 1 payout-method check
        #expect(report.retries == 0)

        let effects = try sandbox.effects()
        #expect(effects.count == 15)
        #expect(try sandbox.effectCounts() == Dictionary(uniqueKeysWithValues: plan.map { ($0.id, 1) }))
        let t3 = try #require(
            effects.first { ($0["metadata"] as? [String: Any])?["settle_instruction"] as? String == "ins_t3" })
        #expect(t3["amount"] as? Int == 1003)
        #expect(t3["idempotency_key"] as? String == "settle-ins_t3-a1")
        #expect(t3["destination"] as? String == "acct_rest")
        #expect(t3["source_transaction"] as? String == "ch_1")
        let p2 = try #require(
            effects.first { ($0["metadata"] as? [String: Any])?["settle_instruction"] as? String == "ins_p2" })
        #expect(p2["amount"] as? Int == 2002)
        #expect(p2["financial_account"] as? String == "fa_1")
        #expect(p2["idempotency_key"] as? String == "settle-ins_p2-a1")

        let ledger = try #require(try LedgerStore.openReadOnly(path: sandbox.ledgerPath))
        #expect(
            try ledger.statusSummary()
                == LedgerStatusSummary(linesSettled: 15, linesPending: 0, linesFailed: 0, instructions: [.settled: 15]))
        #expect(try ledger.line("ins_t3-L1")?.stripeID == t3["id"] as? String)
        #expect(try ledger.calls(instruction: "ins_t3").map(\.requestID).allSatisfy { $0?.hasPrefix("req_") == true })
    }

    @Test func secondRunSendsNothing() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan = (1...5).map { transferInstruction("ins_t\($0)") } + [payoutInstruction("ins_p1")]
        let first = try runEngine(sandbox, plan)
        let settled = first.outcomes.all.compactMapValues {
            if case .settled(let id) = $0 { return id } else { return nil }
        }
        #expect(settled.count == 6)
        let before = try sandbox.requestCount()

        let second = try runEngine(sandbox, plan)
        #expect(second.requests == 0)
        #expect(try sandbox.requestCount() == before)
        for instruction in plan {
            #expect(second.outcomes[instruction.id] == .alreadySettled(stripeID: settled[instruction.id]!))
        }
        #expect(try sandbox.effects().count == 6)
    }

    @Test func faultsStillSettleEveryInstructionExactlyOnce() throws {
        let sandbox = try Sandbox(flags: [
            "--fail-5xx", "0.2", "--fail-429", "0.15", "--drop-after-commit", "0.3", "--latency-ms", "5",
        ])
        try sandbox.seed()
        let plan =
            (1...24).map { transferInstruction("ins_t\($0)", amount: Int64(500 + $0)) }
            + (1...6).map { payoutInstruction("ins_p\($0)", amount: Int64(100 + $0)) }
        let logs = LogCollector()
        let report = try runEngine(sandbox, plan, configuration: configuration(sandbox, logs: logs, maxTries: 8))
        #expect(report.retries > 0)
        #expect(report.serverErrors > 0)
        #expect(report.rateLimited > 0)
        // Responses were dropped after commit (libcurl may itself re-send such a request
        // once on a fresh connection: same key, so a replay).
        let stats = try sandbox.control("GET", "/_sandbox/stats") as? [String: Any]
        #expect(((stats?["by_status"] as? [String: Any])?["dropped"] as? Int ?? 0) > 0)
        for instruction in plan {
            switch report.outcomes[instruction.id] {
            case .settled, .unknown: break
            case let other: Issue.record("\(instruction.id): \(String(describing: other))")
            }
        }
        // Whatever is still unknown, a fault-free second run resolves, without paying twice.
        try sandbox.configure(#"{"fail_5xx": 0, "fail_429": 0, "drop_after_commit": 0}"#)
        let second = try runEngine(sandbox, plan, configuration: configuration(sandbox, logs: logs))
        for instruction in plan {
            switch second.outcomes[instruction.id] {
            case .alreadySettled, .settled: break
            case let other: Issue.record("second run \(instruction.id): \(String(describing: other))")
            }
        }
        #expect(try sandbox.effectCounts() == Dictionary(uniqueKeysWithValues: plan.map { ($0.id, 1) }))
        let effects = try sandbox.effects()
        #expect(effects.count == 30)
        #expect(effects.reduce(0) { $0 + ($1["amount"] as? Int ?? 0) } == plan.reduce(0) { $0 + Int($1.amountMinor) })
        let ledger = try #require(try LedgerStore.openReadOnly(path: sandbox.ledgerPath))
        #expect(try ledger.statusSummary().linesSettled == 30)
        #expect(try ledger.unresolvedInstructions().isEmpty)
        // Every retried call reused attempt 1's key.
        #expect(effects.allSatisfy { ($0["idempotency_key"] as? String)?.hasSuffix("-a1") == true })
        #expect(!logs.lines.isEmpty)
        #expect(!logs.lines.contains { $0.contains(testKey) })
    }

    /// An aggregated payout of `lines` (line id, order), 500 a line, to acct_drv.
    static func aggregated(_ id: String, _ lines: [(String, String)], method: String = "pm_ap_1") -> Instruction {
        var instruction = payoutInstruction(id, amount: Int64(500 * lines.count), method: method)
        instruction.lines = lines.map { .init(lineID: $0.0, kind: "payout", amountMinor: 500, content: "c\($0.0)") }
        return instruction
    }

    static func payout(_ id: String, method: String = "pm_ap_1", group: String) -> Instruction {
        var instruction = payoutInstruction(id, method: method)
        instruction.group = group
        return instruction
    }

    static func orders(of plan: [Instruction]) -> [String: [String: String]] {
        var orders: [String: [String: String]] = [:]
        for instruction in plan where instruction.kind == .payout && instruction.group.isEmpty {
            for line in instruction.lines {
                orders[instruction.id, default: [:]][line.lineID] = String(line.lineID.split(separator: "@")[1])
            }
        }
        return orders
    }

    static func code(_ outcome: InstructionOutcome?) -> String {
        switch outcome {
        case .rejected(let code, _)?: return code
        case .settled?: return "settled"
        case .failed(let code, _)?: return "failed " + code
        case let other: return String(describing: other)
        }
    }

    /// A line's outcome in an aggregated payout that was split, with the instruction that
    /// holds it when not the payout itself.
    static func line(_ report: ApplyReport, _ line: String, of id: String) -> String {
        guard let found = report.outcomes[line: line, of: id] else { return "none" }
        return code(found.outcome) + (found.instruction.map { " in " + $0 } ?? "")
    }

    /// An offline plan whose facts Stripe refuses sends the rest: an order on a refused
    /// payout method or a failed charge moves nothing, an order on a pending charge waits;
    /// an aggregated payout that also pays those orders goes for the other orders' lines
    /// only (a payout of its own), the others each with their order's outcome.
    @Test func refusedFactsOfAnOfflinePlanStopTheirOrdersWholeAndTheRestGoes() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan = [
            // G1: its payout method is archived. G6 shares an aggregated payout with G1.
            transferInstruction("ins_t1", amount: 100, group: "G1"),
            Self.payout("ins_p_bad", method: "pm_ap_archived", group: "G1"),
            Self.aggregated("ins_agg_g1_g6", [("a@G1", "G1"), ("b@G6", "G6")]),
            transferInstruction("ins_t6", amount: 100, group: "G6"),
            // G2 and G3 share an aggregated payout with usable facts: it goes as planned.
            transferInstruction("ins_t2", amount: 100, group: "G2"),
            Self.aggregated("ins_agg_g2_g3", [("c@G2", "G2"), ("d@G3", "G3"), ("e@G2", "G2")]),
            transferInstruction("ins_t3", amount: 100, group: "G3"),
            // G4 on a failed charge, G5 on a pending one, G7 on its own; G5 and G8 share a payout.
            transferInstruction("ins_t4", amount: 100, charge: "ch_failed", group: "G4", preflightCharge: true),
            Self.payout("ins_p4", group: "G4"),
            transferInstruction("ins_t5", amount: 100, charge: "ch_pending", group: "G5", preflightCharge: true),
            Self.aggregated("ins_agg_g5_g8", [("f@G5", "G5"), ("g@G8", "G8")]),
            transferInstruction("ins_t8", amount: 100, group: "G8"),
            transferInstruction("ins_t7", amount: 100, group: "G7", preflightCharge: true),
            // An aggregated payout on an archived method: every order it pays is refused.
            transferInstruction("ins_t9", amount: 100, group: "G9"),
            Self.aggregated("ins_agg_bad", [("h@G9", "G9"), ("i@G10", "G10")], method: "pm_ap_archived"),
            transferInstruction("ins_t10", amount: 100, group: "G10"),
        ]
        let report = try runEngine(sandbox, plan, payoutOrders: Self.orders(of: plan))
        let code = { (id: String) in Self.code(report.outcomes[id]) }
        #expect(code("ins_agg_bad") == "payout_method_unusable")
        #expect(code("ins_t9") == "group_rejected")
        #expect(code("ins_t10") == "group_rejected")
        let g6 = PayoutSplit.derived(from: plan[2], lines: [plan[2].lines[1]])
        let g8 = PayoutSplit.derived(from: plan[10], lines: [plan[10].lines[1]])
        #expect(g6.amountMinor == 500 && g6.id != plan[2].id)
        #expect(code("ins_p_bad") == "payout_method_unusable")
        #expect(code("ins_t1") == "group_rejected")
        #expect(Self.line(report, "a@G1", of: "ins_agg_g1_g6") == "group_rejected")
        #expect(Self.line(report, "b@G6", of: "ins_agg_g1_g6") == "settled in \(g6.id)")
        #expect(code("ins_t4") == "charge_failed")
        #expect(code("ins_p4") == "group_rejected")
        #expect(code("ins_t5") == "charge_pending")
        #expect(Self.line(report, "f@G5", of: "ins_agg_g5_g8") == "charge_pending")
        #expect(Self.line(report, "g@G8", of: "ins_agg_g5_g8") == "settled in \(g8.id)")
        for id in ["ins_t2", "ins_agg_g2_g3", "ins_t3", "ins_t6", "ins_t7", "ins_t8"] {
            #expect(code(id) == "settled", "\(id)")
        }
        #expect(report.outcomes.splitInstructions == ["ins_agg_g1_g6", "ins_agg_g5_g8"])
        #expect(report.outcomes["ins_t5"]?.lineResult.status == .deferred)
        #expect(report.outcomes["ins_p_bad"]?.lineResult.status == .rejected)
        guard case .rejected(_, let message)? = report.outcomes["ins_p_bad"] else { return }
        #expect(message.contains("pm_ap_archived") && message.contains("archived"), "\(message)")
        #expect(
            try sandbox.effectCounts() == [
                "ins_t2": 1, "ins_agg_g2_g3": 1, "ins_t3": 1, "ins_t6": 1, "ins_t7": 1, "ins_t8": 1, g6.id: 1, g8.id: 1,
            ])
        let amounts = try sandbox.effects().filter {
            [g6.id, g8.id].contains(($0["metadata"] as? [String: Any])?["settle_instruction"] as? String ?? "")
        }
        #expect(amounts.compactMap { $0["amount"] as? Int } == [500, 500], "\(amounts)")
        // Nothing stopped was recorded as sent: a later run may send those lines again.
        let ledger = try #require(try LedgerStore.openReadOnly(path: sandbox.ledgerPath))
        for id in [
            "ins_t1", "ins_p_bad", "ins_agg_g1_g6", "ins_t4", "ins_t5", "ins_agg_g5_g8", "ins_agg_bad", "ins_t9",
        ] {
            #expect(try ledger.instruction(id) == nil, "\(id)")
        }
        #expect(try ledger.line("b@G6")?.instructionID == g6.id)
        #expect(try ledger.line("a@G1") == nil)
    }

    /// A transfer Stripe refuses (here its charge failed, though the export said it
    /// succeeded, so nothing looked it up) stops the rest of its order: its other transfer,
    /// sent only after the answer (one transfer of an order at a time), and its payouts. The
    /// aggregated payout that also pays another order goes for that order's line alone.
    /// Payouts wait until every transfer is answered.
    @Test func anOrderWhoseTransferStripeRefusedMovesNoFurther() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan = [
            transferInstruction("ins_t1", amount: 100, charge: "ch_failed", group: "G1"),
            transferInstruction("ins_t1b", amount: 100, destination: "acct_other", group: "G1"),
            transferInstruction("ins_t2", amount: 100, group: "G2"),
            transferInstruction("ins_t3", amount: 100, group: "G3"),
            Self.payout("ins_p1", group: "G1"),
            Self.aggregated("ins_agg_g1_g2", [("a@G2", "G2"), ("b@G1", "G1")]),
            Self.payout("ins_p3", group: "G3"),
        ]
        let report = try runEngine(sandbox, plan, payoutOrders: Self.orders(of: plan))
        let code = { (id: String) in Self.code(report.outcomes[id]) }
        let g2 = PayoutSplit.derived(from: plan[5], lines: [plan[5].lines[0]])
        #expect(code("ins_t1") == "failed charge_failed")
        #expect(code("ins_t1b") == "group_rejected")
        #expect(code("ins_p1") == "group_rejected")
        #expect(Self.line(report, "b@G1", of: "ins_agg_g1_g2") == "group_rejected")
        #expect(Self.line(report, "a@G2", of: "ins_agg_g1_g2") == "settled in \(g2.id)")
        guard case .rejected(_, let message)? = report.outcomes["ins_p1"] else { return }
        #expect(message.contains("ins_t1") && message.contains("charge_failed"), "\(message)")
        #expect(try sandbox.effectCounts() == ["ins_t2": 1, "ins_t3": 1, "ins_p3": 1, g2.id: 1])
    }

    /// A transfer of an order whose outcome stays unknown (a 500 on every try) holds back the
    /// rest of the order: its next transfer and its payout wait for the next run (deferred
    /// `scheduled`), which learns the first one's fate before anything else of the order.
    @Test func anOrderWhoseTransferIsUnknownWaitsWhole() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        _ = try sandbox.control(
            "POST", "/_sandbox/faults",
            json:
                #"{"rules": [{"method": "POST", "path_prefix": "/v1/transfers", "times": 3, "action": "status", "status": 500}]}"#
        )
        let plan = [
            transferInstruction("ins_t1", amount: 100, group: "G1"),
            transferInstruction("ins_t1b", amount: 100, destination: "acct_other", group: "G1"),
            Self.payout("ins_p1", group: "G1"),
        ]
        let report = try runEngine(sandbox, plan, configuration: configuration(sandbox, maxTries: 3))
        guard case .unknown? = report.outcomes["ins_t1"] else {
            Issue.record("ins_t1: \(String(describing: report.outcomes["ins_t1"]))")
            return
        }
        #expect(Self.code(report.outcomes["ins_t1b"]) == "scheduled")
        #expect(Self.code(report.outcomes["ins_p1"]) == "scheduled")
        #expect(report.outcomes["ins_t1b"]?.lineResult.status == .deferred)
        #expect(try sandbox.effectCounts().isEmpty)
    }

    /// Seeded random plans against the sandbox: orders of one to three transfers (some on a
    /// failed charge or to an account that cannot receive transfers) and a payout line each,
    /// per-line or aggregated, at several concurrencies. An order's transfers go one at a
    /// time: those before the first refusal settle, that one fails, the rest are not sent;
    /// no payout pays for an order Stripe refused a transfer of, every other payout line is
    /// paid once (an aggregated payout split when it must), and nothing is sent twice.
    @Test(arguments: 0..<6)
    func ordersMoveWholeThroughApply(seed: UInt64) throws {
        var random = SplitMix64(seed: seed &+ 0x0DE5)
        let sandbox = try Sandbox()
        try sandbox.seed()
        let orders = Int(random.next() % 7) + 4
        let aggregated = random.next() % 2 == 0
        var transfers: [Instruction] = []
        var payoutLines: [(order: String, line: Instruction.Line)] = []
        var expected: [String: String] = [:]
        var failing: Set<String> = []
        for order in 0..<orders {
            let group = "G\(order)"
            var refused = false
            for index in 0..<(Int(random.next() % 3) + 1) {
                let fate = random.next() % 10
                let id = "ins_t\(order)_\(index)"
                let charge = fate == 0 ? "ch_failed" : "ch_1"
                let destination = fate == 1 ? "acct_closed" : (index == 1 ? "acct_other" : "acct_rest")
                transfers.append(
                    transferInstruction(id, amount: 100, destination: destination, charge: charge, group: group))
                if refused {
                    expected[id] = "group_rejected"
                } else if fate <= 1 {
                    expected[id] = fate == 0 ? "failed charge_failed" : "failed transfers_not_allowed"
                    refused = true
                } else {
                    expected[id] = "settled"
                }
            }
            if refused { failing.insert(group) }
            payoutLines.append(
                (
                    group,
                    .init(lineID: "p\(order)@\(group)", kind: "payout", amountMinor: 100 + Int64(order), content: "c")
                ))
        }
        var payouts: [Instruction] = []
        if aggregated {
            var payout = payoutInstruction("ins_agg", amount: payoutLines.reduce(0) { $0 + $1.line.amountMinor })
            payout.lines = payoutLines.map(\.line)
            payouts.append(payout)
        } else {
            for (order, line) in payoutLines {
                var payout = payoutInstruction("ins_p_\(order)", amount: line.amountMinor)
                payout.group = order
                payout.lines = [line]
                payouts.append(payout)
                expected[payout.id] = failing.contains(order) ? "group_rejected" : "settled"
            }
        }
        let concurrency = [1, 4, 16][Int(random.next() % 3)]
        let report = try runEngine(
            sandbox, transfers + payouts, configuration: configuration(sandbox, concurrency: concurrency),
            payoutOrders: Self.orders(of: payouts))
        for (id, outcome) in expected.sorted(by: { $0.key < $1.key }) {
            #expect(Self.code(report.outcomes[id]) == outcome, "seed \(seed) \(id) (concurrency \(concurrency))")
        }
        if aggregated {
            for (order, line) in payoutLines {
                let got = Self.line(report, line.lineID, of: "ins_agg")
                if failing.isEmpty {
                    #expect(Self.code(report.outcomes["ins_agg"]) == "settled", "seed \(seed)")
                } else if failing.contains(order) {
                    #expect(got == "group_rejected", "seed \(seed) \(line.lineID)")
                } else {
                    #expect(got.hasPrefix("settled in ins_"), "seed \(seed) \(line.lineID): \(got)")
                }
            }
        }
        let effects = try sandbox.effects()
        #expect(try sandbox.effectCounts().values.allSatisfy { $0 == 1 }, "seed \(seed): something sent twice")
        let paid = effects.filter { $0["type"] as? String == "outbound_payment" }.compactMap { $0["amount"] as? Int }
        let owed = payoutLines.filter { !failing.contains($0.order) }.map { Int($0.line.amountMinor) }
        #expect(paid.reduce(0, +) == owed.reduce(0, +), "seed \(seed): paid \(paid), owed \(owed)")
        let moved = effects.filter { $0["type"] as? String == "transfer" }.count
        #expect(moved == expected.filter { $0.key.hasPrefix("ins_t") && $0.value == "settled" }.count, "seed \(seed)")
    }

    @Test func definiteRefusalFailsReleasesLinesAndTheNextRunUsesANewAttempt() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan = [transferInstruction("ins_closed", destination: "acct_closed")]
        let first = try runEngine(sandbox, plan)
        guard case .failed(let code, _) = first.outcomes["ins_closed"] else {
            Issue.record("\(String(describing: first.outcomes["ins_closed"]))")
            return
        }
        #expect(code == "transfers_not_allowed")
        #expect(first.retries == 0)
        do {
            let ledger = try #require(try LedgerStore.openReadOnly(path: sandbox.ledgerPath))
            #expect(try ledger.line("ins_closed-L1")?.status == .failed)
            #expect(try ledger.instruction("ins_closed")?.errorCode == "transfers_not_allowed")
        }
        // Fixed on Stripe's side; the next run sends again under attempt 2.
        try sandbox.seed(#"{"accounts": [{"id": "acct_closed", "transfers_disabled": false}]}"#)
        let second = try runEngine(sandbox, plan)
        guard case .settled = second.outcomes["ins_closed"] else {
            Issue.record("\(String(describing: second.outcomes["ins_closed"]))")
            return
        }
        let effects = try sandbox.effects()
        #expect(effects.count == 1)
        #expect(effects.first?["idempotency_key"] as? String == "settle-ins_closed-a2")
    }

    @Test func inFlightFromACrashBeforeSendingIsSentWithTheSameKey() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let instruction = transferInstruction("ins_crash1", amount: 4242)
        try stageInFlight(sandbox, instruction)
        let report = try runEngine(sandbox, [instruction])
        guard case .settled(let id) = report.outcomes["ins_crash1"] else {
            Issue.record("\(String(describing: report.outcomes["ins_crash1"]))")
            return
        }
        #expect(report.resolved["ins_crash1"] == .settled(stripeID: id))
        let effects = try sandbox.effects()
        #expect(effects.count == 1)
        #expect(effects.first?["idempotency_key"] as? String == "settle-ins_crash1-a1")
    }

    @Test func inFlightFromACrashAfterSendingIsNotPaidTwice() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let instruction = transferInstruction("ins_crash2", amount: 4343)
        try stageInFlight(sandbox, instruction)
        // The request had reached Stripe before the process died.
        let made = try sandbox.stripe(
            "POST", "/v1/transfers",
            form:
                "amount=4343&currency=usd&description=Order%20100%20%26%20co%2F%C3%A9&destination=acct_rest&metadata%5Bsettle_instruction%5D=ins_crash2&source_transaction=ch_1&transfer_group=ORDER100",
            key: "settle-ins_crash2-a1")
        let madeID = try #require(made["id"] as? String)
        let report = try runEngine(sandbox, [instruction])
        #expect(report.outcomes["ins_crash2"] == .settled(stripeID: madeID))
        #expect(try sandbox.effects().count == 1)
    }

    @Test func unresolvedInstructionsAreLookedUpFirstWhateverTheClock() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let found = transferInstruction("ins_old_found", amount: 111)
        let lost = transferInstruction("ins_old_lost", amount: 222)
        try stageInFlight(sandbox, found)
        try stageInFlight(sandbox, lost)
        let made = try sandbox.stripe(
            "POST", "/v1/transfers",
            form:
                "amount=111&currency=usd&destination=acct_rest&metadata%5Bsettle_instruction%5D=ins_old_found&source_transaction=ch_1&transfer_group=ORDER100",
            key: "some-other-key")
        let madeID = try #require(made["id"] as? String)
        // Two days later by the local clock: no clock decides; the look-up comes first.
        let later = Date().addingTimeInterval(2 * 24 * 3600)
        let report = try runEngine(sandbox, [found, lost], configuration: configuration(sandbox, now: { later }))
        #expect(report.resolved["ins_old_found"] == .settled(stripeID: madeID))
        #expect(report.outcomes["ins_old_found"] == .settled(stripeID: madeID))
        // Absent from Stripe's list: the stored request goes again under its own key.
        guard case .settled(let lostID) = report.resolved["ins_old_lost"] else {
            Issue.record("\(String(describing: report.resolved["ins_old_lost"]))")
            return
        }
        #expect(report.outcomes["ins_old_lost"] == .settled(stripeID: lostID))
        let keys = try sandbox.effects().compactMap { $0["idempotency_key"] as? String }.sorted()
        #expect(keys == ["settle-ins_old_lost-a1", "some-other-key"])
    }

    @Test func payoutPastTheWindowIsFoundByRecipientBeforeAnythingIsResent() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let found = payoutInstruction("ins_pay_found", amount: 1500, account: "fa_1")
        let lost = payoutInstruction("ins_pay_lost", amount: 2500, account: "fa_1")
        try stageInFlight(sandbox, found)
        try stageInFlight(sandbox, lost)
        let made = try sandbox.stripeJSON(
            "/v2/money_management/outbound_payments",
            json: """
                {"from": {"financial_account": "fa_1", "currency": "usd"},
                 "to": {"recipient": "acct_drv", "payout_method": "pm_ap_1", "currency": "usd"},
                 "amount": {"value": 1500, "currency": "usd"}, "delivery_options": {"speed": "instant"},
                 "metadata": {"settle_instruction": "ins_pay_found"}}
                """,
            key: "an-earlier-key")
        let madeID = try #require(made["id"] as? String)
        #expect(madeID.hasPrefix("obp_"))
        // 31 days later: outside the v2 idempotency window (30 days).
        let later = Date().addingTimeInterval(31 * 24 * 3600)
        let report = try runEngine(sandbox, [found, lost], configuration: configuration(sandbox, now: { later }))
        #expect(report.resolved["ins_pay_found"] == .settled(stripeID: madeID))
        #expect(report.outcomes["ins_pay_found"] == .settled(stripeID: madeID))
        guard case .settled = report.outcomes["ins_pay_lost"] else {
            Issue.record("\(String(describing: report.outcomes["ins_pay_lost"]))")
            return
        }
        let effects = try sandbox.effects().filter { $0["type"] as? String == "outbound_payment" }
        #expect(effects.compactMap { $0["amount"] as? Int }.sorted() == [1500, 2500])
        #expect(
            effects.compactMap { $0["idempotency_key"] as? String }.sorted() == [
                "an-earlier-key", "settle-ins_pay_lost-a1",
            ])
    }

    /// A payout of an earlier attempt that came back carries the same instruction id: the
    /// look-up of the attempt in flight must not take it for this attempt's object. The ledger
    /// knows it as attempt 1's (it recorded it, then learned it came back).
    @Test func aPayoutThatCameBackIsNotTakenForTheAttemptInFlight() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let payout = payoutInstruction("ins_pay_again", amount: 1200, account: "fa_1")
        let earlierID = try createAtSandbox(sandbox, payout, key: "settle-ins_pay_again-a1")
        _ = try sandbox.control(
            "POST", "/_sandbox/outbound_payments/\(earlierID)/status", json: #"{"status": "returned"}"#)
        try stageInFlight(sandbox, payout)
        do {
            let ledger = try openTestLedger(path: sandbox.ledgerPath)
            defer { ledger.close() }
            try ledger.recordOutcome(instruction: payout.id, .settled(stripeID: earlierID))
            try ledger.recordPayoutStatus(instruction: payout.id, status: "returned", reason: nil)
        }
        try stageInFlight(sandbox, payout, attempt: 2)
        let report = try runEngine(sandbox, [payout])
        guard case .settled(let id) = report.resolved["ins_pay_again"] else {
            Issue.record("\(String(describing: report.resolved["ins_pay_again"]))")
            return
        }
        #expect(id != earlierID)
        #expect(try sandbox.effects().filter { $0["type"] as? String == "outbound_payment" }.count == 2)
    }

    /// The payout of the attempt in flight failed at Stripe (or came back) before any run
    /// learned it, and Stripe's idempotency window has passed: the look-up finds it and takes
    /// it, whatever its status: it was made, and came back, so this run reports it failed. Before
    /// (audit 9 #1), a payout that came back counted as absent: the stored request went again,
    /// and after the window that made a second payout to the method that had declined.
    @Test func aLookUpTakesThisAttemptsPayoutThatFailed() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let payout = payoutInstruction("ins_failed_once", amount: 1300, account: "fa_1")
        try stageInFlight(sandbox, payout)
        let madeID = try createAtSandbox(sandbox, payout, key: "settle-ins_failed_once-a1")
        _ = try sandbox.control(
            "POST", "/_sandbox/outbound_payments/\(madeID)/status", json: #"{"status": "failed"}"#)
        _ = try sandbox.control("POST", "/_sandbox/config", json: #"{"clock_offset_s": 2764800}"#)
        let report = try runEngine(sandbox, [])  // the look-up alone: no plan sends it
        guard case .failed(let code, let message)? = report.resolved["ins_failed_once"] else {
            Issue.record("\(String(describing: report.resolved["ins_failed_once"]))")
            return
        }
        #expect(code == "payout_method_declined")
        #expect(message.contains(madeID), "\(message)")
        let made = try sandbox.effects().filter { $0["type"] as? String == "outbound_payment" }
        #expect(made.count == 1, "\(made)")
        // Recorded as made and back: the next attempt passes it over.
        let ledger = try openTestLedger(path: sandbox.ledgerPath)
        defer { ledger.close() }
        #expect(try ledger.instruction("ins_failed_once")?.stripeID == madeID)
    }

    /// Creates the instruction's payout at the sandbox under `key`, as a send that reached
    /// Stripe and whose answer was lost would have; its id.
    private func createAtSandbox(_ sandbox: Sandbox, _ payout: Instruction, key: String) throws -> String {
        let made = try sandbox.stripeJSON(
            "/v2/money_management/outbound_payments", json: payout.params.encoded(sortingKeys: true), key: key)
        return try #require(made["id"] as? String)
    }

    @Test func missingFinancialAccountStopsBeforeAnythingIsSent() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan = [transferInstruction("ins_t1"), payoutInstruction("ins_p1")]
        #expect(throws: ApplyError.self) {
            _ = try runEngine(sandbox, plan, configuration: configuration(sandbox, financialAccount: nil))
        }
        #expect(try sandbox.requestCount() == 0)
        #expect(try LedgerStore.openReadOnly(path: sandbox.ledgerPath)?.instruction("ins_t1") == nil)
        // A plan that names the account itself needs no configuration.
        let named = try runEngine(
            sandbox, [payoutInstruction("ins_p2", account: "fa_1")],
            configuration: configuration(sandbox, financialAccount: nil))
        guard case .settled = named.outcomes["ins_p2"] else {
            Issue.record("\(String(describing: named.outcomes["ins_p2"]))")
            return
        }
    }

    @Test func theKeyNeverAppearsInLogsOrTheLedger() throws {
        let sandbox = try Sandbox(flags: ["--fail-5xx", "0.3", "--seed", "3"])
        try sandbox.seed()
        let logs = LogCollector()
        let plan =
            (1...6).map { transferInstruction("ins_t\($0)") } + [
                transferInstruction("ins_bad", destination: "acct_closed")
            ]
        _ = try runEngine(sandbox, plan, configuration: configuration(sandbox, logs: logs, maxTries: 8))
        #expect(logs.lines.count >= 7)
        #expect(!logs.lines.contains { $0.contains(testKey) || $0.contains("SECRET") })
        for suffix in ["", "-wal"] {
            let data = (try? Data(contentsOf: URL(fileURLWithPath: sandbox.ledgerPath + suffix))) ?? Data()
            #expect(data.range(of: Data("SECRETsettleKEY".utf8)) == nil)
        }
    }

    @Test func rateIsRespected() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let plan = (1...10).map { transferInstruction("ins_t\($0)") }
        let started = Date()
        let report = try runEngine(sandbox, plan, configuration: configuration(sandbox, rate: 10, concurrency: 4))
        #expect(report.requests == 10)
        // 10 requests at 10/s: the first goes at once, the last about 0.9 s later.
        #expect(Date().timeIntervalSince(started) >= 0.85)
    }
}

/// Leaves the ledger as a run that died right after committing `in_flight` would.
func stageInFlight(_ sandbox: Sandbox, _ instruction: Instruction, attempt: Int = 1) throws {
    let ledger = try openTestLedger(path: sandbox.ledgerPath)
    defer { ledger.close() }
    try ledger.markInFlight([
        LedgerDispatch(
            id: instruction.id, kind: instruction.kind.name, group: instruction.group, payee: instruction.payee,
            charge: instruction.charge, currency: instruction.currency, amountMinor: instruction.amountMinor,
            method: "POST", path: instruction.path, params: instruction.params.encoded(sortingKeys: true),
            stripeContext: nil,
            attempt: attempt, idempotencyKey: "settle-\(instruction.id)-a\(attempt)",
            lines: instruction.lines.map {
                .init(lineID: $0.lineID, kind: $0.kind, amountMinor: $0.amountMinor, content: $0.content)
            })
    ])
}

@Suite(
    "ApplyEngine reversals")
struct ApplyEngineReversalTests {
    func reversal(_ id: String, of transfer: String, amount: Int64) -> Instruction {
        Instruction(
            id: id, kind: .reversal, path: "/v1/transfers/\(transfer)/reversals",
            params: ["amount": .string(String(amount)), "metadata[settle_instruction]": .string(id)],
            lines: [.init(lineID: "\(id)-L1", kind: "reversal", amountMinor: amount, content: "c\(id)")],
            group: "ORDER100", payee: "acct_rest", currency: "usd", amountMinor: amount)
    }

    @Test func reversalIsSentAndNetsInTheLedger() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let first = try runEngine(sandbox, [transferInstruction("ins_t", amount: 7000)])
        guard case .settled(let transferID) = first.outcomes["ins_t"] else {
            Issue.record("\(String(describing: first.outcomes["ins_t"]))")
            return
        }
        let second = try runEngine(sandbox, [reversal("ins_r", of: transferID, amount: 1500)])
        guard case .settled(let reversalID) = second.outcomes["ins_r"] else {
            Issue.record("\(String(describing: second.outcomes["ins_r"]))")
            return
        }
        #expect(reversalID.hasPrefix("trr_"))
        let ledger = try #require(try LedgerStore.openReadOnly(path: sandbox.ledgerPath))
        #expect(
            try ledger.transfer(group: "ORDER100", destination: "acct_rest", currency: "usd")
                == LedgerTransfer(
                    stripeID: transferID, amountMinor: 7000, reversedMinor: 1500, charge: "ch_1", currency: "usd",
                    destination: "acct_rest"))
        let reversals = try sandbox.effects().filter { $0["type"] as? String == "reversal" }
        #expect(reversals.count == 1)
        #expect(reversals.first?["amount"] as? Int == 1500)
    }

    @Test func reversalPastTheWindowIsFoundByLookUp() throws {
        let sandbox = try Sandbox()
        try sandbox.seed()
        let first = try runEngine(sandbox, [transferInstruction("ins_t", amount: 7000)])
        let transferID = try #require({ if case .settled(let id)? = first.outcomes["ins_t"] { id } else { nil } }())
        let instruction = reversal("ins_r", of: transferID, amount: 700)
        try stageInFlight(sandbox, instruction)
        let made = try sandbox.stripe(
            "POST", "/v1/transfers/\(transferID)/reversals", form: "amount=700&metadata%5Bsettle_instruction%5D=ins_r",
            key: "settle-ins_r-a1")
        let later = Date().addingTimeInterval(3 * 24 * 3600)
        let report = try runEngine(sandbox, [instruction], configuration: configuration(sandbox, now: { later }))
        #expect(report.outcomes["ins_r"] == .settled(stripeID: made["id"] as? String ?? "?"))
        #expect(try sandbox.effects().filter { $0["type"] as? String == "reversal" }.count == 1)
    }
}
