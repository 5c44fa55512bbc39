import Foundation

/// The help of every command, and the man page made from the same text (one source of
/// truth: `settle help --roff > docs/settle.1`, and a test checks the file is current).
enum Help {
    /// One option as `--help` and the man page list it.
    struct Option {
        /// `--out DIR`.
        let usage: String
        let meaning: String
        /// Empty when it has none worth saying.
        let defaultValue: String

        /// The option's name without its value: `--out`.
        var name: String { String(usage.split(separator: " ").first ?? "") }
    }

    /// One command: synopsis, what it does, its options, exit statuses and examples.
    struct Command {
        let name: String
        let synopsis: [String]
        let summary: String
        let description: String
        /// Names of the options it takes (`--out`), in the order shown.
        let options: [String]
        /// Its exit statuses; a meaning given here replaces the general one.
        let exits: [(Int32, String?)]
        /// (what it does, the command line).
        let examples: [(String, String)]
    }

    static let options: [Option] = [
        Option(
            usage: "--out DIR", meaning: "output folder; refused if it holds files settle did not write",
            defaultValue: "required for plan and run"),
        Option(
            usage: "--ledger FILE",
            meaning:
                "SQLite ledger that makes every line settle at most once, across runs; made by `settle ledger init`",
            defaultValue: "settle-ledger.sqlite"),
        Option(
            usage: "--config FILE",
            meaning: "JSON config; each option's key is its name with - written _; unknown keys are an error",
            defaultValue: "none"),
        Option(
            usage: "--as-of DATE", meaning: "the settlement date (YYYY-MM-DD); lines scheduled later are deferred",
            defaultValue: "today, UTC"),
        Option(
            usage: "--platform-country CC", meaning: "the platform's country, for the cross-border rules",
            defaultValue: "US"),
        Option(
            usage: "--financial-account fa_…", meaning: "the financial account payouts are paid from",
            defaultValue: "none; payout lines need it at apply"),
        Option(
            usage: "--payouts per-recipient|per-line",
            meaning: "one payout per recipient and run (saves instant-payout fees), or one per line",
            defaultValue: "per-recipient"),
        Option(
            usage: "--format csv|xml", meaning: "override the format told from the content", defaultValue: "detected"),
        Option(
            usage: "--online",
            meaning: "plan only: first look up Stripe's facts (payout methods, pending charges), read-only",
            defaultValue: "off"),
        Option(
            usage: "--api-base URL", meaning: "Stripe API base; http:// only for loopback addresses",
            defaultValue: "https://api.stripe.com"),
        Option(
            usage: "--api-key-file FILE", meaning: "file holding the secret key (chmod 600); else STRIPE_API_KEY",
            defaultValue: "STRIPE_API_KEY"),
        Option(
            usage: "--live", meaning: "allow a live-mode key (sk_live_…, rk_live_…); refused without it",
            defaultValue: "off"),
        Option(
            usage: "--stripe-version V", meaning: "Stripe-Version sent on v1 calls", defaultValue: Settle.stripeVersion),
        Option(
            usage: "--rate N", meaning: "most requests per second",
            defaultValue: "20 with a test key, 90 with a live key"),
        Option(usage: "--concurrency N", meaning: "most requests in flight (1-256)", defaultValue: "16"),
        Option(
            usage: "--progress auto|on|off",
            meaning:
                "progress on standard error; auto: only on a terminal (a live line); on: also in a log, a line every 30 s",
            defaultValue: "auto"),
        Option(
            usage: "--log-format text|json",
            meaning: "log lines on standard error; json: one object per event with its own fields", defaultValue: "text"
        ),
        Option(
            usage: "--metrics-file FILE",
            meaning:
                "write the run's metrics in the Prometheus text format, atomically (node_exporter textfile collector)",
            defaultValue: "none"),
        Option(usage: "--json", meaning: "status only: print the status as one JSON object", defaultValue: "off"),
        Option(usage: "--line ID", meaning: "status only: what the ledger knows about one line", defaultValue: "none"),
        Option(
            usage: "--since DATE", meaning: "ledger rebuild only: rebuild from Stripe's objects created since DATE",
            defaultValue: "required for rebuild"),
        Option(usage: "-q", meaning: "fewer log lines (warnings and errors only)", defaultValue: ""),
        Option(usage: "-v", meaning: "more log lines (debug; text logs show each event's fields)", defaultValue: ""),
        Option(usage: "-h, --help", meaning: "this help", defaultValue: ""),
    ]

