import Foundation
import SettleApply
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

    @Test func decodesThePlanFormat() throws {
        let jsonl = """
            {"id":"ins_0123456789abcdef01234567","kind":"transfer","method":"POST","path":"/v1/transfers","idempotency_key":"settle-ins_0123456789abcdef01234567-a1","stripe_context":null,"params":{"amount":"7000","currency":"usd","destination":"acct_rest","metadata[settle_instruction]":"ins_0123456789abcdef01234567"},"lines":[{"line_id":"100-1","kind":"transfer","amount_minor":7000,"content":"00112233aabbccdd"}],"group":"ORDER100","payee":"acct_rest","charge":"ch_1","currency":"usd","amount_minor":7000,"preflight":{}}

            {"id":"ins_p","kind":"payout","method":"POST","path":"/v2/money_management/outbound_payments","idempotency_key":"settle-ins_p-a1","stripe_context":null,"params":{"from":{"financial_account":null,"currency":"usd"},"amount":{"value":2000,"currency":"usd"}},"lines":[],"group":"","payee":"acct_drv","charge":"","currency":"usd","amount_minor":2000,"preflight":{"payout_method":"pm_ap_1","recipient":"acct_drv"}}
            """
        let plan = try PlannedInstruction.decodeJSONLines(Data(jsonl.utf8))
        #expect(plan.count == 2)
        #expect(plan[0].kind == .transfer)
        #expect(plan[0].amountMinor == 7000)
        #expect(
            plan[0].lines == [.init(lineID: "100-1", kind: "transfer", amountMinor: 7000, content: "00112233aabbccdd")])
        #expect(plan[0].params["metadata[settle_instruction]"] == .string("ins_0123456789abcdef01234567"))
        #expect(plan[1].isV2)
        #expect(plan[1].params["amount"]?["value"] == .int(2000))
        #expect(plan[1].params["from"]?["financial_account"] == .null)
        #expect(plan[1].preflight == .init(payoutMethod: "pm_ap_1", recipient: "acct_drv"))
        #expect(
            plan[1].params.encoded(sortingKeys: true)
                == #"{"amount":{"currency":"usd","value":2000},"from":{"currency":"usd","financial_account":null}}"#)
        do {
            _ = try PlannedInstruction.decodeJSONLines(Data("\n{\"id\":\"x\"}\n".utf8))
            Issue.record("an incomplete instruction decoded")
        } catch {
            guard case .planInvalid(let line, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(line == 2)
        }
    }
}
