public import SettleCore

/// Which instructions of a plan made offline may not be sent once Stripe refused (or still
/// holds back) a fact they depend on, so that no order moves in part.
///
/// An order's lines may sit in several instructions (its transfers, its payouts), and an
/// aggregated payout carries lines of many orders. Orders that share an instruction
/// move together or not at all, so the unit is the connected component of orders
/// joined by instructions (a union-find over the orders, fed one instruction at a time).
/// A component with a refused fact moves nothing: the instructions that depend on the
/// refused fact are rejected with its code (`payout_method_unusable`, `charge_failed`), the
/// others `group_rejected`. A component whose only obstacle is a pending charge waits:
/// every instruction in it is deferred `charge_pending` (rejection beats deferral, as in the
/// plan's rules). Memory: an integer per order and a verdict per component.
public struct PreflightCascade: Sendable {
    /// What Stripe said about an instruction's own facts.
    public enum Obstacle: Sendable, Equatable {
        /// Refused for good: the reason code and message its lines get.
        case refused(code: String, message: String)
        /// A charge that has not succeeded yet.
        case pending(message: String)
    }

    private var groupIndex: [String: Int32] = [:]
    private var parent: [Int32] = []
    private var direct: [(group: Int32, obstacle: Obstacle)] = []
    /// Per component root, once ``seal()`` ran: the first refusal, else the first pending charge.
    private var verdicts: [Int32: Obstacle] = [:]

    public init() {}

    private mutating func node(_ group: String) -> Int32 {
        if let found = groupIndex[group] { return found }
        let index = Int32(parent.count)
        groupIndex[group] = index
        parent.append(index)
        return index
    }

    private mutating func root(_ node: Int32) -> Int32 {
        var node = node
        while parent[Int(node)] != node {
            parent[Int(node)] = parent[Int(parent[Int(node)])]
            node = parent[Int(node)]
        }
        return node
    }

    /// Joins the orders of one instruction; `obstacle` is what Stripe said of its own facts.
    /// `groups` must not be empty (an instruction whose lines name no order passes a name of
    /// its own).
    public mutating func add(groups: some Collection<String>, obstacle: Obstacle?) {
        guard let first = groups.first else { return }
        let head = node(first)
        for group in groups.dropFirst() {
            let (a, b) = (root(head), root(node(group)))
            if a != b { parent[Int(b)] = a }
        }
        if let obstacle { direct.append((head, obstacle)) }
    }

    /// Whether anything stops any instruction.
    public var isEmpty: Bool { direct.isEmpty }

    /// Settles each component's verdict; call once, after every ``add(groups:obstacle:)``.
    public mutating func seal() {
        for (group, obstacle) in direct {
            let top = root(group)
            switch (verdicts[top], obstacle) {
            case (nil, _), (.pending?, .refused): verdicts[top] = obstacle
            default: break
            }
        }
    }

    /// The outcome of an instruction of the given orders (nil: it may be sent), given what
    /// Stripe said of its own facts. Call after ``seal()``.
    public mutating func outcome(groups: some Collection<String>, obstacle: Obstacle?) -> InstructionOutcome? {
        guard let first = groups.first, let head = groupIndex[first] else { return nil }
        guard let verdict = verdicts[root(head)] else { return nil }
        switch (verdict, obstacle) {
        case (.refused, .refused(let code, let message)?):
            return .rejected(code: code, message: message)
        case (.refused(_, let message), _):
            return .rejected(
                code: ReasonCode.groupRejected.code,
                message:
                    "not sent: its order moves whole or not at all, with an instruction Stripe refused (\(message))")
        case (.pending, .pending(let message)?):
            return .rejected(code: ReasonCode.chargePending.code, message: message)
        case (.pending(let message), _):
            return .rejected(
                code: ReasonCode.chargePending.code,
                message: "waits: its order moves whole, with an instruction that waits (\(message))")
        }
    }
}
