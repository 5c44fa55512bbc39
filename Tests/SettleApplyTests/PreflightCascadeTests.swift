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

    /// The oracle: each instruction's component, found breadth-first over orders and
    /// instructions, and the component's verdict (a refusal beats a pending charge).
    static func expected(_ test: Case) -> [String?] {
        var byGroup: [String: [Int]] = [:]
        for (index, instruction) in test.instructions.enumerated() {
            for group in instruction.groups { byGroup[group, default: []].append(index) }
        }
        var component = [Int](repeating: -1, count: test.instructions.count)
        var next = 0
        for start in test.instructions.indices where component[start] < 0 {
            var queue = [start]
            component[start] = next
            while let index = queue.popLast() {
                for group in test.instructions[index].groups {
                    for other in byGroup[group]! where component[other] < 0 {
                        component[other] = next
                        queue.append(other)
                    }
                }
            }
            next += 1
        }
        var refused = Set<Int>()
        var pending = Set<Int>()
        for (index, instruction) in test.instructions.enumerated() {
            switch instruction.obstacle {
            case .refused?: refused.insert(component[index])
            case .pending?: pending.insert(component[index])
            case nil: break
            }
        }
        return test.instructions.enumerated().map { index, instruction in
            if refused.contains(component[index]) {
                if case .refused(let code, _)? = instruction.obstacle { return code }
                return "group_rejected"
            }
            return pending.contains(component[index]) ? "charge_pending" : nil
        }
    }

    @Test(arguments: 0..<200)
    func stopsExactlyTheComponentsOfRefusedAndPendingFacts(seed: UInt64) {
        var random = SplitMix64(seed: seed &+ 0xCA5C)
        let test = Self.randomCase(&random)
        var cascade = PreflightCascade()
        for instruction in test.instructions { cascade.add(groups: instruction.groups, obstacle: instruction.obstacle) }
        cascade.seal()
        #expect(cascade.isEmpty == !test.instructions.contains { $0.obstacle != nil })
        let outcomes = test.instructions.map { cascade.outcome(groups: $0.groups, obstacle: $0.obstacle) }
        let codes: [String?] = outcomes.map { outcome in
            guard let outcome else { return nil }
            guard case .rejected(let code, _) = outcome else { return "not rejected: \(outcome)" }
            return code
        }
        #expect(codes == Self.expected(test), "seed \(seed)")
        // Whole or not at all: an order none of whose instructions is stopped, or all.
        var stoppedByGroup: [String: Set<Bool>] = [:]
        for (index, instruction) in test.instructions.enumerated() {
            for group in instruction.groups { stoppedByGroup[group, default: []].insert(outcomes[index] != nil) }
        }
        #expect(stoppedByGroup.values.allSatisfy { $0.count == 1 }, "seed \(seed)")
        // charge_pending is a wait (deferred, back next run); the other codes reject.
        for outcome in outcomes.compactMap({ $0 }) {
            guard case .rejected(let code, _) = outcome else { continue }
            #expect(outcome.lineResult.status == (code == "charge_pending" ? .deferred : .rejected))
        }
    }
}
