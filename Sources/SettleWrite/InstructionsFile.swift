public import SettleCore

/// `instructions.jsonl`: one JSON object per API call, in execution order
/// (docs/PLAN-FORMAT.md has every key). Written straight to bytes: a large run has millions.
public enum InstructionsFile {
    public static func write(path: String, plan: SettlementPlan) throws(WriteFailure) -> (sha256: String, rows: Int) {
        let file = try OutputFile(path: path)
        for instruction in plan.instructions {
            file.withBuffer { append(instruction, plan: plan, to: &$0) }
            file.endRow()
        }
        let sha = try file.commit()
        return (sha, file.rows)
    }

    /// One instruction as a JSON line.
    static func append(_ instruction: Instruction, plan: SettlementPlan, to out: inout [UInt8]) {
        let batch = plan.batch
        var json = JSON.Writer(out: out)
        out = []
        json.open()
        json.key("id"); json.instructionID(instruction)
        json.key("kind"); json.string(instruction.kind.name)
        json.key("method"); json.string("POST")
        json.key("path"); json.string(instruction.path(batch))
        json.key("idempotency_key"); json.string(instruction.idempotencyKey)
        json.key("stripe_context"); json.null()
        json.key("params")
        appendParams(instruction, plan: plan, to: &json)
        json.key("lines")
        json.openArray()
        for index in plan.lines(of: instruction) {
            let line = batch.lines[Int(index)]
            json.open()
            json.key("line_id"); json.symbol(line.lineID, batch)
            json.key("kind"); json.string(line.kind.name)
            json.key("amount_minor"); json.int(line.amount)
            json.key("content"); json.string(LineContent.digest(batch, line))
            json.key("spool")
            json.openArray()
            json.int(Int64(line.file)); json.int(Int64(line.spoolOffset)); json.int(Int64(line.spoolLength))
            json.closeArray()
            json.close()
        }
        json.closeArray()
        json.key("group"); json.symbol(instruction.group, batch)
        json.key("payee"); json.symbol(instruction.payee, batch)
        json.key("charge")
        if instruction.kind == .reversal { json.string("") } else { json.symbol(instruction.charge, batch) }
        json.key("currency"); json.string(instruction.currency.code)
        json.key("amount_minor"); json.int(instruction.amount)
        json.key("preflight")
        json.open()
        switch instruction.kind {
        case .transfer where instruction.needsChargeLookup:
            json.key("charge"); json.symbol(instruction.charge, batch)
        case .payout:
            json.key("payout_method"); json.symbol(instruction.payoutMethod, batch)
            json.key("recipient"); json.symbol(instruction.payee, batch)
        default: break
        }
        json.close()
        json.close()
        swap(&out, &json.out)
        out.append(0x0A)
    }

    static func appendParams(_ instruction: Instruction, plan: SettlementPlan, to json: inout JSON.Writer) {
        let batch = plan.batch
        let (description, metadata) = agreedExtras(plan.lines(of: instruction), batch: batch)
        let settleKey = "settle_instruction"
        let settleParam: StaticString = "metadata[settle_instruction]"
        json.open()
        switch instruction.kind {
        case .transfer, .reversal:
            json.key("amount"); json.separator(); json.out.append(0x22);
            MinorUnits.appendDecimal(instruction.amount, to: &json.out); json.out.append(0x22)
            if instruction.kind == .transfer {
                json.key("currency"); json.string(instruction.currency.code)
                json.key("destination"); json.symbol(instruction.payee, batch)
                if !instruction.charge.isNone { json.key("source_transaction"); json.symbol(instruction.charge, batch) }
                json.key("transfer_group"); json.symbol(instruction.group, batch)
            }
            if let description { json.key("description"); json.string(description) }
            json.key(settleParam); json.instructionID(instruction)
            for (key, value) in metadata where key != settleKey {
                json.key("metadata[\(key)]"); json.string(value)
            }
        case .payout:
            json.key("from")
            json.open()
            json.key("financial_account")
            if let account = plan.options.financialAccount { json.string(account) } else { json.null() }
            json.key("currency"); json.string(instruction.currency.code)
            json.close()
            json.key("to")
            json.open()
            json.key("recipient"); json.symbol(instruction.payee, batch)
            json.key("payout_method"); json.symbol(instruction.payoutMethod, batch)
            json.key("currency"); json.string(instruction.currency.code)
            json.close()
            json.key("amount")
            json.open()
            json.key("value"); json.int(instruction.amount)
            json.key("currency"); json.string(instruction.currency.code)
            json.close()
            json.key("delivery_options")
            json.open()
            json.key("speed"); json.string("instant")
            json.close()
            if let description { json.key("description"); json.string(description) }
            json.key("metadata")
            json.open()
            json.key("settle_instruction"); json.instructionID(instruction)
            for (key, value) in metadata where key != settleKey {
                json.key(key); json.string(value)
            }
            json.close()
        }
        json.close()
    }

    /// The description if every line has the same one; metadata keys on which all lines agree.
    static func agreedExtras(_ lines: ArraySlice<Int32>, batch: Batch) -> (String?, [(String, String)]) {
        guard lines.contains(where: { batch.lines[Int($0)].extras >= 0 }) else { return (nil, []) }
        let extras = lines.map { index -> LineExtras in
            let slot = batch.lines[Int(index)].extras
            return slot >= 0 ? batch.extras[Int(slot)] : LineExtras()
        }
        let first = extras[0]
        let description = extras.allSatisfy { $0.description == first.description } ? first.description : nil
        let metadata = first.metadata.filter { pair in
            extras.allSatisfy { $0.metadata.contains { $0.key == pair.key && $0.value == pair.value } }
        }
        return (description, metadata.map { ($0.key, $0.value) })
    }
}

extension JSON.Writer {
    /// An instruction's id (`ins_…`), written from its digest without a string.
    mutating func instructionID(_ instruction: Instruction) {
        separator()
        out.append(UInt8(ascii: "\""))
        instruction.appendID(to: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// A symbol's bytes as a string.
    mutating func symbol(_ symbol: Symbol, _ batch: Batch) {
        batch.symbols.withBytes(symbol) { string(bytes: $0) }
    }
}
