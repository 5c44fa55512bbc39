import Foundation
import SettleApply
import SettleCore
import SettleRead
import SettleWrite

/// Everything the command line and the config file say, merged (the command line wins).
struct Options {
    var command = ""
    var inputs: [String] = []
    var out: String?
    var ledger = "settle-ledger.sqlite"
    var config: String?
    var asOf: Int32?
    var platformCountry = "US"
    var financialAccount: String?
    var payouts = PayoutGrouping.perRecipient
    var apiBase = "https://api.stripe.com"
    var apiKeyFile: String?
    var live = false
    var stripeVersion: String?
    var rate: Int?
    var concurrency = 16
    var progress = "auto"
    var logFormat = "text"
    var verbosity = 0
    var format: InputFormat?
    var columns: [String: String] = [:]
    /// `--metrics-file`: where the run's metrics go (Prometheus text format), written at the end.
    var metricsFile: String?
    /// `plan --online`: look up Stripe's facts (read-only) before planning.
    var online = false
    /// `status --json`: the status as one JSON object.
    var json = false
    /// `status --line ID`: what the ledger knows about one line.
    var lineID: String?
    /// `ledger rebuild --since DATE`.
    var since: Int32?
    /// What the run did, for the metrics file; shared by every copy of these options.
    let record = RunRecord()
    /// Value options the command line gave more than once with different values: the last
    /// is used, as getopt does, and the run says so (a cron line with two `--out`s wrote to
    /// the second with no word; audit 63 L2).
    var overridden: [(name: String, first: String, last: String)] = []

    static let valueOptions: Set<String> = [
        "out", "ledger", "config", "as-of", "platform-country", "financial-account", "payouts", "api-base",
        "api-key-file", "stripe-version", "rate", "concurrency", "progress", "log-format", "format",
        "metrics-file", "line", "since",
    ]
    /// Options that take no value.
    static let flagOptions: Set<String> = ["live", "online", "json"]
    /// Command-line only: they describe one invocation, not a configuration.
    static let commandLineOnly: Set<String> = ["config", "line", "json", "since"]

    /// The options given on the command line (not from a config file), by name.
    var given: Set<String> = []

    /// Options a command has no use for: given, they are refused (64), never ignored.
    static let refused: [String: Set<String>] = {
        let planTime: Set<String> = ["as-of", "platform-country", "payouts", "format", "online", "out"]
        let statusOnly: Set<String> = ["json", "line"]
        let sending: Set<String> = [
            "api-base", "api-key-file", "live", "stripe-version", "rate", "concurrency", "financial-account",
        ]
        return [
            "plan": statusOnly.union(["since"]),
            "validate": statusOnly.union(["since", "out"]),
            "run": statusOnly.union(["since"]),
            "apply": statusOnly.union(["since"]).union(planTime),
            "status": planTime.union(sending).union(["since", "metrics-file"]),
            "cancel": planTime.union(sending).union(statusOnly).union(["since"]),
        ]
    }()

    /// Refuses an option the command does not take, and arguments `status` does not take.
    func refuseUnusedOptions() throws(CommandFailure) {
        if let refused = Options.refused[command], let name = given.sorted().first(where: refused.contains) {
            throw CommandFailure(.usage, "settle \(command) takes no --\(name); see settle help \(command)")
        }
        if command == "status", let stray = inputs.first {
            throw CommandFailure(.usage, "settle status takes no argument '\(stray)'; see settle help status")
        }
    }

