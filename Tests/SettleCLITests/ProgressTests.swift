import Testing

@testable import SettleCLI

/// The progress line's text (the printer's timing is not tested: no timed tests).
@Suite struct ProgressTests {
    @Test func readingLineHasBytesLinesRateAndETA() {
        var state = Progress.State(name: "reading a.csv.gz", total: 100 * 1_048_576, unit: "", bytes: true, started: 0)
        state.done = 25 * 1_048_576
        state.count = 300_000
        #expect(
            Progress.line(state, now: 10)
                == "reading a.csv.gz: 25.0 MiB of 100.0 MiB (25%), 300,000 lines, 30,000 lines/s, ETA 30 s")
    }

    @Test func countedPhaseHasDoneTotalRateAndETA() {
        var state = Progress.State(name: "sending", total: 5_000, unit: "instructions", started: 100)
        state.done = 1_200
        #expect(Progress.line(state, now: 160) == "sending: 1,200/5,000 instructions (24%), 20.0/s, ETA 3 min 10 s")
        state.done = 5_000
        #expect(Progress.line(state, now: 160) == "sending: 5,000/5,000 instructions (100%), 83.3/s, 1 min 00 s")
    }

    @Test func phaseWithoutTotalShowsTheTimeSpent() {
        let state = Progress.State(name: "planning 6,750,000 lines", total: nil, unit: "", started: 0)
        #expect(Progress.line(state, now: 3.2) == "planning 6,750,000 lines: 3.2 s")
    }

    /// SPEC: `--progress auto` shows progress only when standard error is a terminal; `on`
    /// shows it anywhere (log lines away from a terminal), and a JSON log gets events, never
    /// the live line's escapes.
    @Test func progressIsShownOnATerminalOrWhenAskedFor() {
        #expect(Options.progressMode("auto", logFormat: "text", terminal: true) == .terminal)
        #expect(Options.progressMode("auto", logFormat: "text", terminal: false) == .off)
        #expect(Options.progressMode("auto", logFormat: "json", terminal: false) == .off)
        #expect(Options.progressMode("auto", logFormat: "json", terminal: true) == .logLines)
        #expect(Options.progressMode("on", logFormat: "text", terminal: false) == .logLines)
        #expect(Options.progressMode("on", logFormat: "text", terminal: true) == .terminal)
        #expect(Options.progressMode("on", logFormat: "json", terminal: true) == .logLines)
        #expect(Options.progressMode("off", logFormat: "text", terminal: true) == .off)
    }

    @Test func applyPhasesHaveTheirNames() {
        #expect(Progress.applyPhaseName("preflight") == "looking up")
        #expect(Progress.applyPhaseName("send") == "sending")
        #expect(Progress.applyPhaseName("resolve") == "resolving earlier runs")
    }
}

/// The estimate printed after planning.
@Suite struct ApplyEstimateTests {
    @Test func largePlanAtAKnownRate() {
        let estimate = ApplyEstimate(transfers: 4_100_000, reversals: 70_112, payouts: 1_100_000, lookups: 0)
        #expect(
            estimate.text(rate: 90)
                == "apply estimate: 5,270,112 instructions (4.1 M transfers, 1.1 M payouts, 70.1 k reversals), "
                + "5,270,112 requests ≈ 16 h 16 min at 90 requests/s")
    }

    @Test func unknownKeyGivesBothDefaults() {
        let estimate = ApplyEstimate(transfers: 9, reversals: 1, payouts: 1, lookups: 1)
        #expect(
            estimate.text(rate: nil)
                == "apply estimate: 11 instructions (9 transfers, 1 payout, 1 reversal) + 1 look-up, 12 requests "
                + "≈ 0.6 s at 20/s (test key) or 0.1 s at 90/s (live key)")
        #expect(ApplyEstimate().text(rate: 20) == "apply estimate: nothing to send")
    }
}
