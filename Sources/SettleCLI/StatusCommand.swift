import Foundation
import SettleCore
import SettleLedger
import SettleWrite

/// `settle status [--ledger FILE] [--line ID] [--json]`: what the ledger knows.
///
/// Read-only and without the process lock. Exit 0, or 75 while the ledger holds lines
/// whose outcome is not known yet; 66 for a file that is not a settle ledger; 78 when there
/// is no ledger at the path, as for `run`, `apply` and `cancel`: a ledger lost or named wrong
/// is not "nothing settled yet" (`--json` still prints the status's shape at zero, with
/// `ledger_exists` false). A ledger those commands refuse (a rebuild that did not finish, or
/// one without the lines of some instructions) is shown, with the refusal in the output
/// (`refused` in `--json`), and exits 78 too: a monitor must not read it as healthy.
struct StatusCommand {
    let options: Options

    /// Runs listed in the text form (all of them are in `--json`).
    static let textRuns = 20

    func run() throws(CommandFailure) -> ExitCode {
        let path = options.ledger
        let opened: LedgerStore?
        do {
            opened = try LedgerStore.openReadOnly(path: path)
        } catch {
            throw LedgerHistory.failure(error, path: path)
        }
        guard let store = opened else {
            if options.json { printNoLedger(path) }
            throw LedgerHistory.failure(.missing(path: path, hadMark: LedgerStore.hasMark(path)), path: path)
        }
        defer { store.close() }
        // What it shows is said, and why plan, run and apply refuse it (they exit 78).
        var refused: CommandFailure?
        do throws(CommandFailure) {
            try LedgerHistory.refuseIfLinesUnknown(store)
            // Behind its mark (a backup put back, a lost WAL): refused as they refuse it.
            if let problem = try? store.markProblem() {
                throw LedgerHistory.failure(.behindMark(path: path, message: problem), path: path)
            }
        } catch {
            refused = error
            StandardError.write("settle status: warning: \(error.message)\n")
        }
        do throws(LedgerError) {
            let summary = try store.statusSummary()
            if let lineID = options.lineID {
                let history = try store.lineHistory(lineID)
                say(
                    options.json
                        ? Self.json(line: lineID, history, path: path).encoded() + "\n"
                        : Self.text(line: lineID, history, path: path))
            } else {
                let lines = try store.statusLines()
                let runs = try store.recordedRuns()
                let holder = LedgerStore.holder(of: path)
                say(
                    options.json
                        ? Self.json(
                            summary: summary, lines: lines, runs: runs, path: path, holder: holder,
                            refused: refused?.message
                        ).encoded() + "\n"
                        : Self.text(
                            summary: summary, lines: lines, runs: runs, path: path, holder: holder,
                            refused: refused?.message))
            }
            if let refused { return refused.code }
            return summary.linesPending > 0 ? .tryAgain : .ok
        } catch {
            throw CommandFailure(.tryAgain, "cannot read the ledger \(path): \(error)")
        }
    }

    private func say(_ text: String) { print(text, terminator: "") }

    /// The `--json` status of a path with no ledger: every count zero, `ledger_exists` false.
    private func printNoLedger(_ path: String) {
        var pairs: [(String, JSON)] = [("ledger", .string(path)), ("ledger_exists", .bool(false))]
        if let lineID = options.lineID {
            pairs += [("line_id", .string(lineID)), ("status", .string("not_in_ledger")), ("history", .array([]))]
        } else {
            // The keys of a ledger's status, at zero: a script reads one shape either way.
            pairs += [
                (
                    "lines",
                    .object(["settled", "unknown", "failed", "waiting", "not_carried"].map { ($0, .int(0)) })
                ),
                (
                    "instructions",
                    .object([LedgerStatus.settled, .inFlight, .unknown, .failed].map { ($0.rawValue, .int(0)) })
                ),
                ("runs", .array([])), ("waiting", .array([])), ("not_carried", .array([])), ("unknown", .array([])),
                ("failed", .array([])), ("refused", .null),
            ]
        }
        print(JSON.object(pairs).encoded())
    }

    // MARK: - The whole ledger

