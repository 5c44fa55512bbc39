import Dispatch
import SettleDigest

/// Applies the group rules of docs/RULES.md and forms the instructions.
///
/// Pure: everything it knows of earlier runs comes through ``SettlementHistory``. Built for
/// millions of lines: tables are arrays indexed by symbol, groups a counting sort, and the
/// per-group scratch space is reused.
public struct Planner {
    public let options: RuleOptions
    public let history: (any SettlementHistory)?
    /// What Stripe said before the plan; ``StripeFacts/empty`` for an offline plan.
    public let facts: StripeFacts

    /// Whether instructions get their ids and attempts (false: `validate`, which only counts
    /// them; the ids are a quarter of planning, and asking the ledger for attempts more).
    public var identifies = true

    public init(options: RuleOptions, history: (any SettlementHistory)?, facts: StripeFacts = .empty) {
        self.options = options
        self.history = history
        self.facts = facts
    }

    /// The charge a line draws on (docs/RULES.md, Group rules): the charge it names in `source_transaction`;
    /// else, when it gives charge facts, the one unnamed charge of its `payment_intent`, else
    /// of its group. A line with neither draws on the platform's balance.
    public enum ChargeKey: Equatable {
        case named(Symbol)
        case paymentIntent(Symbol)
        case group(Symbol)

        /// A line naming only a payment intent draws on the charge another line of the batch
        /// names with that intent (``Batch/linkIntents(everyCharge:)``).
        public init?(_ line: OrderLine, in batch: Batch) {
            if !line.charge.isNone {
                self = .named(line.charge)
            } else if !line.givesChargeFacts {
                return nil
            } else if !line.paymentIntent.isNone {
                self =
                    batch.charge(ofIntent: line.paymentIntent).map { .named($0) } ?? .paymentIntent(line.paymentIntent)
            } else if !line.group.isNone {
                self = .group(line.group)
            } else {
                return nil
            }
        }

        /// The symbol that names the charge: its id, its payment intent or its group (what
        /// charges.csv and the ledger's charges know it by).
        public var symbol: Symbol {
            switch self {
            case .named(let symbol), .paymentIntent(let symbol), .group(let symbol): symbol
            }
        }

        /// The charge as a person reads it in a reason.
        func name(_ batch: Batch) -> String {
            switch self {
            case .named(let charge): "charge \(batch.text(charge))"
            case .paymentIntent(let intent): "the charge of payment intent \(batch.text(intent))"
            case .group(let group): "the charge of group \(batch.text(group))"
            }
        }
    }

    /// What is known of one charge: the export's columns merged over the lines drawing on it,
    /// replaced by Stripe's own answer when there is one.
    struct ChargeFacts {
        // Widest first: 72 bytes, not 88 (one a charge, millions in a large batch).
        /// The charge's amount and fee: thousandths of a major unit while the lines merge (a
        /// line may not say the charge's currency), minor units of ``inCurrency`` once
        /// ``resolveAmounts()`` ran; -1 when unknown.
        var amount: Int64 = -1
        var fee: Int64 = -1
        var transfers: Int64 = 0
        var earlier: Int64 = -1
        var mismatch: String? = nil
        var paymentMethodType: Symbol = .none
        var key: ChargeKey
        /// The `charge_currency` its lines state.
        var currency: Currency? = nil
        /// When no line states charge_currency: the currency of the line that tells the most
        /// of it (``currencyRank(_:)``; within a rank, ``stricter(_:than:)``).
        var lineCurrency: Currency? = nil
        var lineCurrencyRank: UInt8 = 0
        /// Transfers that count are in more than one currency and no line states the charge's:
        /// at least one of them would not be in the charge's currency (``Planner/applyChargeRules``).
        var transfersDisagreeOnCurrency = false
        var status: ChargeStatus = .unknown
        /// The facts are Stripe's, not the export's.
        var fromStripe = false
        /// A line that counts in the plan draws on it, not only lines a line rule rejected
        /// (charges.csv and summary.csv show the charges the run touches).
        var touched = false

        init(key: ChargeKey) { self.key = key }

        /// The charge's currency: the one its lines state, else the most telling line's.
        var inCurrency: Currency { currency ?? lineCurrency ?? .usd }
    }

    /// Whether the apply of an offline plan asks Stripe about a charge the export's columns
    /// describe: its lines waited for it in the ledger (``Batch/chargesToAsk``), and Stripe's
    /// word is not in the plan yet.
    static func asksAgain(_ charge: Symbol, _ facts: ChargeFacts, _ batch: Batch) -> Bool {
        !facts.fromStripe && batch.chargesToAsk.contains(charge)
    }

    /// Charges in order of first appearance, and the charge each line draws on.
    struct ChargeTable {
        /// Per key space (named, payment intent, group), the slot of each symbol.
        private let slotOfSymbol = [SymbolSlots(), SymbolSlots(), SymbolSlots()]
        var facts: [ChargeFacts] = []
        /// The slot of the charge each line draws on, -1 for none.
        var slotOfLine: [Int32]

        init(lines: Int) {
            slotOfLine = [Int32](repeating: -1, count: lines)
        }

        private static func space(_ key: ChargeKey) -> (Int, Symbol) {
            switch key {
            case .named(let symbol): (0, symbol)
            case .paymentIntent(let symbol): (1, symbol)
            case .group(let symbol): (2, symbol)
            }
        }

        mutating func slotCreating(_ key: ChargeKey) -> Int {
            let (space, symbol) = ChargeTable.space(key)
            let slot = slotOfSymbol[space][symbol]
            if slot >= 0 { return Int(slot) }
            slotOfSymbol[space].set(symbol, Int32(facts.count))
            facts.append(ChargeFacts(key: key))
            return facts.count - 1
        }

        /// The charge a line draws on.
        func slot(line index: Int) -> Int? {
            let slot = slotOfLine[index]
            return slot < 0 ? nil : Int(slot)
        }

        subscript(line index: Int) -> ChargeFacts? { slot(line: index).map { facts[$0] } }
    }

    /// Instructions of one kind with their lines, contiguous per instruction.
    struct Formed {
        var instructions: [PlanRow] = []
        var lines: [Int32] = []

        mutating func add(_ instruction: PlanRow, lines members: some Sequence<Int32>) {
            var instruction = instruction
            instruction.linesStart = lines.count
            lines.append(contentsOf: members)
            instruction.linesCount = lines.count - instruction.linesStart
            instructions.append(instruction)
        }
    }

