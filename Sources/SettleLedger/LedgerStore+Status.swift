public import Foundation

/// A line `settle status` lists: sent and not known yet, failed, or waiting.
public struct LedgerStatusLine: Sendable, Equatable {
    public enum State: String, Sendable, Equatable {
        /// Recorded in flight; no answer recorded yet.
        case inFlight = "in_flight"
        /// Sent; the outcome is not known yet.
        case unknown
        /// Refused for good by Stripe (the `lines` table).
        case failed
        /// Its payout failed, came back or was canceled (`held_lines` returned).
        case returned
        /// Deferred in the ledger (`held_lines` waiting).
        case waiting
        /// Deferred, and a `settle ledger rebuild` over a ledger that lost commits stopped
        /// holding it (a `settle cancel` of it may be among those lost): no run brings it back
        /// until it is fed again.
        case notCarried = "not_carried"
    }

    public var lineID: String
    public var state: State
    public var payee: String
    public var amountMinor: Int64
    public var currency: String
    public var reasonCode: String?
    public var reason: String
    /// Since when it is in this state: the first send of its attempt (unknown), Stripe's
    /// last answer (failed), or when the ledger began holding it (waiting, returned).
    public var since: Date
    /// The run that began holding it (waiting, returned).
    public var sinceRun: String?
    public var instructionID: String?
    public var stripeID: String?

    public init(
        lineID: String, state: State, payee: String, amountMinor: Int64, currency: String, reasonCode: String?,
        reason: String, since: Date, sinceRun: String? = nil, instructionID: String? = nil, stripeID: String? = nil
    ) {
        self.lineID = lineID
        self.state = state
        self.payee = payee
        self.amountMinor = amountMinor
        self.currency = currency
        self.reasonCode = reasonCode
        self.reason = reason
        self.since = since
        self.sinceRun = sinceRun
        self.instructionID = instructionID
        self.stripeID = stripeID
    }
}

/// The lines of `settle status`, each line in at most one list, by line id.
public struct LedgerStatusLines: Sendable, Equatable {
    /// In flight or unknown.
    public var unknown: [LedgerStatusLine]
    /// Failed for good, and returned (their payout came back); never a line released as
    /// not sent, nor one that was sent again since.
    public var failed: [LedgerStatusLine]
    /// Deferred, waiting for a later run.
    public var waiting: [LedgerStatusLine]
    /// Deferred, no longer carried: to be fed again (``LedgerStatusLine/State/notCarried``).
    public var notCarried: [LedgerStatusLine]

    public init(
        unknown: [LedgerStatusLine], failed: [LedgerStatusLine], waiting: [LedgerStatusLine],
        notCarried: [LedgerStatusLine] = []
    ) {
        self.unknown = unknown
        self.failed = failed
        self.waiting = waiting
        self.notCarried = notCarried
    }
}

/// Everything the ledger knows about one line, for `settle status --line`.
/// A line that netted to zero: the run whose apply recorded it, when, and its currency.
public struct LedgerNetting: Sendable, Equatable {
    public var run: String
    public var at: Date
    public var currency: String
}

public struct LedgerLineHistory: Sendable, Equatable {
    /// The line's row in `lines` (nil if it was never sent).
    public var line: LedgerLine?
    /// The instruction that holds it, with its error and Request-Id.
    public var instruction: LedgerInstruction?
    /// Every HTTP call made for that instruction, over all its attempts.
    public var calls: [LedgerCall]
    /// Its row in `held_lines` (nil if never held).
    public var held: HeldLine?
    /// When its holding ended (cancelled, released).
    public var heldEndedAt: Date?
    /// The runs the line was part of (the instruction's, and those that held it or ended it).
    public var runs: [LedgerRun]
    /// When the line netted to zero with others of its run (nothing sent): the run that
    /// recorded it, when, and its currency. Nil for a line that did not net.
    public var netted: LedgerNetting? = nil
    /// A line a rebuild stopped holding that no run took up since: it waits nowhere until fed
    /// again (``LedgerStore/waitingLinesRebuildsDropped(line:)``; audit 77 H4: status called it
    /// "released").
    public var notCarried = false