    /// - Parameter holder: the process holding the ledger now (``LedgerStore/holder(of:)``):
    ///   a run not ended is running when it is that process's run, else it was killed or
    ///   cut off (the next run takes it over).
    /// - Parameter refused: why `run`, `plan` and `apply` refuse this ledger, if they do.
    static func text(
        summary: LedgerStatusSummary, lines: LedgerStatusLines, runs: [LedgerRun], path: String,
        holder: LedgerStore.Holder? = nil, refused: String? = nil
    ) -> String {
        var text = "settle status: ledger \(path)\n"
        if let refused { text += "  REFUSED by run, plan and apply (exit 78): \(refused)\n" }
        text += "  lines settled: \(summary.linesSettled)\n"
        text += "  lines unknown (may have reached Stripe, outcome not known yet): \(summary.linesPending)\n"
        text += "  lines failed: \(lines.failed.count)\n"
        text += "  lines waiting (deferred): \(lines.waiting.count)\n"
        if !lines.notCarried.isEmpty {
            text +=
                "  lines not carried (deferred; a ledger rebuild over a copy that lost commits stopped holding them: "
                + "no run pays them until they are fed again, leaving out those cancelled): \(lines.notCarried.count)\n"
        }
        for status in [LedgerStatus.settled, .inFlight, .unknown, .failed] {
            text += "  instructions \(status.rawValue): \(summary.instructions[status] ?? 0)\n"
        }
        text += "runs: \(runs.count)\n"
        let shown = runs.suffix(textRuns)
        if shown.count < runs.count {
            text += "  (\(runs.count - shown.count) earlier runs not shown; --json lists them all)\n"
        }
        for run in shown {
            var parts = ["\(run.command)", "as of \(run.asOf)", "started \(timestamp(run.startedAt))"]
            parts.append(run.endedAt.map { "ended \(timestamp($0))" } ?? notEnded(run, holder: holder))
            parts.append(run.exitStatus.map { "exit \($0)" } ?? "no exit status")
            if let counts = countsText(run.counts) { parts.append(counts) }
            if let continues = run.continues { parts.append("continues \(continues)") }
            text += "  \(run.id): " + parts.joined(separator: ", ") + "\n"
        }
        // The lines behind the counts above, for the kinds that have any (the counts are not
        // said twice).
        for (title, list) in [
            ("lines unknown", lines.unknown), ("lines failed", lines.failed), ("lines waiting", lines.waiting),
            ("lines not carried", lines.notCarried),
        ] where !list.isEmpty {
            text += "\(title):\n"
            for line in list {
                let code = line.reasonCode.map { "\($0): " } ?? ""
                var context = "to \(line.payee), since \(timestamp(line.since))"
                if let run = line.sinceRun { context += " (\(run))" }
                if let instruction = line.instructionID { context += ", instruction \(instruction)" }
                text +=
                    "  \(line.lineID) \(amount(line.amountMinor, line.currency)) \(context): \(code)\(line.reason)\n"
            }
        }
        return text
    }

    static func json(
        summary: LedgerStatusSummary, lines: LedgerStatusLines, runs: [LedgerRun], path: String,
        holder: LedgerStore.Holder? = nil, refused: String? = nil
    ) -> JSON {
        .object([
            ("ledger", .string(path)),
            ("ledger_exists", .bool(true)),
            (
                "lines",
                .object([
                    ("settled", .int(Int64(summary.linesSettled))),
                    ("unknown", .int(Int64(summary.linesPending))),
                    ("failed", .int(Int64(lines.failed.count))),
                    ("waiting", .int(Int64(lines.waiting.count))),
                    ("not_carried", .int(Int64(lines.notCarried.count))),
                ])
            ),
            (
                "instructions",
                .object(
                    [LedgerStatus.settled, .inFlight, .unknown, .failed].map {
                        ($0.rawValue, .int(Int64(summary.instructions[$0] ?? 0)))
                    })
            ),
            ("runs", .array(runs.map { json(run: $0, holder: holder) })),
            ("waiting", .array(lines.waiting.map(json(line:)))),
            ("not_carried", .array(lines.notCarried.map(json(line:)))),
            ("unknown", .array(lines.unknown.map(json(line:)))),
            ("failed", .array(lines.failed.map(json(line:)))),
            ("refused", refused.map { .string($0) } ?? .null),
        ])
    }

    /// A run not ended: running now (its process holds the ledger), or not (killed or cut off).
    static func notEnded(_ run: LedgerRun, holder: LedgerStore.Holder?) -> String {
        guard let holder, holder.run == run.id else { return "not ended: no process runs it (killed or cut off)" }
        return "not ended: running now" + (holder.pid.map { " (pid \($0))" } ?? "")
    }

    static func json(run: LedgerRun, holder: LedgerStore.Holder? = nil) -> JSON {
        .object([
            ("id", .string(run.id)),
            ("command", .string(run.command)),
            ("as_of", .string(run.asOf)),
            ("folder", optional(run.folder)),
            ("started_at", .string(timestamp(run.startedAt))),
            ("ended_at", run.endedAt.map { .string(timestamp($0)) } ?? .null),
            ("exit_status", run.exitStatus.map { .int(Int64($0)) } ?? .null),
            ("counts", run.counts.map { (try? JSON.parse($0)) ?? .string($0) } ?? .null),
            ("continues", optional(run.continues)),
            ("running", .bool(run.endedAt == nil && holder?.run == run.id)),
        ])
    }

