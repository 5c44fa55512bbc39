import SettleCore
import Testing

/// The rules plan and apply share: conservation of the plan, and the exit status of a run.
@Suite struct ConservationTests {
    static func plan() -> SettlementPlan {
        TestExport()
            .transfer("1", order: "1", amount: "10.00")
            .transfer("2", order: "2", amount: "20.00", destination: "acct_two")
            .plan()
    }

    @Test func aPlanFromThePlannerIsConserved() {
        #expect(Self.plan().conservationProblem == nil)
    }

    @Test func aPlannedLineOutsideEveryInstructionIsNamed() {
        let plan = Self.plan()
        plan.batch.lines[0].status = .rejected
        #expect(plan.conservationProblem == "line 1 is rejected but is in an instruction")
    }

    @Test func anInstructionThatSendsMoreThanItsLinesIsNamed() {
        let plan = Self.plan()
        plan.instructions[1].amount += 1
        let id = plan.instructions[1].id
        #expect(plan.conservationProblem == "instruction \(id) sends 2001 but its lines add up to 2000")
    }

    @Test func exitStatusOfTheLines() {
        #expect(ExitCode.forLines(counts: [.planned: 2, .settled: 1], fileRejected: false, applied: false) == .ok)
        #expect(ExitCode.forLines(counts: [.planned: 1], fileRejected: false, applied: true) == .tryAgain)
        #expect(ExitCode.forLines(counts: [.rejected: 1], fileRejected: false, applied: false) == .linesRejected)
        #expect(ExitCode.forLines(counts: [.failed: 1], fileRejected: false, applied: true) == .linesRejected)
        #expect(ExitCode.forLines(counts: [:], fileRejected: true, applied: false) == .linesRejected)
        #expect(
            ExitCode.forLines(counts: [.rejected: 1, .unknown: 1], fileRejected: false, applied: false) == .tryAgain)
        #expect(ExitCode.forLines(counts: [.deferred: 3, .netted: 1], fileRejected: false, applied: true) == .ok)
        #expect(ExitCode.linesRejected.combined(with: .tryAgain) == .tryAgain)
        #expect(ExitCode.tryAgain.combined(with: .linesRejected) == .tryAgain)
        #expect(ExitCode.ok.combined(with: .linesRejected) == .linesRejected)
    }
}
