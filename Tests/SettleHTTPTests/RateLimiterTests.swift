import SettleHTTP
import SettleTestSupport
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

    /// A caller that was busy for 200 ms catches up the 20 slots it missed at once, and
    /// however it catches up, no more than the rate start in any second.
    @Test func aLateCallerCatchesUpWithinTheRateOfEverySecond() {
        let start = ContinuousClock.now
        var limiter = RateLimiter(rate: 100, now: start)
        var starts: [ContinuousClock.Instant] = []
        var now = start
        func take() {
            while let later = limiter.acquire(now: now) { now = later }
            starts.append(now)
        }
        for _ in 0..<50 { take() }
        #expect(starts.last == start + .milliseconds(490))
        now = now + .milliseconds(200)
        let late = now
        for _ in 0..<20 { take() }
        #expect(starts.suffix(20).allSatisfy { $0 == late })
        // Busy again and again: every stall caught up, never more than 100 in a second.
        for round in 0..<400 {
            if round % 10 == 0 { now = now + .milliseconds(240) }
            take()
        }
        for (index, instant) in starts.enumerated() where index >= 100 {
            #expect(starts[index - 100] + .seconds(1) <= instant)
        }
    }

    @Test func rateFollowsTheShareOfAcceptedAnswersAndRecoversEachSecond() {
        let start = ContinuousClock.now
        var limiter = RateLimiter(rate: 100, floor: 1, window: .seconds(1), recoveryStep: 0.05, now: start)
        // A window where a quarter of the answers were rate 429s: 75 % of the rate, plus the step.
        for index in 0..<100 { limiter.record(rateLimited: index % 4 == 0, now: start + .milliseconds(10 * index)) }
        _ = limiter.acquire(now: start + .milliseconds(1000))
        #expect(limiter.rate == 80)
        // A server that takes nothing halves the rate each window (never more): it settles at
        // twice the step (r = r / 2 + 5), where the retries of the refused requests still probe.
        for second in 1..<20 {
            limiter.record(rateLimited: true, now: start + .seconds(second) + .milliseconds(1))
        }
        _ = limiter.acquire(now: start + .seconds(20))
        #expect(limiter.rate > 10 && limiter.rate < 10.001)
        // Quiet windows add 5 % of the ceiling each: back to the ceiling within 20 s.
        _ = limiter.acquire(now: start + .seconds(30))
        #expect(limiter.rate > 60 && limiter.rate < 60.001)
        _ = limiter.acquire(now: start + .seconds(40))
        #expect(limiter.rate == 100)
    }

    @Test func fivePercentRandomRateLimitsKeepMostOfTheRate() {
        // Simulated: 100 answers a second, 5 % of them global-rate 429s, for a minute.
        let start = ContinuousClock.now
        var limiter = RateLimiter(rate: 100, now: start)
        var generator = SplitMix64(seed: 7)
        var lowest = 100.0
        var total = 0.0
        for second in 0..<60 {
            let answers = Int(limiter.rate)
            for index in 0..<answers {
                let now = start + .seconds(second) + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(answers))
                limiter.record(rateLimited: generator.next() % 100 < 5, now: now)
            }
            _ = limiter.acquire(now: start + .seconds(second + 1))
            lowest = min(lowest, limiter.rate)
            total += limiter.rate
        }
        #expect(total / 60 >= 90)
        #expect(lowest >= 80)
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