    static func json(line: LedgerStatusLine) -> JSON {
        .object([
            ("line_id", .string(line.lineID)),
            ("state", .string(line.state.rawValue)),
            ("payee", .string(line.payee)),
            ("amount_minor", .int(line.amountMinor)),
            ("amount", decimal(line.amountMinor, line.currency).map { .string($0) } ?? .null),
            ("currency", .string(line.currency)),
            ("reason_code", optional(line.reasonCode)),
            ("reason", .string(line.reason)),
            ("since", .string(timestamp(line.since))),
            ("since_run", optional(line.sinceRun)),
            ("instruction_id", optional(line.instructionID)),
            ("stripe_id", optional(line.stripeID)),
        ])
    }

    // MARK: - One line

    /// One event of a line's history, in time order (ties: runs, holding, instruction,
    /// calls, the end of the holding).
    struct Event {
        var at: Date
        var rank: Int
        var pairs: [(String, JSON)]
        var text: String
    }

    static func events(_ history: LedgerLineHistory) -> [Event] {
        var events: [Event] = []
        for run in history.runs {
            var text = "run \(run.id): \(run.command), as of \(run.asOf)"
            // A run taken over by a later one is ended without an exit status of its own (audit
            // 55 L1: its line's history said "not ended" while the run list said it ended).
            text +=
                run.exitStatus.map { ", exit \($0)" }
                ?? (run.endedAt == nil ? ", not ended" : ", ended, no exit status")
            events.append(
                Event(
                    at: run.startedAt, rank: 0,
                    pairs: [
                        ("event", .string("run")), ("run", .string(run.id)), ("command", .string(run.command)),
                        ("as_of", .string(run.asOf)), ("ended_at", run.endedAt.map { .string(timestamp($0)) } ?? .null),
                        ("exit_status", run.exitStatus.map { .int(Int64($0)) } ?? .null),
                    ], text: text))
        }
        if let held = history.held {
            events.append(
                Event(
                    at: held.sinceAt, rank: 1,
                    pairs: [
                        ("event", .string("held")), ("run", .string(held.sinceRun)),
                        ("reason_code", .string(held.reasonCode)), ("reason", .string(held.reason)),
                        ("source", .string(held.source)), ("instruction_id", optional(held.instructionID)),
                    ],
                    text: "held by \(held.sinceRun) (from \(held.source))"
                        + ([held.reasonCode, held.reason].filter { !$0.isEmpty }.map { ": " + $0 }.joined())))
            if let ended = held.endedRun {
                let event = history.notCarried ? LedgerStatusLine.State.notCarried.rawValue : held.state.rawValue
                events.append(
                    Event(
                        at: history.heldEndedAt ?? held.sinceAt, rank: 4,
                        pairs: [("event", .string(event)), ("run", .string(ended))],
                        text: history.notCarried
                            ? "not carried since settle ledger rebuild (\(ended)) over a ledger that had lost its "
                                + "record of what became of it, a settle cancel too: no run pays it until it is fed "
                                + "again; settle cancel \(held.lineID) if it was cancelled"
                            : "\(held.state.rawValue) by \(ended)"))
            }
        }
        if let netted = history.netted {
            events.append(
                Event(
                    at: netted.at, rank: 2,
                    pairs: [("event", .string("netted")), ("run", .string(netted.run))],
                    text: "netted by \(netted.run): it cancelled out with other lines of its order, nothing was sent"
                ))
        }
        if let instruction = history.instruction {
            var text =
                "instruction \(instruction.id): \(instruction.dispatch.kind) to \(instruction.dispatch.payee), "
                + "\(amount(instruction.dispatch.amountMinor, instruction.dispatch.currency)), "
                + "attempt \(instruction.attempt) (Idempotency-Key \(instruction.idempotencyKey)): "
                + instruction.status.rawValue
            if let stripeID = instruction.stripeID { text += " \(stripeID)" }
            if let code = instruction.errorCode { text += " \(code)" }
            if let message = instruction.errorMessage { text += " (\(message))" }
            if let request = instruction.requestID { text += ", Request-Id \(request)" }
            events.append(
                Event(
                    at: instruction.firstSentAt, rank: 2,
                    pairs: [
                        ("event", .string("instruction")), ("instruction_id", .string(instruction.id)),
                        ("kind", .string(instruction.dispatch.kind)), ("payee", .string(instruction.dispatch.payee)),
                        ("amount_minor", .int(instruction.dispatch.amountMinor)),
                        ("currency", .string(instruction.dispatch.currency)),
                        ("attempt", .int(Int64(instruction.attempt))),
                        ("idempotency_key", .string(instruction.idempotencyKey)),
                        ("status", .string(instruction.status.rawValue)), ("stripe_id", optional(instruction.stripeID)),
                        ("error_code", optional(instruction.errorCode)),
                        ("error_message", optional(instruction.errorMessage)),
                        ("request_id", optional(instruction.requestID)),
                    ], text: text))
        }
        for call in history.calls {
            var text = "call, attempt \(call.attempt) (Idempotency-Key \(call.idempotencyKey)): \(call.outcome)"
            if let status = call.httpStatus { text += ", HTTP \(status)" }
            if let request = call.requestID { text += ", Request-Id \(request)" }
            if let date = call.stripeDate { text += ", Stripe's Date \(date)" }
            events.append(
                Event(
                    at: call.sentAt, rank: 3,
                    pairs: [
                        ("event", .string("call")), ("instruction_id", .string(call.instructionID)),
                        ("attempt", .int(Int64(call.attempt))), ("idempotency_key", .string(call.idempotencyKey)),
                        ("outcome", .string(call.outcome)),
                        ("http_status", call.httpStatus.map { .int(Int64($0)) } ?? .null),
                        ("request_id", optional(call.requestID)), ("stripe_date", optional(call.stripeDate)),
                    ], text: text))
        }
        // Stable: equal times keep the rank, then the order they were recorded in.
        return events.enumerated().sorted {
            ($0.element.at, $0.element.rank, $0.offset) < ($1.element.at, $1.element.rank, $1.offset)
        }.map(\.element)
    }

