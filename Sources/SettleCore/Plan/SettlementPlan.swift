import CPrefetch

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
    /// ledger's transfers that reversal lines take from).
    public var charges: [ChargeTotal] = []
    /// Reversal lines of a transfer the ledger records with a charge: that charge (charges.csv shows
    /// the reversal on it, whatever charge the line names).
    public var ledgerChargeOfLine: [Int32: Symbol] = [:]
    /// Transfers that name no charge but draw on one known by its payment intent (lines with
    /// charge facts and a `payment_intent`, no `source_transaction`), by their rows' first
    /// line position: that payment intent, which the ledger records as the transfer's charge,
    /// so later runs count it toward the charge's amount (instructions.jsonl `charge_key`).
    public var paymentIntentOfTransfer: [Int: Symbol] = [:]
    /// What Stripe said before the plan (``StripeFacts/empty`` offline), for the record.
    public var facts: StripeFacts = .empty

    public init(batch: Batch, options: RuleOptions) {
        self.batch = batch
        self.options = options
        self.instructionOfLine = [Int32](repeating: -1, count: batch.lines.count)
    }

    /// Starts loading the symbols and the instruction a writer will read for line `index` a
    /// few rows from now (two stages: `far` rows ahead the spans, `near` rows ahead the bytes),
    /// so that the cache misses of rows written in input order overlap instead of adding up:
    /// a line's payee, order and group were interned wherever they first appeared.
    @inline(__always)
    public func prefetchForWriting(line index: Int, near: Int = 8, far: Int = 16) {
        let lines = batch.lines
        let symbols = batch.symbols
        if index + far < lines.count {
            let line = lines[index + far]
            symbols.prefetchSpan(batch.payee(of: line))
            symbols.prefetchSpan(line.orderID)
            symbols.prefetchSpan(line.group)
        }
        if index + near < lines.count {
            let line = lines[index + near]
            symbols.prefetchBytes(batch.payee(of: line))
            symbols.prefetchBytes(line.orderID)
            symbols.prefetchBytes(line.group)
            let instruction = Int(instructionOfLine[index + near])
            if instruction >= 0 {
                instructions.withUnsafeBufferPointer { settle_prefetch($0.baseAddress! + instruction) }
            }
        }
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
    /// Whether a line or Stripe said the fee (`fee` is 0 when not): a charge an earlier run
    /// counted keeps the fee it recorded (charges.csv).
    public var feeKnown = true

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
