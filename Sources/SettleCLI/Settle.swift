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
        if arguments.isEmpty || arguments.contains("--help") || arguments.first == "help" || arguments.contains("-h") {
            print(help)
            return arguments.isEmpty ? .usage : .ok
        }
        if arguments.first == "--version" || arguments.first == "version" {
            print("settle \(version) (Stripe-Version \(stripeVersion), v2 \(previewVersion))")
            return .ok
        }
        var log = Log(format: "text", verbosity: 0)
        do throws(CommandFailure) {
            let options = try Options.parse(arguments)
            log = Log(format: options.logFormat, verbosity: options.verbosity)
            switch options.command {
            case "plan": return try Commands(options: options, log: log).plan()
            case "validate": return try Commands(options: options, log: log).validate()
            case "apply": return try Commands(options: options, log: log).apply()
            case "run": return try Commands(options: options, log: log).run()
            case "status": return try Commands(options: options, log: log).status()
            case "ledger": return try LedgerCommand(options: options, log: log).run()
            default: throw CommandFailure(.usage, "unknown command '\(options.command)'; see settle --help")
            }
        } catch {
            log(.error, error.message)
            return error.code
        }
    }

    static let help = """
        settle — settle a marketplace on Stripe: transfers, Apple Pay payouts, reversals.

        USAGE
          settle plan  INPUT... --out DIR [options]   read, validate, group, write the plan; no network
          settle apply DIR [options]                  execute the plan in DIR against Stripe; update its files
          settle run   INPUT... --out DIR [options]   plan, then apply (what cron calls)
          settle validate INPUT... [options]          read and check only; print a report; write nothing
          settle status [--ledger FILE]               what the ledger knows: lines settled, unknown, failed
          settle --help | --version

        INPUTS are files, or - for standard input: CSV or XML, gzipped or not (told from content).

        OPTIONS (each has a config-file key with - written _)
          --out DIR                   output folder (refused if it holds files settle did not write)
          --ledger FILE               SQLite ledger (default settle-ledger.sqlite)
          --config FILE               JSON config; unknown keys are an error
          --as-of YYYY-MM-DD          settlement date (default today, UTC)
          --platform-country CC       the platform's country (default US)
          --financial-account fa_…    the financial account payouts are paid from
          --payouts per-recipient|per-line   payout aggregation (default per-recipient)
          --format csv|xml            override format detection
          --api-base URL              Stripe API base (http:// only for loopback)
          --api-key-file FILE         file holding the secret key; else STRIPE_API_KEY
          --live                      allow a live-mode key
          --stripe-version V          Stripe-Version for v1 calls
          --rate N                    most requests per second (20 test, 90 live)
          --concurrency N             most requests in flight (default 16)
          --progress auto|on|off      progress on standard error (auto: when a terminal)
          --log-format text|json      log lines on standard error
          -q, -v                      fewer / more log lines

        EXIT STATUS
          0   every line is settled, planned, already settled, netted or deferred
          65  some lines were rejected or failed for good: see errors.csv
          75  some outcomes are not known yet or failed for a passing reason: run again later
          64  bad command line
          66  an input file cannot be read
          73  the output folder cannot be written
          78  bad configuration (no key, live key without --live, bad config file)
          70  internal error
        """
}