    /// Where the line stands now: `settled`, `in_flight`, `unknown`, `failed`, `not_sent`
    /// (released: its request never left, it goes again), or the state it is held in
    /// (`waiting`, `following`, `returned`, `cancelled`, `released`), or `not_carried`.
    public var status: String {
        if netted != nil { return "netted" }
        if notCarried { return LedgerStatusLine.State.notCarried.rawValue }
        if let line, line.status != .failed { return line.status.rawValue }
        if let held, [.waiting, .returned, .cancelled].contains(held.state) { return held.state.rawValue }
        if line != nil { return instruction?.errorCode == LedgerOutcome.notSentCode ? "not_sent" : "failed" }
        return held?.state.rawValue ?? "not_in_ledger"
    }
}

extension LedgerStore {
    /// The lines that are sent and not known yet, failed, or waiting. A line sent again
    /// after it failed is listed by its latest state (settled: not listed).
    public func statusLines() throws(LedgerError) -> LedgerStatusLines {
        var unknown: [LedgerStatusLine] = []
        try db.query(
            """
            SELECT l.line_id, l.status, i.payee, l.amount_minor, i.currency, i.error_code, i.error_message,
                   i.first_sent_at, i.id
            FROM lines l JOIN instructions i ON i.id = l.instruction_id
            WHERE l.status IN ('in_flight', 'unknown')
            ORDER BY i.first_sent_at, l.line_id
            """
        ) { row in
            let state = LedgerStatusLine.State(rawValue: row.text(1) ?? "") ?? .unknown
            unknown.append(
                LedgerStatusLine(
                    lineID: row.text(0) ?? "", state: state, payee: row.text(2) ?? "", amountMinor: row.integer(3),
                    currency: row.text(4) ?? "", reasonCode: row.text(5),
                    reason: row.text(6)
                        ?? (state == .inFlight
                            ? "may have reached Stripe, no answer recorded (the next run asks Stripe and resolves it)"
                            : "sent, outcome not known yet"),
                    since: Date(ledgerMilliseconds: row.integer(7)), instructionID: row.text(8)))
        }
        let held = try hasTable("held_lines")
        var failed: [LedgerStatusLine] = []
        // A line held waiting or returned is listed from held_lines below.
        let notHeld =
            held
            ? "AND l.line_id NOT IN (SELECT line_id FROM held_lines WHERE state IN ('waiting', 'returned'))" : ""
        try db.query(
            """
            SELECT l.line_id, i.payee, l.amount_minor, i.currency, i.error_code, i.error_message,
                   COALESCE((SELECT MAX(a.sent_at) FROM attempts a WHERE a.instruction_id = i.id), i.last_sent_at),
                   i.id, i.stripe_id
            FROM lines l JOIN instructions i ON i.id = l.instruction_id
            WHERE l.status = 'failed' AND COALESCE(i.error_code, '') != ? \(notHeld)
            """, [.text(LedgerOutcome.notSentCode)]
        ) { row in
            failed.append(
                LedgerStatusLine(
                    lineID: row.text(0) ?? "", state: .failed, payee: row.text(1) ?? "", amountMinor: row.integer(2),
                    currency: row.text(3) ?? "", reasonCode: row.text(4), reason: row.text(5) ?? "",
                    since: Date(ledgerMilliseconds: row.integer(6)), instructionID: row.text(7),
                    stripeID: row.text(8)))
        }
        var waiting: [LedgerStatusLine] = []
        if held {
            // A held line the `lines` table shows as sent again (settled, in flight,
            // unknown) is not waiting or failed any more, whatever its held row says.
            try db.query(
                """
                SELECT h.line_id, h.state, h.payee, h.amount_minor, h.currency, h.reason_code, h.reason, h.since_at,
                       h.since_run, h.instruction_id, i.stripe_id
                FROM held_lines h
                LEFT JOIN lines l ON l.line_id = h.line_id
                LEFT JOIN instructions i ON i.id = h.instruction_id
                WHERE h.state IN ('waiting', 'returned') AND COALESCE(l.status, 'failed') = 'failed'
                ORDER BY h.since_at, h.line_id
                """
            ) { row in
                let line = LedgerStatusLine(
                    lineID: row.text(0) ?? "", state: row.text(1) == "waiting" ? .waiting : .returned,
                    payee: row.text(2) ?? "", amountMinor: row.integer(3), currency: row.text(4) ?? "",
                    reasonCode: row.text(5), reason: row.text(6) ?? "", since: Date(ledgerMilliseconds: row.integer(7)),
                    sinceRun: row.text(8), instructionID: row.text(9), stripeID: row.text(10))
                if line.state == .waiting { waiting.append(line) } else { failed.append(line) }
            }
        }
        failed.sort { ($0.since, $0.lineID) < ($1.since, $1.lineID) }
        let notCarried = try waitingLinesRebuildsDropped().map { hold in
            LedgerStatusLine(
                lineID: hold.lineID, state: .notCarried, payee: hold.payee, amountMinor: hold.amountMinor,
                currency: hold.currency, reasonCode: hold.reasonCode, reason: hold.reason, since: hold.sinceAt,
                sinceRun: hold.sinceRun)
        }
        return LedgerStatusLines(unknown: unknown, failed: failed, waiting: waiting, notCarried: notCarried)
    }