    /// Parses arguments after the command word.
    static func parse(_ arguments: [String]) throws(CommandFailure) -> Options {
        var options = Options()
        var explicit: [String: String] = [:]
        var flags = Set<String>()
        var index = 0
        guard let command = arguments.first else { throw CommandFailure(.usage, "no command given; see settle --help") }
        options.command = command
        index = 1
        var onlyInputs = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyInputs || argument == "-" || !argument.hasPrefix("-") {
                options.inputs.append(argument)
                continue
            }
            if argument == "--" {
                onlyInputs = true
                continue
            }
            // `-v`, `-vv`, `-qq`: each letter one step.
            if argument.count >= 2, argument.hasPrefix("-"),
                argument.dropFirst().allSatisfy({ $0 == "v" || $0 == "q" }),
                Set(argument.dropFirst()).count == 1
            {
                options.verbosity += argument.dropFirst().first == "v" ? argument.count - 1 : -(argument.count - 1)
                continue
            }
            guard argument.hasPrefix("--") else { throw CommandFailure(.usage, "unknown option \(argument)") }
            var name = String(argument.dropFirst(2))
            var value: String? = nil
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if flagOptions.contains(name) {
                guard value == nil else { throw CommandFailure(.usage, "--\(name) takes no value") }
                flags.insert(name)
                continue
            }
            guard valueOptions.contains(name) else { throw CommandFailure(.usage, "unknown option --\(name)") }
            if value == nil {
                guard index < arguments.count else { throw CommandFailure(.usage, "--\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            if let earlier = explicit[name] {
                if let at = options.overridden.firstIndex(where: { $0.name == name }) {
                    options.overridden[at].last = value!
                } else {
                    options.overridden.append((name, earlier, value!))
                }
            }
            explicit[name] = value!
        }
        options.overridden.removeAll { $0.first == $0.last }
        // The config file first, then the command line over it.
        if let path = explicit["config"] {
            options.config = path
            try options.load(config: path)
        }
        for (name, value) in explicit where name != "config" {
            try options.set(name, value, source: "--\(name)", usage: .usage)
        }
        options.given = flags.union(explicit.keys)
        if flags.contains("live") { options.live = true }
        if flags.contains("online") { options.online = true }
        if flags.contains("json") { options.json = true }
        return options
    }

    /// ISO 3166 region codes, as Foundation knows them.
    static let countries = Set(Locale.Region.isoRegions.map(\.identifier))

    /// `--metrics-file` as the command line gives it (before a `--`), for a run whose options
    /// did not parse: monitoring still sees why it stopped. nil when not given.
    static func metricsFileOnCommandLine(_ arguments: [String]) -> String? {
        valueOnCommandLine("--metrics-file", arguments)
    }

    /// The last value of `option` on the command line, read without parsing the rest (for
    /// what must hold when the options do not parse: the metrics file, the log format).
    static func valueOnCommandLine(_ option: String, _ arguments: [String]) -> String? {
        var value: String?
        var index = 1
        while index < arguments.count, arguments[index] != "--" {
            let argument = arguments[index]
            index += 1
            if argument == option, index < arguments.count {
                value = arguments[index]
                index += 1
            } else if argument.hasPrefix(option + "=") {
                value = String(argument.dropFirst(option.count + 1))
            }
        }
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }

    mutating func set(_ name: String, _ value: String, source: String, usage code: ExitCode) throws(CommandFailure) {
        switch name {
        case "out": out = value
        case "ledger": ledger = value
        case "as-of", "since":
            guard let day = CivilDate.parse(value) else {
                throw CommandFailure(code, "\(source): '\(value)' is not a date YYYY-MM-DD")
            }
            if name == "as-of" { asOf = day } else { since = day }
        case "platform-country":
            // An ISO 3166 country (UK read as GB): a typo would change every cross-border verdict.
            guard value.count == 2, value.allSatisfy({ $0.isLetter && $0.isASCII }),
                value.uppercased() == "UK" || Options.countries.contains(value.uppercased())
            else {
                throw CommandFailure(code, "\(source): '\(value)' is not a 2-letter ISO 3166 country code")
            }
            platformCountry = value.uppercased()
        case "financial-account":
            guard value.hasPrefix("fa_") else { throw CommandFailure(code, "\(source): '\(value)' is not a fa_… id") }
            financialAccount = value
        case "payouts":
            guard let mode = PayoutGrouping(rawValue: value) else {
                throw CommandFailure(code, "\(source): '\(value)' is not per-recipient or per-line")
            }
            payouts = mode
        case "api-base":
            // Checked for every command, a plan that sends nothing too (audit 14: an offline
            // plan took http://example.com, which its apply would then refuse).
            do {
                try ApplyConfiguration.checkAPIBase(value)
            } catch {
                throw Applier.failure(error, folder: "", ledger: ledger)
            }
            apiBase = value
        case "api-key-file": apiKeyFile = value
        case "stripe-version":
            // Sent as a header: empty, or with a space or control character, it would change
            // what is asked of Stripe (no header: the account's default API version).
            guard !value.isEmpty, value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw CommandFailure(code, "\(source): '\(value)' is not a Stripe API version (like 2026-10-28.endive)")
            }
            stripeVersion = value
        case "rate":
            guard let number = Int(value), number > 0 else {
                throw CommandFailure(code, "\(source): '\(value)' is not a positive whole number")
            }
            rate = number
        case "concurrency":
            guard let number = Int(value), number > 0, number <= 256 else {
                throw CommandFailure(code, "\(source): '\(value)' is not a whole number from 1 to 256")
            }
            concurrency = number
        case "progress":
            guard ["auto", "on", "off"].contains(value) else {
                throw CommandFailure(code, "\(source): '\(value)' is not auto, on or off")
            }
            progress = value
        case "log-format":
            guard ["text", "json"].contains(value) else {
                throw CommandFailure(code, "\(source): '\(value)' is not text or json")
            }
            logFormat = value
        case "metrics-file": metricsFile = value
        case "line": lineID = value
        case "format":
            guard let format = InputFormat(rawValue: value) else {
                throw CommandFailure(code, "\(source): '\(value)' is not csv or xml")
            }
            self.format = format
        default:
            throw CommandFailure(code, "unknown option \(source)")
        }
    }

