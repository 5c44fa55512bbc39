import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder
import Testing

/// Which released instructions are Stripe's refusals (reported `failed`, sent again only
/// when a person feeds the line back) and which are settle's own releases (the lines go
/// again with their orders): ``LedgerInstruction/refusedByStripe``.
@Suite struct RefusedByStripeTests {
    @Test(arguments: [
        ("account_invalid", true), ("balance_insufficient", true), ("=weird,code", true),
        (LedgerOutcome.notSentCode, false), ("", false), ("group_rejected", false), ("payout_method_unusable", false),
    ])
    func onlyStripesOwnCodesAreRefusals(code: String, refused: Bool) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "settle-refused-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let ledger = try LedgerStore.create(path: folder.appendingPathComponent("ledger.sqlite").path)
        defer { ledger.close() }
        let dispatch = LedgerDispatch(
            id: "ins_1", kind: "transfer", group: "G", payee: "acct_1", charge: "ch_1", currency: "usd",
            amountMinor: 100, method: "POST", path: "/v1/transfers", params: "{}", stripeContext: nil, attempt: 1,
            idempotencyKey: "settle-ins_1-a1",
            lines: [LedgerLineClaim(lineID: "L1", kind: "transfer", amountMinor: 100, content: "c")])
        try ledger.markInFlight([dispatch])
        let before = try #require(try ledger.instruction("ins_1"))
        #expect(!before.refusedByStripe, "in flight is no refusal")
        try ledger.recordOutcome(instruction: "ins_1", .failed(code: code, message: "no"), requestID: nil, call: nil)
        let after = try #require(try ledger.instruction("ins_1"))
        #expect(after.refusedByStripe == refused, "\(code)")
    }
}
