import SettleApply
public import SettleCore
public import SettleWrite

/// `instructions.jsonl`: one JSON object per API call, in execution order
/// (docs/PLAN-FORMAT.md has every key). Written straight to bytes: a large run has millions.
public enum InstructionsFile {
    public static func write(path: String, plan: SettlementPlan, into set: FileSet? = nil) throws(WriteFailure) -> (
        sha256: String, rows: Int
    ) {
        let file = try OutputFile(path: path)
        // One writer for every line: its storage is reused, and each line reaches the file's
        // buffer in one copy.
        var json = JSON.Writer()
        for instruction in plan.instructions {
            json.removeAll()
            write(instruction, plan: plan, into: &json)
            json.withBytes { file.append($0) }
            file.endRow()
        }
        let sha = try file.commit(into: set)
        return (sha, file.rows)
    }

    /// The plan format this writer writes (the manifest's `plan_format`); apply refuses a
    /// folder of another.
    public static let format = 4

    /// One instruction as a JSON line (docs/PLAN-FORMAT.md): the call as SPEC names it
    /// (`id, kind, method, path, idempotency_key, stripe_context, params, lines`), then
    /// `line_claims` and only the facts its parameters do not carry (a reversal's group,
    /// payee and currency; a per-line payout's group; a transfer's charge look-up). The
    /// parameters come from ``RequestParams/write(_:into:)``, the function apply builds them
    /// with again before it sends.
    static func append(_ instruction: PlanRow, plan: SettlementPlan, to out: inout [UInt8]) {
        var json = JSON.Writer()
        write(instruction, plan: plan, into: &json)
        json.withBytes { out.append(contentsOf: $0) }
    }

    /// ``append(_:plan:to:)`` into a writer: the line and its newline.
    static func write(_ instruction: PlanRow, plan: SettlementPlan, into json: inout JSON.Writer) {
        let batch = plan.batch
        let lines = plan.lines(of: instruction)
        json.open()
        json.key("id"); json.instructionID(instruction)
        json.key("kind"); json.string(instruction.kind.name)
        json.key("method"); json.string("POST")
        json.key("path")
        switch instruction.kind {
        case .reversal:
            // RequestParams.path(kind: .reversal, target:) without building the string (the
            // golden samples and InstructionsWriteTests hold the two to the same bytes).
            batch.symbols.withBytes(instruction.target) { json.string("/v1/transfers/", escaping: $0, "/reversals") }
        case .transfer, .payout:
            // A literal: no string is built.
            json.string(RequestParams.path(kind: instruction.kind, target: ""))
        }
        json.key("idempotency_key")
        json.string(maxCount: PlanRow.idempotencyKeyCapacity) { instruction.writeIdempotencyKey(to: $0) }
        json.key("stripe_context"); json.null()
        json.key("params")
        let (description, metadata) = agreedExtras(lines, batch: batch)
        RequestParams.write(
            RowFacts(
                row: instruction, batch: batch,
                extras: RequestParams.Extras(
                    description: description, metadata: metadata,
                    financialAccount: instruction.kind == .payout ? plan.options.financialAccount : nil)),
            into: &json)
        // The line ids, then what the ledger claims of each line (its signed amount and
        // content digest), in the same order; then only the facts the parameters do not carry.
        json.key("lines")
        json.openArray()
        for index in lines { json.symbol(batch.lines[Int(index)].lineID, batch) }
        json.closeArray()
        json.key("line_claims")
        json.openArray()
        for index in lines {
            let line = batch.lines[Int(index)]
            json.openArray()
            // A reversal line netted into a transfer makes it smaller: its amount is negative.
            json.int(instruction.kind == .transfer && line.kind == .reversal ? -line.amount : line.amount)
            json.string(maxCount: LineContent.hexCount) { LineContent.writeDigest(batch, line, to: $0) }
            json.closeArray()
        }
        json.closeArray()
        switch instruction.kind {
        case .transfer:
            if instruction.charge.isNone, let intent = plan.paymentIntentOfTransfer[instruction.linesStart] {
                json.key("charge_key"); json.symbol(intent, batch)
            }
            writePreflight(instruction, batch, &json)
        case .reversal:
            json.key("group"); json.symbol(instruction.group, batch)
            json.key("payee"); json.symbol(instruction.payee, batch)
            json.key("currency"); json.string(instruction.currency.code)
        case .payout:
            if !instruction.group.isNone { json.key("group"); json.symbol(instruction.group, batch) }
            writePreflight(instruction, batch, &json)
        }
        json.close()
        json.newline()
    }

    /// `preflight`: the charge looked up before sending, for an instruction that has one.
    private static func writePreflight(_ instruction: PlanRow, _ batch: Batch, _ json: inout JSON.Writer) {
        guard let charge = instruction.lookUpCharge else { return }
        json.key("preflight")
        json.open()
        json.key("charge"); json.symbol(charge, batch)
        json.close()
    }

    /// A plan row's facts for ``RequestParams``: its symbols written from the batch's bytes.
    struct RowFacts: RequestParams.Facts {
        let row: PlanRow
        let batch: Batch
        let extras: RequestParams.Extras

        var kind: Instruction.Kind { row.kind }
        var currencyCode: String { row.currency.code }
        var amountMinor: Int64 { row.amount }
        var hasCharge: Bool { !row.charge.isNone }

        func write(_ field: RequestParams.Field, into json: inout JSON.Writer) {
            switch field {
            case .id: json.instructionID(row)
            case .group: json.symbol(row.group, batch)
            case .payee: json.symbol(row.payee, batch)
            case .charge: json.symbol(row.charge, batch)
            case .payoutMethod: json.symbol(row.payoutMethod, batch)
            }
        }
    }

    /// The description if every line has the same one; metadata keys on which all lines agree.
    static func agreedExtras(
        _ lines: ArraySlice<Int32>, batch: Batch
    ) -> (String?, [(key: String, value: String)]) {
        // Most instructions have lines of one extras slot (or none): they agree on all of it.
        if let first = lines.first {
            let slot = batch.lines[Int(first)].extras
            if lines.allSatisfy({ batch.lines[Int($0)].extras == slot }) {
                guard slot >= 0 else { return (nil, []) }
                let extras = batch.extras[Int(slot)]
                return (extras.description, extras.metadata)
            }
        }
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
        return (description, metadata)
    }
}

extension JSON.Writer {
    /// An instruction's id (`ins_…`), written from its digest without a string.
    mutating func instructionID(_ instruction: PlanRow) {
        string(maxCount: PlanRow.idCount) { instruction.writeID(to: $0) }
    }

    /// A symbol's bytes as a string.
    mutating func symbol(_ symbol: Symbol, _ batch: Batch) {
        batch.symbols.withBytes(symbol) { string(bytes: $0) }
    }
}