    static let exitStatuses: [(Int32, String)] = [
        (0, "every line is settled, planned, already settled, netted or deferred"),
        (65, "some lines were rejected or failed for good, or an input was rejected whole: see errors.csv"),
        (
            75,
            "some outcomes are not known yet or failed for a passing reason (network, 429, 5xx, ledger busy): run again later; nothing is lost and nothing will be paid twice"
        ),
        (64, "bad command line"),
        (66, "an input file cannot be read, or --ledger names a file that is not a settle ledger"),
        (73, "the output folder cannot be written"),
        (78, "bad configuration (no key, live key without --live, bad config file, missing or damaged ledger)"),
        (70, "internal error"),
    ]

    static let logOptions = ["--config", "--progress", "--log-format", "--metrics-file", "-q", "-v"]
    static let stripeOptions = [
        "--financial-account", "--api-base", "--api-key-file", "--live", "--stripe-version", "--rate", "--concurrency",
    ]
    static let planOptions = [
        "--out", "--ledger", "--as-of", "--platform-country", "--financial-account", "--payouts", "--format",
    ]
    static let cron =
        "settle run /exports/orders-$(date +%F).csv.gz --out /var/settle/$(date +%F) --ledger /var/settle/ledger.sqlite --financial-account fa_…"

    static let commands: [Command] = [
        Command(
            name: "plan", synopsis: ["settle plan INPUT... --out DIR [options]"],
            summary: "read, validate, group, write the plan and all files; no network",
            description:
                "Reads every INPUT (a file, or - for standard input: CSV or XML, gzipped or not, told from the content), checks each line against the rules, groups the lines into transfer groups and writes the plan folder: results.csv, errors.csv, deferred.csv, instructions.jsonl, summary.csv, report.html, manifest.json. Nothing is sent to Stripe unless --online is given, and then only read-only look-ups. After planning it prints an estimate of the apply: instructions by kind, requests, and the time at the rate.",
            options: planOptions + [
                "--online", "--api-base", "--api-key-file", "--live", "--stripe-version", "--rate", "--concurrency",
            ] + logOptions,
            exits: [
                (0, nil), (65, nil), (75, "with --online: Stripe could not be reached; run again later"), (64, nil),
                (66, nil), (73, nil), (78, nil), (70, nil),
            ],
            examples: [
                (
                    "plan a day's export, review it, then apply it",
                    "settle plan /exports/orders-2026-11-29.csv.gz --out /var/settle/2026-11-29 --ledger /var/settle/ledger.sqlite"
                ),
                (
                    "review: the control sums, the page for finance, what will be sent",
                    "less /var/settle/2026-11-29/summary.csv; xdg-open /var/settle/2026-11-29/report.html"
                ),
                (
                    "then send exactly that plan",
                    "settle apply /var/settle/2026-11-29 --ledger /var/settle/ledger.sqlite --financial-account fa_…"
                ),
            ]),
        Command(
            name: "apply", synopsis: ["settle apply DIR [options]"],
            summary: "execute the plan in DIR against Stripe; update its files",
            description:
                "Sends exactly the plan in DIR, exactly once: every instruction is recorded in the ledger before its request leaves, retries reuse its idempotency key, and outcomes not known yet are resolved by the next run. It first asks Stripe about the payouts the ledger holds as processing: those that came back are reported failed by the next plan or run. An order moves whole: a plan made offline has its payout methods and charges checked first, an order Stripe refuses part of (or has not answered for) moves no further, and an aggregated payout goes without the lines of orders that may not move. Refuses (65, nothing sent) a folder whose plan changed since plan wrote it. Rewrites results.csv, errors.csv, deferred.csv, summary.csv, report.html and manifest.json with the outcomes. The key comes from --api-key-file or STRIPE_API_KEY and is never printed.",
            options: ["--ledger"] + stripeOptions + logOptions,
            exits: [
                (0, nil),
                (
                    65,
                    "some lines were rejected or failed for good, or the plan changed since it was written (nothing sent)"
                ), (75, nil), (64, nil), (66, nil), (73, nil),
                (78, "bad configuration, or Stripe refused the key (the run stopped; nothing more was sent)"),
                (70, nil),
            ],
            examples: [
                (
                    "apply a reviewed plan with a test key",
                    "STRIPE_API_KEY=sk_test_… settle apply /var/settle/2026-11-29 --ledger /var/settle/ledger.sqlite --financial-account fa_…"
                ),
                (
                    "live, key in a file, slower than the default",
                    "settle apply /var/settle/2026-11-29 --ledger /var/settle/ledger.sqlite --api-key-file /etc/settle/key --live --rate 50"
                ),
                (
                    "after exit 75: the same command again resolves what is not known yet",
                    "settle apply /var/settle/2026-11-29 --ledger /var/settle/ledger.sqlite --financial-account fa_…"
                ),
            ]),
        Command(
            name: "run", synopsis: ["settle run INPUT... --out DIR [options]"],
            summary: "look up, plan, then apply, in one go (what cron calls)",
            description:
                "Looks up Stripe's facts (read-only), plans into --out and applies the plan, holding the ledger from the plan to the end of the apply. Lines waiting in the ledger from earlier runs (deferred, not yet due) come back by themselves. A non-zero exit status is what cron mails: 65 means read errors.csv, 75 means run again later.",
            options: planOptions + stripeOptions.filter { $0 != "--financial-account" } + logOptions,
            exits: [(0, nil), (65, nil), (75, nil), (64, nil), (66, nil), (73, nil), (78, nil), (70, nil)],
            examples: [
                ("the nightly cron line (in a crontab write each % as \\%)", cron),
                (
                    "re-run a fixed errors.csv: only the lines not settled yet move",
                    "settle run /var/settle/2026-11-29/errors-fixed.csv --out /var/settle/2026-11-29-fix --ledger /var/settle/ledger.sqlite --financial-account fa_…"
                ),
                (
                    "metrics for node_exporter's textfile collector",
                    "settle run orders.csv.gz --out out --metrics-file /var/lib/node_exporter/textfile/settle.prom"
                ),
            ]),
        Command(
            name: "validate", synopsis: ["settle validate INPUT... [options]"],
            summary: "read and check only; print a report; write nothing",
            description:
                "Reads and checks the inputs as plan does and prints what it found: lines by status, reasons, the first rejected lines with their file:line, and how many instructions would be sent. It writes no file and sends nothing.",
            options: [
                "--ledger", "--as-of", "--platform-country", "--financial-account", "--payouts", "--format", "--config",
                "--progress", "--log-format", "-q", "-v",
            ],
            exits: [
                (0, "every line would be planned, netted, already settled or deferred"),
                (65, "some lines would be rejected, or an input is rejected whole"), (64, nil), (66, nil), (78, nil),
                (70, nil),
            ],
            examples: [
                (
                    "check an export before the nightly run",
                    "settle validate /exports/orders-2026-11-29.csv.gz --as-of 2026-11-29"
                ),
                (
                    "check a fixed errors.csv before feeding it back",
                    "settle validate /var/settle/2026-11-29/errors-fixed.csv"
                ),
            ]),
        Command(
            name: "status", synopsis: ["settle status [--ledger FILE] [--line ID] [--json]"],
            summary: "what the ledger knows: runs; lines settled, unknown, failed, waiting",
            description:
                "Prints what the ledger holds: its runs, and its lines settled, sent but not known yet, failed and waiting. With --line, the story of one line; with --json, one JSON object for scripts.",
            options: ["--ledger", "--line", "--json", "--config", "--log-format"],
            exits: [
                (0, "the ledger holds no line whose outcome is unknown"),
                (75, "some lines were sent and their outcome is not known yet: run apply or run again"), (64, nil),
                (66, nil),
                (
                    78,
                    "there is no ledger at the path (create one with settle ledger init, or recover a lost one), or run, plan and apply refuse the one there (a rebuild that did not finish): the status is still printed, with the reason (refused in --json)"
                ),
                (70, nil),
            ],
            examples: [
                ("after a night's run", "settle status --ledger /var/settle/ledger.sqlite"),
                ("one line, for a script", "settle status --ledger /var/settle/ledger.sqlite --line 100-1 --json"),
            ]),
        Command(
            name: "cancel", synopsis: ["settle cancel LINE_ID... [--ledger FILE]"],
            summary: "drop lines that wait in the ledger (recorded, reported)",
            description:
                "Drops lines that wait in the ledger (deferred or not yet due) so that no later run brings them back: a copy fed again with the same money content is rejected (line_conflict; to pay it, feed it under a new line_id). The cancellation is recorded in the ledger and reported by status. A line status lists as not carried (a ledger rebuild over a copy that lost commits stopped holding it) can be cancelled too, which takes it off that list. A line already sent cannot be cancelled. An order is cancelled whole or not at all: a line whose order has other waiting (or not carried) lines not named stays (name them all; give the --config its export was read with if it maps columns).",
            options: ["--ledger", "--config", "--log-format", "-q", "-v"],
            exits: [
                (0, "every line named was waiting and is cancelled"),
                (
                    65,
                    "some lines named were not waiting (unknown, or already sent), or not all waiting lines of their order were named"
                ),
                (75, "the ledger is in use by another settle process: try again"), (64, nil), (66, nil), (78, nil),
                (70, nil),
            ],
            examples: [
                (
                    "a deferred line the order system withdrew",
                    "settle cancel 117-1 118-1 --ledger /var/settle/ledger.sqlite"
                ),
                ("then check it is gone", "settle status --ledger /var/settle/ledger.sqlite --line 117-1"),
            ]),
        Command(
            name: "ledger",
            synopsis: [
                "settle ledger init [FILE | --ledger FILE]", "settle ledger backup FILE [--ledger FILE]",
                "settle ledger rebuild --since DATE [--ledger FILE] [PLAN_FOLDER...] [options]",
            ],
            summary: "create a ledger; copy it safely; rebuild it from Stripe",
            description:
                "init creates an empty ledger (apply and run refuse a missing one). backup copies the ledger consistently while it may be in use (SQLite's backup, not cp); a backup put back in place is refused until a rebuild over it has brought it up to date from Stripe (an older copy would pay again what was sent since it was made). rebuild --since DATE reads Stripe's transfers and outbound payments made by settle since DATE (their metadata) and rebuilds the ledger from them, read-only on Stripe's side. Stripe's objects do not list their lines: give the plan folders that made them, whose instructions.jsonl do; an instruction whose lines no folder lists makes rebuild exit 78, and plan, run, validate and apply refuse the ledger until a rebuild knows them.",
            options: [
                "--ledger", "--since", "--api-base", "--api-key-file", "--live", "--stripe-version", "--rate",
                "--concurrency", "--config", "--log-format", "-q", "-v",
            ],
            exits: [
                (0, nil), (64, nil), (66, nil), (73, "the ledger or the backup file cannot be written"),
                (75, "the ledger is in use, or Stripe could not be reached: try again"), (78, nil), (70, nil),
            ],
            examples: [
                ("once, before the first run", "settle ledger init --ledger /var/settle/ledger.sqlite"),
                (
                    "every night, after the run",
                    "settle ledger backup /backup/ledger-$(date +%F).sqlite --ledger /var/settle/ledger.sqlite"
                ),
                (
                    "the ledger was lost: rebuild it from Stripe",
                    "settle ledger rebuild --since 2026-11-01 --ledger /var/settle/ledger.sqlite --api-key-file /etc/settle/key --live /var/settle/runs/*"
                ),
            ]),
        Command(
            name: "help", synopsis: ["settle help [COMMAND]", "settle COMMAND --help", "settle --version"],
            summary: "this help, or one command's",
            description:
                "Prints the list of commands and options, or one command's synopsis, options with defaults, exit statuses and examples. The same text is the man page settle(1).",
            options: [], exits: [(0, "help printed"), (64, "no such command")],
            examples: [("the options of run", "settle help run"), ("the same", "settle run --help")]),
    ]

