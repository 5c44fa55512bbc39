import SettleDigest

/// Applies the group rules of SPEC §3 and forms the instructions.
///
/// Pure: everything it knows of earlier runs comes through ``SettlementHistory``. Built for
/// millions of lines: tables are arrays indexed by symbol, groups a counting sort, and the
/// per-group scratch space is reused.
public struct Planner {
    public let options: RuleOptions
    public let history: (any SettlementHistory)?

    public init(options: RuleOptions, history: (any SettlementHistory)?) {
        self.options = options
        self.history = history
    }

    /// What the export says about one charge, merged over the lines naming it.
    struct ChargeFacts {
        var symbol: Symbol
        var amount: Int64 = -1
        var currency: Currency? = nil
        var status: ChargeStatus = .unknown
        var fee: Int64 = -1
        var paymentMethodType: Symbol = .none
        var mismatch: String? = nil
        /// The first line's currency, when no line states charge_currency.
        var lineCurrency: Currency? = nil
        var transfers: Int64 = 0
        var earlier: Int64 = -1

        init(symbol: Symbol) { self.symbol = symbol }
    }

    /// Charges by symbol, in order of first appearance.
    struct ChargeTable {
        var slotOfSymbol: [Int32]
        var facts: [ChargeFacts] = []

        init(symbols: Int) { slotOfSymbol = [Int32](repeating: -1, count: symbols + 1) }

        func slot(_ symbol: Symbol) -> Int? {
            let slot = slotOfSymbol[Int(symbol.raw)]
            return slot < 0 ? nil : Int(slot)
        }

        mutating func slotCreating(_ symbol: Symbol) -> Int {
            if let slot = slot(symbol) { return slot }
            slotOfSymbol[Int(symbol.raw)] = Int32(facts.count)
            facts.append(ChargeFacts(symbol: symbol))
            return facts.count - 1
        }

        subscript(_ symbol: Symbol) -> ChargeFacts? { slot(symbol).map { facts[$0] } }
    }

    /// Instructions of one kind with their lines, contiguous per instruction.
    struct Formed {
        var instructions: [Instruction] = []
        var lines: [Int32] = []

        mutating func add(_ instruction: Instruction, lines members: some Sequence<Int32>) {
            var instruction = instruction
            instruction.linesStart = lines.count
            lines.append(contentsOf: members)
            instruction.linesCount = lines.count - instruction.linesStart
            instructions.append(instruction)
        }
    }

    public func plan(_ batch: Batch) -> SettlementPlan {
        let plan = SettlementPlan(batch: batch, options: options)
        if let history { applyHistory(batch, plan: plan, history: history) }
        var charges = mergeCharges(batch)
        applyChargeRules(batch, charges: &charges)
        plan.charges = charges.facts.compactMap { facts in
            guard facts.amount >= 0 else { return nil }
            return ChargeTotal(
                currency: facts.currency ?? facts.lineCurrency ?? .usd, amount: facts.amount,
                fee: max(0, facts.fee))
        }
        let (order, starts) = groupIndex(batch)
        var transfers = Formed()
        var reversals = Formed()
        var payoutLines: [Int32] = []
        var scratch = GroupScratch()
        for group in 0..<(starts.count - 1) {
            let members = order[Int(starts[group])..<Int(starts[group + 1])]
            applyGroupRules(batch, group: members, charges: charges)
            formGroup(
                batch, group: members, charges: charges, scratch: &scratch, transfers: &transfers,
                reversals: &reversals, payoutLines: &payoutLines)
        }
        let payouts = formPayouts(batch, lines: payoutLines)
        // Execution order: transfers, then reversals, then payouts.
        let hasher = SHA256()
        var keyBytes: [UInt8] = []
        for formed in [transfers, reversals, payouts] {
            for instruction in formed.instructions {
                let lines = formed.lines[instruction.linesStart..<instruction.linesStart + instruction.linesCount]
                append(instruction, lines, to: plan, hasher: hasher, scratch: &keyBytes)
            }
        }
        return plan
    }

    // MARK: - Ledger