    /// Loads the JSON config file; unknown keys are an error so a typo never passes silently.
    mutating func load(config path: String) throws(CommandFailure) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure(.configuration, "cannot read the config file \(path)")
        }
        let config: JSON
        do throws(JSON.ParseError) {
            config = try JSON.parse(data)
        } catch {
            throw CommandFailure(.configuration, "the config file \(path) is not a JSON object (\(error))")
        }
        guard case .object(let pairs) = config else {
            throw CommandFailure(.configuration, "the config file \(path) is not a JSON object")
        }
        for (key, value) in pairs {
            let name = key.replacingOccurrences(of: "_", with: "-")
            let source = "\(path): \(key)"
            // SPEC: each key is its option's name with `-` written `_`; `as-of` is not a key
            // (audit 38 D3: it was taken as `as_of`, so a key no document names passed).
            guard !key.contains("-") else {
                throw CommandFailure(
                    .configuration,
                    "\(source): unknown key (write `-` as `_`: \(key.replacingOccurrences(of: "-", with: "_")))")
            }
            switch (key, value) {
            case ("columns", .object(let map)):
                for (column, header) in map {
                    guard Column(headerName: column) != nil, case .string(let alias) = header else {
                        throw CommandFailure(
                            .configuration,
                            "\(source): '\(column)' is not a settle column, or its header is not a string")
                    }
                    columns[column] = alias
                }
            // `-q` and `-v` (SPEC: every option has a key of its name): true is one -q or -v,
            // a number that many; they add to the command line's.
            case ("q", .bool(let flag)): verbosity -= flag ? 1 : 0
            case ("v", .bool(let flag)): verbosity += flag ? 1 : 0
            case ("q", .int(let count)) where count >= 0: verbosity -= Int(count)
            case ("v", .int(let count)) where count >= 0: verbosity += Int(count)
            case ("live", .bool(let flag)): live = flag
            case ("online", .bool(let flag)): online = flag
            case (_, .string(let text))
            where Options.valueOptions.contains(name) && !Options.commandLineOnly.contains(name):
                try set(name, text, source: source, usage: .configuration)
            case (_, .int(let number)) where ["rate", "concurrency"].contains(name):
                try set(name, String(number), source: source, usage: .configuration)
            default:
                throw CommandFailure(.configuration, "\(source): unknown key or wrong type")
            }
        }
    }

    var progressMode: Progress.Mode {
        Self.progressMode(progress, logFormat: logFormat, terminal: isatty(2) == 1)
    }

    /// How progress is shown. SPEC: `auto` shows it only when standard error is a terminal
    /// (audit 63: a log line every 30 s went to cron's log too). Where it is shown, a live
    /// line on a terminal, and progress events (a line every 30 s) in a log: `--progress on`
    /// away from a terminal, and always in a JSON log, every line of which is one JSON object
    /// (audit 38 D1: the live line's escapes went into the JSON stream).
    static func progressMode(_ progress: String, logFormat: String, terminal: Bool) -> Progress.Mode {
        if progress == "off" || (progress == "auto" && !terminal) { return .off }
        return logFormat == "json" || !terminal ? .logLines : .terminal
    }

    var ruleOptions: RuleOptions {
        var rules = RuleOptions(asOf: asOf ?? CivilDate.day(fromUnixSeconds: Int(Date().timeIntervalSince1970)))
        rules.platformCountry = platformCountry
        rules.payouts = payouts
        rules.financialAccount = financialAccount
        return rules
    }
}
