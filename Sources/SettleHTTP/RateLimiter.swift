/// A token bucket that spaces requests to at most `rate` per second, and adapts the rate
/// to what the server accepts.
///
/// Answers are counted in windows of `window` (one second by default). At the end of a
/// window in which some answers were global-rate 429s, the rate is multiplied by the share
/// of answers that were accepted (never by less than a half); then every window adds
/// `ceiling × recoveryStep`. So the rate settles just above what the server takes
/// (`accepted + step`), a few random 429s cost a few per cent, and it climbs back within
/// seconds. 429s for concurrency or lock time-outs are not about
/// the rate: the caller backs off that one request and does not report them here.
public struct RateLimiter: Sendable {
    /// The configured rate, requests per second; the rate never goes above it.
    public let ceiling: Double
    /// The lowest the rate goes after 429s.
    public let floor: Double
    /// The length of one counting window.
    public let window: Duration
    /// The share of the ceiling added back after each window without a rate 429.
    public let recoveryStep: Double
    /// The current rate, requests per second.
    public private(set) var rate: Double
    /// How much of the rate may be caught up after a late call (see `capacity`).
    public let burst: Duration
    /// When the last requests started, oldest first (at most `ceiling` of them): no more
    /// than `rate` start in any `window`, however late calls catch up.
    private var starts: [ContinuousClock.Instant] = []
    private var oldestStart = 0

    private var tokens: Double
    private var lastRefill: ContinuousClock.Instant
    private var windowStart: ContinuousClock.Instant
    private var answered = 0
    private var limited = 0

    /// - Parameter rate: requests per second (raised to `floor` when below it).
    public init(
        rate: Double, floor: Double = 1, window: Duration = .seconds(1), recoveryStep: Double = 0.05,
        burst: Duration = .milliseconds(250), now: ContinuousClock.Instant = .now
    ) {
        self.burst = burst
        self.ceiling = max(rate, floor)
        self.floor = floor
        self.window = window
        self.recoveryStep = recoveryStep
        self.rate = ceiling
        self.tokens = 1
        self.lastRefill = now
        self.windowStart = now
    }

    /// Takes a token if one is there and returns nil; otherwise returns when one will be.
    public mutating func acquire(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        refill(now: now)
        if tokens >= 1 {
            // The request `limit` starts ago must be a window old.
            let limit = max(1, Int(rate.rounded(.down)))
            if starts.count >= limit {
                let earlier = starts[(oldestStart + starts.count - limit) % starts.count]
                if earlier + window > now { return earlier + window }
            }
            tokens -= 1
            noteStart(now)
            return nil
        }
        let missing = (1 - tokens) / rate
        return now + .nanoseconds(Int64((missing * 1e9).rounded(.up)))
    }

    /// Keeps the start instants of the last `ceiling` requests, in a ring.
    private mutating func noteStart(_ now: ContinuousClock.Instant) {
        if starts.count < max(1, Int(ceiling.rounded(.down))) {
            starts.append(now)
            return
        }
        starts[oldestStart] = now
        oldestStart = (oldestStart + 1) % starts.count
    }

    /// Counts one answer: `rateLimited` for a 429 about the request rate (global rate).
    public mutating func record(rateLimited: Bool, now: ContinuousClock.Instant) {
        closeWindows(now: now)
        answered += 1
        if rateLimited {
            limited += 1
            tokens = min(tokens, 0)
        }
    }

    private mutating func closeWindows(now: ContinuousClock.Instant) {
        while windowStart + window <= now {
            if limited > 0, answered > 0 {
                let accepted = Double(answered - limited) / Double(answered)
                rate = rate * max(0.5, accepted)
            }
            rate = max(floor, min(ceiling, rate + ceiling * recoveryStep))
            answered = 0
            limited = 0
            windowStart = windowStart + window
            // A long quiet spell: jump to now instead of replaying every empty window.
            if windowStart + window * 20 <= now, rate >= ceiling { windowStart = now }
        }
    }

    private mutating func refill(now: ContinuousClock.Instant) {
        closeWindows(now: now)
        let elapsed = lastRefill.duration(to: now)
        guard elapsed > .zero else { return }
        tokens = min(capacity, tokens + elapsed.seconds * rate)
        lastRefill = now
    }

    /// The most tokens saved up: `burst` worth of the rate (at least one). A caller that
    /// comes back late (busy committing answers, reading the next instructions, a ledger
    /// checkpoint) catches up on the slots it missed instead of losing them; in any span of
    /// time `t` at most `capacity + rate × t` requests start, and in any `window` (one
    /// second) at most `rate` (the ring of start instants), so the rate never exceeds the
    /// configured one over a second, and a server's token bucket of a second's worth (Stripe's,
    /// the sandbox's) is never emptied.
    private var capacity: Double { max(1, (rate * burst.seconds).rounded(.down)) }
}

/// Exponential backoff with jitter, for retries with the same idempotency key.
public enum Backoff {
    /// The delay before retry number `retry` (1 for the first retry): half of
    /// `min(cap, base × 2^(retry−1))` plus a random part of up to the other half, so
    /// retries spread out but never come back at once.
    public static func delay(
        retry: Int, base: Duration = .milliseconds(250), cap: Duration = .seconds(8),
        using generator: inout some RandomNumberGenerator
    ) -> Duration {
        let exponent = min(max(retry - 1, 0), 20)
        let ceiling = min(cap.seconds, base.seconds * Double(1 << exponent))
        let jitter = Double.random(in: 0...(ceiling / 2), using: &generator)
        return .nanoseconds(Int64((ceiling / 2 + jitter) * 1e9))
    }

    /// ``delay(retry:base:cap:using:)`` with the system's random numbers.
    public static func delay(retry: Int, base: Duration = .milliseconds(250), cap: Duration = .seconds(8)) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(retry: retry, base: base, cap: cap, using: &generator)
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number (timing only, never money).
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
