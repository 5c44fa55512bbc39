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
        try answer(path).body
    }

    /// ``object(_:)`` with Stripe's time of the answer (its `Date` header), nil when it gave none.
    mutating func answer(_ path: String) throws(ApplyError) -> (body: JSON, date: Date?) {
        var last = ""
        for attempt in 0..<configuration.maxTries {
            requests += 1
            ProcessTally.add(requests: 1, retries: attempt == 0 ? 0 : 1)
            let outcome = client.perform(api.request(method: "GET", path: path))
            if case .response(let response) = outcome, response.status == 401 || response.status == 403 {
                throw .keyRefused("Stripe refused the API key (HTTP \(response.status))")
            }
            if case .object(let body) = StripeAnswer(outcome), case .response(let response) = outcome {
                return (body, response.header("date").flatMap(StripeGet.httpDate))
            }
            last = StripeAPI.summary(outcome)
            usleep(UInt32(min(8_000_000, 250_000 << attempt)))
        }
        throw .factsUnavailable(["GET \(path.prefix(60)): \(last)"])
    }

    /// An HTTP `Date` header (RFC 7231: `Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
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