    public func plan(_ batch: Batch) -> SettlementPlan {
        let plan = SettlementPlan(batch: batch, options: options)
        plan.facts = facts
        if let history {
            applyHistory(batch, plan: plan, history: history)
            applyDecidedOrders(batch, history: history)
        }
        applyPayoutMethodFacts(batch)
        batch.linkIntents(everyCharge: history != nil)
        // Stripe's word links a charge looked up to its payment intent too (a line naming the
        // charge id alone, with no charge columns).
        for (charge, intent) in facts.intentOfCharge.sorted(by: { $0.key < $1.key }) {
            batch.link(charge: batch.symbols.intern(charge), intent: batch.symbols.intern(intent))
        }
        if let history { linkIntentsTheLedgerKnows(batch, history: history) }
        var charges = mergeCharges(batch)
        applyChargeRules(batch, charges: &charges)
        // A charge the lines give facts of without naming it is in the summary too, under its
        // payment intent (else its group), which a later run's lines name the same way, so the
        // ledger counts it once (audit 13: its gross and fees were left out of the sums).
        plan.charges = charges.facts.compactMap { facts in
            let charge = facts.key.symbol
            guard facts.amount >= 0, facts.touched else { return nil }
            var status = facts.status
            if status != .succeeded, status != .failed, !facts.paymentMethodType.isNone,
                batch.isBankDebit(facts.paymentMethodType)
            {
                status = .pending
            }
            var total = ChargeTotal(
                currency: facts.inCurrency, amount: facts.amount,
                fee: max(0, facts.fee), charge: charge, status: status)
            total.feeKnown = facts.fee >= 0
            return total
        }
        var (order, starts) = groupIndex(batch)
        var transfers = Formed()
        var reversals = Formed()
        var payoutLines: [Int32] = []
        var payoutLookups: [Int32: Symbol] = [:]
        var scratch = GroupScratch()
        if let history { scratch.namedTransfers = namedTransfers(batch, history: history) }
        // Execution order: transfers, then reversals, then payouts. A group's transfers go to
        // the plan as soon as the group is formed (groups are disjoint: nothing later changes
        // their lines), so they are never held twice; the plan's tables are reserved for every
        // line that can still be planned (untouched pages cost nothing), so they never double.
        let plannable = batch.lines.reduce(0) { $0 + ($1.status == .planned ? 1 : 0) }
        plan.instructions.reserveCapacity(plannable)
        plan.instructionLines.reserveCapacity(plannable)
        HugePages.advise(&plan.instructions)
        HugePages.advise(&plan.instructionLines)
        for group in 0..<(starts.count - 1) {
            let members = order[Int(starts[group])..<Int(starts[group + 1])]
            applyGroupRules(batch, group: members, charges: charges)
            formGroup(
                batch, group: members, charges: charges, scratch: &scratch, transfers: &transfers,
                reversals: &reversals, payoutLines: &payoutLines, payoutLookups: &payoutLookups)
            for instruction in transfers.instructions {
                let lines = transfers.lines[instruction.linesStart..<instruction.linesStart + instruction.linesCount]
                append(instruction, lines, to: plan)
                // Recorded under the intent its lines name, also when a line of the batch
                // names the charge with it: a later run that knows only the intent finds it.
                if instruction.charge.isNone, let first = lines.first, let key = charges[line: Int(first)]?.key,
                    key != .group(key.symbol), case let intent = batch.lines[Int(first)].paymentIntent,
                    !intent.isNone, let row = plan.instructions.last
                {
                    plan.paymentIntentOfTransfer[row.linesStart] = intent
                }
            }
            transfers.instructions.removeAll(keepingCapacity: true)
            transfers.lines.removeAll(keepingCapacity: true)
        }
        if let history { addLedgerCharges(scratch.reversalCharges, batch: batch, plan: plan, history: history) }
        // What only the groups needed goes before the plan's own tables are made.
        (order, starts, scratch) = ([], [], GroupScratch())
        charges = ChargeTable(lines: 0)
        var payouts = formPayouts(batch, lines: payoutLines, lookups: payoutLookups)
        payoutLines = []
        // Each kind's formed rows are let go as soon as they are copied.
        for kind in 0..<2 {
            var formed = Formed()
            if kind == 0 { swap(&formed, &reversals) } else { swap(&formed, &payouts) }
            for instruction in formed.instructions {
                let lines = formed.lines[instruction.linesStart..<instruction.linesStart + instruction.linesCount]
                append(instruction, lines, to: plan)
            }
        }
        if identifies { Planner.identify(plan) }
        if let history, identifies { applyAttempts(plan, history: history) }
        return plan
    }

    /// Each instruction's id (``InstructionID``), on both cores: an id depends on its own
    /// instruction and lines only, and nothing changes the batch or the plan meanwhile.
    static func identify(_ plan: SettlementPlan) {
        let batch = plan.batch
        let count = plan.instructions.count
        let parts = count < 4096 ? 1 : 2
        plan.instructions.withUnsafeMutableBufferPointer { rows in
            nonisolated(unsafe) let rows = rows
            DispatchQueue.concurrentPerform(iterations: parts) { part in
                let hasher = SHA256()
                var scratch: [UInt8] = []
                var ids: [Symbol] = []
                for slot in (count * part / parts)..<(count * (part + 1) / parts) {
                    let row = rows[slot]
                    let lines = plan.instructionLines[row.linesStart..<row.linesStart + row.linesCount]
                    (rows[slot].digestHigh, rows[slot].digestLow) = InstructionID.make(
                        row, lines: lines, batch: batch, hasher: hasher, scratch: &scratch, ids: &ids)
                }
            }
        }
    }

    // MARK: - Ledger

    /// Keys a ledger look-up takes at once (``SettlementHistory``): big enough that a
    /// statement's set-up is spread thin, small enough that a batch's keys stay in cache.
    public static let lookUpBatch = 4096

    private func applyHistory(_ batch: Batch, plan: SettlementPlan, history: any SettlementHistory) {
        var ids: [UnsafeRawBufferPointer] = []
        var indices: [Int] = []
        ids.reserveCapacity(Planner.lookUpBatch)
        indices.reserveCapacity(Planner.lookUpBatch)
        // The symbols' bytes stay where they are: nothing is interned until the batch is asked.
        func lookUp() {
            history.lines(ids) { position, known in settle(indices[position], known) }
            ids.removeAll(keepingCapacity: true)
            indices.removeAll(keepingCapacity: true)
        }
        func settle(_ index: Int, _ known: HistoricLine) {
            let line = batch.lines[index]
            let content = LineContent.digest(batch, line)
            guard known.content == content else {
                if known.state != .failed {
                    batch.set(
                        index, .rejected, .lineConflict,
                        "the ledger settled line_id \(batch.text(line.lineID)) earlier with other content (amount, payee, charge or group differ)"
                    )
                }
                return
            }
            switch known.state {
            case .settled:
                batch.set(index, .alreadySettled, .none, "settled by an earlier run")
                if let id = known.stripeID { plan.knownStripeIDs[index] = id }
            case .pending:
                batch.set(
                    index, .unknown, .none,
                    "an earlier run sent this line and its outcome is not known yet; the next apply resolves it")
            case .failed:
                break
            }
        }
        // A line's answer changes only its own status, so asking in batches reads what asking
        // line by line would.
        for index in batch.lines.indices where batch.lines[index].status == .planned {
            ids.append(batch.symbols.bytes(batch.lines[index].lineID))
            indices.append(index)
            if ids.count == Planner.lookUpBatch { lookUp() }
        }
        if !ids.isEmpty { lookUp() }
    }

