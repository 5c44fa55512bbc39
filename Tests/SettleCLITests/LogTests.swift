import Foundation
import SettleCore
import SettleWrite
import Testing

@testable import SettleCLI

/// Events as JSON objects with typed fields, and as readable text.
@Suite struct LogTests {
    final class Lines: @unchecked Sendable {
        var all: [String] = []
    }

    static func log(_ format: String, verbosity: Int = 0) -> (Log, Lines) {
        let lines = Lines()
        let log = Log(
            format: format, verbosity: verbosity, sink: { lines.all.append($0) },
            clock: { Date(timeIntervalSince1970: 1_796_000_000.25) })
        return (log, lines)
    }

    @Test func jsonEventHasItsFieldsAsTopLevelTypedKeys() throws {
        let (log, lines) = Self.log("json")
        log(
            .warning, event: "instruction_failed", "transfer refused",
            fields: [
                .run("run_1"), .instruction("ins_abc"), .lines(3), .kind("transfer"), .amountMinor(7000),
                .currency("usd"), .httpStatus(402), .stripeCode("balance_insufficient"), .requestID("req_9"),
                .attempt(2), .durationMS(131), .file("a.csv"), .line(17),
            ])
        #expect(lines.all.count == 1)
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("}\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["time"] as? String == "2026-11-30T00:53:20.250Z")
        #expect(object["level"] as? String == "warning")
        #expect(object["event"] as? String == "instruction_failed")
        #expect(object["message"] as? String == "transfer refused")
        #expect(object["run"] as? String == "run_1")
        #expect(object["amount_minor"] as? Int == 7000)
        #expect(object["http_status"] as? Int == 402)
        #expect(object["attempt"] as? Int == 2)
        #expect(object["line"] as? Int == 17)
        #expect(object["stripe_code"] as? String == "balance_insufficient")
        #expect(object.count == 17)
        // Integers are written as JSON numbers, not strings.
        #expect(line.contains("\"amount_minor\":7000,"))
    }

    @Test func aFieldNamedLikeAReservedKeyDoesNotOverwriteIt() throws {
        let (log, lines) = Self.log("json")
        log(.info, event: "x", "m", fields: [Log.Field("event", "other")])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines.all[0].utf8)) as? [String: Any])
        #expect(object["event"] as? String == "x")
        #expect(object["field_event"] as? String == "other")
    }

    /// A key pasted where a value goes is echoed by the error that refuses it: whatever is
    /// shaped like a secret or restricted key never reaches the log, in the message or a
    /// field, as text or JSON (audit 19 F4).
    @Test func anythingShapedLikeAKeyIsRedacted() throws {
        for format in ["text", "json"] {
            let (log, lines) = Self.log(format, verbosity: 1)
            log(
                .error, event: "command_failed", "settle.json: financial_account 'sk_live_51AbC9xyz' is not fa_…",
                fields: [Log.Field("file", "/keys/rk_test_9Zz"), .lines(2)])
            let line = try #require(lines.all.first)
            #expect(!line.contains("sk_live_51AbC9xyz") && !line.contains("rk_test_9Zz"), "\(line)")
            #expect(line.contains("financial_account '[redacted]' is not fa_"), "\(line)")
            #expect(line.contains("/keys/[redacted]"), "\(line)")
        }
        // Only keys: the words around them, and a bare prefix, stay.
        #expect(Log.withoutKeys("risk_test_ is a prefix; ask_live_x") == "risk_test_ is a prefix; a[redacted]")
        #expect(Log.withoutKeys("no key here") == "no key here")
    }

    @Test func textShowsFieldsOnlyWhenVerbose() {
        let (quiet, quietLines) = Self.log("text")
        quiet(.info, event: "plan_written", "plan written", fields: [.lines(36), .file("out dir")])
        #expect(quietLines.all == ["settle: plan written\n"])
        let (verbose, verboseLines) = Self.log("text", verbosity: 1)
        verbose(.warning, event: "plan_written", "plan written", fields: [.lines(36), .file("out dir")])
        #expect(verboseLines.all == ["settle: warning: plan written lines=36 file=\"out dir\"\n"])
    }

    @Test func levelsBelowTheThresholdAreDropped() {
        let (log, lines) = Self.log("text", verbosity: -1)
        log(.info, event: "a", "info")
        log(.debug, event: "b", "debug")
        log(.warning, event: "c", "warn")
        #expect(lines.all == ["settle: warning: warn\n"])
    }

    @Test func theOldCallShapeIsAnEventNamedLog() throws {
        let (log, lines) = Self.log("json")
        log(.error, "boom", [("position", "a.csv:3")])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines.all[0].utf8)) as? [String: Any])
        #expect(object["event"] as? String == "log")
        #expect(object["position"] as? String == "a.csv:3")
    }
}

