public import SettleCore

extension SettlementPlan {
    /// The ``Instruction`` value of the plan's row `index`: its instructions.jsonl line, as
    /// the writer writes it and apply reads it, so the value and the file never disagree.
    /// For tests and tools; the writer itself never builds one (millions of rows).
    public func instruction(at index: Int) -> Instruction {
        var bytes: [UInt8] = []
        InstructionsFile.append(instructions[index], plan: self, to: &bytes)
        bytes.removeLast()  // the newline
        do {
            // Never nil and never throws: the writer writes one instruction object.
            return try Instruction.decode(line: bytes, number: index + 1)!
        } catch {
            preconditionFailure("the instructions writer wrote a line its reader refuses: \(error)")
        }
    }
}
