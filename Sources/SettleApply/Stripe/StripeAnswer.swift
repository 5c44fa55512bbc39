import SettleCore
import SettleHTTP

/// One HTTP outcome read as Stripe's answer. Only a well-formed answer from Stripe decides
/// anything about an object; everything else (a transport error, a redirect, an HTML page,
/// a body that is not Stripe's JSON) is `noAnswer`, a passing failure.
enum StripeAnswer {
    /// A 2xx with a JSON object body.
    case object(JSON)
    /// A Stripe-shaped error (`{"error": {...}}`) with a 4xx or 5xx status.
    case error(StripeError)
    /// Not an answer from Stripe.
    case noAnswer(String)

    init(_ outcome: HTTPOutcome) {
        switch outcome {
        case .transportError(let kind, let message):
            self = .noAnswer("\(kind.said): \(message)")
        case .response(let response):
            let body = StripeAnswer.jsonObject(response.body)
            switch response.status {
            case 200..<300:
                if let body {
                    self = .object(body)
                } else {
                    self = .noAnswer("HTTP \(response.status) with a body that is not JSON")
                }
            case 400..<600:
                if let error = body?["error"], case .object = error,
                    error["type"]?.stringValue != nil || error["code"]?.stringValue != nil
                {
                    self = .error(StripeError(response: response, error: error))
                } else {
                    self = .noAnswer("HTTP \(response.status) that is not a Stripe error")
                }
            default:
                self = .noAnswer("HTTP \(response.status)")
            }
        }
    }

    private static func jsonObject(_ bytes: [UInt8]) -> JSON? {
        guard let first = bytes.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }),
            first == UInt8(ascii: "{"),
            let value = try? JSON.parse(bytes), case .object = value
        else { return nil }
        return value
    }
}

/// A Stripe error answer.
struct StripeError {
    var status: Int
    /// `error.code`, else `error.type`.
    var code: String
    var message: String
    /// `Idempotent-Replayed: true`: Stripe's saved answer to an earlier request with this key.
    var replayed: Bool
    var shouldRetry: Bool?
    /// `Stripe-Rate-Limited-Reason` of a 429 (`global-rate`, `endpoint-concurrency`, …).
    var rateLimitReason: String?

    init(response: HTTPResponse, error: JSON) {
        status = response.status
        code = error["code"]?.stringValue ?? error["type"]?.stringValue ?? "http_\(response.status)"
        message = error["message"]?.stringValue ?? "HTTP \(response.status)"
        replayed = response.header("idempotent-replayed")?.lowercased() == "true"
        shouldRetry = response.header("stripe-should-retry").map { $0.lowercased() == "true" }
        rateLimitReason = response.header("stripe-rate-limited-reason")?.lowercased()
    }
}

/// What the tries of one call told, besides its last answer.
struct CallEnding {
    /// The tries ran out on passing failures.
    var gaveUp = false
    /// The run stopped before this call's next try (no last answer is final).
    var stopped = false
    /// Some try before the last may have reached Stripe (a reset, a time-out, a 5xx, a 409, an
    /// answer that was not Stripe's), or the call re-sends a request an earlier run may have
    /// made: then only Stripe's replay of the first outcome, or a look-up, settles it.
    var earlierMayHaveReached = false
}

/// What a create call (transfer, reversal, payout) ended with.
enum CreateVerdict: Equatable {
    /// The object exists at Stripe.
    case created(stripeID: String)
    /// Stripe refused it, and no object can exist: the lines may be sent again later.
    case refused(code: String, message: String)
    /// It may exist: only a look-up or a replay under the same key can tell.
    case unknown(String)
    /// It never reached Stripe: nothing exists, nothing was refused.
    case notSent(String)
    /// Stripe refused the API key (401/403): the run stops.
    case keyRefused(String, mayHaveReached: Bool)

    /// Reads a create call's last outcome (nil when it never had one) and how its tries went.
    init(_ outcome: HTTPOutcome?, _ ending: CallEnding) {
        let reached = ending.earlierMayHaveReached
        guard let outcome, !ending.stopped else {
            self =
                reached
                ? .unknown("the run stopped before a definite answer") : .notSent("the run stopped before it was sent")
            return
        }
        if case .response(let response) = outcome, response.status == 401 || response.status == 403 {
            let (code, message) = StripeAPI.error(response)
            self = .keyRefused(
                "Stripe refused the API key (HTTP \(response.status), \(code)): \(message)", mayHaveReached: reached)
            return
        }
        switch StripeAnswer(outcome) {
        case .object(let body):
            if let id = body["id"]?.stringValue, !id.isEmpty {
                self = .created(stripeID: id)
            } else {
                self = .unknown("HTTP 2xx without an object id")
            }
        case .error(let error):
            let passing = error.status == 409 || error.status == 429 || error.status >= 500
            if error.status == 429, !reached {
                self = .notSent("rate limited on every try (\(error.code))")
            } else if passing || error.code == "idempotency_error" || error.code == "idempotency_key_in_use" {
                self = .unknown("HTTP \(error.status) \(error.code): \(error.message)")
            } else if !reached || error.replayed {
                self = .refused(code: error.code, message: error.message)
            } else {
                self = .unknown(
                    "HTTP \(error.status) \(error.code) on a retry, not Stripe's replay of the first try: a look-up decides"
                )
            }
        case .noAnswer(let text):
            self = !reached && !outcome.mayHaveReachedServer ? .notSent(text) : .unknown(text)
        }
    }
}
