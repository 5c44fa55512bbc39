/// What a ``RequestSource`` wants the client to do next.
public enum RequestSourceStep: Sendable {
    /// Start this request now.
    case request(HTTPRequest)
    /// Nothing can start before this instant (rate limit, backoff); ask again then.
    case wait(until: ContinuousClock.Instant)
    /// Nothing to start until a request in flight completes. With nothing in flight the
    /// loop ends.
    case idle
    /// Nothing more to send. The loop ends once no request is in flight (it still asks
    /// again after each completion, so a completion may schedule more work).
    case finished
}

/// Feeds ``HTTPClient/run(source:)``: hands out requests and receives their outcomes.
///
/// Both methods are called on the thread that called `run`, never concurrently.
public protocol RequestSource: AnyObject {
    /// The next thing to do. Called while fewer than `maxInFlight` requests are in flight.
    func next(now: ContinuousClock.Instant) -> RequestSourceStep
    /// A request handed out by `next` has completed.
    func completed(_ request: HTTPRequest, _ outcome: HTTPOutcome)
}