    /// Everything the ledger knows about one line; nil when it knows nothing of it.
    public func lineHistory(_ id: String) throws(LedgerError) -> LedgerLineHistory? {
        let found = try line(id)
        var instruction: LedgerInstruction?
        if let found { instruction = try self.instruction(found.instructionID) }
        var calls: [LedgerCall] = []
        if let instruction {
            try db.query(
                """
                SELECT attempt, idempotency_key, sent_at, outcome, http_status, request_id, stripe_date
                FROM attempts WHERE instruction_id = ? ORDER BY seq
                """, [.text(instruction.id)]
            ) { row in
                calls.append(
                    LedgerCall(
                        instructionID: instruction.id, attempt: Int(row.integer(0)), idempotencyKey: row.text(1) ?? "",
                        sentAt: Date(ledgerMilliseconds: row.integer(2)), outcome: row.text(3) ?? "",
                        httpStatus: row.optionalInteger(4).map { Int($0) }, requestID: row.text(5),
                        stripeDate: row.text(6)))
            }
        }
        var held: HeldLine?
        var heldEndedAt: Date?
        var runIDs: [String] = []
        if try hasTable("held_lines") {
            try db.query(
                """
                SELECT line_id, state, payee, amount_minor, currency, reason_code, reason, source, header, record,
                    instruction_id, since_run, since_at, ended_run, ended_at
                FROM held_lines WHERE line_id = ?
                """, [.text(id)]
            ) { row in
                held = HeldLine(
                    lineID: row.text(0) ?? "", state: HeldLine.State(rawValue: row.text(1) ?? "") ?? .released,
                    payee: row.text(2) ?? "", amountMinor: row.integer(3), currency: row.text(4) ?? "",
                    reasonCode: row.text(5) ?? "", reason: row.text(6) ?? "", source: row.text(7) ?? "",
                    header: row.text(8) ?? "", record: row.blob(9), instructionID: row.text(10),
                    sinceRun: row.text(11) ?? "", sinceAt: Date(ledgerMilliseconds: row.integer(12)),
                    endedRun: row.text(13))
                heldEndedAt = row.optionalInteger(14).map { Date(ledgerMilliseconds: $0) }
            }
            if let instruction {
                try db.query("SELECT run_id FROM instructions WHERE id = ?", [.text(instruction.id)]) { row in
                    if let run = row.text(0) { runIDs.append(run) }
                }
            }
            if let held {
                runIDs.append(held.sinceRun)
                if let ended = held.endedRun { runIDs.append(ended) }
            }
        }
        // A line read from netted_lines has no instruction (``line(_:)``).
        var netted: LedgerNetting?
        if version >= 4, let found, found.instructionID.isEmpty {
            try db.query("SELECT run_id, recorded_at, currency FROM netted_lines WHERE line_id = ?", [.text(id)]) {
                row in
                netted = LedgerNetting(
                    run: row.text(0) ?? "", at: Date(ledgerMilliseconds: row.integer(1)), currency: row.text(2) ?? "")
            }
            if let netted { runIDs.append(netted.run) }
        }
        guard found != nil || held != nil else { return nil }
        let runs = try runIDs.isEmpty ? [] : self.runs().filter { runIDs.contains($0.id) }
        var notCarried = false
        if found == nil { notCarried = !(try waitingLinesRebuildsDropped(line: id)).isEmpty }
        return LedgerLineHistory(
            line: found, instruction: instruction, calls: calls, held: held, heldEndedAt: heldEndedAt, runs: runs,
            netted: netted, notCarried: notCarried)
    }

    /// The runs, or none for a ledger from before runs were recorded (schema version 1).
    public func recordedRuns() throws(LedgerError) -> [LedgerRun] {
        try hasTable("runs") ? runs() : []
    }

    func hasTable(_ name: String) throws(LedgerError) -> Bool {
        var exists = false
        try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(name)]) { _ in
            exists = true
        }
        return exists
    }
}
