import SettleApply
import SettleCore
import SettleTestSupport
import Testing

/// An aggregated payout some of whose lines may not go: seeded random payouts (lines of
/// several orders, some orders stopped, some lines settled elsewhere) against what a plan
/// of only the lines that go would send, and each line accounted for once.
@Suite struct PayoutSplitTests {
    @Test(arguments: 0..<200)
    func theLinesThatGoAreSentAsAPlanOfThemAloneWouldSendThem(seed: UInt64) throws {
        var random = SplitMix64(seed: seed &+ 0x5B17)
        let count = Int(random.next() % 12) + 1
        let orders = Int(random.next() % 5) + 1
        var base = payoutInstruction("ins_p", amount: 0)
        base.lines = (0..<count).map { index in
            .init(
                lineID: "L\(index)@G\(random.next() % UInt64(orders))", kind: "payout",
                amountMinor: Int64(random.next() % 9_999) + 1, content: "c\(index)")
        }
        base.amountMinor = base.lines.reduce(0) { $0 + $1.amountMinor }
        let stopped = Set((0..<orders).filter { _ in random.next() % 3 == 0 }.map { "G\($0)" })
        let elsewhere = Set(base.lines.filter { _ in random.next() % 7 == 0 }.map(\.lineID))
        func order(_ line: Instruction.Line) -> String { String(line.lineID.split(separator: "@")[1]) }
        let result = PayoutSplit.split(base.lines) { line in
            if elsewhere.contains(line.lineID) { return (.alreadySettled(stripeID: "obp_x"), "ins_other") }
            if stopped.contains(order(line)) { return (.rejected(code: "group_rejected", message: "m"), nil) }
            return nil
        }
        let goes = base.lines.filter { !elsewhere.contains($0.lineID) && !stopped.contains(order($0)) }
        guard let (entries, free) = result else {
            #expect(goes.count == base.lines.count, "seed \(seed): nothing split, yet a line may not go")
            return
        }
        #expect(goes.count < base.lines.count, "seed \(seed)")
        #expect(entries.map(\.line) == base.lines.map(\.lineID), "seed \(seed): one entry a line, in order")
        #expect(free == goes, "seed \(seed)")
        for (line, entry) in entries {
            let sent = goes.contains { $0.lineID == line }
            #expect((entry == .sent) == sent, "seed \(seed) \(line)")
        }
        guard !free.isEmpty else { return }
        let derived = PayoutSplit.derived(from: base, lines: free)
        let amount = free.reduce(Int64(0)) { $0 + $1.amountMinor }
        #expect(derived.amountMinor == amount)
        #expect(derived.lines == free)
        #expect(
            derived.id
                == InstructionID.make(
                    kind: "payout", group: "", payee: base.payee, chargeOrTarget: "", currency: base.currency,
                    amountMinor: amount, lineIDs: free.map(\.lineID).shuffled(using: &random)))
        #expect(derived.params["amount"]?["value"] == .int(amount))
        #expect(derived.params["metadata"]?["settle_instruction"] == .string(derived.id))
        #expect(derived.params["to"] == base.params["to"])
        // The parameters are the ones apply would check a planned instruction of these facts against.
        #expect(RequestParams.mismatch(derived) == nil, "seed \(seed)")
    }

    /// A refusal beats a pending charge in an order, whichever Stripe said first.
    @Test func aRefusalBeatsAPendingCharge() {
        var stops = OrderStops()
        stops.add(order: "G1", obstacle: .pending(message: "p"))
        stops.add(order: "G1", obstacle: .refused(code: "charge_failed", message: "r"))
        stops.add(order: "G2", obstacle: .refused(code: "payout_method_unusable", message: "r2"))
        stops.add(order: "G2", obstacle: .pending(message: "p2"))
        stops.add(order: "G3", obstacle: .pending(message: "p3"))
        #expect(stops.verdict(ofOrder: "G1") == .refused(message: "r"))
        #expect(stops.verdict(ofOrder: "G2") == .refused(message: "r2"))
        #expect(stops.verdict(ofOrder: "G3") == .pending(message: "p3"))
        #expect(stops.verdict(ofOrder: "G4") == nil)
        let pending = OrderStops.outcome(.pending(message: "p3"), own: nil)
        #expect(pending.lineResult.status == .deferred)
        #expect(pending.lineResult.reasonCode == "charge_pending")
        let refused = OrderStops.outcome(.refused(message: "r"), own: nil)
        #expect(refused.lineResult.status == .rejected)
        #expect(refused.lineResult.reasonCode == "group_rejected")
        let own = OrderStops.outcome(.refused(message: "r"), own: .refused(code: "charge_failed", message: "x"))
        #expect(own.lineResult.reasonCode == "charge_failed")
        let waits = OrderStops.outcome(.unsettled(message: "u"), own: nil)
        #expect(waits.lineResult.status == .deferred)
        #expect(waits.lineResult.reasonCode == "scheduled")
    }
}
