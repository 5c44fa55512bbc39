public import SettleCore

/// A plan the engine reads one instruction at a time, so that memory holds the
/// instructions in flight and not the plan (`instructions.jsonl` may hold millions).
///
/// The engine reads it more than once (facts of a plan made offline, then sending):
/// ``rewind()`` starts again at the first instruction. A source that reads a file checks
/// each instruction it yields against its own content (``Instruction/inconsistency``).
public protocol InstructionSource: AnyObject {
    /// What the engine must know of the whole plan before the first request.
    var overview: PlanOverview { get }
    /// Starts again at the first instruction.
    func rewind() throws(ApplyError)
    /// The next instruction, or nil after the last.
    func next() throws(ApplyError) -> Instruction?
}

/// What the engine must know of the whole plan before anything is sent: from the sealed
/// manifest for a plan folder, or gathered instruction by instruction (``add(_:)``).
public struct PlanOverview: Sendable, Equatable {
    /// How many instructions the plan lists.
    public var count = 0
    /// The v2 payouts that name no financial account (the configured one must).
    public var unfundedPayouts = 0
    /// The financial account the plan's payouts are paid from, when the plan names one: a
    /// configured account that differs is refused, never silently passed over.
    public var fundingAccount: String? = nil

    public init(count: Int = 0, unfundedPayouts: Int = 0, fundingAccount: String? = nil) {
        self.count = count
        self.unfundedPayouts = unfundedPayouts
        self.fundingAccount = fundingAccount
    }

    public mutating func add(_ instruction: Instruction) {
        count += 1
        guard instruction.isV2, case .object? = instruction.params["from"] else { return }
        if let account = instruction.params["from"]?["financial_account"]?.stringValue {
            if fundingAccount == nil { fundingAccount = account }
        } else {
            unfundedPayouts += 1
        }
    }
}

/// A plan already in memory (tests, small plans).
public final class ArrayInstructionSource: InstructionSource {
    private let instructions: [Instruction]
    private var position = 0
    public let overview: PlanOverview

    public init(_ instructions: [Instruction]) {
        self.instructions = instructions
        var overview = PlanOverview()
        for instruction in instructions { overview.add(instruction) }
        self.overview = overview
    }

    public func rewind() throws(ApplyError) { position = 0 }

    public func next() throws(ApplyError) -> Instruction? {
        guard position < instructions.count else { return nil }
        position += 1
        return instructions[position - 1]
    }
}
