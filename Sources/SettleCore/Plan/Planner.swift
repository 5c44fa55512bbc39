/// Applies the group rules of SPEC §3 and forms the instructions.
///
/// Pure: everything it knows of earlier runs comes through ``SettlementHistory``.
public struct Planner {
    public let options: RuleOptions
    public let history: (any SettlementHistory)?

    public init(options: RuleOptions, history: (any SettlementHistory)?) {
        self.options = options
        self.history = history
    }

    /// What the export says about one charge, merged over the lines naming it.
    struct ChargeFacts {
        var amount: Int64 = -1
        var currency: Currency? = nil
        var status: ChargeStatus = .unknown
        var fee: Int64 = -1
        var paymentMethodType: Symbol = .none
        var mismatch: String? = nil
        /// The first line's currency, when no line states charge_currency.
        var lineCurrency: Currency? = nil
        var transfers: Int64 = 0
    }

    public func plan(_ batch: Batch) -> SettlementPlan {
        let plan = SettlementPlan(batch: batch, options: options)
        if let history { applyHistory(batch, plan: plan, history: history) }
        var charges = mergeCharges(batch)
        applyChargeRules(batch, charges: &charges)
        plan.charges = batch.chargeOrder(charges.keys).compactMap { symbol in
            let facts = charges[symbol]!
            guard facts.amount >= 0 else { return nil }
            return ChargeTotal(currency: facts.currency ?? facts.lineCurrency ?? .usd, amount: facts.amount, fee: max(0, facts.fee))
        }
        let groups = groupIndex(batch)
        var transfers: [Instruction] = []
        var reversals: [Instruction] = []
        var payoutLines: [Int32] = []
        var lineLists: [[Int32]] = []  // per formed instruction, in formation order
        var reversalLists: [[Int32]] = []
        for group in groups {
            applyGroupRules(batch, group: group, charges: charges)
            formGroup(batch, group: group, charges: charges, transfers: &transfers, transferLines: &lineLists,
                      reversals: &reversals, reversalLines: &reversalLists, payoutLines: &payoutLines)
        }
        let (payouts, payoutLists) = formPayouts(batch, lines: payoutLines)
        // Execution order: transfers, then reversals, then payouts.
        for (instruction, lines) in zip(transfers, lineLists) { append(instruction, lines, to: plan) }
        for (instruction, lines) in zip(reversals, reversalLists) { append(instruction, lines, to: plan) }
        for (instruction, lines) in zip(payouts, payoutLists) { append(instruction, lines, to: plan) }
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
                    batch.set(index, .rejected, .lineConflict,
                              "the ledger settled line_id \(batch.text(line.lineID)) earlier with other content (amount, payee, charge or group differ)")
                }
                continue
            }
            switch known.state {
            case .settled:
                batch.set(index, .alreadySettled, .none, "settled by an earlier run")
                if let id = known.stripeID { plan.knownStripeIDs[index] = id }
            case .pending:
                batch.set(index, .unknown, .none,
                          "an earlier run sent this line and its outcome is not known yet; the next apply resolves it")
            case .failed:
                break
            }
        }
    }

    // MARK: - Charges

    private func mergeCharges(_ batch: Batch) -> [Symbol: ChargeFacts] {
        var charges: [Symbol: ChargeFacts] = [:]
        for line in batch.lines where !line.charge.isNone && line.status != .rejected {
            var facts = charges[line.charge] ?? ChargeFacts()
            if facts.lineCurrency == nil { facts.lineCurrency = line.currency }
            let name = batch.text(line.charge)
            if line.chargeAmount >= 0 {
                if facts.amount >= 0, facts.amount != line.chargeAmount, facts.mismatch == nil {
                    facts.mismatch = "lines naming charge \(name) disagree on charge_amount"
                }
                if facts.amount < 0 { facts.amount = line.chargeAmount }
            }
            if line.chargeCurrencyGiven {
                if let known = facts.currency, known != line.chargeCurrency, facts.mismatch == nil {
                    facts.mismatch = "lines naming charge \(name) disagree on charge_currency"
                }
                if facts.currency == nil { facts.currency = line.chargeCurrency }
            }
            if line.chargeStatus != .unknown {
                if facts.status != .unknown, facts.status != line.chargeStatus, facts.mismatch == nil {
                    facts.mismatch = "lines naming charge \(name) disagree on charge_status"
                }
                if facts.status == .unknown { facts.status = line.chargeStatus }
            }
            if line.chargeFee >= 0, facts.fee < 0 { facts.fee = line.chargeFee }
            if !line.paymentMethodType.isNone, facts.paymentMethodType.isNone {
                facts.paymentMethodType = line.paymentMethodType
            }
            charges[line.charge] = facts
        }
        return charges
    }

    /// charge_mismatch, charge_failed, currency_mismatch, over_allocated: per line, before groups.
    private func applyChargeRules(_ batch: Batch, charges: inout [Symbol: ChargeFacts]) {
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, !line.charge.isNone, let facts = charges[line.charge] else { continue }
            if let mismatch = facts.mismatch {
                batch.set(index, .rejected, .chargeMismatch, mismatch)
            } else if facts.status == .failed {
                batch.set(index, .rejected, .chargeFailed, "charge \(batch.text(line.charge)) failed")
            } else if line.kind == .transfer, let currency = facts.currency, currency != line.currency {
                batch.set(index, .rejected, .currencyMismatch,
                          "the transfer is in \(line.currency.code.uppercased()) but charge \(batch.text(line.charge)) is in \(currency.code.uppercased())")
            } else if line.kind == .transfer {
                charges[line.charge]!.transfers += line.amount
            }
        }
        // Over-allocation: this batch (deferred lines included) plus earlier runs.
        var ledgerTransferred: [Symbol: Int64] = [:]
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard line.status == .planned, line.kind == .transfer, !line.charge.isNone,
                let facts = charges[line.charge], facts.amount >= 0
            else { continue }
            let earlier: Int64
            if let known = ledgerTransferred[line.charge] {
                earlier = known
            } else {
                earlier = history?.transferred(charge: batch.text(line.charge), currency: line.currency.code) ?? 0
                ledgerTransferred[line.charge] = earlier
            }
            if facts.transfers + earlier > facts.amount {
                let currency = facts.currency ?? line.currency
                batch.set(index, .rejected, .overAllocated,
                          "transfers on charge \(batch.text(line.charge)) add up to \(MinorUnits.format(facts.transfers + earlier, currency: currency)) \(currency.code.uppercased()), more than the charge's \(MinorUnits.format(facts.amount, currency: currency))")
            }
        }
    }

    // MARK: - Groups

    /// Line indices per group, groups in order of their first line. Duplicates stay outside.
    private func groupIndex(_ batch: Batch) -> [[Int32]] {
        var slot: [Symbol: Int] = [:]
        var groups: [[Int32]] = []
        for index in batch.lines.indices {
            let line = batch.lines[index]
            if LineChecker.isDuplicate(line) { continue }
            if line.group.isNone {
                groups.append([Int32(index)])
                continue
            }
            if let existing = slot[line.group] {
                groups[existing].append(Int32(index))
            } else {
                slot[line.group] = groups.count
                groups.append([Int32(index)])
            }
        }
        return groups
    }

    private func isPending(_ line: OrderLine, _ batch: Batch, _ charges: [Symbol: ChargeFacts]) -> Bool {
        var status = line.chargeStatus
        var type = line.paymentMethodType
        if !line.charge.isNone, let facts = charges[line.charge] {
            if facts.status != .unknown { status = facts.status }
            if !facts.paymentMethodType.isNone { type = facts.paymentMethodType }
        }
        if status == .pending { return true }
        if status != .succeeded, !type.isNone, bankDebitTypes.contains(batch.text(type)) { return true }
        return false
    }

    /// A group is atomic; rejection beats deferral; charge_pending beats scheduled.
    private func applyGroupRules(_ batch: Batch, group: [Int32], charges: [Symbol: ChargeFacts]) {
        if group.contains(where: { batch.lines[Int($0)].status == .rejected }) {
            rejectGroup(batch, group: group)
            return
        }
        if group.contains(where: { isPending(batch.lines[Int($0)], batch, charges) }) {
            let charge = group.lazy.map { batch.lines[Int($0)].charge }.first { !$0.isNone }
            let name = charge.map { "charge \(batch.text($0))" } ?? "the order's charge"
            for index in group where batch.lines[Int(index)].status == .planned {
                batch.set(Int(index), .deferred, .chargePending, "\(name) has not succeeded yet; the line waits for it")
            }
            return
        }
        for index in group {
            let line = batch.lines[Int(index)]
            if line.status == .planned, line.transferOn != .min, line.transferOn > options.asOf {
                batch.set(Int(index), .deferred, .scheduled,
                          "transfer_on \(CivilDate.format(line.transferOn)) is after the settlement date \(CivilDate.format(options.asOf))")
            }
        }
    }

    private func rejectGroup(_ batch: Batch, group: [Int32]) {
        let culprit = group.first { batch.lines[Int($0)].status == .rejected }!
        let culpritLine = batch.lines[Int(culprit)]
        let message = "line \(batch.text(culpritLine.lineID)) of group \(batch.text(culpritLine.group)) was rejected (\(culpritLine.reason.code)); the group moves together or not at all"
        for index in group {
            let status = batch.lines[Int(index)].status
            if status == .planned || status == .deferred {
                batch.set(Int(index), .rejected, .groupRejected, message)
            }
        }
    }

    // MARK: - Forming instructions

    private func formGroup(
        _ batch: Batch, group: [Int32], charges: [Symbol: ChargeFacts],
        transfers: inout [Instruction], transferLines: inout [[Int32]],
        reversals: inout [Instruction], reversalLines: inout [[Int32]], payoutLines: inout [Int32]
    ) {
        var groupTransfers: [Instruction] = []
        var groupTransferLines: [[Int32]] = []
        var groupReversals: [Instruction] = []
        var groupReversalLines: [[Int32]] = []
        var groupPayouts: [Int32] = []
        var pendingReversals: [Int32] = []
        for index in group {
            let line = batch.lines[Int(index)]
            guard line.status == .planned else { continue }
            switch line.kind {
            case .transfer:
                if let slot = groupTransfers.firstIndex(where: {
                    $0.payee == line.payee && $0.charge == line.charge && $0.currency == line.currency
                }) {
                    groupTransfers[slot].amount += line.amount
                    groupTransferLines[slot].append(index)
                } else {
                    var instruction = Instruction(kind: .transfer, group: line.group, payee: line.payee,
                                                  currency: line.currency)
                    instruction.charge = line.charge
                    instruction.amount = line.amount
                    if !line.charge.isNone, let facts = charges[line.charge], facts.amount < 0,
                        facts.status == .unknown
                    {
                        instruction.needsChargeLookup = true
                    }
                    groupTransfers.append(instruction)
                    groupTransferLines.append([index])
                }
            case .payout:
                groupPayouts.append(index)
            case .reversal:
                if !line.transfer.isNone {
                    var instruction = Instruction(kind: .reversal, group: line.group, payee: line.payee,
                                                  currency: line.currency)
                    instruction.target = batch.text(line.transfer)
                    instruction.amount = line.amount
                    groupReversals.append(instruction)
                    groupReversalLines.append([index])
                } else {
                    pendingReversals.append(index)
                }
            }
        }
        // Reversals without a transfer id net into this run's transfer, else reverse the ledger's.
        var netted = [Int64](repeating: 0, count: groupTransfers.count)
        var ledgerReversalSlot: [String: Int] = [:]
        for index in pendingReversals {
            let line = batch.lines[Int(index)]
            if let slot = groupTransfers.firstIndex(where: {
                $0.payee == line.payee && $0.currency == line.currency && (line.charge.isNone || $0.charge == line.charge)
            }) {
                netted[slot] += line.amount
                groupTransferLines[slot].append(index)
                if netted[slot] > groupTransfers[slot].amount {
                    failGroup(batch, group: group, culprit: index, .reversalExceedsTransfer,
                              "the reversal of \(MinorUnits.format(line.amount, currency: line.currency)) is larger than what is left of the transfer it nets into (\(MinorUnits.format(groupTransfers[slot].amount - netted[slot] + line.amount, currency: line.currency)))")
                    return
                }
                continue
            }
            let recorded = history?.recordedTransfer(group: batch.text(line.group), destination: batch.text(line.payee),
                                                     currency: line.currency.code)
            guard let recorded else {
                failGroup(batch, group: group, culprit: index, .reversalTargetUnknown,
                          "no transfer to \(batch.text(line.payee)) in group \(batch.text(line.group)) in this run or in the ledger")
                return
            }
            // Reversal lines of one group and destination aimed at the ledger's transfer are one call.
            let slot: Int
            if let existing = ledgerReversalSlot[recorded.stripeID] {
                slot = existing
                groupReversals[slot].amount += line.amount
                groupReversalLines[slot].append(index)
            } else {
                var instruction = Instruction(kind: .reversal, group: line.group, payee: line.payee, currency: line.currency)
                instruction.target = recorded.stripeID
                instruction.amount = line.amount
                slot = groupReversals.count
                ledgerReversalSlot[recorded.stripeID] = slot
                groupReversals.append(instruction)
                groupReversalLines.append([index])
            }
            if groupReversals[slot].amount > recorded.remaining {
                failGroup(batch, group: group, culprit: index, .reversalExceedsTransfer,
                          "reversals of \(MinorUnits.format(groupReversals[slot].amount, currency: line.currency)) exceed what is left of transfer \(recorded.stripeID) (\(MinorUnits.format(recorded.remaining, currency: line.currency)))")
                return
            }
        }
        for slot in groupTransfers.indices {
            groupTransfers[slot].amount -= netted[slot]
            if groupTransfers[slot].amount == 0 {
                for index in groupTransferLines[slot] {
                    batch.set(Int(index), .netted, .none, "the transfer and its reversal in this run cancel out; nothing to send")
                }
                continue
            }
            transfers.append(groupTransfers[slot])
            transferLines.append(groupTransferLines[slot])
        }
        reversals.append(contentsOf: groupReversals)
        reversalLines.append(contentsOf: groupReversalLines)
        payoutLines.append(contentsOf: groupPayouts)
    }

    private func failGroup(_ batch: Batch, group: [Int32], culprit: Int32, _ code: ReasonCode, _ message: String) {
        batch.set(Int(culprit), .rejected, code, message)
        rejectGroup(batch, group: group)
    }

    private func formPayouts(_ batch: Batch, lines: [Int32]) -> ([Instruction], [[Int32]]) {
        var instructions: [Instruction] = []
        var lists: [[Int32]] = []
        var slots: [PayoutKey: Int] = [:]
        for index in lines {
            let line = batch.lines[Int(index)]
            guard line.status == .planned else { continue }
            if options.payouts == .perRecipient {
                let key = PayoutKey(recipient: line.payee, method: line.payoutMethod, currency: line.currency)
                if let slot = slots[key] {
                    instructions[slot].amount += line.amount
                    lists[slot].append(index)
                    continue
                }
                slots[key] = instructions.count
            }
            var instruction = Instruction(kind: .payout, group: options.payouts == .perRecipient ? .none : line.group,
                                          payee: line.payee, currency: line.currency)
            instruction.payoutMethod = line.payoutMethod
            instruction.amount = line.amount
            instructions.append(instruction)
            lists.append([index])
        }
        return (instructions, lists)
    }

    private struct PayoutKey: Hashable {
        var recipient: Symbol
        var method: Symbol
        var currency: Currency
    }

    private func append(_ instruction: Instruction, _ lines: [Int32], to plan: SettlementPlan) {
        let batch = plan.batch
        // A group rejected after this instruction was formed (a later reversal) drops it.
        if lines.contains(where: { batch.lines[Int($0)].status != .planned }) { return }
        var instruction = instruction
        instruction.id = InstructionID.make(
            kind: instruction.kind, group: batch.text(instruction.group), payee: batch.text(instruction.payee),
            charge: instruction.kind == .reversal ? instruction.target : batch.text(instruction.charge),
            currency: instruction.currency, amount: instruction.amount,
            lineIDs: lines.map { batch.text(batch.lines[Int($0)].lineID) })
        instruction.attempt = (history?.attempts(instruction: instruction.id) ?? 0) + 1
        instruction.linesStart = plan.instructionLines.count
        instruction.linesCount = lines.count
        plan.instructionLines.append(contentsOf: lines)
        for index in lines { plan.instructionOfLine[Int(index)] = Int32(plan.instructions.count) }
        plan.instructions.append(instruction)
    }
}
