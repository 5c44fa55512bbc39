/// A token bucket that spaces requests to at most `rate` per second.
///
/// On a 429, ``lower(now:)`` halves the rate (never below `floor`); after a quiet
/// `recoveryInterval` without 429s the rate climbs back by a tenth of the ceiling at a
/// time, so one burst of 429s does not slow the whole run for good.
public struct RateLimiter: Sendable {
    /// The configured rate, requests per second; the rate never goes above it.
    public let ceiling: Double
    /// The lowest the rate goes after 429s.
    public let floor: Double
    /// How long without a 429 before the rate climbs one step.
    public let recoveryInterval: Duration
    /// The current rate, requests per second.
    public private(set) var rate: Double

    private var tokens: Double
    private var lastRefill: ContinuousClock.Instant
    private var lastChange: ContinuousClock.Instant

    /// - Parameter rate: requests per second (raised to `floor` when below it).
    public init(
        rate: Double, floor: Double = 1, recoveryInterval: Duration = .seconds(5),
        now: ContinuousClock.Instant = .now
    ) {
        self.ceiling = max(rate, floor)
        self.floor = floor
        self.recoveryInterval = recoveryInterval
        self.rate = ceiling
        self.tokens = 1
        self.lastRefill = now
        self.lastChange = now
    }

    /// Takes a token if one is there and returns nil; otherwise returns when one will be.
    public mutating func acquire(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        refill(now: now)
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        let missing = (1 - tokens) / rate
        return now + .nanoseconds(Int64((missing * 1e9).rounded(.up)))
    }

    /// Slows down after a 429: halves the rate, not below `floor`, and drains the bucket.
    public mutating func lower(now: ContinuousClock.Instant) {
        refill(now: now)
        rate = max(floor, rate / 2)
        tokens = min(tokens, 0)
        lastChange = now
    }

    private mutating func refill(now: ContinuousClock.Instant) {
        // Recover one step per quiet interval.
        while rate < ceiling, lastChange + recoveryInterval <= now {
            lastChange = lastChange + recoveryInterval
            rate = min(ceiling, rate + ceiling / 10)
        }
        let elapsed = lastRefill.duration(to: now)
        guard elapsed > .zero else { return }
        tokens = min(1, tokens + elapsed.seconds * rate)
        lastRefill = now
    }
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