    /// The line's amount and currency: its `lines` row, else its holding.
    private static func money(_ history: LedgerLineHistory) -> (Int64, String)? {
        if let line = history.line, let instruction = history.instruction {
            return (line.amountMinor, instruction.dispatch.currency)
        }
        if let line = history.line, let netted = history.netted { return (line.amountMinor, netted.currency) }
        return history.held.map { ($0.amountMinor, $0.currency) }
    }

    static func json(line id: String, _ history: LedgerLineHistory?, path: String) -> JSON {
        var pairs: [(String, JSON)] = [
            ("ledger", .string(path)), ("ledger_exists", .bool(true)), ("line_id", .string(id)),
            ("status", .string(history?.status ?? "not_in_ledger")),
        ]
        if let history {
            let money = money(history)
            pairs += [
                ("amount_minor", money.map { .int($0.0) } ?? .null),
                ("amount", money.flatMap { decimal($0.0, $0.1) }.map { .string($0) } ?? .null),
                ("currency", money.map { .string($0.1) } ?? .null),
                ("payee", optional(history.instruction?.dispatch.payee ?? history.held?.payee)),
                ("instruction_id", optional(history.line?.instructionID ?? history.held?.instructionID)),
                ("stripe_id", optional(history.line?.stripeID)),
                ("held_state", optional(history.held?.state.rawValue)),
            ]
        }
        let events = history.map(events) ?? []
        pairs.append(
            ("history", .array(events.map { .object([("at", .string(timestamp($0.at)))] + $0.pairs) })))
        return .object(pairs)
    }

    static func text(line id: String, _ history: LedgerLineHistory?, path: String) -> String {
        guard let history else { return "settle status: line \(id) is not in the ledger \(path)\n" }
        var text = "settle status: line \(id) in the ledger \(path): \(history.status)\n"
        var facts: [String] = []
        if let (minor, currency) = money(history) { facts.append(amount(minor, currency)) }
        if let payee = history.instruction?.dispatch.payee ?? history.held?.payee { facts.append("to \(payee)") }
        if let stripeID = history.line?.stripeID { facts.append("Stripe id \(stripeID)") }
        if !facts.isEmpty { text += "  " + facts.joined(separator: ", ") + "\n" }
        for event in events(history) {
            text += "  \(timestamp(event.at))  \(event.text)\n"
        }
        return text
    }

    // MARK: - Formatting

    static func timestamp(_ date: Date) -> String { Log.timestamp(date) }

    static func optional(_ text: String?) -> JSON { text.map { .string($0) } ?? .null }

    /// The canonical decimal, or nil for a currency settle does not know.
    static func decimal(_ minor: Int64, _ code: String) -> String? {
        Currency(code).map { MinorUnits.format(minor, currency: $0) }
    }

    /// `70.00 usd (7000 minor units)`.
    static func amount(_ minor: Int64, _ code: String) -> String {
        guard let text = decimal(minor, code) else { return "\(minor) minor units \(code)" }
        return "\(text) \(code) (\(minor) minor units)"
    }

    /// A run's counts (`{"settled": 3, "failed": 1}`) as `settled 3, failed 1`.
    static func countsText(_ counts: String?) -> String? {
        guard let counts else { return nil }
        guard case .object(let pairs)? = try? JSON.parse(counts) else { return "counts \(counts)" }
        let parts = pairs.map { "\($0.0) \($0.1.intValue.map(String.init) ?? $0.1.encoded())" }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }
}
