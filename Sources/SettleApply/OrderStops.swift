public import SettleCore
public import SettleLedger

/// Which orders may not move, and what becomes of their lines, so that an order moves whole
/// or not at all: what Stripe said of the facts of a plan made offline (a refused payout
/// method, a failed or pending charge), and what it answered in this run (a transfer or
/// reversal refused, or not answered).
///
/// An order with a refused fact is rejected: the instructions on the fact get its code
/// (`payout_method_unusable`, `charge_failed`), its other lines `group_rejected`. An order on
/// a pending charge (nothing refused of its own) waits, deferred `charge_pending`: rejection
/// beats deferral within an order. An aggregated payout pays many orders: it is never sent
/// for a line of an order that may not move, and never holds back the others
/// (``PayoutSplit``).
public struct OrderStops: Sendable {
    /// What Stripe said about an instruction's own facts.
    public enum Obstacle: Sendable, Equatable {
        /// Refused for good: the reason code and message its lines get.
        case refused(code: String, message: String)
        /// A charge that has not succeeded yet.
        case pending(message: String)

        var isRefusal: Bool { if case .refused = self { true } else { false } }
    }

    /// Why an order may not move.
    public enum OrderVerdict: Sendable, Equatable {
        /// Stripe refused a fact of its own, or one of its transfers or reversals.
        case refused(message: String)
        /// Its charge is still pending.
        case pending(message: String)
        /// A transfer or reversal of it has no known outcome yet: its payouts wait.
        case unsettled(message: String)
        /// Another run took up a line of it after the plan was made: it is that run's.
        case takenUp(message: String)
    }

    /// Each order's own obstacle (a refusal beats a pending charge).
    private var own: [String: Obstacle] = [:]

    public init() {}

    /// Notes what Stripe said of the facts of an instruction of `order`.
    public mutating func add(order: String, obstacle: Obstacle) {
        if let old = own[order], old.isRefusal || !obstacle.isRefusal { return }
        own[order] = obstacle
    }

    /// Whether anything stops any order.
    public var isEmpty: Bool { own.isEmpty }

    /// Whether the facts stop this order.
    public func contains(_ order: String) -> Bool { own[order] != nil }

    /// The orders a refused fact stops, with the refusal's message.
    public var refusedOrders: [String: String] {
        var refused: [String: String] = [:]
        for case (let order, .refused(_, let message)) in own { refused[order] = message }
        return refused
    }

    /// Why an order may not move for its facts; nil when it may.
    public func verdict(ofOrder order: String) -> OrderVerdict? {
        switch own[order] {
        case .refused(_, let message)?: .refused(message: message)
        case .pending(let message)?: .pending(message: message)
        case nil: nil
        }
    }

    /// The outcome of a line (or of an instruction of one order) whose order has this
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
        case (.takenUp(let message), _):
            return .rejected(code: ReasonCode.groupRejected.code, message: "not sent: \(message)")
        }
    }
}

/// An aggregated payout some of whose lines may not go now: each such line gets its own
/// outcome, and the rest go at once as a payout of their own (``derived(from:lines:)``), so
/// that a line of an order that may not move never holds back the others.
public enum PayoutSplit {
    /// What becomes of one line of the payout.
    public enum Entry: Sendable, Equatable {
        /// Not sent: this outcome (a stopped order's, or already settled by another
        /// instruction, named).
        case outcome(InstructionOutcome, instruction: String?)
        /// Sent in the payout of the lines that may go.
        case sent
    }

    /// Each line's entry, and the lines that go; nil when every line may go as planned.
    /// - Parameters:
    ///   - stop: the outcome of a line that may not go now (its order's), or nil.
    public static func split(
        _ lines: [Instruction.Line], stop: (Instruction.Line) -> (InstructionOutcome, instruction: String?)?
    ) -> (entries: [(line: String, entry: Entry)], free: [Instruction.Line])? {
        var entries: [(line: String, entry: Entry)] = []
        var free: [Instruction.Line] = []
        for line in lines {
            if let (outcome, instruction) = stop(line) {
                entries.append((line.lineID, .outcome(outcome, instruction: instruction)))
            } else {
                entries.append((line.lineID, .sent))
                free.append(line)
            }
        }
        return free.count == lines.count ? nil : (entries, free)
    }

    /// The payout of some of an aggregated payout's lines: its id, amount and parameters as
    /// a plan of only those lines would form them (the same functions).
    public static func derived(from payout: Instruction, lines: [Instruction.Line]) -> Instruction {
        let amount = lines.reduce(Int64(0)) { $0 + $1.amountMinor }
        let id = InstructionID.make(
            kind: payout.kind.name, group: payout.group, payee: payout.payee, chargeOrTarget: payout.charge,
            currency: payout.currency, amountMinor: amount, lineIDs: lines.map(\.lineID))
        var derived = payout
        derived.id = id
        derived.lines = lines
        derived.amountMinor = amount
        derived.idempotencyKey = IdempotencyKey.make(instruction: id, attempt: 1)
        derived.params = RequestParams.make(
            id: id, kind: payout.kind, group: payout.group, payee: payout.payee, charge: payout.charge,
            currency: payout.currency, amountMinor: amount,
            extras: RequestParams.extras(of: payout.params, kind: .payout))
        return derived
    }
}

extension LedgerInstruction {
    /// Whether Stripe refused it for good: failed with Stripe's own code. Not a release
    /// settle decided (`not_sent`: the request never left; one of its own codes, such as
    /// `group_rejected` for an instruction a look-up found never made whose order was stopped):
    /// those lines go again with their orders. The line of a refusal is reported `failed` by
    /// the next plan and goes again only when a person feeds it back.
    public var refusedByStripe: Bool {
        guard status == .failed, let code = errorCode, !code.isEmpty, code != LedgerOutcome.notSentCode else {
            return false
        }
        return !ReasonCode.allCases.contains { $0.code == code }
    }
}
