import Testing

@testable import SettleCLI

/// The one formatter of durations and counts the operator reads.
@Suite struct HumanFormatTests {
    @Test(arguments: [
        (0.0, "0.0 s"), (0.44, "0.4 s"), (3.2, "3.2 s"), (9.94, "9.9 s"), (9.96, "10 s"), (42.4, "42 s"),
        (59.6, "1 min 00 s"), (87, "1 min 27 s"), (3599.4, "59 min 59 s"), (3600, "1 h 00 min"),
        (7500, "2 h 05 min"), (58_560, "16 h 16 min"), (86_000, "23 h 53 min"), (86_399, "1 d 00 h"),
        (86_400, "1 d 00 h"),
        (273_600, "3 d 04 h"), (-5, "0.0 s"), (Double.infinity, "0.0 s"),
    ])
    func duration(_ seconds: Double, _ expected: String) {
        #expect(HumanFormat.duration(seconds: seconds) == expected)
    }

    @Test func counts() {
        #expect(HumanFormat.count(0) == "0")
        #expect(HumanFormat.count(999) == "999")
        #expect(HumanFormat.count(1000) == "1,000")
        #expect(HumanFormat.count(5_270_112) == "5,270,112")
        #expect(HumanFormat.count(-12_345) == "-12,345")
    }

    @Test func compactCounts() {
        #expect(HumanFormat.compact(9_999) == "9,999")
        #expect(HumanFormat.compact(12_345) == "12.3 k")
        #expect(HumanFormat.compact(999_949) == "999.9 k")
        #expect(HumanFormat.compact(999_950) == "1.0 M")
        #expect(HumanFormat.compact(4_100_000) == "4.1 M")
        #expect(HumanFormat.compact(2_000_000_000) == "2.0 G")
    }

    @Test func rates() {
        #expect(HumanFormat.rate(12.34) == "12.3")
        #expect(HumanFormat.rate(310_000.4) == "310,000")
        #expect(HumanFormat.rate(0) == "0")
    }
}