    /// An order an earlier run decided against (a line of it rejected, or refused by Stripe)
    /// moves only whole: its lines read back from a file settle wrote (an earlier run's
    /// deferred.csv or errors.csv) are rejected `group_rejected` when the line that decided it
    /// is not in the batch and has not settled since (audit 48 R1: a deferred.csv written
    /// before a later run saw the order's transfer refused paid the order's payout alone). An
    /// export lists its orders whole, so only fed-back files are asked about.
    private func applyDecidedOrders(_ batch: Batch, history: any SettlementHistory) {
        let fedBack = Set(batch.files.indices.filter { batch.files[$0].layout.guardedCells != nil })
        guard !fedBack.isEmpty else { return }
        var asked = Set<Symbol>()
        for line in batch.lines
        where fedBack.contains(Int(line.file)) && line.status == .planned && !line.group.isNone {
            asked.insert(line.group)
        }
        guard !asked.isEmpty else { return }
        let names = Dictionary(uniqueKeysWithValues: asked.map { (batch.text($0), $0) })
        var decided: [Symbol: (line: String, reason: String)] = [:]
        for (name, decision) in history.decidedOrders(names.keys.sorted()) {
            if let group = names[name] { decided[group] = decision }
        }
        guard !decided.isEmpty else { return }
        // The decided orders' lines in the batch, from every file, and the ids they hold.
        var members: [Symbol: [Int]] = [:]
        var ids: [Symbol: Set<String>] = [:]
        for index in batch.lines.indices where decided[batch.lines[index].group] != nil {
            let line = batch.lines[index]
            members[line.group, default: []].append(index)
            ids[line.group, default: []].insert(batch.text(line.lineID))
        }
        for (group, indices) in members {
            guard let decision = decided[group], ids[group]?.contains(decision.line) != true else { continue }
            // The deciding line settled since (its order fed back whole and paid): the order moved.
            var settled = false
            Array(decision.line.utf8).withUnsafeBytes { id in
                history.lines([id]) { _, known in settled = known.state == .settled }
            }
            guard !settled else { continue }
            for index in indices where batch.lines[index].status == .planned {
                batch.set(
                    index, .rejected, .groupRejected,
                    "\(decision.reason); the order moves only whole: feed it back with line \(decision.line)")
            }
        }
    }

    /// The transfers settle made that planned reversal lines name, asked once for the batch.
    private func namedTransfers(_ batch: Batch, history: any SettlementHistory) -> [Symbol: RecordedTransfer] {
        var symbols: [Symbol] = []
        var seen: Set<Symbol> = []
        for line in batch.lines
        where line.status == .planned && line.kind == .reversal && !line.transfer.isNone
            && seen.insert(line.transfer).inserted
        {
            symbols.append(line.transfer)
        }
        var known: [Symbol: RecordedTransfer] = [:]
        var start = 0
        while start < symbols.count {
            let chunk = symbols[start..<min(start + Planner.lookUpBatch, symbols.count)]
            history.recordedTransfers(chunk.map { batch.symbols.bytes($0) }) {
                known[chunk[chunk.startIndex + $0]] = $1
            }
            start += chunk.count
        }
        return known
    }

    /// Each instruction's attempt: one more than the ledger's count of its attempts.
    private func applyAttempts(_ plan: SettlementPlan, history: any SettlementHistory) {
        var found: [(Int, Int)] = []
        var start = 0
        while start < plan.instructions.count {
            let end = min(start + Planner.lookUpBatch, plan.instructions.count)
            history.attempts(plan.instructions[start..<end]) { found.append(($0, $1)) }
            for (position, attempts) in found { plan.instructions[start + position].attempt = attempts + 1 }
            found.removeAll(keepingCapacity: true)
            start = end
        }
    }

    // MARK: - Stripe's facts

