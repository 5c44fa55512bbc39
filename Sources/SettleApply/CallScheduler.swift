import SettleHTTP

/// One logical API call: sent, and retried with the same request (so the same
/// idempotency key) while the answer is a passing one.
final class Call {
    var request: HTTPRequest
    /// A short name for logs: the instruction id and what the call does. Never a header.
    let label: String
    var tries = 0
    var notBefore: ContinuousClock.Instant = .now
    /// Called after every try that will be retried (to record it).
    var onRetry: ((HTTPOutcome) -> Void)?
    /// Called once with the last answer; `gaveUp` when the tries ran out on a passing one.
    let completion: (HTTPOutcome, _ gaveUp: Bool) -> Void

    init(request: HTTPRequest, label: String, completion: @escaping (HTTPOutcome, Bool) -> Void) {
        self.request = request
        self.label = label
        self.completion = completion
    }
}

/// Counters for the report.
struct CallCounters {
    var requests = 0
    var retries = 0
    var rateLimited = 0
    var serverErrors = 0
    var transportErrors = 0
}

/// Feeds calls to the HTTP client at the limiter's pace, retries passing failures with
/// jittered backoff, and asks `refill` for more work whenever nothing is ready to go.
final class CallScheduler: RequestSource {
    private var pending: [Call] = []
    private var inFlight: [Int: Call] = [:]
    private var nextTag = 0
    private var limiter: RateLimiter
    private let maxTries: Int
    private let retryBase: Duration
    private let log: (ApplyLogLevel, String) -> Void
    /// Pulls the next batch of new calls (e.g. marks them in flight in the ledger first);
    /// empty when there is no more.
    var refill: (() -> [Call])?
    /// Once set, no new call starts (pending ones are dropped unanswered).
    var stopped = false
    var counters = CallCounters()

    init(limiter: RateLimiter, maxTries: Int, retryBase: Duration, log: @escaping (ApplyLogLevel, String) -> Void) {
        self.limiter = limiter
        self.maxTries = max(1, maxTries)
        self.retryBase = retryBase
        self.log = log
    }

    /// The limiter as the run left it (429s lower its rate), for the next phase.
    var rateLimiter: RateLimiter { limiter }

    func enqueue(_ call: Call) { pending.append(call) }

    func next(now: ContinuousClock.Instant) -> RequestSourceStep {
        if stopped { return inFlight.isEmpty ? .finished : .idle }
        var readyIndex = pending.firstIndex { $0.notBefore <= now }
        if readyIndex == nil, let refill {
            let more = refill()
            pending.append(contentsOf: more)
            readyIndex = pending.firstIndex { $0.notBefore <= now }
        }
        guard let index = readyIndex else {
            if let earliest = pending.map(\.notBefore).min() { return .wait(until: earliest) }
            return inFlight.isEmpty ? .finished : .idle
        }
        if let later = limiter.acquire(now: now) { return .wait(until: later) }
        let call = pending.remove(at: index)
        call.tries += 1
        nextTag += 1
        call.request.tag = nextTag
        inFlight[nextTag] = call
        counters.requests += 1
        if call.tries > 1 { counters.retries += 1 }
        return .request(call.request)
    }

    func completed(_ request: HTTPRequest, _ outcome: HTTPOutcome) {
        guard let call = inFlight.removeValue(forKey: request.tag) else { return }
        let reason = retryReason(outcome)
        guard let reason else {
            call.completion(outcome, false)
            return
        }
        if call.tries >= maxTries || stopped {
            log(.warning, "\(call.label): giving up after \(call.tries) tries (\(reason))")
            call.completion(outcome, true)
            return
        }
        call.onRetry?(outcome)
        let delay = Backoff.delay(retry: call.tries, base: retryBase, cap: .seconds(30))
        call.notBefore = .now + delay
        log(.info, "\(call.label): \(reason), retry \(call.tries) of \(maxTries - 1) with the same key")
        pending.append(call)
    }

    /// Why this answer is worth another try with the same key, or nil when it is final.
    private func retryReason(_ outcome: HTTPOutcome) -> String? {
        switch outcome {
        case .transportError(let kind, let message):
            counters.transportErrors += 1
            return "\(kind.rawValue) error: \(message)"
        case .response(let response):
            let shouldRetry = response.header("stripe-should-retry")
            if response.status == 429 {
                counters.rateLimited += 1
                limiter.lower(now: .now)
                return "HTTP 429, rate lowered to \(limiter.rate)/s"
            }
            if response.status >= 500 {
                counters.serverErrors += 1
                return shouldRetry == "false" ? nil : "HTTP \(response.status)"
            }
            if response.status == 409 { return "HTTP 409" }
            if shouldRetry == "true", response.status >= 400 { return "HTTP \(response.status), Stripe-Should-Retry" }
            return nil
        }
    }
}