    static func command(named name: String) -> Command? { commands.first { $0.name == name } }

    static func option(named name: String) -> Option? {
        options.first { $0.name == name || $0.usage.hasPrefix(name + " ") || $0.usage == name }
    }

    // MARK: - Text

    /// `settle help`, `settle --help`.
    static func global() -> String {
        var text =
            "settle \(Settle.version) — settle a marketplace on Stripe: transfers, Apple Pay payouts, reversals.\n\n"
        text += "USAGE\n"
        for command in commands where command.name != "help" {
            for (index, line) in command.synopsis.enumerated() {
                text += "  " + pad(line, 46) + (index == 0 ? command.summary : "") + "\n"
            }
        }
        text += "  settle help [COMMAND] | COMMAND --help | --version\n\n"
        text += "INPUTS are files, or - for standard input: CSV or XML, gzipped or not (told from the content).\n\n"
        text += "OPTIONS (each has a config-file key: its name with - written _)\n"
        text += optionLines(options.map(\.name))
        text += "\nEXIT STATUS (cron mails on non-zero)\n"
        for (code, meaning) in exitStatuses { text += "  \(pad(String(code), 4))\(meaning)\n" }
        text += "\nEXAMPLES\n  # the nightly cron line (in a crontab write each % as \\%)\n  \(cron)\n"
        text += "\nsettle help COMMAND shows a command's options, exit statuses and examples; man settle has it all.\n"
        return text
    }

