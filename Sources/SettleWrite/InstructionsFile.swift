public import SettleCore

/// `instructions.jsonl`: one JSON object per API call, in execution order
/// (docs/PLAN-FORMAT.md has every key).
public enum InstructionsFile {
    public static func write(path: String, plan: SettlementPlan) throws(WriteFailure) -> (sha256: String, rows: Int) {
        let file = try OutputFile(path: path)
        for instruction in plan.instructions {
            let object = json(for: instruction, plan: plan)
            file.withBuffer { object.append(to: &$0); $0.append(0x0A) }
            file.endRow()
        }
        let sha = try file.commit()
        return (sha, file.rows)
    }

    public static func json(for instruction: Instruction, plan: SettlementPlan) -> JSON {
        let batch = plan.batch
        let lines = plan.lines(of: instruction).map { batch.lines[Int($0)] }
        let group = batch.text(instruction.group)
        let payee = batch.text(instruction.payee)
        let (description, metadata) = agreedExtras(lines, batch: batch)
        var allMetadata: [(String, String)] = [("settle_instruction", instruction.id)]
        allMetadata += metadata.filter { $0.0 != "settle_instruction" }
        let params: JSON
        var preflight: [(String, JSON)] = []
        switch instruction.kind {
        case .transfer:
            var pairs: [(String, JSON)] = [
                ("amount", .string(String(instruction.amount))),
                ("currency", .string(instruction.currency.code)),
                ("destination", .string(payee)),
            ]
            if !instruction.charge.isNone {
                pairs.append(("source_transaction", .string(batch.text(instruction.charge))))
            }
            pairs.append(("transfer_group", .string(group)))
            if let description { pairs.append(("description", .string(description))) }
            pairs += allMetadata.map { ("metadata[\($0.0)]", .string($0.1)) }
            params = .object(pairs)
            if instruction.needsChargeLookup { preflight.append(("charge", .string(batch.text(instruction.charge)))) }
        case .reversal:
            var pairs: [(String, JSON)] = [("amount", .string(String(instruction.amount)))]
            if let description { pairs.append(("description", .string(description))) }
            pairs += allMetadata.map { ("metadata[\($0.0)]", .string($0.1)) }
            params = .object(pairs)
        case .payout:
            let method = batch.text(instruction.payoutMethod)
            let currency = JSON.string(instruction.currency.code)
            var pairs: [(String, JSON)] = [
                ("from", .object([
                    ("financial_account", plan.options.financialAccount.map(JSON.string) ?? .null),
                    ("currency", currency),
                ])),
                ("to", .object([("recipient", .string(payee)), ("payout_method", .string(method)), ("currency", currency)])),
                ("amount", .object([("value", .int(instruction.amount)), ("currency", currency)])),
                ("delivery_options", .object([("speed", .string("instant"))])),
            ]
            if let description { pairs.append(("description", .string(description))) }
            pairs.append(("metadata", .object(allMetadata.map { ($0.0, .string($0.1)) })))
            params = .object(pairs)
            preflight = [("payout_method", .string(method)), ("recipient", .string(payee))]
        }
        let lineObjects: [JSON] = plan.lines(of: instruction).map { index in
            let line = batch.lines[Int(index)]
            return .object([
                ("line_id", .string(batch.text(line.lineID))),
                ("kind", .string(line.kind.name)),
                ("amount_minor", .int(line.amount)),
                ("content", .string(LineContent.digest(batch, line))),
                ("source", .string(batch.source(of: line))),
                ("spool", .array([.int(Int64(line.file)), .int(Int64(line.spoolOffset)), .int(Int64(line.spoolLength))])),
            ])
        }
        return .object([
            ("id", .string(instruction.id)),
            ("kind", .string(instruction.kind.name)),
            ("method", .string("POST")),
            ("path", .string(instruction.path)),
            ("idempotency_key", .string(instruction.idempotencyKey)),
            ("stripe_context", .null),
            ("params", params),
            ("lines", .array(lineObjects)),
            ("group", .string(group)),
            ("payee", .string(payee)),
            ("charge", .string(instruction.kind == .reversal ? "" : batch.text(instruction.charge))),
            ("currency", .string(instruction.currency.code)),
            ("amount_minor", .int(instruction.amount)),
            ("preflight", .object(preflight)),
        ])
    }

    /// The description if every line has the same one; metadata keys on which all lines agree.
    static func agreedExtras(_ lines: [OrderLine], batch: Batch) -> (String?, [(String, String)]) {
        let extras = lines.map { $0.extras >= 0 ? batch.extras[Int($0.extras)] : LineExtras() }
        guard let first = extras.first else { return (nil, []) }
        let description = extras.allSatisfy { $0.description == first.description } ? first.description : nil
        let metadata = first.metadata.filter { pair in
            extras.allSatisfy { $0.metadata.contains { $0.key == pair.key && $0.value == pair.value } }
        }
        return (description, metadata.map { ($0.key, $0.value) })
    }
}
