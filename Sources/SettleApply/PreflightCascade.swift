public import SettleCore

/// Which orders of a plan made offline may not move once Stripe refused (or still holds
/// back) a fact they depend on, so that no order moves in part.
///
/// An order's lines may sit in several instructions (its transfers, its payouts), and an
/// aggregated payout carries lines of many orders: orders that share an instruction cannot
/// be sent apart, so the unit is the connected component of orders joined by instructions
/// (a union-find over the orders, fed one instruction at a time). In a component with a
/// refused or pending fact:
/// - an order with a refused fact of its own is rejected: the instructions on the fact with
///   its code (`payout_method_unusable`, `charge_failed`), its other lines `group_rejected`;
/// - an order on a pending charge (and nothing refused of its own) waits, deferred
///   `charge_pending`: rejection beats deferral within an order;
/// - every other order is only tied to those: it waits too (deferred `scheduled`, held by
///   the ledger), whole, and the next run plans it without the orders that stopped it.
/// Memory: an integer per order, the orders' own verdicts, a verdict per component.
public struct PreflightCascade: Sendable {
    /// What Stripe said about an instruction's own facts.
    public enum Obstacle: Sendable, Equatable {
        /// Refused for good: the reason code and message its lines get.
        case refused(code: String, message: String)
        /// A charge that has not succeeded yet.
        case pending(message: String)

        var isRefusal: Bool { if case .refused = self { true } else { false } }
        var message: String {
            switch self {
            case .refused(_, let message), .pending(let message): message
            }
        }
    }

    /// Why an order may not move.
    public enum OrderVerdict: Sendable, Equatable {
        /// Stripe refused a fact of its own.
        case refused(message: String)
        /// Its charge is still pending.
        case pending(message: String)
        /// Nothing of its own: an instruction ties it to an order that stopped.
        case tied(message: String)
        /// A transfer or reversal of it has no known outcome yet (its payouts wait).
        case unsettled(message: String)
    }

    private var groupIndex: [String: Int32] = [:]
    private var parent: [Int32] = []
    /// Each order's own obstacle (a refusal beats a pending charge).
    private var own: [Int32: Obstacle] = [:]
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

    private static func merged(_ old: Obstacle?, _ new: Obstacle) -> Obstacle {
        guard let old else { return new }
        return !old.isRefusal && new.isRefusal ? new : old
    }

    /// Joins the orders of one instruction; `obstacle` is what Stripe said of its own facts
    /// (every order of its lines has it as its own). `groups` must not be empty (an
    /// instruction whose lines name no order passes a name of its own).
    public mutating func add(groups: some Collection<String>, obstacle: Obstacle?) {
        guard let first = groups.first else { return }
        let head = node(first)
        for group in groups.dropFirst() {
            let other = node(group)
            let (a, b) = (root(head), root(other))
            if a != b { parent[Int(b)] = a }
            if let obstacle { own[other] = Self.merged(own[other], obstacle) }
        }
        if let obstacle { own[head] = Self.merged(own[head], obstacle) }
    }

    /// Whether anything stops any order.
    public var isEmpty: Bool { own.isEmpty }

    /// Settles each component's verdict; call once, after every ``add(groups:obstacle:)``.
    public mutating func seal() {
        for (group, obstacle) in own.sorted(by: { $0.key < $1.key }) {
            let top = root(group)
            verdicts[top] = Self.merged(verdicts[top], obstacle)
        }
    }

    /// Why an order may not move; nil when it may. Call after ``seal()``.
    public mutating func verdict(ofOrder group: String) -> OrderVerdict? {
        guard let index = groupIndex[group], let component = verdicts[root(index)] else { return nil }
        switch own[index] {
        case .refused(_, let message)?: return .refused(message: message)
        case .pending(let message)?: return .pending(message: message)
        case nil: return .tied(message: component.message)
        }
    }

    /// The outcome of one line (or of an instruction of one order) whose order has this
    /// verdict, given what Stripe said of the instruction's own facts.
    public static func outcome(_ verdict: OrderVerdict, own obstacle: Obstacle?) -> InstructionOutcome {
        switch (verdict, obstacle) {
        case (.refused, .refused(let code, let message)?):
            return .rejected(code: code, message: message)
        case (.refused(let message), _):
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
        case (.unsettled(let message), _):
            return .rejected(
                code: ReasonCode.scheduled.code,
                message: "waits for the next run: \(message); the next run resolves it first, then plans this line")
        case (.tied(let message), _):
            return .rejected(
                code: ReasonCode.scheduled.code,
                message:
                    "waits for the next run: an aggregated payout ties its order to one that may not move now (\(message)); "
                    + "the next run plans it without that order")
        }
    }

    /// The outcome of an instruction of one order (nil: it may be sent). Call after ``seal()``.
    public mutating func outcome(order group: String, obstacle: Obstacle?) -> InstructionOutcome? {
        verdict(ofOrder: group).map { Self.outcome($0, own: obstacle) }
    }
}
