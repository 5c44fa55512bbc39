public import SettleCore
public import SettleWrite

/// `instructions.jsonl`: one JSON array per API call, in execution order
/// (docs/PLAN-FORMAT.md has every position). Written straight to bytes: a large run has millions.
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

    /// The plan format this writer writes (the manifest's `plan_format`); apply refuses a
    /// folder of another.
    public static let format = 2

    /// One instruction as a JSON line: a positional array of its facts, its lines (id,
    /// amount, content digest) and what the input says that settle cannot derive
    /// (docs/PLAN-FORMAT.md). The request parameters are not stored: apply builds them from
    /// these facts (``RequestParams``).
    static func append(_ instruction: PlanRow, plan: SettlementPlan, to out: inout [UInt8]) {
        let batch = plan.batch
        var json = JSON.Writer(out: out)
        out = []
        json.openArray()
        json.instructionID(instruction)
        json.string(instruction.kind.name)
        json.symbol(instruction.group, batch)
        json.symbol(instruction.payee, batch)
        json.symbol(instruction.kind == .reversal ? instruction.target : instruction.charge, batch)
        json.string(instruction.currency.code)
        json.int(instruction.amount)
        let lines = plan.lines(of: instruction)
        json.openArray()
        for index in lines {
            let line = batch.lines[Int(index)]
            json.openArray()
            json.symbol(line.lineID, batch)
            // The kind follows from the instruction's and the sign; a line it does not
            // follow for names its kind.
            let derived: Bool
            switch (instruction.kind, line.kind) {
            case (.transfer, .transfer) where line.amount >= 0, (.reversal, .reversal) where line.amount >= 0,
                (.payout, .payout) where line.amount >= 0:
                json.int(line.amount)
                derived = true
            case (.transfer, .reversal) where line.amount > 0:
                json.int(-line.amount)
                derived = true
            default:
                json.int(line.amount)
                derived = false
            }
            json.string(LineContent.digest(batch, line))
            if !derived { json.string(line.kind.name) }
            json.closeArray()
        }
        json.closeArray()
        let (description, metadata) = agreedExtras(lines, batch: batch)
        let financialAccount = instruction.kind == .payout ? plan.options.financialAccount : nil
        let preflightCharge = instruction.kind == .transfer && instruction.needsChargeLookup
        let hasExtras =
            !metadata.isEmpty || instruction.kind == .payout || financialAccount != nil || preflightCharge
        if let description { json.string(description) } else if hasExtras { json.null() }
        if hasExtras {
            json.open()
            if !metadata.isEmpty {
                json.key("metadata")
                json.open()
                for (key, value) in metadata where key != "settle_instruction" {
                    json.key(key); json.string(value)
                }
                json.close()
            }
            if instruction.kind == .payout {
                json.key("payout_method"); json.symbol(instruction.payoutMethod, batch)
            }
            if let financialAccount { json.key("financial_account"); json.string(financialAccount) }
            if preflightCharge {
                json.key("preflight_charge"); json.separator(); json.out.append(contentsOf: "true".utf8)
            }
            json.close()
        }
        json.closeArray()
        swap(&out, &json.out)
        out.append(0x0A)
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
    mutating func instructionID(_ instruction: PlanRow) {
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
