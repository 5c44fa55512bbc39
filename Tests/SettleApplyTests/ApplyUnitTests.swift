import Foundation
import SettleApply
import SettleCore
import SettleLedger
import Testing

@Suite struct ApplyUnitTests {
    @Test func apiKeyNeverShowsItself() {
        let key = APIKey("  sk_test_TOPSECRET42\n")
        #expect("\(key)" == "APIKey(redacted)")
        #expect(String(reflecting: key) == "APIKey(redacted)")
        var dumped = ""
        dump(key, to: &dumped)
        #expect(!dumped.contains("TOPSECRET"))
        let configuration = ApplyConfiguration(apiKey: key)
        var dumpedConfiguration = ""
        dump(configuration, to: &dumpedConfiguration)
        #expect(!dumpedConfiguration.contains("TOPSECRET"))
        #expect(!"\(configuration)".contains("TOPSECRET"))
        #expect(key.isWellFormed)
        #expect(!key.isLive)
        #expect(APIKey("rk_live_x").isLive)
    }

    @Test(arguments: [
        ("http://example.com", false), ("http://10.0.0.1:8080", false), ("ftp://127.0.0.1", false),
        ("http://127.0.0.1:4242", true), ("http://127.9.9.9", true), ("http://localhost:1", true),
        ("http://[::1]:8080", true), ("https://api.stripe.com", true), ("http://127.0.0.1.evil.com", false),
    ])
    func apiBaseMustBeHTTPSOrLoopback(base: String, allowed: Bool) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settle-unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let ledger = try openTestLedger(path: folder.appendingPathComponent("l.sqlite").path)
        let result = Result {
            try ApplyEngine(
                configuration: ApplyConfiguration(apiBase: base, apiKey: APIKey("sk_test_x")), ledger: ledger)
        }
        switch result {
        case .success: #expect(allowed, "\(base) should be refused")
        case .failure(let error):
            #expect(!allowed, "\(base) refused: \(error)")
            guard case ApplyError.configuration = error else {
                Issue.record("unexpected \(error)")
                return
            }
        }
    }
}
