import Foundation
import SettleTestSupport
import Testing

/// What the people who run settle see: help, logs, metrics, report.html — read back with the
/// tools they use (Prometheus's own parser, a real browser).
@Suite struct OperatorCommandTests {
    static let sample = "samples/orders-2026-11-29.csv.gz"

    // MARK: help

    @Test(arguments: ["plan", "apply", "run", "validate", "status", "cancel", "ledger", "help"])
    func helpPerCommand(_ command: String) throws {
        let viaHelp = try SettleProcess.run(["help", command])
        #expect(viaHelp.status == 0)
        #expect(viaHelp.stdout.hasPrefix("settle \(command) — "))
        #expect(viaHelp.stdout.contains("\nUSAGE\n  settle "))
        #expect(viaHelp.stdout.contains("\nEXIT STATUS\n  0   "))
        #expect(viaHelp.stdout.contains("\nEXAMPLES\n  # "))
        let viaFlag = try SettleProcess.run([command, "--help"])
        #expect(viaFlag.status == 0)
        #expect(viaFlag.stdout == viaHelp.stdout)
    }

    @Test func globalHelpListsCommandsAndOptions() throws {
        let outcome = try SettleProcess.run(["--help"])
        #expect(outcome.status == 0)
        for line in [
            "settle plan INPUT... --out DIR [options]", "settle status [--ledger FILE] [--line ID] [--json]",
            "settle cancel LINE_ID... [--ledger FILE]", "settle ledger rebuild --since DATE",
            "--metrics-file FILE", "--log-format text|json", "--online",
        ] {
            #expect(outcome.stdout.contains(line), "settle --help lacks \(line)")
        }
        #expect(try SettleProcess.run(["help"]).stdout == outcome.stdout)
    }

    @Test func wrongUsagePrintsTheCommandsUsageAndExits64() throws {
        let missing = try SettleProcess.run(["plan", Self.sample])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("settle: error: plan needs --out DIR\n"))
        #expect(missing.stderr.contains("usage: settle plan INPUT... --out DIR [options]\nsee settle help plan"))
        let unknown = try SettleProcess.run(["apply", "--colour"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("usage: settle apply DIR [options]"))
        let none = try SettleProcess.run([])
        #expect(none.status == 64)
        #expect(none.stderr.hasPrefix("usage: settle plan|apply|run"))
        #expect(try SettleProcess.run(["help", "nosuch"]).status == 64)
        #expect(try SettleProcess.run(["frobnicate"]).status == 64)
    }

