import SettleHTTP
import Testing

@Suite struct RateLimiterTests {
    @Test func spacesRequestsAtTheRate() {
        let start = ContinuousClock.now
        var limiter = RateLimiter(rate: 10, now: start)
        #expect(limiter.acquire(now: start) == nil)
        let next = limiter.acquire(now: start)
        #expect(next == start + .milliseconds(100))
        #expect(limiter.acquire(now: start + .milliseconds(100)) == nil)
        #expect(limiter.acquire(now: start + .milliseconds(150)) != nil)
        // Over one second at most rate + 1 requests start.
        var granted = 0
        var now = start + .milliseconds(200)
        while now < start + .milliseconds(1200) {
            if limiter.acquire(now: now) == nil { granted += 1 }
            now = now + .milliseconds(5)
        }
        #expect(granted == 10)
    }

    @Test func lowerHalvesNotBelowFloorAndRecoversSlowly() {
        let start = ContinuousClock.now
        var limiter = RateLimiter(rate: 20, floor: 1, recoveryInterval: .seconds(5), now: start)
        limiter.lower(now: start)
        #expect(limiter.rate == 10)
        limiter.lower(now: start)
        limiter.lower(now: start)
        limiter.lower(now: start)
        limiter.lower(now: start)
        #expect(limiter.rate == 1)
        limiter.lower(now: start)
        #expect(limiter.rate == 1)
        _ = limiter.acquire(now: start + .seconds(4))
        #expect(limiter.rate == 1)
        _ = limiter.acquire(now: start + .seconds(5))
        #expect(limiter.rate == 3)
        _ = limiter.acquire(now: start + .seconds(60))
        #expect(limiter.rate == 20)
    }

    @Test func backoffGrowsAndStaysWithinItsBounds() {
        var generator = SystemRandomNumberGenerator()
        for retry in 1...8 {
            let ceiling = min(8.0, 0.25 * Double(1 << (retry - 1)))
            for _ in 0..<50 {
                let delay = Backoff.delay(retry: retry, using: &generator)
                #expect(delay >= .nanoseconds(Int64(ceiling / 2 * 1e9)) - .nanoseconds(1))
                #expect(delay <= .nanoseconds(Int64(ceiling * 1e9)))
            }
        }
    }
}