    /// A payout method Stripe refused rejects its lines; their groups follow in the group rules.
    private func applyPayoutMethodFacts(_ batch: Batch) {
        guard !facts.payoutMethods.isEmpty else { return }
        // One verdict per (recipient, method) pair of symbols: no string built per line.
        var verdicts: [[Int32]: StripeFacts.PayoutMethod?] = [:]
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, line.kind == .payout else { continue }
            let pair = [line.payee.raw, line.payoutMethod.raw]
            let fact: StripeFacts.PayoutMethod?
            if let known = verdicts[pair] {
                fact = known
            } else {
                fact = facts.payoutMethod(recipient: batch.text(line.payee), method: batch.text(line.payoutMethod))
                verdicts[pair] = fact
            }
            guard case .refused(let reason) = fact?.verdict else { continue }
            batch.set(
                index, .rejected, .payoutMethodUnusable,
                "Stripe reports payout method \(batch.text(line.payoutMethod)) of \(batch.text(line.payee)) cannot receive instant Apple Pay payouts: \(reason)"
            )
        }
    }

    // MARK: - Charges

    /// The charge an earlier run's lines named with a payment intent that this batch's lines
    /// give facts under alone (the ledger's `charge_intents`): those lines draw on that charge,
    /// and what moved on it under its id counts (audit 53 H4: its lines named it by id on
    /// day 1, by intent alone on day 2, and 130.00 moved on a 100.00 charge).
    private func linkIntentsTheLedgerKnows(_ batch: Batch, history: any SettlementHistory) {
        let intents = batch.unlinkedIntents
        guard !intents.isEmpty else { return }
        var start = 0
        while start < intents.count {
            let chunk = Array(intents[start..<min(start + Planner.lookUpBatch, intents.count)])
            var found: [(Symbol, String)] = []
            history.chargesOfIntents(chunk.map { batch.symbols.bytes($0) }) { found.append((chunk[$0], $1)) }
            for (intent, charge) in found { batch.link(charge: batch.symbols.intern(charge), intent: intent) }
            start += Planner.lookUpBatch
        }
    }

    /// The charge each line draws on and what its lines say of it. A line a line rule rejected
    /// still states its charge's facts (they govern the other lines on it) but moves nothing;
    /// copies that do not count state nothing (``LineChecker/statesChargeFacts(_:)``).
    private func mergeCharges(_ batch: Batch) -> ChargeTable {
        var charges = ChargeTable(lines: batch.lines.count)
        batch.lines.withUnsafeBufferPointer { lines in
            for index in lines.indices {
                let line = lines[index]
                guard LineChecker.statesChargeFacts(line), let key = ChargeKey(line, in: batch) else { continue }
                let slot = charges.slotCreating(key)
                charges.slotOfLine[index] = Int32(slot)
                charges.facts[slot].merge(line, batch: batch)
                if line.status != .rejected { charges.facts[slot].touched = true }
            }
        }
        for slot in charges.facts.indices { charges.facts[slot].resolveAmounts() }
        guard !facts.charges.isEmpty || !facts.failedIntents.isEmpty else { return charges }
        for slot in charges.facts.indices {
            switch charges.facts[slot].key {
            case .named(let symbol):
                guard let fact = facts.charges[batch.text(symbol)] else { continue }
                // An earlier run's look-up says only that it failed: the lines' amounts stand.
                if fact.lookedUpBy == nil {
                    charges.facts[slot].adopt(fact, batch: batch)
                } else {
                    charges.facts[slot].failedAtStripe()
                }
            case .paymentIntent(let intent):
                // Lines that name only the intent of a charge Stripe said failed: no money either.
                if !facts.failedIntents.isEmpty, facts.failedIntents[batch.text(intent)] != nil {
                    charges.facts[slot].failedAtStripe()
                }
            case .group: continue
            }
        }
        return charges
    }

    /// Stripe's fact of a charge whose facts are Stripe's (``ChargeFacts/fromStripe``).
    private func stripeFact(_ key: ChargeKey, _ batch: Batch) -> (fact: StripeFacts.Charge, id: String?)? {
        switch key {
        case .named(let charge):
            let id = batch.text(charge)
            return facts.charges[id].map { ($0, id) }
        case .paymentIntent(let intent): return facts.failedIntents[batch.text(intent)].map { ($0, nil) }
        case .group: return nil
        }
    }

    /// charge_mismatch, charge_failed, currency_mismatch, over_allocated: per line, before groups.
    private func applyChargeRules(_ batch: Batch, charges: inout ChargeTable) {
        let failedIntents = facts.failedIntents
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, let slot = charges.slot(line: index) else {
                // A line that names only the payment intent of a charge Stripe said failed,
                // without charge columns, draws on no charge of its own but on no money either.
                if !failedIntents.isEmpty, line.status == .planned, line.kind != .reversal, line.charge.isNone,
                    !line.paymentIntent.isNone,
                    let fact = failedIntents[batch.text(line.paymentIntent)]
                {
                    batch.set(
                        index, .rejected, .chargeFailed,
                        StripeFacts.failure(
                            of: fact, name: "the charge of payment intent \(batch.text(line.paymentIntent))", id: nil))
                }
                continue
            }
            let facts = charges.facts[slot]
            if let mismatch = facts.mismatch {
                batch.set(index, .rejected, .chargeMismatch, mismatch)
            } else if let inexact = facts.inexactAmount(of: line, batch: batch) {
                batch.set(index, .rejected, .chargeInvalid, inexact)
            } else if facts.status == .failed {
                if facts.fromStripe, let (fact, id) = stripeFact(facts.key, batch) {
                    batch.set(
                        index, .rejected, .chargeFailed,
                        StripeFacts.failure(of: fact, name: facts.key.name(batch), id: id))
                } else {
                    batch.set(index, .rejected, .chargeFailed, "\(facts.key.name(batch)) failed")
                }
            } else if line.kind == .transfer, let currency = facts.currency, currency != line.currency {
                batch.set(
                    index, .rejected, .currencyMismatch,
                    "the transfer is in \(line.currency.code.uppercased()) but \(facts.key.name(batch)) is in \(currency.code.uppercased())"
                )
            } else if line.kind == .transfer, facts.currency == nil, facts.transfersDisagreeOnCurrency {
                // No line says the charge's currency, but it has one: a transfer in another
                // would be refused at Stripe, and its order would move in part.
                batch.set(
                    index, .rejected, .currencyMismatch,
                    "the transfers on \(facts.key.name(batch)) are in more than one currency; a charge has one (give charge_currency)"
                )
            } else if line.kind == .transfer {
                charges.facts[slot].transfers += line.amount
            }
        }
        // Over-allocation: this batch (deferred lines included) plus earlier runs (the ledger
        // knows only named charges, in the currency of the first transfer drawing on them).
        applyEarlierTransfers(batch, charges: &charges)
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, line.kind == .transfer, let slot = charges.slot(line: index),
                charges.facts[slot].amount >= 0
            else { continue }
            let facts = charges.facts[slot]
            if facts.transfers + facts.earlier > facts.amount {
                let currency = facts.inCurrency
                batch.set(
                    index, .rejected, .overAllocated,
                    "transfers on \(facts.key.name(batch)) add up to \(MinorUnits.format(facts.transfers + facts.earlier, currency: currency)) \(currency.code.uppercased()), more than the charge's \(MinorUnits.format(facts.amount, currency: currency))"
                )
            }
        }
    }

    /// What earlier runs transferred on each charge that a planned transfer draws on
    /// (``ChargeFacts/earlier``), asked in batches. A line's over-allocation changes only
    /// its own status, so the first transfer of each charge is the one the check meets first.
    private func applyEarlierTransfers(_ batch: Batch, charges: inout ChargeTable) {
        var keys: [(charge: UnsafeRawBufferPointer, currency: Currency)] = []
        var slots: [Int] = []
        func lookUp(_ charges: inout ChargeTable) {
            var found: [(Int, Int64)] = []
            history?.transferred(keys) { found.append(($0, $1)) }
            for (position, amount) in found { charges.facts[slots[position]].earlier += amount }
            // A charge an earlier run counted is never more than it counted, whatever a later
            // export says (audit 53 H3: a later export's 150.00 let 130.00 move on a 100.00
            // charge known by its payment intent, which Stripe cannot check). Stripe's word stands.
            found.removeAll()
            history?.countedGross(keys) { found.append(($0, $1)) }
            for (position, gross) in found where gross >= 0 && !charges.facts[slots[position]].fromStripe {
                charges.facts[slots[position]].amount = min(charges.facts[slots[position]].amount, gross)
            }
            keys.removeAll(keepingCapacity: true)
            slots.removeAll(keepingCapacity: true)
        }
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, line.kind == .transfer, let slot = charges.slot(line: index),
                charges.facts[slot].amount >= 0, charges.facts[slot].earlier < 0
            else { continue }
            // Asked or not, nothing earlier is 0 until the ledger says otherwise.
            charges.facts[slot].earlier = 0
            // Named charges, and those known by their payment intent (the ledger records a
            // transfer that names no charge under its payment intent: ``SettlementPlan/paymentIntentOfTransfer``).
            guard history != nil else { continue }
            let charge: Symbol
            switch charges.facts[slot].key {
            case .named(let named): charge = named
            case .paymentIntent(let intent): charge = intent
            case .group: continue
            }
            keys.append((batch.symbols.bytes(charge), line.currency))
            slots.append(slot)
            // And what earlier runs recorded under its payment intent (transfers of lines that
            // named only the intent).
            if case .named = charges.facts[slot].key, let intent = batch.intent(ofCharge: charge) {
                keys.append((batch.symbols.bytes(intent), line.currency))
                slots.append(slot)
            }
            if keys.count >= Planner.lookUpBatch { lookUp(&charges) }
        }
        if !keys.isEmpty { lookUp(&charges) }
    }

    // MARK: - Groups

    /// Lines per group, groups in order of their first line (a counting sort). Duplicates stay
    /// outside; a line without a group key is a group of its own.
    private func groupIndex(_ batch: Batch) -> (order: [Int32], starts: [Int32]) {
        let slotOfSymbol = SymbolSlots()
        var groupOfLine = HugePages.array(repeating: Int32(-1), count: batch.lines.count)
        var counts: [Int32] = []
        batch.lines.withUnsafeBufferPointer { lines in
            for index in lines.indices {
                let line = lines[index]
                if LineChecker.staysOutsideGroup(line) { continue }
                var group: Int32
                if line.group.isNone {
                    group = Int32(counts.count)
                    counts.append(0)
                } else {
                    group = slotOfSymbol[line.group]
                    if group < 0 {
                        group = Int32(counts.count)
                        slotOfSymbol.set(line.group, group)
                        counts.append(0)
                    }
                }
                groupOfLine[index] = group
                counts[Int(group)] += 1
            }
        }
        var starts = [Int32](repeating: 0, count: counts.count + 1)
        for group in counts.indices { starts[group + 1] = starts[group] + counts[group] }
        var next = starts
        var order = HugePages.array(repeating: Int32(0), count: Int(starts[counts.count]))
        for index in groupOfLine.indices where groupOfLine[index] >= 0 {
            let group = Int(groupOfLine[index])
            order[Int(next[group])] = Int32(index)
            next[group] += 1
        }
        return (order, starts)
    }

    /// charge_pending: the charge a line draws on is pending, or a bank debit not yet succeeded.
    private func isPending(_ index: Int32, _ batch: Batch, _ charges: ChargeTable) -> Bool {
        guard let facts = charges[line: Int(index)] else { return false }
        if facts.status == .pending { return true }
        if facts.status != .succeeded, !facts.paymentMethodType.isNone, batch.isBankDebit(facts.paymentMethodType) {
            return true
        }
        return false
    }

    /// Whether a line keeps its group from moving: rejected, or a transfer or reversal Stripe
    /// refused for good that this run reports (``HeldInputs``; a refused payout stops itself
    /// alone, as at apply).
    private static func sinksGroup(_ line: OrderLine) -> Bool {
        line.status == .rejected || (line.reason == .refusedByStripe && line.kind != .payout)
    }

    /// A group is atomic; rejection beats deferral; charge_pending beats scheduled.
    private func applyGroupRules(_ batch: Batch, group: ArraySlice<Int32>, charges: ChargeTable) {
        if group.contains(where: { Planner.sinksGroup(batch.lines[Int($0)]) }) {
            rejectGroup(batch, group: group)
            return
        }
        if let waiting = group.first(where: { isPending($0, batch, charges) }), let facts = charges[line: Int(waiting)]
        {
            let source = facts.fromStripe ? "Stripe reports " : ""
            let message = batch.addMessage(
                "\(source)\(facts.key.name(batch)) has not succeeded yet; the line waits for it")
            for index in group where batch.lines[Int(index)].status == .planned {
                batch.set(Int(index), .deferred, .chargePending, message: message)
            }
            return
        }
        for index in group {
            let line = batch.lines[Int(index)]
            if line.status == .planned, line.transferOn != .min, line.transferOn > options.asOf {
                batch.set(
                    Int(index), .deferred, .scheduled,
                    "transfer_on \(CivilDate.format(line.transferOn)) is after the settlement date \(CivilDate.format(options.asOf))"
                )
            }
        }
    }

    private func rejectGroup(_ batch: Batch, group: ArraySlice<Int32>) {
        let culprit = group.first { Planner.sinksGroup(batch.lines[Int($0)]) }!
        let culpritLine = batch.lines[Int(culprit)]
        let what = culpritLine.status == .rejected ? "was rejected" : "was refused by Stripe"
        let message = batch.addMessage(
            "line \(batch.text(culpritLine.lineID)) of group \(batch.text(culpritLine.group)) \(what) (\(batch.reasonCode(of: culpritLine))); the group moves together or not at all"
        )
        for index in group {
            let status = batch.lines[Int(index)].status
            if status == .planned || status == .deferred {
                batch.set(Int(index), .rejected, .groupRejected, message: message)
            }
        }
    }

    // MARK: - Forming instructions

    /// Space reused from one group to the next.
    struct GroupScratch {
        var transfers: [PlanRow] = []
        var netted: [Int64] = []
        var reversals: [PlanRow] = []
        /// (slot, line): which instruction of the group a line belongs to.
        var transferMembers: [(slot: Int32, line: Int32)] = []
        var reversalMembers: [(slot: Int32, line: Int32)] = []
        var pendingReversals: [Int32] = []
        var payouts: [Int32] = []
        /// Kept across groups: reversal lines naming no charge whose transfer the ledger
        /// records with one (charges.csv shows the reversal on that charge).
        var reversalCharges: [(line: Int32, charge: String)] = []
        /// This group's reversals by the Stripe id of the ledger's transfer they take from.
        var reversing: [String: Int64] = [:]
        /// Each reversal line and what it takes from: a transfer of this run (its slot) or one
        /// the ledger recorded (its Stripe id); the ones reversing more than is left, and the
        /// lines with nothing to take from. All lines are weighed before any is blamed, so that
        /// the line order never decides which line carries the reason.
        var reversalTargets: [(line: Int32, slot: Int, stripeID: String)] = []
        var exceededSlots: Set<Int> = []
        var exceededTransfers: [String: Int64] = [:]
        var targetUnknown: [Int32] = []
        /// Reversal lines naming a transfer settle made in another currency than theirs.
        var wrongCurrency: [(line: Int32, transfer: RecordedTransfer)] = []
        /// Reversal lines naming a transfer settle made to another destination than theirs.
        var wrongDestination: [(line: Int32, transfer: RecordedTransfer)] = []
        /// Kept across groups: the transfers settle made that reversal lines name (by symbol),
        /// and what this run's formed groups already reverse of each (by Stripe id).
        var namedTransfers: [Symbol: RecordedTransfer] = [:]
        var reversedInRun: [String: Int64] = [:]

        mutating func reset() {
            reversing.removeAll(keepingCapacity: true)
            reversalTargets.removeAll(keepingCapacity: true)
            exceededSlots.removeAll(keepingCapacity: true)
            exceededTransfers.removeAll(keepingCapacity: true)
            targetUnknown.removeAll(keepingCapacity: true)
            wrongCurrency.removeAll(keepingCapacity: true)
            wrongDestination.removeAll(keepingCapacity: true)
            transfers.removeAll(keepingCapacity: true)
            netted.removeAll(keepingCapacity: true)
            reversals.removeAll(keepingCapacity: true)
            transferMembers.removeAll(keepingCapacity: true)
            reversalMembers.removeAll(keepingCapacity: true)
            pendingReversals.removeAll(keepingCapacity: true)
            payouts.removeAll(keepingCapacity: true)
        }
    }

    private func formGroup(
        _ batch: Batch, group: ArraySlice<Int32>, charges: ChargeTable, scratch: inout GroupScratch,
        transfers: inout Formed, reversals: inout Formed, payoutLines: inout [Int32],
        payoutLookups: inout [Int32: Symbol]
    ) {
        scratch.reset()
        for index in group {
            let line = batch.lines[Int(index)]
            guard line.status == .planned else { continue }
            switch line.kind {
            case .transfer:
                if let slot = scratch.transfers.firstIndex(where: {
                    $0.payee == line.payee && $0.charge == line.charge && $0.currency == line.currency
                }) {
                    scratch.transfers[slot].amount += line.amount
                    scratch.transferMembers.append((Int32(slot), index))
                } else {
                    var instruction = PlanRow(
                        kind: .transfer, group: line.group, payee: line.payee,
                        currency: line.currency)
                    instruction.charge = line.charge
                    instruction.amount = line.amount
                    // Nothing says the charge's amount (nor, perhaps, its status): the apply of an
                    // offline plan looks it up, and checks the order's transfers against it
                    // before any goes (audit 46 F3).
                    // So when its lines waited for the charge and came back on the export's word.
                    if !line.charge.isNone, let facts = charges[line: Int(index)],
                        facts.amount < 0 || Planner.asksAgain(line.charge, facts, batch)
                    {
                        instruction.needsChargeLookup = true
                    }
                    scratch.transferMembers.append((Int32(scratch.transfers.count), index))
                    scratch.transfers.append(instruction)
                    scratch.netted.append(0)
                }
            case .payout:
                scratch.payouts.append(index)
            case .reversal:
                if !line.transfer.isNone {
                    // Never more than is left of a transfer settle made (the ledger knows it);
                    // Stripe alone knows what is left of any other.
                    if let recorded = scratch.namedTransfers[line.transfer] {
                        // Stripe reverses in the transfer's currency whatever the line says: a
                        // line in another one would move another amount than it states.
                        if let currency = Currency(recorded.currency), currency != line.currency {
                            scratch.wrongCurrency.append((index, recorded))
                            continue
                        }
                        // Stripe takes the money back from the account the transfer went to: a
                        // line naming another destination (its payee) would report a move from
                        // an account nothing was taken from (audit 87 F3).
                        if !line.payee.isNone, !recorded.destination.isEmpty,
                            batch.text(line.payee) != recorded.destination
                        {
                            scratch.wrongDestination.append((index, recorded))
                            continue
                        }
                        takeFrom(recorded, line.amount, line: index, &scratch)
                        if !recorded.charge.isEmpty { scratch.reversalCharges.append((index, recorded.charge)) }
                    }
                    var instruction = PlanRow(
                        kind: .reversal, group: line.group, payee: line.payee,
                        currency: line.currency)
                    instruction.target = line.transfer
                    instruction.amount = line.amount
                    scratch.reversalMembers.append((Int32(scratch.reversals.count), index))
                    scratch.reversals.append(instruction)
                } else {
                    scratch.pendingReversals.append(index)
                }
            }
        }
        // Reversals without a transfer id net into this run's transfer, else reverse the ledger's.
        var ledgerReversalSlot: [String: Int] = [:]
        for index in scratch.pendingReversals {
            let line = batch.lines[Int(index)]
            if let slot = nettingTarget(of: line, in: scratch.transfers, batch: batch) {
                scratch.netted[slot] += line.amount
                scratch.transferMembers.append((Int32(slot), index))
                scratch.reversalTargets.append((index, slot, ""))
                if scratch.netted[slot] > scratch.transfers[slot].amount { scratch.exceededSlots.insert(slot) }
                continue
            }
            guard let recorded = ledgerTarget(of: line, in: group, batch: batch) else {
                // A transfer that may exist is waited for, never refused for.
                if let wait = waitForTarget(of: line, in: group, batch: batch) {
                    batch.set(Int(index), .deferred, .scheduled, wait)
                    continue
                }
                scratch.targetUnknown.append(index)
                continue
            }
            // Reversal lines of one group and destination aimed at the ledger's transfer are one call.
            let slot: Int
            if let existing = ledgerReversalSlot[recorded.stripeID] {
                slot = existing
                scratch.reversals[slot].amount += line.amount
            } else {
                var instruction = PlanRow(
                    kind: .reversal, group: line.group, payee: line.payee, currency: line.currency)
                instruction.target = batch.symbols.intern(recorded.stripeID)
                instruction.amount = line.amount
                slot = scratch.reversals.count
                ledgerReversalSlot[recorded.stripeID] = slot
                scratch.reversals.append(instruction)
            }
            scratch.reversalMembers.append((Int32(slot), index))
            takeFrom(recorded, line.amount, line: index, &scratch)
            if !recorded.charge.isEmpty { scratch.reversalCharges.append((index, recorded.charge)) }
        }
        guard scratch.exceededSlots.isEmpty, scratch.exceededTransfers.isEmpty, scratch.targetUnknown.isEmpty,
            scratch.wrongCurrency.isEmpty, scratch.wrongDestination.isEmpty
        else {
            blameReversals(batch, group: group, scratch: scratch)
            return
        }
        // The group is formed: what it reverses is no longer left for the groups after it.
        for (stripeID, amount) in scratch.reversing { scratch.reversedInRun[stripeID, default: 0] += amount }
        // The charges a transfer of this order looks up before it is sent (the export had no
        // charge columns): a refusal or a pending charge stops the order whole at apply.
        var lookedUp: [Symbol] = []
        for slot in scratch.transfers.indices {
            let members = scratch.transferMembers.lazy.filter { $0.slot == Int32(slot) }.map(\.line)
            var instruction = scratch.transfers[slot]
            instruction.amount -= scratch.netted[slot]
            if instruction.amount == 0 {
                for index in members {
                    batch.set(
                        Int(index), .netted, .none,
                        "the transfer and its reversal in this run cancel out; nothing to send")
                }
                continue
            }
            if instruction.needsChargeLookup { lookedUp.append(instruction.charge) }
            transfers.add(instruction, lines: members)
        }
        for slot in scratch.reversals.indices {
            reversals.add(
                scratch.reversals[slot],
                lines: scratch.reversalMembers.lazy.filter { $0.slot == Int32(slot) }.map(\.line))
        }
        // A payout line naming a charge nothing says anything of, in an order no transfer of
        // which looks that charge up: its payout looks it up itself (audit 32 N4: an offline
        // plan paid a payout-only order whose charge had failed, or was a pending debit).
        for index in scratch.payouts {
            let line = batch.lines[Int(index)]
            guard line.status == .planned, !line.charge.isNone, !lookedUp.contains(line.charge),
                let facts = charges[line: Int(index)],
                (facts.amount < 0 && facts.status == .unknown) || Planner.asksAgain(line.charge, facts, batch)
            else { continue }
            payoutLookups[index] = line.charge
        }
        payoutLines.append(contentsOf: scratch.payouts)
    }

    /// The charges of the ledger's transfers that planned reversal lines take
    /// from: each line's charge for charges.csv, and a charge row from the ledger's record of
    /// it when this run's lines do not state it (a refund a day after its order moved).
    private func addLedgerCharges(
        _ found: [(line: Int32, charge: String)], batch: Batch, plan: SettlementPlan, history: any SettlementHistory
    ) {
        guard !found.isEmpty else { return }
        var known = Set(plan.charges.map(\.charge))
        for (line, charge) in found where batch.lines[Int(line)].status == .planned {
            let symbol = batch.symbols.intern(charge)
            plan.ledgerChargeOfLine[line] = symbol
            guard !known.contains(symbol) else { continue }
            known.insert(symbol)
            guard var counted = history.countedCharge(charge) else { continue }
            counted.charge = symbol
            plan.charges.append(counted)
        }
    }

    /// Counts a reversal line against what is left of a transfer settle made: the ledger's
    /// remainder, less what this run's earlier groups and this group already reverse of it.
    /// Past it, the transfer is exceeded (``blameReversals(_:group:scratch:)``).
    private func takeFrom(_ recorded: RecordedTransfer, _ amount: Int64, line: Int32, _ scratch: inout GroupScratch) {
        scratch.reversing[recorded.stripeID, default: 0] += amount
        scratch.reversalTargets.append((line, -1, recorded.stripeID))
        let left = recorded.remaining - scratch.reversedInRun[recorded.stripeID, default: 0]
        if scratch.reversing[recorded.stripeID, default: 0] > left {
            scratch.exceededTransfers[recorded.stripeID] = left
        }
    }

    /// A group whose reversals exceed what they take from, have nothing to take from, or name a
    /// transfer settle made in another currency (`currency_mismatch`) or to another destination,
    /// is rejected: every reversal line on an exceeded transfer is `reversal_exceeds_transfer`
    /// (together they exceed it; which one came last in the file does not matter), every one
    /// with no transfer, or naming one to another destination, `reversal_target_unknown`, the
    /// others `group_rejected`.
    private func blameReversals(_ batch: Batch, group: ArraySlice<Int32>, scratch: GroupScratch) {
        for (index, slot, stripeID) in scratch.reversalTargets {
            let currency = batch.lines[Int(index)].currency
            if slot >= 0, scratch.exceededSlots.contains(slot) {
                let transfer = scratch.transfers[slot].amount
                batch.set(
                    Int(index), .rejected, .reversalExceedsTransfer,
                    "reversals of \(MinorUnits.format(scratch.netted[slot], currency: currency)) net into a transfer of \(MinorUnits.format(transfer, currency: currency)) to \(batch.text(scratch.transfers[slot].payee)): more than it"
                )
            } else if slot < 0, let left = scratch.exceededTransfers[stripeID] {
                batch.set(
                    Int(index), .rejected, .reversalExceedsTransfer,
                    "reversals of \(MinorUnits.format(scratch.reversing[stripeID, default: 0], currency: currency)) exceed what is left of transfer \(stripeID) (\(MinorUnits.format(left, currency: currency)))"
                )
            }
        }
        for (index, transfer) in scratch.wrongCurrency {
            let line = batch.lines[Int(index)]
            batch.set(
                Int(index), .rejected, .currencyMismatch,
                "transfer \(transfer.stripeID) moved in \(transfer.currency.uppercased()) and Stripe reverses it in that "
                    + "currency, not in \(line.currency.code.uppercased()) as this line says"
            )
        }
        for (index, transfer) in scratch.wrongDestination {
            let line = batch.lines[Int(index)]
            batch.set(
                Int(index), .rejected, .reversalTargetUnknown,
                "transfer \(transfer.stripeID) went to \(transfer.destination), not to \(batch.text(line.payee)) as this line "
                    + "says: Stripe would take the money back from \(transfer.destination)"
            )
        }
        for index in scratch.targetUnknown {
            let line = batch.lines[Int(index)]
            batch.set(
                Int(index), .rejected, .reversalTargetUnknown,
                "no transfer to \(batch.text(line.payee)) in group \(batch.text(line.group)) in this run or in the ledger"
            )
        }
        rejectGroup(batch, group: group)
    }

    /// Why a reversal without `transfer` that has no transfer to take from yet waits for one
    /// (nil: there is none to wait for): a transfer line of its group deferred in this run (it
    /// nets into it once due), or a transfer the ledger sent whose outcome is not known yet
    /// (the run that resolves it at Stripe records it; the line is back the run after). Only
    /// the reversal waits: the order's other lines do not depend on it.
    private func waitForTarget(of line: OrderLine, in group: ArraySlice<Int32>, batch: Batch) -> String? {
        if let deferred = deferredTarget(of: line, in: group, batch: batch) {
            return
                "the transfer it reverses (line \(batch.text(batch.lines[Int(deferred)].lineID))) waits in this run; the reversal waits with it"
        }
        let (group, destination, currency) = (batch.text(line.group), batch.text(line.payee), line.currency.code)
        let charge = line.charge.isNone ? nil : batch.text(line.charge)
        let unsettled =
            history?.unsettledTransfer(group: group, destination: destination, currency: currency, charge: charge)
            ?? history?.unsettledTransfer(group: group, destination: destination, currency: currency, charge: nil)
        guard let unsettled else { return nil }
        return
            "transfer \(unsettled) to \(batch.text(line.payee)) in group \(batch.text(line.group)) was sent and its outcome is not known yet; the reversal waits until a run has resolved it at Stripe"
    }

    /// A transfer line of the reversal's group to its destination, in its currency (and on its
    /// charge when it names one), that is deferred in this run: the reversal waits with it.
    private func deferredTarget(of line: OrderLine, in group: ArraySlice<Int32>, batch: Batch) -> Int32? {
        group.first { index in
            let candidate = batch.lines[Int(index)]
            return candidate.kind == .transfer && candidate.status == .deferred && candidate.payee == line.payee
                && candidate.currency == line.currency && (line.charge.isNone || candidate.charge == line.charge)
        }
    }

    /// The transfer the ledger recorded that a reversal without `transfer`, with none of this
    /// run's to net into, reverses: of its group, destination and currency, and funded by the
    /// charge the line names (audit 87 F1: the order's transfer with the most left was taken,
    /// though funded by another charge). When the ledger has none on that charge, and no
    /// transfer on it may yet exist (a line of the group deferred in this run, or one sent whose
    /// outcome is not known yet: the reversal waits for it; audit 88 F1: the transfer on
    /// another charge was reversed at once), the one of its group and destination as SPEC
    /// says: a transfer made without the charge, say.
    private func ledgerTarget(of line: OrderLine, in lines: ArraySlice<Int32>, batch: Batch) -> RecordedTransfer? {
        guard let history else { return nil }
        let (group, destination, currency) = (batch.text(line.group), batch.text(line.payee), line.currency.code)
        guard !line.charge.isNone else {
            return history.recordedTransfer(group: group, destination: destination, currency: currency, charge: nil)
        }
        let charge = batch.text(line.charge)
        if let funded = history.recordedTransfer(
            group: group, destination: destination, currency: currency, charge: charge)
        {
            return funded
        }
        guard deferredTarget(of: line, in: lines, batch: batch) == nil,
            history.unsettledTransfer(group: group, destination: destination, currency: currency, charge: charge) == nil
        else { return nil }
        return history.recordedTransfer(group: group, destination: destination, currency: currency, charge: nil)
    }

    /// The transfer of this run a reversal without `transfer` nets into: same destination and
    /// currency, and its charge when the reversal names one. When the reversal names none and
    /// the group pays that destination from several charges, the charge whose id sorts first
    /// (bytes; no charge first), so that the line order never changes what is sent.
    private func nettingTarget(of line: OrderLine, in transfers: [PlanRow], batch: Batch) -> Int? {
        var best: Int? = nil
        for slot in transfers.indices {
            let transfer = transfers[slot]
            guard transfer.payee == line.payee, transfer.currency == line.currency,
                line.charge.isNone || transfer.charge == line.charge
            else { continue }
            if let current = best {
                let earlier = batch.symbols.withBytes(transfer.charge) { candidate in
                    batch.symbols.withBytes(transfers[current].charge) { candidate.lexicographicallyPrecedes($0) }
                }
                if earlier { best = slot }
            } else {
                best = slot
            }
        }
        return best
    }

    /// Payouts: one per recipient, payout method and currency (per-recipient), or one per line.
    /// A line whose charge must be looked up first (`lookups`, by line: the charge) is paid
    /// alone, as its order's (the look-up stops its order, and no other order's line with it).
    private func formPayouts(_ batch: Batch, lines: [Int32], lookups: [Int32: Symbol]) -> Formed {
        var instructions: [PlanRow] = []
        var instructionOfLine: [Int32] = []
        // Per recipient symbol, the first of its payout instructions; others chain through `next`.
        let headOfRecipient = SymbolSlots()
        var next: [Int32] = []
        for index in lines {
            let line = batch.lines[Int(index)]
            guard line.status == .planned else { continue }
            let lookup = lookups.isEmpty ? nil : lookups[index]
            if options.payouts == .perRecipient, lookup == nil {
                var candidate = headOfRecipient[line.payee]
                while candidate >= 0 {
                    let existing = instructions[Int(candidate)]
                    if existing.payoutMethod == line.payoutMethod && existing.currency == line.currency { break }
                    candidate = next[Int(candidate)]
                }
                if candidate >= 0 {
                    instructions[Int(candidate)].amount += line.amount
                    instructionOfLine.append(candidate)
                    continue
                }
                next.append(headOfRecipient[line.payee])
                headOfRecipient.set(line.payee, Int32(instructions.count))
            } else if options.payouts == .perRecipient {
                // Its order's own payout: in no recipient's chain, and `next` keeps one entry
                // per instruction (audit 33 O7: without it, a later payout of the recipient on
                // another method followed a wrong link, and the plan trapped).
                next.append(-1)
            }
            var instruction = PlanRow(
                kind: .payout, group: options.payouts == .perRecipient && lookup == nil ? .none : line.group,
                payee: line.payee, currency: line.currency)
            if let lookup {
                instruction.target = lookup
                instruction.needsChargeLookup = true
            }
            instruction.payoutMethod = line.payoutMethod
            instruction.amount = line.amount
            instructionOfLine.append(Int32(instructions.count))
            instructions.append(instruction)
        }
        // Lines of each payout, contiguous and in input order (a counting sort).
        var counts = [Int32](repeating: 0, count: instructions.count + 1)
        for owner in instructionOfLine { counts[Int(owner) + 1] += 1 }
        for slot in instructions.indices { counts[slot + 1] += counts[slot] }
        var formed = Formed()
        formed.lines = [Int32](repeating: 0, count: instructionOfLine.count)
        var cursor = counts
        var position = 0
        for index in lines where batch.lines[Int(index)].status == .planned {
            let owner = Int(instructionOfLine[position])
            formed.lines[Int(cursor[owner])] = index
            cursor[owner] += 1
            position += 1
        }
        for slot in instructions.indices {
            instructions[slot].linesStart = Int(counts[slot])
            instructions[slot].linesCount = Int(counts[slot + 1] - counts[slot])
        }
        formed.instructions = instructions
        return formed
    }

    /// Appends a formed instruction to the plan (its id comes later, ``identify(_:)``).
    private func append(_ instruction: PlanRow, _ lines: ArraySlice<Int32>, to plan: SettlementPlan) {
        let batch = plan.batch
        // A group rejected after this instruction was formed (a later reversal) drops it.
        if lines.contains(where: { batch.lines[Int($0)].status != .planned }) { return }
        var instruction = instruction
        instruction.attempt = 1
        instruction.linesStart = plan.instructionLines.count
        instruction.linesCount = lines.count
        plan.instructionLines.append(contentsOf: lines)
        let position = Int32(plan.instructions.count)
        for index in lines { plan.instructionOfLine[Int(index)] = position }
        plan.instructions.append(instruction)
    }
}

