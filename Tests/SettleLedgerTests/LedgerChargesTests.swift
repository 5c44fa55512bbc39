import Foundation
import SettleLedger
import Testing

/// The charges table: each charge counted once, by the first run that records it.
@Suite struct LedgerChargesTests {
    @Test func aChargeKeepsItsFirstRun() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("settle-charges-\(UUID().uuidString)")
            .path
        let store = try openTestLedger(path: path)
        #expect(try store.chargeFirstRun("ch_1") == nil)
        try store.recordCharges([("ch_1", "usd", "run_a", 10000, 320, "succeeded")])
        try store.recordCharges([
            ("ch_1", "usd", "run_b", 10000, 320, "succeeded"), ("ch_2", "eur", "run_b", 500, 0, "succeeded"),
        ])
        #expect(try store.chargeFirstRun("ch_1") == "run_a")
        #expect(try store.chargeFirstRun("ch_2") == "run_b")
        #expect(try store.transferredBefore(charge: "ch_1", currency: "usd") == 0)
        store.close()
        let reader = try #require(try LedgerStore.openReadOnly(path: path))
        #expect(try reader.chargeFirstRun("ch_1") == "run_a")
    }
}