    /// `settle ledger init FILE` creates FILE, as `--ledger FILE` does (audit 86 F2: it was 64);
    /// two different names are refused before anything is made.
    @Test func ledgerInitTakesTheLedgerAsItsFile() throws {
        let folder = SettleProcess.temporaryFolder()
        let named = folder.appendingPathComponent("named.sqlite").path
        let made = try SettleProcess.run(["ledger", "init", named])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try SettleProcess.run(["status", "--ledger", named]).status == 0)
        #expect(try SettleProcess.run(["ledger", "init", named, "--ledger", named]).status == 78, "exists already")
        let other = folder.appendingPathComponent("other.sqlite").path
        let twice = try SettleProcess.run(["ledger", "init", other, "--ledger", named + "x"])
        #expect(twice.status == 64)
        #expect(twice.stderr.contains("names two ledgers"), "\(twice.stderr)")
        #expect(!FileManager.default.fileExists(atPath: other) && !FileManager.default.fileExists(atPath: named + "x"))
        #expect(try SettleProcess.run(["ledger", "init", other, "extra"]).status == 64)
    }

    /// An option given twice with different values: the last is used, as getopt does, and the
    /// run says so on standard error, naming both (audit 63 L2: a cron line with two `--out`s
    /// wrote to the second without a word). The same value twice says nothing.
    @Test func anOptionGivenTwiceSaysWhichValueIsUsed() throws {
        let folder = SettleProcess.temporaryFolder()
        let first = folder.appendingPathComponent("first").path
        let second = folder.appendingPathComponent("second").path
        let twice = try SettleProcess.run([
            "plan", Self.sample, "--out", first, "--as-of", "2026-11-28", "--out", second, "--as-of", "2026-11-29",
        ])
        #expect(twice.status == 65, "\(twice.stderr)")
        #expect(
            twice.stderr.contains("--out was given more than once; using the last, \(second) (not \(first))"),
            "\(twice.stderr)")
        #expect(twice.stderr.contains("--as-of was given more than once; using the last, 2026-11-29 (not 2026-11-28)"))
        #expect(FileManager.default.fileExists(atPath: second + "/results.csv"))
        #expect(!FileManager.default.fileExists(atPath: first))
        let same = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("third").path, "--as-of", "2026-11-29",
            "--as-of", "2026-11-29",
        ])
        #expect(same.status == 65)
        #expect(!same.stderr.contains("more than once"), "\(same.stderr)")
    }

    // MARK: logs

    /// Also with `--progress on`: progress is events in a JSON log, not the terminal's live
    /// line (audit 38 D1: its escapes were 7 of 19 lines).
    @Test(arguments: ["auto", "on"]) func jsonLogsAreOneObjectPerEventWithTypedFields(progress: String) throws {
        let out = SettleProcess.temporaryFolder()
        let outcome = try SettleProcess.run([
            "plan", Self.sample, "--out", out.path, "--as-of", "2026-11-29", "--log-format", "json", "-v",
            "--progress", progress,
        ])
        #expect(outcome.status == 65)
        let lines = outcome.stderr.split(separator: "\n")
        #expect(!lines.isEmpty)
        var events: [String: [String: Any]] = [:]
        for line in lines {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            for key in ["time", "level", "event", "message"] { #expect(object[key] is String, "\(key) in \(line)") }
            events[object["event"] as! String] = object
        }
        let read = try #require(events["input_read"])
        #expect(read["lines"] as? Int == 36)
        #expect(read["file"] as? String == Self.sample)
        let written = try #require(events["plan_written"])
        #expect(written["lines"] as? Int == 36)
        let estimate = try #require(events["apply_estimate"])
        #expect(
            estimate["instructions"] as? Int
                == Int(
                    SettleProcess.read(out.appendingPathComponent("instructions.jsonl")).split(separator: "\n").count))
        #expect(events["lines_rejected"]?["level"] as? String == "warning")
    }

    /// The error that stops a command is JSON too when the options asked for it, even when
    /// they do not parse (a bad config file, 78; a bad option, 64, without the usage text),
    /// and a key pasted into a config value is not echoed (audit 19 F4, F5).
    @Test func theStoppingErrorIsJSONAndNeverEchoesAKey() throws {
        let folder = SettleProcess.temporaryFolder()
        let config = folder.appendingPathComponent("settle.json")
        try Data(#"{"financial_account": "sk_live_51PastedByMistake", "rate": 5}"#.utf8).write(to: config)
        let out = folder.appendingPathComponent("out").path
        for (arguments, status) in [
            (["plan", Self.sample, "--out", out, "--config", config.path, "--log-format", "json"], Int32(78)),
            (["plan", Self.sample, "--out", out, "--rate", "fast", "--log-format=json"], 64),
            // No Stripe-Version header at all would ask for the account's default version.
            (["plan", Self.sample, "--out", out, "--stripe-version", "", "--log-format", "json"], 64),
            // Not a country: every cross-border verdict would be wrong.
            (["validate", Self.sample, "--platform-country", "ZZ", "--log-format", "json"], 64),
        ] {
            let outcome = try SettleProcess.run(arguments)
            #expect(outcome.status == status, "\(outcome.stderr)")
            let lines = outcome.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(outcome.stderr)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8)) as? [String: Any],
                "not JSON: \(outcome.stderr)")
            #expect(object["event"] as? String == "command_failed")
            #expect(!outcome.stderr.contains("sk_live_51PastedByMistake"))
        }
    }

    /// `-vv` is two `-v`, `-qq` two `-q`; `uk` is the United Kingdom.
    @Test func repeatedShortFlagsAndUKParse() throws {
        let verbose = try SettleProcess.run(["validate", Self.sample, "-vv", "--platform-country", "uk"])
        #expect(verbose.status == 65, "\(verbose.stderr)")
        #expect(verbose.stderr.contains("settle: debug: "))
        let quiet = try SettleProcess.run(["validate", Self.sample, "-qq"])
        #expect(quiet.status == 65 && quiet.stderr.isEmpty, "\(quiet.stderr)")
    }

    @Test func aRejectedFileIsAnEventWithItsPlace() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("cut.csv.gz")
        let whole = try Data(contentsOf: SettleProcess.root.appendingPathComponent(Self.sample))
        try whole.prefix(whole.count / 2).write(to: input)
        let outcome = try SettleProcess.run([
            "plan", input.path, "--out", folder.appendingPathComponent("out").path, "--as-of", "2026-11-29",
            "--log-format", "json",
        ])
        #expect(outcome.status == 65)
        let rejected = try #require(
            outcome.stderr.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.first { $0["event"] as? String == "input_rejected" })
        #expect(rejected["level"] as? String == "error")
        #expect(rejected["file"] as? String == input.path)
        #expect(rejected["reason_code"] as? String == "gzip_truncated")
        #expect(rejected["line"] is Int)
    }

    // MARK: metrics

    /// The samples of a metrics file as Prometheus's own parser reads them: "name{labels}" → value.
    static func parseMetrics(_ path: String) throws -> [String: Double] {
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = {}
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                assert family.documentation, family.name
                for s in family.samples:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                    out[s.name + ("{" + labels + "}" if labels else "")] = s.value
            print(json.dumps(out))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, path]
        let pipe = Pipe()
        let errors = Pipe()
        process.standardOutput = pipe
        process.standardError = errors
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(
            process.terminationStatus == 0,
            "the Prometheus parser refused \(path) (make test installs prometheus_client): \(errorText)")
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Double])
    }

    @Test func planWritesMetricsThatPrometheusParses() throws {
        let folder = SettleProcess.temporaryFolder()
        let metricsPath = folder.appendingPathComponent("settle.prom").path
        let before = Date().timeIntervalSince1970
        let outcome = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("out").path, "--as-of", "2026-11-29", "-q",
            "--metrics-file", metricsPath,
        ])
        let after = Date().timeIntervalSince1970
        #expect(outcome.status == 65)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["out", "settle.prom"])
        let metrics = try Self.parseMetrics(metricsPath)
        #expect(metrics["settle_last_run_exit_status"] == 65)
        #expect(metrics["settle_lines{status=\"planned\"}"] == 15)
        #expect(metrics["settle_lines{status=\"rejected\"}"] == 16)
        #expect(metrics["settle_lines{status=\"deferred\"}"] == 3)
        #expect(metrics["settle_lines{status=\"netted\"}"] == 2)
        #expect(metrics["settle_lines{status=\"settled\"}"] == 0)
        #expect(metrics["settle_last_run_requests"] == 0)
        #expect(metrics["settle_last_run_retries"] == 0)
        #expect(metrics["settle_last_run_rate_limited"] == 0)
        // Amounts are summary.csv's, exactly.
        let summary = SettleProcess.read(folder.appendingPathComponent("out/summary.csv"))
        var compared = 0
        for row in summary.split(separator: "\n").dropFirst() {
            // run_id and as_of first: the per-currency columns follow.
            let fields = Array(
                row.split(separator: ",", omittingEmptySubsequences: false).map(String.init).dropFirst(2))
            guard fields[1].hasPrefix("status:"), !fields[0].isEmpty else { continue }
            let status = String(fields[1].dropFirst("status:".count))
            #expect(
                metrics["settle_amount_minor{currency=\"\(fields[0])\",status=\"\(status)\"}"] == Double(fields[4]),
                "\(row)")
            compared += 1
        }
        #expect(compared >= 5)
        let start = try #require(metrics["settle_last_run_start_timestamp_seconds"])
        let end = try #require(metrics["settle_last_run_end_timestamp_seconds"])
        #expect(start >= before.rounded(.down) && start <= end && end <= after.rounded(.up))
        #expect(abs(try #require(metrics["settle_run_duration_seconds"]) - (end - start)) < 0.002)
    }

    @Test func aRunThatStopsEarlyStillWritesItsExitStatus() throws {
        let folder = SettleProcess.temporaryFolder()
        let metricsPath = folder.appendingPathComponent("settle.prom").path
        let outcome = try SettleProcess.run([
            "plan", folder.appendingPathComponent("missing.csv").path, "--out",
            folder.appendingPathComponent("out").path,
            "--metrics-file", metricsPath,
        ])
        #expect(outcome.status == 66)
        let metrics = try Self.parseMetrics(metricsPath)
        #expect(metrics["settle_last_run_exit_status"] == 66)
        #expect(metrics["settle_lines{status=\"planned\"}"] == 0)
        // 66 stops before anything is made: no output folder (audit 12: it held a lock file).
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("out").path))
        // Nor a lock file beside a --ledger that is not a ledger (run refuses it with 66).
        let input = folder.appendingPathComponent("orders.csv")
        try "line_id,order_id,amount,currency,destination\n".write(to: input, atomically: true, encoding: .utf8)
        let notALedger = folder.appendingPathComponent("notes.txt")
        try "not a ledger".write(to: notALedger, atomically: true, encoding: .utf8)
        let run = try SettleProcess.run(
            [
                "run", input.path, "--out", folder.appendingPathComponent("run").path, "--ledger", notALedger.path,
                "--api-base", "http://127.0.0.1:9",
            ], environment: ["STRIPE_API_KEY": testKey])
        #expect(run.status == 66, "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: notALedger.path + ".lock"))
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("run").path))
        // A bad config file stops the run before its options exist (78): the command line's
        // --metrics-file still gets the exit status (it had none).
        let config = folder.appendingPathComponent("settle.json")
        try #"{"platform_country": "US", "finacial_account": "fa_1"}"#.write(
            to: config, atomically: true, encoding: .utf8)
        let badConfigMetrics = folder.appendingPathComponent("config.prom").path
        let badConfig = try SettleProcess.run([
            "plan", input.path, "--out", folder.appendingPathComponent("bad-config").path, "--config", config.path,
            "--metrics-file=\(badConfigMetrics)",
        ])
        #expect(badConfig.status == 78, "\(badConfig.stderr)")
        #expect(try Self.parseMetrics(badConfigMetrics)["settle_last_run_exit_status"] == 78)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("bad-config").path))
        // For node_exporter, which may run as another user: 0644 when new, and the mode an
        // operator gave it kept on every rewrite (audit 19 F7: always 0600).
        func mode() throws -> Int {
            try #require(try FileManager.default.attributesOfItem(atPath: metricsPath)[.posixPermissions] as? Int)
        }
        #expect(try mode() == 0o644)
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: metricsPath)
        _ = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("out2").path, "--as-of", "2026-11-29", "-q",
            "--metrics-file", metricsPath,
        ])
        #expect(try mode() == 0o640)
    }

    /// A one-line export (L1, 10.00 usd to acct_1A) in `folder`.
    static func oneLine(in folder: URL) throws -> URL {
        let input = folder.appendingPathComponent("orders.csv")
        try "line_id,order_id,amount,currency,destination\nL1,O1,10.00,usd,acct_1A\n".write(
            to: input, atomically: true, encoding: .utf8)
        return input
    }

    /// `settle plan INPUT --out OUT --as-of 2026-11-29 --metrics-file METRICS` (`-q` unless not `quiet`).
    static func plan(_ input: URL, into out: URL, metrics: String, quiet: Bool = true) throws -> SettleProcess.Outcome {
        try SettleProcess.run(
            ["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "--metrics-file", metrics]
                + (quiet ? ["-q"] : []))
    }

    /// A metrics file that cannot be written makes a run that would end 0 end 75 (every write
    /// is checked, and cron mails on a non-zero status; the collector would show the previous
    /// run as the last one): the message says the lines are as results.csv says. A run that
    /// ends otherwise keeps its status (audit 61 F1: exit 0).
    @Test func aMetricsFileThatCannotBeWrittenIsNotASilentZero() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = try Self.oneLine(in: folder)
        // A folder that is a file: no metrics file can be made in it, by any user.
        let blocked = folder.appendingPathComponent("orders.csv/settle.prom").path
        let clean = try Self.plan(input, into: folder.appendingPathComponent("out"), metrics: blocked, quiet: false)
        #expect(clean.status == 75, "\(clean.stderr)")
        #expect(clean.stderr.contains("cannot write --metrics-file \(blocked): "), "\(clean.stderr)")
        #expect(clean.stderr.contains("run again later to write the metrics"), "\(clean.stderr)")
        #expect(SettleProcess.read(folder.appendingPathComponent("out/results.csv")).contains(",planned,"))
        let rejected = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("sample").path, "--as-of", "2026-11-29",
            "-q", "--metrics-file", blocked,
        ])
        #expect(rejected.status == 65, "\(rejected.stderr)")
        #expect(rejected.stderr.contains("cannot write --metrics-file"), "\(rejected.stderr)")
        let written = folder.appendingPathComponent("settle.prom").path
        let fine = try Self.plan(input, into: folder.appendingPathComponent("out2"), metrics: written)
        #expect(fine.status == 0, "\(fine.stderr)")
        #expect(try Self.parseMetrics(written)["settle_last_run_exit_status"] == 0)
    }

    /// A metrics path that is a symlink updates the file it names and stays a link (a
    /// collector's folder often links there); one that is not a regular file (a pipe here, a
    /// device alike) is not replaced: the write is refused as any unwritable metrics file is
    /// (audit 62 F2: the link and a device node were replaced by regular files).
    @Test func aMetricsPathThatIsALinkOrNotAFileIsNotReplaced() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = try Self.oneLine(in: folder)
        let real = folder.appendingPathComponent("real.prom").path
        try "stale\n".write(toFile: real, atomically: true, encoding: .utf8)
        let link = folder.appendingPathComponent("settle.prom").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "real.prom")
        let linked = try Self.plan(input, into: folder.appendingPathComponent("out"), metrics: link)
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "real.prom")
        #expect(try Self.parseMetrics(real)["settle_lines{status=\"planned\"}"] == 1)

        let pipe = folder.appendingPathComponent("pipe.prom").path
        #expect(mkfifo(pipe, 0o644) == 0)
        let refused = try Self.plan(input, into: folder.appendingPathComponent("out2"), metrics: pipe)
        #expect(refused.status == 75, "\(refused.stderr)")
        #expect(refused.stderr.contains("\(pipe) is not a regular file"), "\(refused.stderr)")
        var info = stat()
        #expect(lstat(pipe, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
    }

    // MARK: report.html

    /// The rendered DOM of a page, from headless Chromium.
    static func renderedDOM(_ file: URL) throws -> String {
        let profile = SettleProcess.temporaryFolder()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "chromium", "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=\(profile.path)",
            "--dump-dom", file.absoluteString,
        ]
        let output = SettleProcess.temporaryFolder().appendingPathComponent("dom.html")
        try #require(FileManager.default.createFile(atPath: output.path, contents: nil))
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try handle.close()
        try #require(process.terminationStatus == 0, "chromium did not run (make test installs it)")
        return SettleProcess.read(output)
    }

    @Test func reportShowsTheSumsOfSummaryCSVInABrowser() throws {
        let out = SettleProcess.temporaryFolder()
        let outcome = try SettleProcess.run(["plan", Self.sample, "--out", out.path, "--as-of", "2026-11-29", "-q"])
        #expect(outcome.status == 65)
        let dom = try Self.renderedDOM(out.appendingPathComponent("report.html"))
        #expect(dom.contains("<h1>Settlement report</h1>"))
        var shown: [String: String] = [:]
        let cell = try Regex(#"data-currency="([a-z]+)" data-measure="([a-z_:]+)" data-minor="(-?[0-9]+)""#)
        for match in dom.matches(of: cell) {
            let key = "\(match.output[1].substring!),\(match.output[2].substring!)"
            #expect(shown[key] == nil, "\(key) shown twice")
            shown[key] = String(match.output[3].substring!)
        }
        var expected: [String: String] = [:]
        for row in SettleProcess.read(out.appendingPathComponent("summary.csv")).split(separator: "\n").dropFirst() {
            // run_id and as_of first: the per-currency columns follow.
            let fields = Array(
                row.split(separator: ",", omittingEmptySubsequences: false).map(String.init).dropFirst(2))
            guard !fields[0].isEmpty else { continue }
            expected["\(fields[0]),\(fields[1])"] = fields[4]
        }
        #expect(!expected.isEmpty)
        // Every row of summary.csv, at its amount; the page also shows "waiting: 0" where
        // summary.csv has no deferred row.
        #expect(shown.filter { expected[$0.key] != nil } == expected)
        #expect(
            shown.filter { expected[$0.key] == nil }.allSatisfy {
                $0.key.hasSuffix(",status:deferred") && $0.value == "0"
            })
        // Each currency's lines by status are every status:… row of summary.csv, deferred
        // included, so they add up to its input (deferred also stands under Waiting).
        var statusRows: [String: [String]] = [:]
        for row in SettleProcess.read(out.appendingPathComponent("summary.csv")).split(separator: "\n").dropFirst() {
            let fields = row.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard !fields[2].isEmpty, fields[3].hasPrefix("status:") else { continue }
            statusRows[fields[2], default: []].append("\(fields[3].dropFirst(7)) \(fields[4]) \(fields[5])")
        }
        #expect(statusRows["usd"]?.contains("deferred 2 50.00") == true)
        let statusRow = try Regex(
            #"<tr><td>([a-z_]+)</td><td class="num count"><span[^>]*>([0-9,]+)</span></td><td class="num"[^>]*>([0-9.,]+) [A-Z]{3}</td></tr>"#
        )
        for (code, rows) in statusRows {
            let table = try #require(
                dom.firstRange(of: "data-currency-table=\"\(code)\"").map { String(dom[$0.upperBound...]) })
            let part = table[try #require(table.firstRange(of: "Lines by status")).upperBound...]
            let end = try #require(part.firstRange(of: "</table>"))
            // The page groups digits (4,200 JPY); summary.csv does not.
            let shownRows = part[..<end.lowerBound].matches(of: statusRow).map {
                "\($0.output[1].substring!) \($0.output[2].substring!) \($0.output[3].substring!)"
                    .replacingOccurrences(of: ",", with: "")
            }
            #expect(shownRows == rows, "\(code)")
        }
        // Lines by status and the run's facts.
        #expect(dom.contains(#"data-status="all" data-count="36""#))
        #expect(dom.contains(#"data-status="rejected" data-count="16""#))
        #expect(dom.contains(#"<dd id="exit-status" data-value="65">"#))
        #expect(dom.contains(#"<dd id="as-of">2026-11-29</dd>"#))
        #expect(dom.contains(#"<dd id="mode" data-value="plan">"#))
        // Rejected lines grouped by reason, with their file:line.
        let errors = SettleProcess.read(out.appendingPathComponent("errors.csv")).split(separator: "\n").dropFirst()
        var codes: [String: Int] = [:]
        for row in errors {
            let fields = SettleProcess.csvFields(String(row))
            codes[fields[fields.count - 3], default: 0] += 1
        }
        for (code, count) in codes {
            #expect(
                dom.contains(
                    #"data-reason-code="\#(code)" data-reason-status="rejected"><td>rejected</td><td><code>\#(code)</code></td><td class="num" data-count="\#(count)">"#
                ), "\(code)")
        }
        #expect(dom.contains("<code>\(Self.sample):"))
        #expect(!dom.contains("<script"))
    }
}