extension Planner.ChargeFacts {
    /// Merges one line's charge columns; an empty value never disagrees, and amounts compare
    /// as numbers (thousandths: a line need not say the charge's currency).
    mutating func merge(_ line: OrderLine, batch: Batch) {
        // Built only when the lines disagree.
        var lines: String {
            switch key {
            case .named(let charge): "lines naming charge \(batch.text(charge))"
            case .paymentIntent(let intent): "lines of payment intent \(batch.text(intent))"
            case .group(let group): "lines of group \(batch.text(group))"
            }
        }
        let rank = Self.currencyRank(line)
        if let known = lineCurrency, rank == lineCurrencyRank {
            // Same rank as a transfer that counts: both are transfers that count.
            if line.kind == .transfer, line.status != .rejected, known != line.currency {
                transfersDisagreeOnCurrency = true
            }
            if Self.stricter(line.currency, than: known) { lineCurrency = line.currency }
        } else if lineCurrency == nil || rank > lineCurrencyRank {
            lineCurrency = line.currency
            lineCurrencyRank = rank
        }
        // Where lines disagree, what is kept is the strict side, never the first line's: the
        // lines on the charge are rejected, and a line the ledger settled that draws on it (its
        // group) sees the same charge whatever the line order.
        if line.chargeAmount >= 0 {
            if amount >= 0, amount != line.chargeAmount, mismatch == nil {
                mismatch = "\(lines) disagree on charge_amount"
            }
            if amount < 0 || line.chargeAmount < amount { amount = line.chargeAmount }
        }
        if line.chargeCurrencyGiven {
            if let known = currency, known != line.chargeCurrency {
                if mismatch == nil { mismatch = "\(lines) disagree on charge_currency" }
                if Self.stricter(line.chargeCurrency, than: known) { currency = line.chargeCurrency }
            }
            if currency == nil { currency = line.chargeCurrency }
        }
        if line.chargeStatus != .unknown {
            if status != .unknown, status != line.chargeStatus, mismatch == nil {
                mismatch = "\(lines) disagree on charge_status"
            }
            // failed, then pending, then succeeded.
            if status == .unknown || line.chargeStatus == .failed || status == .succeeded { status = line.chargeStatus }
        }
        // The largest fee stated, whatever the line order (docs/RULES.md; audit 57 F1: the
        // first line's was kept, and charges.csv's fee and retained followed the line order).
        if line.chargeFee > fee { fee = line.chargeFee }
        if !line.paymentMethodType.isNone, line.paymentMethodType != paymentMethodType,
            paymentMethodType.isNone
                || (batch.isBankDebit(line.paymentMethodType) && !batch.isBankDebit(paymentMethodType))
        {
            // A bank debit among the types stated: waiting is the safe side.
            paymentMethodType = line.paymentMethodType
        }
    }

