import Foundation
import SettleCore
import Testing

@testable import SettleWrite

/// The Prometheus text exposition of a run (a real parser reads it in the end-to-end test).
@Suite struct MetricsFileTests {
    @Test func rendersEveryFamilyWithHelpAndType() {
        var sums = ControlSums()
        sums.add(kind: .transfer, currency: "usd", amount: 7000, status: .planned)
        sums.add(kind: .transfer, currency: "usd", amount: 1500, status: .rejected)
        let metrics = RunMetrics(
            start: 1_796_000_000.25, end: 1_796_000_012, exitStatus: 65,
            counts: [.planned: 1, .rejected: 2], sums: sums, requests: 14, retries: 2, rateLimited: 1)
        let text = MetricsFile.render(metrics)
        #expect(
            text.contains(
                "# TYPE settle_last_run_start_timestamp_seconds gauge\nsettle_last_run_start_timestamp_seconds 1796000000.25\n"
            ))
        #expect(text.contains("\nsettle_last_run_end_timestamp_seconds 1796000012\n"))
        #expect(text.contains("\nsettle_run_duration_seconds 11.75\n"))
        #expect(text.contains("\nsettle_last_run_exit_status 65\n"))
        #expect(text.contains("\nsettle_lines{status=\"planned\"} 1\n"))
        #expect(text.contains("\nsettle_lines{status=\"rejected\"} 2\n"))
        #expect(text.contains("\nsettle_lines{status=\"unknown\"} 0\n"))
        #expect(text.contains("\nsettle_amount_minor{currency=\"usd\",status=\"planned\"} 7000\n"))
        #expect(text.contains("\nsettle_amount_minor{currency=\"usd\",status=\"rejected\"} 1500\n"))
        #expect(text.contains("\nsettle_last_run_requests 14\n"))
        #expect(text.contains("\nsettle_last_run_retries 2\n"))
        #expect(text.contains("\nsettle_last_run_rate_limited 1\n"))
        let families = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.count
        let helps = text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.count
        #expect(families == 9 && helps == 9)
        #expect(text.hasSuffix("\n"))
    }

    @Test func escapesLabelValuesAndHelp() {
        #expect(MetricsFile.escapeLabel("a\"b\\c\nd") == "a\\\"b\\\\c\\nd")
        #expect(MetricsFile.escapeHelp("a\\b\nc\"") == "a\\\\b\\nc\"")
        let metrics = RunMetrics(start: 0, end: 0, exitStatus: 0, lines: [("we\"ird\n", 1)])
        #expect(MetricsFile.render(metrics).contains("settle_lines{status=\"we\\\"ird\\n\"} 1\n"))
    }

    @Test func secondsWithoutFloatNoise() {
        #expect(MetricsFile.seconds(1_796_000_000.1) == "1796000000.1")
        #expect(MetricsFile.seconds(0.043) == "0.043")
        #expect(MetricsFile.seconds(12) == "12")
    }

    @Test func writesAtomicallyIntoPlace() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "settle-metrics-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("settle.prom").path
        let metrics = RunMetrics(start: 1, end: 2, exitStatus: 0)
        try MetricsFile.write(metrics, path: path)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == MetricsFile.render(metrics))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["settle.prom"])
    }
}
