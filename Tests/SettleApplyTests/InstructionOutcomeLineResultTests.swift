import SettleApply
import SettleCore
import Testing

/// The one mapping from an instruction's outcome to its lines' status in results.csv.
@Suite struct InstructionOutcomeLineResultTests {
    @Test(arguments: [
        (InstructionOutcome.settled(stripeID: "tr_1"), LineResult(status: .settled, stripeID: "tr_1")),
        (
            .alreadySettled(stripeID: "tr_0"),
            LineResult(status: .alreadySettled, stripeID: "tr_0", reason: "settled by an earlier run")
        ),
        (
            .failed(code: "account_invalid", message: "No such destination"),
            LineResult(status: .failed, reasonCode: "account_invalid", reason: "No such destination")
        ),
        (.unknown(message: "HTTP 500"), LineResult(status: .unknown, reason: "HTTP 500")),
        (
            .rejected(code: "line_conflict", message: "claimed"),
            LineResult(status: .rejected, reasonCode: "line_conflict", reason: "claimed")
        ),
        (
            .rejected(code: ReasonCode.chargePending.code, message: "pending"),
            LineResult(status: .deferred, reasonCode: ReasonCode.chargePending.code, reason: "pending")
        ),
        (.notSent(reason: "stopped"), LineResult(status: .planned, reason: "stopped")),
    ])
    func everyOutcomeGivesItsStatus(outcome: InstructionOutcome, expected: LineResult) {
        #expect(outcome.lineResult == expected)
    }

    /// The report's outcomes wait on disk: each case comes back as it was set, the last set wins.
    @Test func outcomesComeBackFromTheSpill() throws {
        let outcomes = try InstructionOutcomes()
        let all: [InstructionOutcome] = [
            .settled(stripeID: "tr_1"), .alreadySettled(stripeID: "tr_0"),
            .failed(code: "account_invalid", message: "No such destination"), .unknown(message: "HTTP 500"),
            .rejected(code: "line_conflict", message: "claimed"), .notSent(reason: "stopped"),
        ]
        for (number, outcome) in all.enumerated() { try outcomes.set(outcome, for: "ins_\(number)") }
        try outcomes.set(.unknown(message: "the ledger failed"), for: "ins_5")
        #expect(outcomes.count == all.count)
        for number in 0..<5 { #expect(outcomes["ins_\(number)"] == all[number]) }
        #expect(outcomes["ins_5"] == .unknown(message: "the ledger failed"))
        #expect(outcomes["ins_6"] == nil)
        #expect(outcomes.all.count == all.count)
    }
}
