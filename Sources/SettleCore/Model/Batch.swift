/// Everything read from the inputs of one run, checked and ready to plan.
public final class Batch: @unchecked Sendable {
    /// One input file of the batch.
    public struct InputFile: Sendable {
        public var name: String
        public var layout: FileLayout
        public var lines = 0
        public var discarded = false

        public init(name: String, layout: FileLayout) {
            self.name = name
            self.layout = layout
        }
    }

    public let symbols = SymbolTable()
    public var lines: [OrderLine] = []
    public var extras: [LineExtras] = []
    /// The lines this run reports `failed` because the payout that paid them came back
    /// (failed, returned or canceled after Stripe accepted it): their money is back in the
    /// financial account (summary.csv's `payouts_returned`).
    public var returnedPayoutLines: [Int32] = []
    /// Charges Stripe is asked about before money moves on them, whatever the export says:
    /// those of lines that waited in the ledger for their charge and came back as a newer
    /// export's copy (`run` asks before it plans; an offline plan's apply before it sends).
    public var chargesToAsk = Set<Symbol>()
    /// Charges named with their payment intent (`source_transaction` and `payment_intent` on
    /// one line), each way: a line that names only the intent draws on that charge, and what
    /// the ledger recorded under the intent counts toward it (``linkIntents(everyCharge:)``).
    public private(set) var chargeOfIntent = SymbolSlots()
    public private(set) var intentOfCharge = SymbolSlots()
    /// Human reasons that are more specific than the code's default text.
    public var messages: [String] = []
    public var files: [InputFile] = []
    /// `transfer_group` given explicitly for a group key (sent on transfers).
    public init() {}

    /// The text of a symbol.
    @inline(__always)
    public func text(_ symbol: Symbol) -> String { symbols.string(symbol) }

    /// Whether a payment method type is a bank debit (settles days later); cached per symbol.
    public func isBankDebit(_ type: Symbol) -> Bool {
        if let known = bankDebitCache[type] { return known }
        // Either case, spaces around: a type that reads as a bank debit is one (waiting is the safe side).
        var name = text(type).lowercased()
        while name.first == " " || name.first == "\t" { name.removeFirst() }
        while name.last == " " || name.last == "\t" { name.removeLast() }
        let answer = bankDebitTypes.contains(name)
        bankDebitCache[type] = answer
        return answer
    }
    private var bankDebitCache: [Symbol: Bool] = [:]

    /// Links each charge a line names to the payment intent the same line names, for a batch with a line that gives charge facts under an intent alone, or
    /// for every charge (`everyCharge`: a plan with a ledger, whose earlier runs may have
    /// recorded the charge under either name). Audit 53 H4: 80.00 drawn by intent and 50.00
    /// by charge id on one 100.00 charge were two charges, over-allocated and counted twice.
    public func linkIntents(everyCharge: Bool) {
        let needed =
            everyCharge
            || lines.contains { line in
                line.charge.isNone && !line.paymentIntent.isNone && line.givesChargeFacts
                    && LineChecker.statesChargeFacts(line)
            }
        guard needed else { return }
        for line in lines
        where !line.charge.isNone && !line.paymentIntent.isNone && LineChecker.statesChargeFacts(line) {
            link(charge: line.charge, intent: line.paymentIntent)
        }
    }

    /// Links a charge and the payment intent named with it. An intent named with two charges
    /// (or a charge with two intents) links nothing: which one a line naming only the intent
    /// means is not said, whatever the line order.
    public func link(charge: Symbol, intent: Symbol) {
        func link(_ slots: SymbolSlots, _ key: Symbol, _ value: Symbol) {
            let known = slots[key]
            if known < 0 {
                slots.set(key, value.raw)
            } else if known != value.raw {
                slots.set(key, Batch.ambiguous)
            }
        }
        link(chargeOfIntent, intent, charge)
        link(intentOfCharge, charge, intent)
    }

    /// The payment intents lines give charge facts under with no charge id, which no line of
    /// the batch names with one: the ledger may know their charge.
    public var unlinkedIntents: [Symbol] {
        var seen = Set<Symbol>()
        var found: [Symbol] = []
        for line in lines
        where line.charge.isNone && !line.paymentIntent.isNone && line.givesChargeFacts
            && LineChecker.statesChargeFacts(line) && chargeOfIntent[line.paymentIntent] < 0
        {
            if seen.insert(line.paymentIntent).inserted { found.append(line.paymentIntent) }
        }
        return found
    }

    /// A link ``linkIntents(everyCharge:)`` found two ways (no symbol has this raw value).
    private static let ambiguous = Int32.max

    /// The charge a line naming only `intent` draws on, when other lines name both.
    public func charge(ofIntent intent: Symbol) -> Symbol? {
        let raw = chargeOfIntent[intent]
        return raw < 0 || raw == Batch.ambiguous ? nil : Symbol(raw: raw)
    }

    /// The payment intent the lines naming `charge` give with it.
    public func intent(ofCharge charge: Symbol) -> Symbol? {
        let raw = intentOfCharge[charge]
        return raw < 0 || raw == Batch.ambiguous ? nil : Symbol(raw: raw)
    }

    /// `file:line` of a line.
    public func source(of line: OrderLine) -> String {
        "\(files[Int(line.file)].name):\(line.sourceLine)"
    }

    /// Appends `file:line` to a byte buffer (the results writer's hot path).
    public func appendSource(of line: OrderLine, to out: inout [UInt8]) {
        out.append(contentsOf: files[Int(line.file)].name.utf8)
        out.append(UInt8(ascii: ":"))
        MinorUnits.appendDecimal(Int64(line.sourceLine), to: &out)
    }