    private func applyHistory(_ batch: Batch, plan: SettlementPlan, history: any SettlementHistory) {
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, let known = history.line(batch.text(line.lineID)) else { continue }
            let content = LineContent.digest(batch, line)
            guard known.content == content else {
                if known.state != .failed {
                    batch.set(
                        index, .rejected, .lineConflict,
                        "the ledger settled line_id \(batch.text(line.lineID)) earlier with other content (amount, payee, charge or group differ)"
                    )
                }
                continue
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
    }

    // MARK: - Charges

    private func mergeCharges(_ batch: Batch) -> ChargeTable {
        var charges = ChargeTable(symbols: batch.symbols.count)
        batch.lines.withUnsafeBufferPointer { lines in
            for line in lines where !line.charge.isNone && line.status != .rejected {
                let slot = charges.slotCreating(line.charge)
                charges.facts[slot].merge(line, batch: batch)
            }
        }
        return charges
    }

    /// charge_mismatch, charge_failed, currency_mismatch, over_allocated: per line, before groups.
    private func applyChargeRules(_ batch: Batch, charges: inout ChargeTable) {
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, !line.charge.isNone, let slot = charges.slot(line.charge) else { continue }
            let facts = charges.facts[slot]
            if let mismatch = facts.mismatch {
                batch.set(index, .rejected, .chargeMismatch, mismatch)
            } else if facts.status == .failed {
                batch.set(index, .rejected, .chargeFailed, "charge \(batch.text(line.charge)) failed")
            } else if line.kind == .transfer, let currency = facts.currency, currency != line.currency {
                batch.set(
                    index, .rejected, .currencyMismatch,
                    "the transfer is in \(line.currency.code.uppercased()) but charge \(batch.text(line.charge)) is in \(currency.code.uppercased())"
                )
            } else if line.kind == .transfer {
                charges.facts[slot].transfers += line.amount
            }
        }
        // Over-allocation: this batch (deferred lines included) plus earlier runs.
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, line.kind == .transfer, !line.charge.isNone,
                let slot = charges.slot(line.charge), charges.facts[slot].amount >= 0
            else { continue }
            if charges.facts[slot].earlier < 0 {
                charges.facts[slot].earlier =
                    history?.transferred(charge: batch.text(line.charge), currency: line.currency.code) ?? 0
            }
            let facts = charges.facts[slot]
            if facts.transfers + facts.earlier > facts.amount {
                let currency = facts.currency ?? line.currency
                batch.set(
                    index, .rejected, .overAllocated,
                    "transfers on charge \(batch.text(line.charge)) add up to \(MinorUnits.format(facts.transfers + facts.earlier, currency: currency)) \(currency.code.uppercased()), more than the charge's \(MinorUnits.format(facts.amount, currency: currency))"
                )
            }
        }
    }

    // MARK: - Groups

    /// Lines per group, groups in order of their first line (a counting sort). Duplicates stay
    /// outside; a line without a group key is a group of its own.
    private func groupIndex(_ batch: Batch) -> (order: [Int32], starts: [Int32]) {
        var slotOfSymbol = [Int32](repeating: -1, count: batch.symbols.count + 1)
        var groupOfLine = [Int32](repeating: -1, count: batch.lines.count)
        var counts: [Int32] = []
        batch.lines.withUnsafeBufferPointer { lines in
            for index in lines.indices {
                let line = lines[index]
                if LineChecker.isDuplicate(line) { continue }
                var group: Int32
                if line.group.isNone {
                    group = Int32(counts.count)
                    counts.append(0)
                } else {
                    group = slotOfSymbol[Int(line.group.raw)]
                    if group < 0 {
                        group = Int32(counts.count)
                        slotOfSymbol[Int(line.group.raw)] = group
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
        var order = [Int32](repeating: 0, count: Int(starts[counts.count]))
        for index in groupOfLine.indices where groupOfLine[index] >= 0 {
            let group = Int(groupOfLine[index])
            order[Int(next[group])] = Int32(index)
            next[group] += 1
        }
        return (order, starts)
    }

    private func isPending(_ line: OrderLine, _ batch: Batch, _ charges: ChargeTable) -> Bool {
        var status = line.chargeStatus
        var type = line.paymentMethodType
        if !line.charge.isNone, let facts = charges[line.charge] {
            if facts.status != .unknown { status = facts.status }
            if !facts.paymentMethodType.isNone { type = facts.paymentMethodType }
        }
        if status == .pending { return true }
        if status != .succeeded, !type.isNone, batch.isBankDebit(type) { return true }
        return false
    }

    /// A group is atomic; rejection beats deferral; charge_pending beats scheduled.
    private func applyGroupRules(_ batch: Batch, group: ArraySlice<Int32>, charges: ChargeTable) {
        if group.contains(where: { batch.lines[Int($0)].status == .rejected }) {
            rejectGroup(batch, group: group)
            return
        }
        if group.contains(where: { isPending(batch.lines[Int($0)], batch, charges) }) {
            let charge = group.lazy.map { batch.lines[Int($0)].charge }.first { !$0.isNone }
            let name = charge.map { "charge \(batch.text($0))" } ?? "the order's charge"
            let message = batch.addMessage("\(name) has not succeeded yet; the line waits for it")
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
        let culprit = group.first { batch.lines[Int($0)].status == .rejected }!
        let culpritLine = batch.lines[Int(culprit)]
        let message = batch.addMessage(
            "line \(batch.text(culpritLine.lineID)) of group \(batch.text(culpritLine.group)) was rejected (\(culpritLine.reason.code)); the group moves together or not at all"
        )
        for index in group {
            let status = batch.lines[Int(index)].status
            if status == .planned || status == .deferred {
                batch.set(Int(index), .rejected, .groupRejected, message: message)
            }
        }
    }

    private func failGroup(
        _ batch: Batch, group: ArraySlice<Int32>, culprit: Int32, _ code: ReasonCode, _ message: String
    ) {
        batch.set(Int(culprit), .rejected, code, message)
        rejectGroup(batch, group: group)
    }

    // MARK: - Forming instructions

    /// Space reused from one group to the next.
    struct GroupScratch {
        var transfers: [Instruction] = []
        var netted: [Int64] = []
        var reversals: [Instruction] = []
        /// (slot, line): which instruction of the group a line belongs to.
        var transferMembers: [(slot: Int32, line: Int32)] = []
        var reversalMembers: [(slot: Int32, line: Int32)] = []
        var pendingReversals: [Int32] = []
        var payouts: [Int32] = []

        mutating func reset() {
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
        transfers: inout Formed, reversals: inout Formed, payoutLines: inout [Int32]
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
                    var instruction = Instruction(
                        kind: .transfer, group: line.group, payee: line.payee,
                        currency: line.currency)
                    instruction.charge = line.charge
                    instruction.amount = line.amount
                    if !line.charge.isNone, let facts = charges[line.charge], facts.amount < 0, facts.status == .unknown
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
                    var instruction = Instruction(
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
            if let slot = scratch.transfers.firstIndex(where: {
                $0.payee == line.payee && $0.currency == line.currency
                    && (line.charge.isNone || $0.charge == line.charge)
            }) {
                scratch.netted[slot] += line.amount
                scratch.transferMembers.append((Int32(slot), index))
                if scratch.netted[slot] > scratch.transfers[slot].amount {
                    failGroup(
                        batch, group: group, culprit: index, .reversalExceedsTransfer,
                        "the reversal of \(MinorUnits.format(line.amount, currency: line.currency)) is larger than what is left of the transfer it nets into (\(MinorUnits.format(scratch.transfers[slot].amount - scratch.netted[slot] + line.amount, currency: line.currency)))"
                    )
                    return
                }
                continue
            }
            let recorded = history?.recordedTransfer(
                group: batch.text(line.group), destination: batch.text(line.payee),
                currency: line.currency.code)
            guard let recorded else {
                failGroup(
                    batch, group: group, culprit: index, .reversalTargetUnknown,
                    "no transfer to \(batch.text(line.payee)) in group \(batch.text(line.group)) in this run or in the ledger"
                )
                return
            }
            // Reversal lines of one group and destination aimed at the ledger's transfer are one call.
            let slot: Int
            if let existing = ledgerReversalSlot[recorded.stripeID] {
                slot = existing
                scratch.reversals[slot].amount += line.amount
            } else {
                var instruction = Instruction(
                    kind: .reversal, group: line.group, payee: line.payee, currency: line.currency)
                instruction.target = batch.symbols.intern(recorded.stripeID)
                instruction.amount = line.amount
                slot = scratch.reversals.count
                ledgerReversalSlot[recorded.stripeID] = slot
                scratch.reversals.append(instruction)
            }
            scratch.reversalMembers.append((Int32(slot), index))
            if scratch.reversals[slot].amount > recorded.remaining {
                failGroup(
                    batch, group: group, culprit: index, .reversalExceedsTransfer,
                    "reversals of \(MinorUnits.format(scratch.reversals[slot].amount, currency: line.currency)) exceed what is left of transfer \(recorded.stripeID) (\(MinorUnits.format(recorded.remaining, currency: line.currency)))"
                )
                return
            }
        }
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
            transfers.add(instruction, lines: members)
        }
        for slot in scratch.reversals.indices {
            reversals.add(
                scratch.reversals[slot],
                lines: scratch.reversalMembers.lazy.filter { $0.slot == Int32(slot) }.map(\.line))
        }
        payoutLines.append(contentsOf: scratch.payouts)
    }

    /// Payouts: one per recipient, payout method and currency (per-recipient), or one per line.
    private func formPayouts(_ batch: Batch, lines: [Int32]) -> Formed {
        var instructions: [Instruction] = []
        var instructionOfLine: [Int32] = []
        // Per recipient symbol, the first of its payout instructions; others chain through `next`.
        var headOfRecipient = [Int32](
            repeating: -1, count: options.payouts == .perRecipient ? batch.symbols.count + 1 : 0)
        var next: [Int32] = []
        for index in lines {
            let line = batch.lines[Int(index)]
            guard line.status == .planned else { continue }
            if options.payouts == .perRecipient {
                var candidate = headOfRecipient[Int(line.payee.raw)]
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
                next.append(headOfRecipient[Int(line.payee.raw)])
                headOfRecipient[Int(line.payee.raw)] = Int32(instructions.count)
            }
            var instruction = Instruction(
                kind: .payout, group: options.payouts == .perRecipient ? .none : line.group,
                payee: line.payee, currency: line.currency)
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

    private func append(
        _ instruction: Instruction, _ lines: ArraySlice<Int32>, to plan: SettlementPlan,
        hasher: SHA256, scratch: inout [UInt8]
    ) {
        let batch = plan.batch
        // A group rejected after this instruction was formed (a later reversal) drops it.
        if lines.contains(where: { batch.lines[Int($0)].status != .planned }) { return }
        var instruction = instruction
        (instruction.digestHigh, instruction.digestLow) = InstructionID.make(
            instruction, lines: lines, batch: batch, hasher: hasher, scratch: &scratch)
        instruction.attempt = (history?.attempts(instruction: instruction.id) ?? 0) + 1
        instruction.linesStart = plan.instructionLines.count
        instruction.linesCount = lines.count
        plan.instructionLines.append(contentsOf: lines)
        let position = Int32(plan.instructions.count)
        for index in lines { plan.instructionOfLine[Int(index)] = position }
        plan.instructions.append(instruction)
    }
}

extension Planner.ChargeFacts {
    /// Merges one line's charge columns; an empty value never disagrees.
    mutating func merge(_ line: OrderLine, batch: Batch) {
        if lineCurrency == nil { lineCurrency = line.currency }
        if line.chargeAmount >= 0 {
            if amount >= 0, amount != line.chargeAmount, mismatch == nil {
                mismatch = "lines naming charge \(batch.text(symbol)) disagree on charge_amount"
            }
            if amount < 0 { amount = line.chargeAmount }
        }
        if line.chargeCurrencyGiven {
            if let known = currency, known != line.chargeCurrency, mismatch == nil {
                mismatch = "lines naming charge \(batch.text(symbol)) disagree on charge_currency"
            }
            if currency == nil { currency = line.chargeCurrency }
        }
        if line.chargeStatus != .unknown {
            if status != .unknown, status != line.chargeStatus, mismatch == nil {
                mismatch = "lines naming charge \(batch.text(symbol)) disagree on charge_status"
            }
            if status == .unknown { status = line.chargeStatus }
        }
        if line.chargeFee >= 0, fee < 0 { fee = line.chargeFee }
        if !line.paymentMethodType.isNone, paymentMethodType.isNone { paymentMethodType = line.paymentMethodType }
    }
}
