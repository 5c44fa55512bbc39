import SettleHTTP

/// One logical API call: sent, and retried with the same request (so the same
/// idempotency key) while the answer is a passing one.
final class Call {
    var request: HTTPRequest
    /// A short name for logs: the instruction id and what the call does. Never a header.
    let label: String
    var tries = 0
    var notBefore: ContinuousClock.Instant = .now
    /// Whether a try so far may have reached Stripe (see ``CallEnding``). A call that re-sends
    /// what an earlier run may have sent starts with it set.
    var mayHaveReached: Bool
    /// The answer to the last try, if any.
    var lastOutcome: HTTPOutcome?
    /// Called after every try that will be retried (to record it).
    var onRetry: ((HTTPOutcome) -> Void)?
    /// Called once with the last answer (nil when the run stopped before any) and how the tries went.
    let completion: (HTTPOutcome?, CallEnding) -> Void

    init(
        request: HTTPRequest, label: String, mayHaveReached: Bool = false,
        completion: @escaping (HTTPOutcome?, CallEnding) -> Void
    ) {
        self.request = request
        self.label = label
        self.mayHaveReached = mayHaveReached
        self.completion = completion
    }

    var ending: CallEnding { CallEnding(earlierMayHaveReached: mayHaveReached) }
}

/// Counters for the report.
struct CallCounters {
    var requests = 0
    var retries = 0
    var rateLimited = 0
    var serverErrors = 0
    var transportErrors = 0
    /// Answers that were not Stripe's (redirects, HTML, unreadable bodies).
    var notStripe = 0

    mutating func add(_ other: CallCounters) {
        requests += other.requests
        retries += other.retries
        rateLimited += other.rateLimited
        serverErrors += other.serverErrors
        transportErrors += other.transportErrors
        notStripe += other.notStripe
    }
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
    /// Called each time the client asks for work (after every batch of answers), e.g. to
    /// commit the answers that came in.
    var tick: ((ContinuousClock.Instant) -> Void)?
    /// Once set, no new call starts; ``finishStopped()`` ends the calls left waiting.
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
        tick?(now)
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
        ProcessTally.add(requests: 1, retries: call.tries > 1 ? 1 : 0)
        return .request(call.request)
    }

    func completed(_ request: HTTPRequest, _ outcome: HTTPOutcome) {
        guard let call = inFlight.removeValue(forKey: request.tag) else { return }
        call.lastOutcome = outcome
        let retry = retryDecision(outcome)
        limiter.record(rateLimited: retry?.lowersRate ?? false, now: .now)
        guard let retry else {
            call.completion(outcome, call.ending)
            return
        }
        if retry.mayHaveReached { call.mayHaveReached = true }
        if call.tries >= maxTries || stopped {
            log(.warning, "\(call.label): giving up after \(call.tries) tries (\(retry.reason))")
            var ending = call.ending
            ending.gaveUp = true
            call.completion(outcome, ending)
            return
        }
        call.onRetry?(outcome)
        let delay = Backoff.delay(retry: call.tries, base: retryBase, cap: .seconds(30))
        call.notBefore = .now + delay
        log(.debug, "\(call.label): \(retry.reason), retry \(call.tries) of \(maxTries - 1) with the same key")
        pending.append(call)
    }

    /// Ends every call still waiting after a stop: they get no new try.
    func finishStopped() {
        let left = pending
        pending = []
        for call in left {
            var ending = call.ending
            ending.stopped = true
            call.completion(call.lastOutcome, ending)
        }
    }

    private struct RetryDecision {
        var reason: String
        /// The try may have reached Stripe (so a later refusal is not the first try's fate).
        var mayHaveReached: Bool
        /// A global-rate 429: the limiter slows down.
        var lowersRate = false
    }

    /// Why this answer is worth another try with the same key, or nil when it is final.
    private func retryDecision(_ outcome: HTTPOutcome) -> RetryDecision? {
        guard case .response(let response) = outcome else {
            counters.transportErrors += 1
            return RetryDecision(
                reason: StripeAPI.summary(outcome), mayHaveReached: outcome.mayHaveReachedServer)
        }
        // A refused key is final and stops the run; nothing was done with it.
        if response.status == 401 || response.status == 403 { return nil }
        switch StripeAnswer(outcome) {
        case .object:
            return nil
        case .noAnswer(let text):
            counters.notStripe += 1
            if response.status >= 500 { counters.serverErrors += 1 }
            return RetryDecision(reason: text, mayHaveReached: true)
        case .error(let error):
            if error.status == 429 {
                counters.rateLimited += 1
                ProcessTally.add(rateLimited: 1)
                // Only a global-rate 429 (or one that does not say) is about the request rate;
                // concurrency and lock time-outs back off this one request.
                let reason = error.rateLimitReason ?? "global-rate"
                return RetryDecision(
                    reason: "HTTP 429 \(error.code) (\(reason))", mayHaveReached: false,
                    lowersRate: reason == "global-rate")
            }
            if error.status >= 500 {
                counters.serverErrors += 1
                return error.shouldRetry == false
                    ? nil : RetryDecision(reason: "HTTP \(error.status)", mayHaveReached: true)
            }
            if error.status == 409 { return RetryDecision(reason: "HTTP 409 \(error.code)", mayHaveReached: true) }
            if error.shouldRetry == true {
                return RetryDecision(reason: "HTTP \(error.status), Stripe-Should-Retry", mayHaveReached: true)
            }
            return nil
        }
    }
}

extension CallScheduler {
    /// A scheduler at the configured rate, tries and backoff, logging through the configuration.
    convenience init(configuration: ApplyConfiguration, limiter: RateLimiter? = nil) {
        self.init(
            limiter: limiter ?? RateLimiter(rate: configuration.rate), maxTries: configuration.maxTries,
            retryBase: configuration.retryBase
        ) { level, message in configuration.logger(level, message) }
    }
}

extension HTTPClient {
    /// The client every phase uses: the configured time-outs and concurrency.
    static func forStripe(_ configuration: ApplyConfiguration) throws(ApplyError) -> HTTPClient {
        do {
            return try HTTPClient(
                configuration: .init(
                    version: configuration.settleVersion, connectTimeout: configuration.connectTimeout,
                    totalTimeout: configuration.totalTimeout, maxInFlight: configuration.concurrency))
        } catch {
            throw .transport("\(error)")
        }
    }
}
