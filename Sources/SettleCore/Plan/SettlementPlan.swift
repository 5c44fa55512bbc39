/// The outcome of planning: every line with its status, and the instructions to send.
public final class SettlementPlan: @unchecked Sendable {
    public let batch: Batch
    public let options: RuleOptions
    public var instructions: [PlanRow] = []
    /// Line indices of all instructions, each instruction owning a contiguous range.
    public var instructionLines: [Int32] = []
    /// For each line, the index of the instruction that settles it, -1 when none.
    public var instructionOfLine: [Int32]
    /// Stripe ids the ledger recorded for `already_settled` lines.
    public var knownStripeIDs: [Int: String] = [:]
    /// The charges the batch names, once each, for the finance summary (and those of the
    /// ledger's transfers that reversal lines naming no charge take from).
    public var charges: [ChargeTotal] = []
    /// Reversal lines naming no charge whose transfer the ledger records with one: that charge.
    public var ledgerChargeOfLine: [Int32: Symbol] = [:]
    /// What Stripe said before the plan (``StripeFacts/empty`` offline), for the record.
    public var facts: StripeFacts = .empty

    public init(batch: Batch, options: RuleOptions) {
        self.batch = batch
        self.options = options
        self.instructionOfLine = [Int32](repeating: -1, count: batch.lines.count)
    }

    /// The line indices of an instruction.
    public func lines(of instruction: PlanRow) -> ArraySlice<Int32> {
        instructionLines[instruction.linesStart..<instruction.linesStart + instruction.linesCount]
    }
}

/// A charge as the export describes it: its amount and Stripe's fee, for the summary.
/// 24 bytes and no string: a plan of the 1 GB export names millions of charges.
public struct ChargeTotal: Sendable {
    public var amount: Int64
    public var fee: Int64
    /// The charge id (`ch_…`/`py_…`), a symbol of the plan's batch.
    public var charge: Symbol = .none
    public var currency: Currency
    /// As the rules read it: `pending` also for a bank debit that has not succeeded.
    public var status: ChargeStatus = .unknown

    public init(
        currency: Currency, amount: Int64, fee: Int64, charge: Symbol = .none, status: ChargeStatus = .unknown
    ) {
        self.currency = currency
        self.amount = amount
        self.fee = fee
        self.charge = charge
        self.status = status
    }
}