    /// `settle help COMMAND`, `settle COMMAND --help`.
    static func text(of command: Command) -> String {
        var text = "settle \(command.name) — \(command.summary)\n\nUSAGE\n"
        for line in command.synopsis { text += "  \(line)\n" }
        text += "\n" + wrap(command.description, indent: "  ") + "\n"
        if !command.options.isEmpty {
            text += "\nOPTIONS\n" + optionLines(command.options)
        }
        text += "\nEXIT STATUS\n"
        for (code, meaning) in command.exits {
            text += "  \(pad(String(code), 4))\(meaning ?? exitStatuses.first { $0.0 == code }?.1 ?? "")\n"
        }
        text += "\nEXAMPLES\n"
        for (what, line) in command.examples { text += "  # \(what)\n  \(line)\n" }
        return text
    }

    /// What a wrong command line prints before exiting 64.
    static func usage(of name: String?) -> String {
        if let name, let command = command(named: name) {
            return "usage: " + command.synopsis.joined(separator: "\n       ") + "\n"
                + "see settle help \(command.name) for its options\n"
        }
        return
            "usage: settle plan|apply|run|validate|status|cancel|ledger|help ...\nsee settle help for the commands and options\n"
    }

    static func optionLines(_ names: [String]) -> String {
        var text = ""
        for name in names {
            guard let option = option(named: name) else { continue }
            var meaning = option.meaning
            // The default stays on one line: its spaces do not break.
            if !option.defaultValue.isEmpty {
                meaning += " (default:\u{1}\(option.defaultValue.replacingOccurrences(of: " ", with: "\u{1}")))"
            }
            let head = "  " + pad(option.usage, 34)
            if option.usage.count >= 34 {
                text += "  \(option.usage)\n" + wrap(meaning, indent: String(repeating: " ", count: 36)) + "\n"
            } else {
                let wrapped = wrap(meaning, indent: String(repeating: " ", count: 36))
                text += head + wrapped.dropFirst(36) + "\n"
            }
            text = text.replacingOccurrences(of: "\u{1}", with: " ")
        }
        return text
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    /// Wraps words to 100 columns after `indent`.
    static func wrap(_ text: String, indent: String, width: Int = 100) -> String {
        var lines: [String] = []
        var line = indent
        for word in text.split(separator: " ") {
            if line.count > indent.count && line.count + 1 + word.count > width {
                lines.append(line)
                line = indent
            }
            line += (line.count > indent.count ? " " : "") + word
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    // MARK: - Man page

    static let manDate = "2026-11-29"

    /// settle(1) in roff (man macros), from the same text as `--help`.
    static func roff() -> String {
        var out = ".\\\" Generated by `settle help --roff`; edit Sources/SettleCLI/Help.swift, not this file.\n"
        out += ".TH SETTLE 1 \"\(manDate)\" \"settle \(Settle.version)\" \"User Commands\"\n"
        out += ".SH NAME\nsettle \\- settle a marketplace on Stripe: transfers, Apple Pay payouts, reversals\n"
        out += ".SH SYNOPSIS\n.nf\n"
        for command in commands { for line in command.synopsis { out += roffText(line) + "\n" } }
        out += ".fi\n.SH DESCRIPTION\n"
        out +=
            roffText(
                "settle reads order exports (CSV or XML, gzipped or not), checks every line against the rules before any money moves, plans Stripe transfers, instant Apple Pay payouts and transfer reversals, and applies the plan exactly once with a SQLite ledger. Every input line ends in exactly one status in results.csv; rejected lines go to errors.csv with a reason code and their file:line, to be fixed and fed back in."
            ) + "\n"
        out += ".SH COMMANDS\n"
        for command in commands {
            out += ".SS \(roffText(command.name))\n.nf\n"
            for line in command.synopsis { out += ".B \(roffText(line))\n" }
            out += ".fi\n" + roffText(command.description) + "\n"
            if !command.options.isEmpty {
                out += ".PP\nOptions: " + roffText(command.options.joined(separator: ", ")) + ".\n"
            }
            out += ".PP\nExit status:\n"
            for (code, meaning) in command.exits {
                out += ".TP 5\n.B \(code)\n"
                out += roffText(meaning ?? exitStatuses.first { $0.0 == code }?.1 ?? "") + "\n"
            }
            out += ".PP\nExamples:\n"
            for (what, line) in command.examples {
                out += ".PP\n" + roffText(what) + ":\n.RS\n.nf\n" + roffText(line) + "\n.fi\n.RE\n"
            }
        }
        out += ".SH OPTIONS\nEach option has a config-file key: its name with - written _ (--as-of is as_of).\n"
        for option in options {
            out += ".TP\n.B \(roffText(option.usage))\n"
            out +=
                roffText(option.meaning + (option.defaultValue.isEmpty ? "" : " (default: \(option.defaultValue))"))
                + "\n"
        }
        out += ".SH EXIT STATUS\n"
        for (code, meaning) in exitStatuses { out += ".TP 5\n.B \(code)\n\(roffText(meaning))\n" }
        out += ".PP\nWhen several apply, 75 wins over 65; 64, 66, 73, 78 and 70 stop the run before any money moves.\n"
        out +=
            ".SH ENVIRONMENT\n.TP\n.B STRIPE_API_KEY\nthe secret key, when --api-key-file is not given. It is never printed, logged or written.\n"
        out += ".SH FILES\n.TP\n.B settle-ledger.sqlite\nthe default ledger, in the current folder.\n"
        out +=
            ".TP\n.I DIR\n"
            + roffText(
                "the output folder: results.csv, errors.csv, deferred.csv, instructions.jsonl, summary.csv, report.html, manifest.json."
            )
            + "\n"
        out +=
            ".SH EXAMPLES\nThe nightly cron line (in a crontab write each % as \\e%):\n.RS\n.nf\n" + roffText(cron)
            + "\n.fi\n.RE\n"
        out += ".SH SEE ALSO\n.BR cron (8),\n.BR sqlite3 (1)\n"
        return out
    }

    /// Text safe in roff: backslashes escaped, hyphens as \-, a leading dot or quote guarded,
    /// and the few non-ASCII characters the help uses as roff glyphs.
    static func roffText(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "…": out += "\\&..."
            case "—": out += "\\(em"
            case "’": out += "'"
            default: out.append(character)
            }
        }
        var lines = out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for index in lines.indices where lines[index].hasPrefix(".") || lines[index].hasPrefix("'") {
            lines[index] = "\\&" + lines[index]
        }
        return lines.joined(separator: "\n")
    }
}
