import Foundation
import SettleApply
import SettleCore
import SettleWrite

/// Entry point of the `settle` command.
public enum Settle {
    public static let version = "0.1.0"
    /// Stripe-Version pinned for v1 calls.
    public static let stripeVersion = ApplyConfiguration.pinnedStripeVersion
    /// v2 money-management calls need a preview version (Apple Pay payout methods).
    public static let previewVersion = ApplyConfiguration.pinnedPreviewVersion

    public static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let code = run(arguments)
        exit(code.rawValue)
    }

    static func run(_ arguments: [String]) -> ExitCode {
        if let code = help(arguments) { return code }
        if arguments.first == "--version" || arguments.first == "version" {
            print("settle \(version) (Stripe-Version \(stripeVersion), v2 \(previewVersion))")
            return .ok
        }
        // As asked even when the options do not parse: a script reading JSON gets its error as JSON.
        var log = Log(format: Options.valueOnCommandLine("--log-format", arguments) ?? "text", verbosity: 0)
        var parsed: Options?
        var code: ExitCode
        do throws(CommandFailure) {
            let options = try Options.parse(arguments)
            parsed = options
            log = Log(format: options.logFormat, verbosity: options.verbosity)
            try options.refuseUnusedOptions()
            for option in options.overridden {
                log(
                    .warning, event: "option_given_twice",
                    "--\(option.name) was given more than once; using the last, \(option.last) (not \(option.first))")
            }
            if ["plan", "apply", "run", "validate", "ledger", "cancel"].contains(options.command) {
                if let path = options.metricsFile { options.record.writeMetricsOnStop(path: path) }
                StopSignals.install()
            }
            switch options.command {
            case "plan": code = try Commands(options: options, log: log).plan()
            case "validate": code = try Commands(options: options, log: log).validate()
            case "apply": code = try Commands(options: options, log: log).apply()
            case "run": code = try Commands(options: options, log: log).run()
            case "status": code = try Commands(options: options, log: log).status()
            case "cancel": code = try CancelCommand(options: options, log: log).run()
            case "ledger": code = try LedgerCommand(options: options, log: log).run()
            default: throw CommandFailure(.usage, "unknown command '\(options.command)'")
            }
        } catch {
            log(
                .error, event: "command_failed", error.message,
                fields: error.fields)
            if error.code == .usage, Options.valueOnCommandLine("--log-format", arguments) != "json" {
                let name = arguments.first.flatMap { Help.command(named: $0)?.name }
                StandardError.write(Help.usage(of: name))
            }
            code = error.code
        }
        // Metrics last, with the exit status, also when the command stopped early; when the
        // options did not parse (a bad config file: 78), the command line's own --metrics-file.
        if parsed == nil, let path = Options.metricsFileOnCommandLine(arguments) {
            code = RunRecord().writeMetrics(path: path, exit: code, log: log)
        }
        if let options = parsed, let path = options.metricsFile {
            // Every request the process sent: look-ups and payouts followed too, not only the apply's.
            let sent = ProcessTally.snapshot
            options.record.recordRequests(
                requests: sent.requests, retries: sent.retries, rateLimited: sent.rateLimited)
            code = options.record.writeMetrics(path: path, exit: code, log: log)
        }
        return code
    }

    /// `settle help [COMMAND]`, `settle COMMAND --help|-h`, `settle --help`, and no arguments
    /// (the usage, exit 64). nil when the arguments ask for no help.
    static func help(_ arguments: [String]) -> ExitCode? {
        func say(_ text: String) { print(text, terminator: text.hasSuffix("\n") ? "" : "\n") }
        guard let first = arguments.first else {
            StandardError.write(Help.usage(of: nil))
            return .usage
        }
        if first == "help" {
            let rest = Array(arguments.dropFirst())
            if rest == ["--roff"] {
                say(Help.roff())
                return .ok
            }
            if rest.contains("--help") || rest.contains("-h") {
                say(Help.text(of: Help.command(named: "help")!))
                return .ok
            }
            guard let name = rest.first else {
                say(Help.global())
                return .ok
            }
            guard rest.count == 1, let command = Help.command(named: name) else {
                StandardError.write(
                    "settle: error: no such command '\(rest.joined(separator: " "))'\n\(Help.usage(of: nil))")
                return .usage
            }
            say(Help.text(of: command))
            return .ok
        }
        // --help anywhere before a `--` asks for help.
        let options = arguments.prefix { $0 != "--" }
        guard options.contains("--help") || options.contains("-h") else { return nil }
        if let command = Help.command(named: first) {
            say(Help.text(of: command))
        } else {
            say(Help.global())
        }
        return .ok
    }
}