    /// How much a line's currency tells of its charge's, when no line states charge_currency:
    /// a transfer's is the charge's (they must be equal), a reversal's that of the transfer it
    /// takes back, a payout's only the financial account's (USD); a rejected line's may be
    /// no currency it was read in, and tells least.
    static func currencyRank(_ line: OrderLine) -> UInt8 {
        guard line.status != .rejected else { return 0 }
        switch line.kind {
        case .transfer: return 3
        case .reversal: return 2
        case .payout: return 1
        }
    }

    /// Of two currencies lines of one rank are in (transfers in two currencies on a charge no
    /// line states the currency of: an export that contradicts itself), the one that reads the
    /// charge's amount as fewer minor units, so that over-allocation errs on the side of moving
    /// less; then the lower code. Never the line order: the plan is the same in any order.
    static func stricter(_ candidate: Currency, than known: Currency) -> Bool {
        func unitsPerMajor(_ currency: Currency) -> Int {
            switch currency.exponent {
            case .zero: 1
            case .two, .wholeTimesHundred: 100
            case .three: 1000
            }
        }
        let (mine, theirs) = (unitsPerMajor(candidate), unitsPerMajor(known))
        return mine != theirs ? mine < theirs : candidate < known
    }

    /// The merged amount and fee, from thousandths to minor units of the charge's currency;
    /// one that is not an amount in it is unknown (the lines stating it are rejected
    /// `charge_invalid`, ``inexactAmount(of:batch:)``).
    mutating func resolveAmounts() {
        let currency = inCurrency
        if amount >= 0, case .success(let minor) = MinorUnits.minor(thousandths: amount, currency: currency) {
            amount = minor
        } else {
            amount = -1
        }
        if fee >= 0, case .success(let minor) = MinorUnits.minor(thousandths: fee, currency: currency, allowZero: true)
        {
            fee = minor
        } else {
            fee = -1
        }
    }

