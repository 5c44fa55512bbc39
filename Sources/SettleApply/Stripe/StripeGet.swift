import Foundation
import SettleCore
import SettleHTTP

/// One read-only GET at a time, retried with backoff until Stripe answers with an object:
/// the pages of a listing, each of which needs the one before (`ledger rebuild`, the
/// posted payouts ``PayoutFollow`` watches for a return).
struct StripeGet {
    let configuration: ApplyConfiguration
    let api: StripeAPI
    let client: HTTPClient
    /// Requests made so far.
    private(set) var requests = 0

    init(configuration: ApplyConfiguration) throws(ApplyError) {
        self.configuration = configuration
        api = try StripeAPI(configuration: configuration)
        client = try HTTPClient.forStripe(configuration)
    }

    /// The object at `path`. Throws ``ApplyError/keyRefused(_:)`` on 401/403, and
    /// ``ApplyError/factsUnavailable(_:)`` when no try got Stripe's answer.
    mutating func object(_ path: String) throws(ApplyError) -> JSON {
        var last = ""
        for attempt in 0..<configuration.maxTries {
            requests += 1
            ProcessTally.add(requests: 1, retries: attempt == 0 ? 0 : 1)
            let outcome = client.perform(api.request(method: "GET", path: path))
            if case .response(let response) = outcome, response.status == 401 || response.status == 403 {
                throw .keyRefused("Stripe refused the API key (HTTP \(response.status))")
            }
            if case .object(let body) = StripeAnswer(outcome) { return body }
            last = StripeAPI.summary(outcome)
            usleep(UInt32(min(8_000_000, 250_000 << attempt)))
        }
        throw .factsUnavailable(["GET \(path.prefix(60)): \(last)"])
    }

    /// Every outbound payment (v2) created at or after `since`, page by page.
    mutating func outboundPayments(since: Date, _ each: (JSON) throws(ApplyError) -> Void) throws(ApplyError) {
        let sinceText = ISO8601DateFormatter().string(from: since)
        var next: String? =
            "/v2/money_management/outbound_payments" + StripeAPI.query([("created_gte", sinceText), ("limit", "100")])
        while let path = next {
            let page = try object(path)
            for payment in page["data"]?.arrayValue ?? [] { try each(payment) }
            next = page["next_page_url"]?.stringValue.flatMap { api.path(of: $0) }
        }
    }
}
