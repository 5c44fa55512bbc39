extension SettlementPlan {
    /// What breaks conservation in the plan, or nil: every line is planned exactly when an
    /// instruction holds it, the instructions hold exactly the planned lines, and each
    /// instruction sends what its lines add up to (a reversal line nets a transfer). The
    /// sums by status are checked by the control sums; plan and apply both refuse a
    /// violation as an internal error (exit 70).
    public var conservationProblem: String? {
        var planned = 0
        for (index, line) in batch.lines.enumerated() {
            let owned = instructionOfLine[index] >= 0
            if (line.status == .planned) != owned {
                return
                    "line \(batch.text(line.lineID)) is \(line.status.name) but \(owned ? "is" : "is not") in an instruction"
            }
            if owned { planned += 1 }
        }
        guard planned == instructionLines.count else {
            return "instructions hold \(instructionLines.count) lines, \(planned) are planned"
        }
        for instruction in instructions {
            var net: Int64 = 0
            for index in lines(of: instruction) {
                let line = batch.lines[Int(index)]
                net += instruction.kind == .transfer && line.kind == .reversal ? -line.amount : line.amount
            }
            guard net == instruction.amount else {
                return "instruction \(instruction.id) sends \(instruction.amount) but its lines add up to \(net)"
            }
        }
        return nil
    }
}