/// Many similar warnings said in one line.
@Suite struct WarningGroupTests {
    @Test func oneLineNamesAtMostFive() {
        let items = (1...7).map { ("pm_\($0)", $0 == 1 ? "archived" : "not instant") }
        #expect(
            WarningGroup.line(total: 650, noun: "payout methods", verb: "checked", problem: "unusable", items: items)
                == "650 payout methods checked, 7 unusable: pm_1 (archived), pm_2 (not instant), pm_3 (not instant), "
                + "pm_4 (not instant), pm_5 (not instant) and 2 more")
        #expect(
            WarningGroup.line(
                total: 650, noun: "payout methods", verb: "checked", problem: "unusable",
                items: [("pm_a", "archived")]) == "650 payout methods checked, 1 unusable: pm_a (archived)")
        #expect(
            WarningGroup.line(total: 3, noun: "charges", verb: "looked up", problem: "pending", items: [])
                == "3 charges looked up, none pending")
    }

    @Test func emitsOneWarningWithCounts() throws {
        let (log, lines) = LogTests.log("json")
        let group = WarningGroup(noun: "payout methods", problem: "unusable", event: "payout_methods_checked", log: log)
        group.checked(650)
        group.add("pm_a", reason: "archived")
        group.add("pm_b", reason: "not instant")
        group.emit()
        #expect(lines.all.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines.all[0].utf8)) as? [String: Any])
        #expect(object["level"] as? String == "warning")
        #expect(object["event"] as? String == "payout_methods_checked")
        #expect(
            object["message"] as? String
                == "650 payout methods checked, 2 unusable: pm_a (archived), pm_b (not instant)")
        #expect(object["checked"] as? Int == 650)
        #expect(object["unusable"] as? Int == 2)
    }

    @Test func saysNothingWhenNothingWasChecked() {
        let (log, lines) = LogTests.log("text")
        WarningGroup(noun: "charges", problem: "pending", event: "charges_checked", log: log).emit()
        #expect(lines.all.isEmpty)
    }
}

/// The page facts the apply side reads from a manifest.
@Suite struct PlanReportTests {
    @Test func factsFromAManifest() throws {
        let manifest = try JSON.parse(
            #"{"run_id":"run_7","as_of":"2026-11-29","inputs":[{"path":"a.csv","status":"read"},"#
                + #"{"path":"b.csv.gz","status":"rejected","reason_code":"gzip_truncated","reason":"cut","position":"b.csv.gz:9"}]}"#
        )
        let facts = PlanReport.facts(manifest: manifest, mode: "apply", exit: .tryAgain)
        #expect(facts.runID == "run_7")
        #expect(facts.asOf == "2026-11-29")
        #expect(facts.mode == "apply")
        #expect(facts.exitStatus == 75)
        #expect(facts.rejectedFiles.map(\.path) == ["b.csv.gz"])
        #expect(facts.rejectedFiles.first?.code == "gzip_truncated")
        #expect(facts.rejectedFiles.first?.position == "b.csv.gz:9")
    }
}

/// A failure with a place carries its code and location into the `command_failed` event.
@Suite struct CommandFailureTests {
    @Test func aPlacedFailureGivesItsFieldsAndExitStatus() {
        let failure = CommandFailure(
            SettleError(
                .planInvalid, "DIR/instructions.jsonl line 4: byte 9: expected ':'; nothing was sent",
                at: .init(file: "DIR/instructions.jsonl", line: 4, byteOffset: 9)))
        #expect(failure.code == .linesRejected)
        #expect(
            failure.fields.map(\.key) == ["exit_status", "code", "file", "line", "byte_offset"])
        #expect(CommandFailure(.usage, "no").fields.map(\.key) == ["exit_status"])
    }
}
