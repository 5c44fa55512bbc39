import Foundation
import SettleApply
import SettleCore
import SettleTestSupport
import Testing

@testable import SettlePlanFolder

/// The rebuild finds a split payout no results.csv names from the aggregated payout it was
/// split from (``PlanFolder/splitCandidates(of:amounts:wanted:)``): generated payouts, a
/// random few of their lines left out as an apply's split leaves them out, the split's id
/// and amount as Stripe holds them.
@Suite struct SplitCandidatesTests {
    static func payout(lines count: Int, _ random: inout SplitMix64) -> Instruction {
        let lines = (0..<count).map { index in
            Instruction.Line(
                lineID: "L\(index)-\(random.next() % 1000)", kind: "payout",
                amountMinor: Int64(random.next() % 5000 + 1), content: String(random.next(), radix: 16))
        }
        return Instruction(
            id: "ins_aggregate", kind: .payout, path: "/v2/money_management/outbound_payments", params: .object([]),
            lines: lines, group: "", payee: "acct_drv", currency: "usd",
            amountMinor: lines.reduce(0) { $0 + $1.amountMinor })
    }

    @Test(arguments: 0..<40) func aSplitIsFoundFromItsAggregatedPayout(seed: UInt64) {
        var random = SplitMix64(seed: 700 + seed)
        let count = [2, 3, 5, 9, 16, 17, 40, 120, 121, 300][Int(seed % 10)]
        let payout = Self.payout(lines: count, &random)
        // Up to three lines left out (two past 120 lines), never all of them.
        let most = count <= 16 ? min(3, count - 1) : (count <= 120 ? 3 : 2)
        var out: Set<Int> = []
        let wantedOut = Int(random.next() % UInt64(most)) + 1
        while out.count < wantedOut { out.insert(Int(random.next() % UInt64(count))) }
        let kept = payout.lines.indices.filter { !out.contains($0) }.map { payout.lines[$0] }
        let split = PayoutSplit.derived(from: payout, lines: kept)
        let decoy = "ins_000000000000000000000000"
        let found = PlanFolder.splitCandidates(
            of: payout, amounts: [split.amountMinor, 1], wanted: [split.id, decoy])
        #expect(found.map(\.id) == [split.id], "seed \(seed): \(count) lines, \(out.sorted()) left out")
        #expect(found.first?.lines == kept)
    }

    /// A payout of other lines (the split is not of this payout) gives nothing, and nor does an
    /// amount no split of it can have.
    @Test func nothingIsFoundWhenNoSplitMatches() {
        var random = SplitMix64(seed: 90)
        let payout = Self.payout(lines: 6, &random)
        let other = Self.payout(lines: 6, &random)
        let split = PayoutSplit.derived(from: other, lines: Array(other.lines.dropFirst()))
        #expect(PlanFolder.splitCandidates(of: payout, amounts: [split.amountMinor], wanted: [split.id]).isEmpty)
        let own = PayoutSplit.derived(from: payout, lines: Array(payout.lines.dropFirst()))
        #expect(PlanFolder.splitCandidates(of: payout, amounts: [own.amountMinor + 1], wanted: [own.id]).isEmpty)
        #expect(PlanFolder.splitCandidates(of: payout, amounts: [payout.amountMinor], wanted: [payout.id]).isEmpty)
    }
}