    /// Stripe's own codes of the lines this run reports refused (``ReasonCode/refusedByStripe``),
    /// by their message: few lines have one.
    public var stripeCodes: [Int32: String] = [:]

    /// The `reason_code` a line's row shows: a fixed code, or Stripe's own.
    public func reasonCode(of line: OrderLine) -> String {
        line.reason == .refusedByStripe ? stripeCodes[line.message] ?? "" : line.reason.code
    }

    /// Reports a line `failed` with Stripe's own code and message: Stripe refused it for good.
    public func setRefused(_ index: Int, code: String, message: String) {
        // A message of its own (not shared through the cache): the code is keyed by it.
        let stored = appendMessage(message)
        stripeCodes[stored] = code
        set(index, .failed, .refusedByStripe, message: stored)
    }

    /// The reason a person reads for a line's status.
    public func reasonText(of line: OrderLine) -> String {
        if line.message >= 0 { return messages[Int(line.message)] }
        return ReasonText.default(for: line.reason)
    }

    /// Sets a line's status with a specific message.
    public func set(_ index: Int, _ status: LineStatus, _ reason: ReasonCode, _ message: String? = nil) {
        set(index, status, reason, message: message.map(addMessage) ?? -1)
    }

    /// Sets a line's status with a message already stored (shared by the lines of a group).
    public func set(_ index: Int, _ status: LineStatus, _ reason: ReasonCode, message: Int32) {
        lines[index].status = status
        lines[index].reason = reason
        lines[index].message = message
    }

    /// Stores a human reason once; lines refer to it by index. A text stored a moment ago is
    /// shared (a small cache of recent texts): millions of lines rejected for the same reason
    /// ("the record has 1 fields, the header 5") kept a String each (audit 60 F2: a 58 KB gzip
    /// of 30 M one-character lines needed more than 4 GB).
    public func addMessage(_ text: String) -> Int32 {
        // The symbol table's hash: the same slot in every process (String's hashValue is
        // seeded per process).
        var bytes = text
        let hash = text.isEmpty ? 0 : bytes.withUTF8 { SymbolTable.hash(UnsafeRawBufferPointer($0)) }
        let slot = hash & (Batch.recentSlots - 1)
        if recentMessages.isEmpty { recentMessages = [Int32](repeating: -1, count: Batch.recentSlots) }
        let recent = recentMessages[slot]
        if recent >= 0, messages[Int(recent)] == text { return recent }
        let stored = appendMessage(text)
        recentMessages[slot] = stored
        return stored
    }

    private func appendMessage(_ text: String) -> Int32 {
        messages.append(text)
        return Int32(messages.count - 1)
    }
    private static let recentSlots = 256
    private var recentMessages: [Int32] = []

    /// The payee shown in results: destination, recipient, or a reversal's transfer.
    public func payee(of line: OrderLine) -> Symbol {
        if line.kind == .reversal, line.payee.isNone { return line.transfer }
        return line.payee
    }
}

/// Default texts for reason codes, written for the finance person who reads errors.csv.
public enum ReasonText {
    public static func `default`(for code: ReasonCode) -> String {
        switch code {
        case .none: ""
        case .amountInvalid: "the amount is not a positive decimal exact in the currency's minor unit"
        case .currencyUnsupported: "the currency is not one Stripe supports"
        case .idInvalid: "an id does not have the expected prefix"
        case .kindInvalid: "kind must be transfer, payout or reversal"
        case .dateInvalid: "the date is not an ISO date YYYY-MM-DD"
        case .fieldMissing: "a required field is empty"
        case .fieldTooLong: "a field is too long"
        case .encodingInvalid: "the line is not valid UTF-8"
        case .malformedRecord: "the record does not match the header"
        case .schemaInvalid: "the line does not match the export schema"
        case .duplicateLineID: "this line_id already appeared earlier in the batch; the first copy counts"
        case .lineConflict: "the ledger settled this line_id earlier with different content"
        case .crossBorderUnsupported: "a transfer to this country is not allowed from the platform's country"
        case .payoutCurrencyUnsupported: "Apple Pay payouts are in USD only"
        case .payoutCountryUnsupported: "Apple Pay payouts go to US recipients only"
        case .payoutMethodMissing: "a payout line needs a payout_method"
        case .chargeInvalid: "a charge column does not parse"
        case .groupRejected:
            "another line of the same transfer group was rejected; the group moves together or not at all"
        case .chargeMismatch: "lines naming the same charge disagree on its amount, currency or status"
        case .currencyMismatch: "the transfer's currency differs from the charge's currency"
        case .overAllocated: "transfers on this charge add up to more than the charge"
        case .chargeFailed: "the funding charge failed"
        case .reversalExceedsTransfer: "the reversal is larger than the transfer it nets into"
        case .reversalTargetUnknown:
            "no transfer to reverse: none in this run and none in the ledger for this group and destination"
        case .chargePending: "the funding charge has not succeeded yet"
        case .scheduled: "transfer_on is after the settlement date"
        case .payoutMethodUnusable: "the payout method cannot receive instant Apple Pay payouts"
        case .refusedByStripe: "Stripe refused it for good"
        case .payoutMethodDeclined, .payoutMethodExpired, .payoutMethodUnsupported, .payoutMethodAmountLimitExceeded,
            .payoutMethodClosed, .payoutFailed, .payoutReturned, .payoutCanceled:
            "Stripe accepted the payout, then it did not reach the recipient; the money is back in the financial account"
        }
    }
}