    /// Why a line's charge_amount or charge_fee, given without charge_currency, is not an amount
    /// in the charge's currency (nil: it is, or the line states one; a line stating the currency
    /// was checked in it when read). Stripe's facts replace the columns: they are not checked.
    func inexactAmount(of line: OrderLine, batch: Batch) -> String? {
        guard !line.chargeCurrencyGiven, !fromStripe else { return nil }
        let currency = inCurrency
        // Called for every line on a charge: no array of the two columns, no text unless needed.
        func inexact(_ column: String, _ value: Int64, allowZero: Bool) -> String? {
            guard value >= 0,
                case .failure = MinorUnits.minor(thousandths: value, currency: currency, allowZero: allowZero)
            else { return nil }
            return
                "\(column) \(MinorUnits.formatThousandths(value)) is not an amount in \(currency.code.uppercased()), the currency of \(key.name(batch))"
        }
        return inexact("charge_amount", line.chargeAmount, allowZero: false)
            ?? inexact("charge_fee", line.chargeFee, allowZero: true)
    }

    /// Stripe's answer replaces the export's columns: they no longer count, even to disagree.
    /// Stripe said the charge failed, and nothing else of it is known.
    mutating func failedAtStripe() {
        status = .failed
        mismatch = nil
        fromStripe = true
    }

    mutating func adopt(_ fact: StripeFacts.Charge, batch: Batch) {
        amount = fact.amount
        currency = fact.currency
        status = fact.status
        if let stripeFee = fact.fee { fee = stripeFee }
        if let type = fact.paymentMethodType { paymentMethodType = batch.symbols.intern(type) }
        mismatch = nil
        fromStripe = true
    }
}
