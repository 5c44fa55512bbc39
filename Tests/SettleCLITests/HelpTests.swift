import Foundation
import Testing

@testable import SettleCLI

/// The help text is complete, and the checked-in man page is made from it.
@Suite struct HelpTests {
    static let specOptions = [
        "--out", "--ledger", "--config", "--as-of", "--platform-country", "--financial-account", "--payouts",
        "--api-base", "--api-key-file", "--live", "--stripe-version", "--rate", "--concurrency", "--progress",
        "--log-format", "--metrics-file", "--format", "--online", "--json", "--line", "-q", "-v",
    ]

    @Test func everyCommandIsDocumented() {
        #expect(
            Help.commands.map(\.name) == ["plan", "apply", "run", "validate", "status", "cancel", "ledger", "help"])
        for command in Help.commands {
            #expect(command.examples.count >= 2, "\(command.name) has fewer than two examples")
            #expect(!command.exits.isEmpty)
            for name in command.options {
                #expect(Help.option(named: name) != nil, "\(command.name) lists an undocumented option \(name)")
            }
            let text = Help.text(of: command)
            #expect(text.contains("USAGE\n  \(command.synopsis[0])\n"))
            #expect(text.contains("EXIT STATUS\n"))
        }
    }

    @Test func everySpecOptionIsInTheTableAndGlobalHelp() {
        let global = Help.global()
        for name in Self.specOptions {
            #expect(Help.option(named: name) != nil, "\(name) is missing from the options table")
            #expect(global.contains("  \(name)"), "\(name) is missing from settle --help")
        }
        for code in [0, 65, 75, 64, 66, 73, 78, 70] { #expect(global.contains("\n  \(code)  ")) }
    }

    @Test func everyParsedOptionIsDocumented() {
        for name in Options.valueOptions.union(Options.flagOptions) {
            #expect(Help.option(named: "--" + name) != nil, "--\(name) is parsed but not documented")
        }
    }

    @Test func optionDefaultsAreShown() throws {
        let plan = Help.text(of: try #require(Help.command(named: "plan")))
        #expect(plan.contains("(default: 16)"))
        #expect(plan.contains("(default: per-recipient)"))
        #expect(plan.contains("(default: settle-ledger.sqlite)"))
    }

    @Test func cronLineIsAnExampleOfRun() throws {
        let run = try #require(Help.command(named: "run"))
        #expect(
            run.examples.contains {
                $0.1.hasPrefix(
                    "settle run /exports/orders-$(date +%F).csv.gz --out /var/settle/$(date +%F) --ledger /var/settle/ledger.sqlite --financial-account fa_"
                )
            })
    }

    @Test func roffEscapesWhatRoffWouldRun() {
        #expect(Help.roffText(".TH oops") == "\\&.TH oops")
        #expect(Help.roffText("--out a\\b") == "\\-\\-out a\\eb")
        let roff = Help.roff()
        for line in roff.split(separator: "\n") where !line.hasPrefix(".") {
            #expect(!line.hasPrefix("'"))
        }
    }

    @Test func checkedInManPageIsCurrent() throws {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }
        let page = try String(contentsOf: root.appendingPathComponent("docs/settle.1"), encoding: .utf8)
        #expect(page == Help.roff(), "docs/settle.1 is stale: run `make man`")
    }
}

/// The options this change added.
@Suite struct OperatorOptionsTests {
    @Test func parsesTheNewOptions() throws {
        let options = try Options.parse([
            "status", "--json", "--line", "100-1", "--metrics-file", "/tmp/m.prom", "--online", "--since", "2026-11-01",
        ])
        #expect(options.json)
        #expect(options.lineID == "100-1")
        #expect(options.metricsFile == "/tmp/m.prom")
        #expect(options.online)
        #expect(options.since != nil)
        let defaults = try Options.parse(["plan"])
        #expect(!defaults.json && !defaults.online && defaults.lineID == nil && defaults.metricsFile == nil)
    }

    @Test func aFlagTakesNoValue() {
        #expect(throws: CommandFailure.self) { try Options.parse(["plan", "--online=yes"]) }
    }

    @Test func configKeysForMetricsFileAndOnline() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("settle-cfg-\(UUID().uuidString).json")
        try #"{"metrics_file": "/var/lib/node_exporter/settle.prom", "online": true}"#.write(
            to: path, atomically: true, encoding: .utf8)
        let options = try Options.parse(["plan", "--config", path.path])
        #expect(options.metricsFile == "/var/lib/node_exporter/settle.prom")
        #expect(options.online)
        try #"{"line": "100-1"}"#.write(to: path, atomically: true, encoding: .utf8)
        do {
            _ = try Options.parse(["plan", "--config", path.path])
            Issue.record("a per-invocation option was accepted as a config key")
        } catch {
            #expect(error.code == .configuration)
        }
    }
}
