import SettleApply
import SettleCore
import SettleTestSupport
import Testing

/// What an apply of an offline plan stops when Stripe refuses a fact: seeded random plans
/// (orders joined by aggregated payouts, refusals and pending charges scattered) against an
/// oracle that walks the orders and instructions breadth-first, and against the property
/// the cascade exists for: an order moves whole or not at all.
@Suite struct PreflightCascadeTests {
    struct Case {
        var instructions: [(groups: [String], obstacle: PreflightCascade.Obstacle?)] = []
    }

    static func randomCase(_ random: inout SplitMix64) -> Case {
        var test = Case()
        let orders = Int(random.next() % 30) + 1
        let count = Int(random.next() % 40) + 1
        for index in 0..<count {
            let width = random.next() % 5 == 0 ? Int(random.next() % 4) + 2 : 1
            let groups = (0..<width).map { _ in "G\(random.next() % UInt64(orders))" }
            let obstacle: PreflightCascade.Obstacle? =
                switch random.next() % 12 {
                case 0: .refused(code: "payout_method_unusable", message: "m\(index)")
                case 1: .refused(code: "charge_failed", message: "c\(index)")
                case 2: .pending(message: "p\(index)")
                default: nil
                }
            test.instructions.append((groups, obstacle))
        }
        return test
    }

    /// The oracle: each order's component, found breadth-first over orders and
    /// instructions; an order's verdict from its own facts (a refusal beats a pending
    /// charge), else `tied` when anything in its component stopped.
    static func expected(_ test: Case) -> [String: String] {
        var byGroup: [String: [Int]] = [:]
        for (index, instruction) in test.instructions.enumerated() {
            for group in instruction.groups { byGroup[group, default: []].append(index) }
        }
        var component: [String: Int] = [:]
        var next = 0
        for start in byGroup.keys.sorted() where component[start] == nil {
            var queue = [start]
            component[start] = next
            while let group = queue.popLast() {
                for index in byGroup[group]! {
                    for other in test.instructions[index].groups where component[other] == nil {
                        component[other] = next
                        queue.append(other)
                    }
                }
            }
            next += 1
        }
        var own: [String: String] = [:]
        for instruction in test.instructions {
            for group in instruction.groups {
                switch instruction.obstacle {
                case .refused?: own[group] = "refused"
                case .pending?: if own[group] == nil { own[group] = "pending" }
                case nil: break
                }
            }
        }
        let stopped = Set(own.keys.map { component[$0]! })
        var verdicts: [String: String] = [:]
        for group in byGroup.keys {
            if let mine = own[group] {
                verdicts[group] = mine
            } else if stopped.contains(component[group]!) {
                verdicts[group] = "tied"
            }
        }
        return verdicts
    }

    static func name(_ verdict: PreflightCascade.OrderVerdict) -> String {
        switch verdict {
        case .refused: "refused"
        case .pending: "pending"
        case .tied: "tied"
        case .unsettled: "unsettled"
        }
    }

    @Test(arguments: 0..<200)
    func stopsExactlyTheOrdersOfRefusedAndPendingFactsAndThoseTiedToThem(seed: UInt64) {
        var random = SplitMix64(seed: seed &+ 0xCA5C)
        let test = Self.randomCase(&random)
        var cascade = PreflightCascade()
        for instruction in test.instructions { cascade.add(groups: instruction.groups, obstacle: instruction.obstacle) }
        cascade.seal()
        #expect(cascade.isEmpty == !test.instructions.contains { $0.obstacle != nil })
        let groups = Set(test.instructions.flatMap(\.groups))
        var verdicts: [String: String] = [:]
        for group in groups {
            if let verdict = cascade.verdict(ofOrder: group) { verdicts[group] = Self.name(verdict) }
        }
        #expect(verdicts == Self.expected(test), "seed \(seed)")
        // What each line gets: a refusal of its own instruction its code, a refused order
        // group_rejected, a pending one charge_pending, a tied one scheduled; the last two wait.
        for instruction in test.instructions {
            for group in instruction.groups {
                guard let verdict = cascade.verdict(ofOrder: group) else { continue }
                let outcome = PreflightCascade.outcome(verdict, own: instruction.obstacle)
                guard case .rejected(let code, _) = outcome else {
                    Issue.record("seed \(seed): \(outcome)")
                    continue
                }
                let expected: String
                switch (verdict, instruction.obstacle) {
                case (.refused, .refused(let own, _)?): expected = own
                case (.refused, _): expected = "group_rejected"
                case (.pending, _): expected = "charge_pending"
                default: expected = "scheduled"
                }
                #expect(code == expected, "seed \(seed)")
                #expect(
                    outcome.lineResult.status
                        == (expected == "charge_pending" || expected == "scheduled" ? .deferred : .rejected))
            }
        }
    }
}
