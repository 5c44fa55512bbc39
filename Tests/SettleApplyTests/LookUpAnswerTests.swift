import SettleHTTP
import SettleTestSupport
import Testing

@testable import SettleApply

/// What a charge or payout-method look-up's answer decides: only the object asked for, as
/// Stripe describes it, or Stripe's "no such object" (audit 59 F1, F2, F4). Seeded: each
/// answer is altered at random from the real one, and the verdict follows the alteration.
@Suite struct LookUpAnswerTests {
    static func answer(_ status: Int, _ body: String) -> HTTPOutcome {
        .response(HTTPResponse(status: status, headers: [("content-type", "application/json")], body: Array(body.utf8)))
    }

    static let charge =
        #"{"id": "ch_1", "object": "charge", "amount": 10000, "currency": "usd", "status": "succeeded", "#
        + #""balance_transaction": {"fee": 320, "currency": "usd"}, "amount_refunded": 0}"#
    static let method =
        #"{"id": "pm_1", "object": "v2.money_management.payout_method", "type": "apple_pay", "#
        + #""available_payout_speeds": ["instant"], "usage_status": {"payments": "eligible"}, "archived": false, "#
        + #""restricted": false, "apple_pay": {"supported_currencies": ["usd"]}}"#

    @Test func theObjectAskedForDecides() {
        #expect(StripeLookup.chargeFact(Self.answer(200, Self.charge), CallEnding(), charge: "ch_1").verdict == .usable)
        let fact = StripeLookup.payoutMethodFact(
            Self.answer(200, Self.method), CallEnding(), recipient: "acct_1", method: "pm_1")
        #expect(fact.verdict == .usable)
    }

    /// An answer that is not the object asked for (no id, another id, another object) is no
    /// answer; a refusal is a verdict only when it says there is no such object.
    @Test func otherAnswersDecideNothing() {
        let alterations: [(String, String)] = [
            (#""id": "ch_1", "#, ""), (#""id": "ch_1""#, #""id": "ch_2""#),
            (#""object": "charge""#, #""object": "transfer""#),
        ]
        for (from, to) in alterations {
            let body = Self.charge.replacingOccurrences(of: from, with: to)
            let verdict = StripeLookup.chargeFact(Self.answer(200, body), CallEnding(), charge: "ch_1").verdict
            #expect(verdict == .unavailable("the answer is not the charge ch_1"), "\(body)")
        }
        let methodAlterations: [(String, String)] = [
            (#""id": "pm_1", "#, ""), (#""id": "pm_1""#, #""id": "pm_2""#),
            (#""object": "v2.money_management.payout_method""#, #""object": "v2.core.account""#),
        ]
        for (from, to) in methodAlterations {
            let body = Self.method.replacingOccurrences(of: from, with: to)
            let fact = StripeLookup.payoutMethodFact(
                Self.answer(200, body), CallEnding(), recipient: "acct_1", method: "pm_1")
            #expect(fact.verdict == .unavailable("the answer is not the payout method pm_1"), "\(body)")
        }
    }

    /// Seeded 4xx answers of every kind: only 404 `resource_missing` / `not_found` refuses.
    @Test func onlyNoSuchObjectRefuses() {
        var random = SplitMix64(seed: 0x59F1)
        let statuses = [400, 402, 404, 410, 422]
        let codes = ["resource_missing", "not_found", "idempotency_error", "parameter_invalid", "card_declined", ""]
        for _ in 0..<300 {
            let status = statuses[Int(random.next() % UInt64(statuses.count))]
            let code = codes[Int(random.next() % UInt64(codes.count))]
            let error =
                code.isEmpty
                ? #"{"error": {"type": "invalid_request_error", "message": "m"}}"#
                : #"{"error": {"type": "invalid_request_error", "code": "\#(code)", "message": "m"}}"#
            let refuses = status == 404 && (code == "resource_missing" || code == "not_found")
            let charge = StripeLookup.chargeFact(Self.answer(status, error), CallEnding(), charge: "ch_1").verdict
            let method = StripeLookup.payoutMethodFact(
                Self.answer(status, error), CallEnding(), recipient: "acct_1", method: "pm_1"
            ).verdict
            for verdict in [charge, method] {
                if case .refused = verdict {
                    #expect(refuses, "\(status) \(code)")
                } else {
                    #expect(
                        !refuses
                            && verdict
                                == .unavailable("HTTP \(status) \(code.isEmpty ? "invalid_request_error" : code)"),
                        "\(status) \(code)")
                }
            }
        }
    }
}
