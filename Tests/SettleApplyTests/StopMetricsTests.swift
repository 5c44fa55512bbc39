import Foundation
import SettleCore
import SettleTestSupport
import Testing

@testable import SettleApply
@testable import SettleWrite

/// The metrics file a stop by signal writes (audit 54 F1) is the file `MetricsFile` renders
/// for a run that ended then with 75: its template cut around the two values of the stop,
/// and the signal handler's own digits, on seeded random times.
@Suite struct StopMetricsTests {
    @Test func theHandlersDigitsAreMetricsFileSeconds() {
        var random = SplitMix64(seed: 0x5709)
        let digits = UnsafeMutablePointer<UInt8>.allocate(capacity: 32)
        defer { digits.deallocate() }
        var samples: [Int64] = [0, 1, 10, 100, 999, 1000, 1001, 1010, 1100, 1_764_374_400_250, 4_102_444_800_999]
        for _ in 0..<5000 { samples.append(Int64(random.next() % 5_000_000_000_000)) }
        for millis in samples {
            let count = StopSignals.formatSeconds(millis, into: digits)
            let written = String(decoding: UnsafeBufferPointer(start: digits, count: count), as: UTF8.self)
            #expect(written == MetricsFile.seconds(Double(millis) / 1000), "\(millis)")
        }
    }

    @Test func theTemplateWithTheStopsValuesIsTheRenderedFile() {
        var random = SplitMix64(seed: 0xF1)
        for _ in 0..<200 {
            let startMillis = 1_700_000_000_000 + Int64(random.next() % 100_000_000_000)
            let endMillis = startMillis + Int64(random.next() % 100_000_000)
            let start = Double(startMillis) / 1000
            let end = Double(endMillis) / 1000
            let parts = MetricsFile.stopTemplate(start: start, exitStatus: 75)
            let text =
                parts.head + MetricsFile.seconds(end) + parts.middle
                + MetricsFile.seconds(Double(endMillis - startMillis) / 1000) + parts.tail
            let rendered = MetricsFile.render(
                RunMetrics(start: start, end: end, exitStatus: 75, counts: [:], sums: nil))
            #expect(text == rendered)
        }
    }
}
