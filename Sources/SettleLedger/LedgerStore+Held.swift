public import Foundation

/// A line the ledger holds for later runs (the `held_lines` table).
public struct HeldLine: Sendable, Equatable {
    public enum State: String, Sendable, Equatable, CaseIterable {
        /// Deferred (`charge_pending`, `scheduled`): every later run brings it back.
        case waiting
        /// Paid by a payout Stripe has not posted yet.
        case following
        /// Its payout failed, came back or was canceled: the next run reports it failed.
        case returned
        /// Sent by a run that did not learn the outcome (`unknown`): the next run brings it
        /// back, resolves it at Stripe and reports it (settled, failed), so what moved is in
        /// some run's results and summary whatever that run's own export holds.
        case unresolved
        /// Dropped on purpose by `settle cancel`.
        case cancelled
        /// It left the queue: settled, rejected, or fed again by an export.
        case released
    }

    public var lineID: String
    public var state: State
    public var payee: String
    public var amountMinor: Int64
    public var currency: String
    public var reasonCode: String
    public var reason: String
    /// `file:line` where the line first came from.
    public var source: String
    /// The header of its export, in CSV (the columns of `errors.csv`).
    public var header: String
    /// Its original record, byte for byte.
    public var record: [UInt8]
    /// The payout that paid it (following, returned).
    public var instructionID: String?
    public var sinceRun: String
    public var sinceAt: Date
    public var endedRun: String?

    public init(
        lineID: String, state: State, payee: String, amountMinor: Int64, currency: String, reasonCode: String,
        reason: String, source: String, header: String, record: [UInt8], instructionID: String? = nil,
        sinceRun: String, sinceAt: Date = Date(), endedRun: String? = nil
    ) {
        self.lineID = lineID
        self.state = state
        self.payee = payee
        self.amountMinor = amountMinor
        self.currency = currency
        self.reasonCode = reasonCode
        self.reason = reason
        self.source = source
        self.header = header
        self.record = record
        self.instructionID = instructionID
        self.sinceRun = sinceRun
        self.sinceAt = sinceAt
        self.endedRun = endedRun
    }
}

/// How a line's holding ended (released by a run, or cancelled), and by which run when one did.
public struct HeldLineEnd: Sendable, Equatable {
    public var state: HeldLine.State
    public var endedRun: String?
    /// The reason code the line was held with (a payout's return reason, for a line held
    /// `returned` that a run reported).
    public var reasonCode = ""
}

/// A run as the ledger records it.
public struct LedgerRun: Sendable, Equatable {
    public var id: String
    public var command: String
    public var asOf: String
    public var folder: String?
    public var startedAt: Date
    public var endedAt: Date?
    public var exitStatus: Int?
    /// Line counts by status, as JSON (`{"settled": 3, …}`).
    public var counts: String?
    public var continues: String?

    public init(
        id: String, command: String, asOf: String, folder: String?, startedAt: Date, endedAt: Date? = nil,
        exitStatus: Int? = nil, counts: String? = nil, continues: String? = nil
    ) {
        self.id = id
        self.command = command
        self.asOf = asOf
        self.folder = folder
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.exitStatus = exitStatus
        self.counts = counts
        self.continues = continues
    }
}

extension LedgerStore {
    /// Records a run (insert or update by id).
    ///
    /// A run's end counts in the mark like a request in flight: what the run did (a return it
    /// reported, holds it ended, a killed run it took over) is in no backup from before it, and
    /// such a backup put back is refused until a rebuild (audit 69 F3: one from before a run
    /// that sent nothing was used, and the next run reported and counted the return again).
    public func recordRun(_ run: LedgerRun) throws(LedgerError) {
        if run.endedAt == nil {
            try db.transaction { () throws(LedgerError) in try writeRun(run) }
            announce(run: run.id)
        } else {
            try markedTransaction { () throws(LedgerError) in try writeRun(run) }
        }
    }

    /// Cancels lines that wait (``endHolding(_:to:run:from:)`` to `cancelled`) and records
    /// the cancel run that did it, started and ended, in one transaction: a cancel is all
    /// recorded or not at all (audit 61 F2: on a nearly full disk the lines were cancelled and
    /// the run's end was not, the command said it failed, and the same command again said the
    /// lines were not waiting). `ended` is the run's ended record, given how many changed.
    /// A line not carried (``waitingLinesRebuildsDropped()``) is cancelled too: the cancel may
    /// have been among the commits the ledger lost, and nothing else took it off the list
    /// (audit 77 H2: `settle cancel` refused it, "released, not waiting"). Not a line whose
    /// payout came back (`returned`): the next run reports the return (audit 81 L1: cancelled,
    /// no run reported it, and the days' paid_out overstated what Stripe moved).
    public func cancel(_ lineIDs: [String], run: LedgerRun, ended: (Int) -> LedgerRun) throws(LedgerError) -> Int {
        try markedTransaction { () throws(LedgerError) in
            try writeRun(run)
            var changed = try updateHolding(lineIDs, to: .cancelled, run: run.id, from: [.waiting])
            let notCarried = Set(try waitingLinesRebuildsDropped().map(\.lineID))
            changed += try updateHolding(
                lineIDs.filter { notCarried.contains($0) }, to: .cancelled, run: run.id, from: [.released])
            try rememberCancelled(by: run.id)
            try writeRun(ended(changed))
            return changed
        }
    }

    private func writeRun(_ run: LedgerRun) throws(LedgerError) {
        _ = try db.run(
            """
            INSERT INTO runs (id, command, as_of, folder, started_at, ended_at, exit_status, counts, continues)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET ended_at = excluded.ended_at, exit_status = excluded.exit_status,
                counts = excluded.counts, continues = excluded.continues
            """,
            [
                .text(run.id), .text(run.command), .text(run.asOf), SQLiteValue(run.folder),
                .integer(run.startedAt.ledgerMilliseconds), SQLiteValue(run.endedAt?.ledgerMilliseconds),
                SQLiteValue(run.exitStatus.map { Int64($0) }), SQLiteValue(run.counts), SQLiteValue(run.continues),
            ])
    }

    /// Whether the ledger holds a request the run sent (in flight, answered or not).
    public func sentAnything(run: String) throws(LedgerError) -> Bool {
        var found = false
        let sentRun = version >= 8 ? "OR sent_run = ?1" : ""
        try db.query("SELECT 1 FROM instructions WHERE run_id = ?1 \(sentRun) LIMIT 1", [.text(run)]) { _ in
            found = true
        }
        return found
    }

    /// Removes the record of a run that has not ended: `run` records itself before it plans,
    /// and a plan that stops with an error (nothing sent) leaves no run behind, as before it
    /// recorded itself (an ended record of a run refused for its folder would hide an earlier
    /// run of that folder that never ended).
    public func forgetRun(_ id: String) throws(LedgerError) {
        try db.run("DELETE FROM runs WHERE id = ? AND ended_at IS NULL", [.text(id)])
    }

    /// Whether this ledger saw the run `id` apply (its own record, or a re-apply continuing
    /// it), or a `ledger rebuild` restored what it made from Stripe. A plan folder applied on
    /// a ledger that does not know its run was applied on another one, or on this one before
    /// it was lost: what it sent is not here (``restore(_:lines:runs:at:)``).
    public func knowsRun(_ id: String) throws(LedgerError) -> Bool {
        var found = false
        try db.query("SELECT 1 FROM runs WHERE id = ?1 OR continues = ?1 LIMIT 1", [.text(id)]) { _ in found = true }
        if found { return true }
        return try rebuiltRuns().contains(id)
    }

    /// Whether this ledger ever recorded an instruction (sent, or about to be).
    public func hasInstructions() throws(LedgerError) -> Bool {
        var found = false
        try db.query("SELECT 1 FROM instructions LIMIT 1") { _ in found = true }
        return found
    }

    /// The runs whose objects a `ledger rebuild` restored from Stripe (their plan folders were given).
    func rebuiltRuns() throws(LedgerError) -> Set<String> {
        Set((try meta("rebuilt_runs") ?? "").split(separator: "\n").map(String.init))
    }

    /// The plan folder of each run that names one, by run id.
    public func runFolders() throws(LedgerError) -> [String: String] {
        Dictionary(try runs().compactMap { run in run.folder.map { (run.id, $0) } }, uniquingKeysWith: { $1 })
    }

    /// The runs, oldest first.
    public func runs() throws(LedgerError) -> [LedgerRun] {
        var result: [LedgerRun] = []
        try db.query(
            "SELECT id, command, as_of, folder, started_at, ended_at, exit_status, counts, continues FROM runs ORDER BY started_at, id"
        ) { row in
            result.append(
                LedgerRun(
                    id: row.text(0) ?? "", command: row.text(1) ?? "", asOf: row.text(2) ?? "", folder: row.text(3),
                    startedAt: Date(ledgerMilliseconds: row.integer(4)),
                    endedAt: row.isNull(5) ? nil : Date(ledgerMilliseconds: row.integer(5)),
                    exitStatus: row.isNull(6) ? nil : Int(row.integer(6)), counts: row.text(7), continues: row.text(8)))
        }
        return result
    }

    /// Holds lines (insert or replace by line id), in one transaction. A line held `returned`
    /// is not followed again for the payout that came back (a re-apply of a folder that says
    /// it `settled` by that payout): the return stays to be reported (audit 51 F6: after a
    /// rebuild, the re-apply's row put it back to `following`, and no run reported it).
    public func hold(_ lines: [HeldLine]) throws(LedgerError) {
        guard !lines.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in try insertHolds(lines) }
    }

    /// Records lines the ledger has no record of as not carried, in one transaction: held, and
    /// their holding ended by a rebuild at once, as ``finishRebuild()`` ends the waiting lines of
    /// a ledger that lost commits (``waitingLinesRebuildsDropped(line:)`` lists them). For the
    /// deferred lines of the plan folders a rebuild is given (audit 77 H3, audit 78 F1: after a
    /// lost ledger, a folder applied again held them waiting again, and the next run paid them
    /// unfed, a cancelled one too; held waiting first, a second rebuild over the same ledger,
    /// which lost no commits itself, kept them waiting).
    public func recordNotCarried(_ lines: [HeldLine]) throws(LedgerError) {
        guard !lines.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            try insertHolds(
                lines.map {
                    var line = $0
                    line.state = .waiting
                    return line
                })
            try stopCarrying(lines.map(\.lineID))
        }
    }

    /// Lines a plan folder given to a rebuild says `settle cancel` dropped, recorded cancelled
    /// by `run` (the apply whose rows say so), in one transaction: only those the ledger has
    /// no claim of and no holding of, or does not carry (a rebuild stopped holding them). A
    /// line it holds otherwise keeps its holding: the ledger's own record is newer than the
    /// folder's.
    public func recordCancelled(_ lines: [HeldLine], run: String) throws(LedgerError) {
        guard !lines.isEmpty else { return }
        let notCarried = Set(try waitingLinesRebuildsDropped().map(\.lineID))
        try db.transaction { () throws(LedgerError) in
            var cancelled: [HeldLine] = []
            for line in lines {
                guard try self.line(line.lineID) == nil,
                    try holdState(of: line.lineID) == nil || notCarried.contains(line.lineID)
                else { continue }
                var held = line
                held.state = .waiting
                cancelled.append(held)
            }
            try insertHolds(cancelled)
            _ = try updateHolding(cancelled.map(\.lineID), to: .cancelled, run: run, from: [.waiting])
            try rememberCancelled(by: run)
        }
    }

    /// Keeps the money content of each line `run` cancelled (``schemaVersion12``).
    func rememberCancelled(by run: String) throws(LedgerError) {
        guard try hasTable("cancelled_contents") else { return }
        try db.run(
            """
            INSERT OR IGNORE INTO cancelled_contents (line_id, payee, amount_minor, currency, run_id)
            SELECT line_id, payee, amount_minor, currency, ended_run FROM held_lines
            WHERE state = 'cancelled' AND ended_run = ?
            """, [.text(run)])
    }

    /// Every money content a line had when `settle cancel` dropped it (``schemaVersion12``;
    /// a ledger not migrated yet: its cancelled holdings), as held lines with the cancel's run
    /// as `endedRun`: a copy of one is the cancelled line fed again.
    public func cancelledContents() throws(LedgerError) -> [HeldLine] {
        var result: [HeldLine] = []
        let remembered =
            try hasTable("cancelled_contents")
            ? "SELECT line_id, payee, amount_minor, currency, run_id FROM cancelled_contents UNION " : ""
        try db.query(
            remembered
                + "SELECT line_id, payee, amount_minor, currency, COALESCE(ended_run, '') FROM held_lines "
                + "WHERE state = 'cancelled'"
        ) { row in
            result.append(
                HeldLine(
                    lineID: row.text(0) ?? "", state: .cancelled, payee: row.text(1) ?? "",
                    amountMinor: row.integer(2), currency: row.text(3) ?? "", reasonCode: "", reason: "", source: "",
                    header: "", record: [], instructionID: nil, sinceRun: "", endedRun: row.text(4)))
        }
        return result
    }

    /// Lines not carried whose fate a plan folder given to a rebuild decided (its newest row of
    /// the line rejects it, reports it failed or settled, or says `settle cancel` dropped it):
    /// their holding's end is that folder's run's, so they leave the list, and a folder planned
    /// before it takes the line as that run's (audit 78 F5: one stayed listed, and was named to
    /// be fed though a newer folder given had rejected its order).
    public func decidedByFolders(_ lines: [String: String]) throws(LedgerError) {
        guard !lines.isEmpty, try hasTable("held_lines") else { return }
        try db.transaction { () throws(LedgerError) in
            for (line, run) in lines.sorted(by: { $0.key < $1.key }) {
                try db.run(
                    """
                    UPDATE held_lines SET ended_run = ? WHERE line_id = ? AND state = 'released' AND ended_run = ?
                      AND NOT EXISTS (SELECT 1 FROM lines l WHERE l.line_id = held_lines.line_id)
                    """, [.text(run), .text(line), .text(Self.rebuildRun)])
            }
        }
    }

    func insertHolds(_ lines: [HeldLine]) throws(LedgerError) {
        for line in lines {
            try db.run(
                """
                INSERT INTO held_lines (line_id, state, payee, amount_minor, currency, reason_code, reason, source,
                    header, record, instruction_id, since_run, since_at, ended_run, ended_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)
                ON CONFLICT(line_id) DO UPDATE SET state = excluded.state, payee = excluded.payee,
                    amount_minor = excluded.amount_minor, currency = excluded.currency,
                    reason_code = excluded.reason_code, reason = excluded.reason, header = excluded.header,
                    record = excluded.record, instruction_id = excluded.instruction_id,
                    since_run = CASE WHEN held_lines.state = excluded.state THEN held_lines.since_run
                                     ELSE excluded.since_run END,
                    since_at = CASE WHEN held_lines.state = excluded.state THEN held_lines.since_at
                                    ELSE excluded.since_at END,
                    source = CASE WHEN held_lines.state IN ('waiting', 'following', 'returned')
                                  THEN held_lines.source ELSE excluded.source END,
                    ended_run = NULL, ended_at = NULL
                WHERE NOT (held_lines.state = 'returned' AND excluded.state = 'following'
                           AND held_lines.instruction_id IS excluded.instruction_id)
                """,
                [
                    .text(line.lineID), .text(line.state.rawValue), .text(line.payee), .integer(line.amountMinor),
                    .text(line.currency), .text(line.reasonCode), .text(line.reason), .text(line.source),
                    .text(line.header), .blob(line.record), SQLiteValue(line.instructionID), .text(line.sinceRun),
                    .integer(line.sinceAt.ledgerMilliseconds),
                ])
        }
    }

    /// Ends the holding of lines (released, cancelled) by a run; only lines currently held
    /// in `from` states change. Returns how many changed.
    @discardableResult
    public func endHolding(
        _ lineIDs: [String], to state: HeldLine.State, run: String,
        from: [HeldLine.State] = [.waiting, .returned, .unresolved]
    ) throws(LedgerError) -> Int {
        guard !lineIDs.isEmpty else { return 0 }
        return try db.transaction { () throws(LedgerError) in
            try updateHolding(lineIDs, to: state, run: run, from: from)
        }
    }

    func updateHolding(_ lineIDs: [String], to state: HeldLine.State, run: String, from: [HeldLine.State])
        throws(LedgerError) -> Int
    {
        var changed = 0
        let states = from.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        // A return's holding released is its report (the run that ends it counts it).
        let reports = state == .released && from.contains(.returned) && version >= 11
        for id in lineIDs {
            if reports {
                try db.run(
                    """
                    INSERT OR IGNORE INTO return_reports (line_id, reason, run_id)
                    SELECT line_id, reason, ? FROM held_lines WHERE line_id = ? AND state = 'returned'
                    """, [.text(run), .text(id)])
            }
            changed += try db.run(
                "UPDATE held_lines SET state = ?, ended_run = ?, ended_at = ? WHERE line_id = ? AND state IN (\(states))",
                [.text(state.rawValue), .text(run), .integer(Date().ledgerMilliseconds), .text(id)])
        }
        return changed
    }

    /// The lines held in the given states, by line id.
    public func heldLines(_ states: [HeldLine.State]) throws(LedgerError) -> [HeldLine] {
        let list = states.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return try heldLines(where: "state IN (\(list))")
    }

    /// The lines held whose row meets `condition` (SQL over `held_lines`), oldest first.
    func heldLines(where condition: String, _ values: [SQLiteValue] = []) throws(LedgerError) -> [HeldLine] {
        var result: [HeldLine] = []
        try db.query(
            """
            SELECT line_id, state, payee, amount_minor, currency, reason_code, reason, source, header, record,
                instruction_id, since_run, since_at, ended_run
            FROM held_lines WHERE \(condition) ORDER BY since_at, line_id
            """, values
        ) { row in
            result.append(
                HeldLine(
                    lineID: row.text(0) ?? "", state: HeldLine.State(rawValue: row.text(1) ?? "") ?? .released,
                    payee: row.text(2) ?? "", amountMinor: row.integer(3), currency: row.text(4) ?? "",
                    reasonCode: row.text(5) ?? "", reason: row.text(6) ?? "", source: row.text(7) ?? "",
                    header: row.text(8) ?? "", record: row.blob(9), instructionID: row.text(10),
                    sinceRun: row.text(11) ?? "", sinceAt: Date(ledgerMilliseconds: row.integer(12)),
                    endedRun: row.text(13)))
        }
        return result
    }

    /// Payout instructions Stripe has not posted yet (`payout_status` processing).
    public func processingPayouts() throws(LedgerError) -> [(instruction: String, stripeID: String)] {
        var result: [(String, String)] = []
        try db.query(
            """
            SELECT id, stripe_id FROM instructions
            WHERE kind = 'payout' AND status = 'settled' AND payout_status = 'processing' AND stripe_id IS NOT NULL
            ORDER BY rowid
            """
        ) { row in result.append((row.text(0) ?? "", row.text(1) ?? "")) }
        return result
    }

    /// Payouts Stripe posted whose last attempt was sent at or after `since`: a posted payout
    /// may still be returned by the recipient's bank (``PayoutFollow`` watches them for a while).
    /// `sentAt`: when it was sent, by this machine's clock; `stripeDate`: Stripe's `Date` of
    /// the first answer that names it, when one was recorded (Stripe's time is what counts).
    public func postedPayouts(sentSince since: Date) throws(LedgerError) -> [(
        instruction: String, stripeID: String, sentAt: Date, stripeDate: String?
    )] {
        var result: [(String, String, Date, String?)] = []
        try db.query(
            """
            SELECT i.id, i.stripe_id, i.first_sent_at,
                   (SELECT a.stripe_date FROM attempts a
                    WHERE a.instruction_id = i.id AND a.stripe_date IS NOT NULL ORDER BY a.seq LIMIT 1)
            FROM instructions i
            WHERE i.kind = 'payout' AND i.status = 'settled' AND i.payout_status = 'posted'
              AND i.stripe_id IS NOT NULL AND i.last_sent_at >= ?
            ORDER BY i.rowid
            """, [.integer(Int64(since.timeIntervalSince1970 * 1000))]
        ) { row in
            result.append(
                (
                    row.text(0) ?? "", row.text(1) ?? "", Date(timeIntervalSince1970: Double(row.integer(2)) / 1000),
                    row.text(3)
                ))
        }
        return result
    }

    /// Records a payout's status at Stripe. `failed`, `returned`, `canceled`: the money came
    /// back, so the instruction and its lines are failed (released for a new attempt) with
    /// Stripe's reason, and its following lines become returned.
    public func recordPayoutStatus(instruction id: String, status: String, reason: String?) throws(LedgerError) {
        try db.transaction { () throws(LedgerError) in
            try db.run("UPDATE instructions SET payout_status = ? WHERE id = ?", [.text(status), .text(id)])
            guard ["failed", "returned", "canceled"].contains(status) else { return }
            // Its money is back: later runs' retained so far no longer counts it as paid out.
            if version >= 5 {
                try db.run(
                    """
                    UPDATE payout_charges SET came_back = 1
                    WHERE instruction_id = ?1 AND stripe_id = (SELECT stripe_id FROM instructions WHERE id = ?1)
                    """, [.text(id)])
            }
            // Which run reported it made, per line, before the holds turn `returned` (a run holds
            // a payout's line from the row that reports it made, since that attempt was sent).
            // Not for a payout a rebuild restored (no run recorded it: the rebuilt holds name the
            // folders' runs, not the one that reported it; the rebuild records what its folders
            // reported, ``recordPayoutReports(_:)``).
            if version >= 11 {
                try db.run(
                    """
                    INSERT OR IGNORE INTO payout_reports (stripe_id, line_id, run_id)
                    SELECT i.stripe_id, h.line_id, h.since_run FROM held_lines AS h JOIN instructions AS i
                        ON i.id = h.instruction_id
                    WHERE h.instruction_id = ? AND h.state IN ('following', 'released') AND i.stripe_id IS NOT NULL
                        AND i.run_id IS NOT NULL AND h.since_at >= i.last_sent_at
                    """, [.text(id)])
            }
            let code = reason ?? "payout_\(status)"
            var payout = ""
            try db.query("SELECT stripe_id FROM instructions WHERE id = ?", [.text(id)]) { row in
                payout = row.text(0) ?? ""
            }
            // The payout's id, so finance can find it at Stripe from errors.csv alone.
            let message =
                "the payout \(payout.isEmpty ? "" : payout + " ")was \(status) at Stripe after it was accepted (\(code))"
            try db.run(
                "UPDATE instructions SET status = 'failed', error_code = ?, error_message = ? WHERE id = ?",
                [.text(code), .text(message), .text(id)])
            try db.run("UPDATE lines SET status = 'failed' WHERE instruction_id = ?", [.text(id)])
            // Its lines: followed (still processing), released when it posted (a return after
            // posting), or unresolved when another folder's apply resolved the payout and no
            // run has reported it yet (audit 46 M1: the line stayed `unresolved`, came back as
            // a line to pay, and was paid again with the return reported nowhere); each row
            // names the payout that last paid its line. A line a later run held `unresolved`
            // under no instruction (its own look-up could not ask Stripe either) is the
            // payout's by the ledger's claim (audit 73 A73-4: it stayed `unresolved`, and the run
            // that learned the return reported the lines `failed` without counting it).
            try db.run(
                """
                UPDATE held_lines SET state = 'returned', reason_code = ?1, reason = ?2, ended_run = NULL,
                    ended_at = NULL, instruction_id = ?3
                WHERE (instruction_id = ?3 AND state IN ('following', 'released', 'unresolved'))
                    OR (instruction_id IS NULL AND state = 'unresolved'
                        AND line_id IN (SELECT line_id FROM lines WHERE instruction_id = ?3))
                """, [.text(code), .text(message), .text(id)])
        }
    }
}

extension LedgerStore {
    /// The line ids an instruction claimed.
    public func lines(ofInstruction id: String) throws(LedgerError) -> [String] {
        var result: [String] = []
        try db.query("SELECT line_id FROM lines WHERE instruction_id = ? ORDER BY line_id", [.text(id)]) { row in
            result.append(row.text(0) ?? "")
        }
        return result
    }

    /// Records a payout's status as the create call answered it (`processing`, `posted`).
    public func notePayoutStatus(instruction id: String, status: String) throws(LedgerError) {
        try db.run(
            "UPDATE instructions SET payout_status = ? WHERE id = ? AND kind = 'payout'", [.text(status), .text(id)])
    }
}

extension LedgerStore {
    /// The lines whose holding another run than `run` (or `settle cancel`) ended at or after
    /// `since`, each with how (released or cancelled) and by which run: lines no longer an
    /// older plan's to hold again. One indexed query (`held_lines_by_end`: the few since the
    /// plan), where the rewrite after apply used to ask line by line.
    public func holdsEnded(since: Date, notBy run: String) throws(LedgerError) -> [String: HeldLineEnd] {
        var found: [String: HeldLineEnd] = [:]
        try db.query(
            """
            SELECT line_id, state, ended_run, reason_code FROM held_lines
            WHERE +state IN ('released', 'cancelled') AND ended_at >= ?
              AND (ended_run IS NULL OR ended_run != ?)
            """, [.integer(since.ledgerMilliseconds), .text(run)]
        ) { row in
            if let state = HeldLine.State(rawValue: row.text(1) ?? "") {
                found[row.text(0) ?? ""] = HeldLineEnd(
                    state: state, endedRun: row.text(2), reasonCode: row.text(3) ?? "")
            }
        }
        return found
    }

    /// The lines another run than `run` began holding (waiting, returned, unresolved) at or
    /// after `since`, each with that state and run: a line fed again after a `settle cancel`
    /// (a new line, other content) or sent by a later run is that run's, not an older plan's
    /// to hold again (audit 81 H3: a re-apply of the older folder put the cancelled content
    /// back in place of the new line's, and the run on its day paid the cancelled amount).
    /// A line carried from run to run keeps the run that began holding it.
    public func holdsBegun(since: Date, notBy run: String) throws(LedgerError) -> [String: HeldLineEnd] {
        var found: [String: HeldLineEnd] = [:]
        try db.query(
            """
            SELECT line_id, state, since_run FROM held_lines
            WHERE state IN ('waiting', 'returned', 'unresolved') AND since_at >= ? AND since_run != ?
            """, [.integer(since.ledgerMilliseconds), .text(run)]
        ) { row in
            if let state = HeldLine.State(rawValue: row.text(1) ?? "") {
                found[row.text(0) ?? ""] = HeldLineEnd(state: state, endedRun: row.text(2))
            }
        }
        return found
    }

    /// Who ended a waiting line's holding, for ``linesTakenUp(since:notBy:)``, when a rebuild over
    /// a ledger behind its mark did (``rebuildDistrustsWaiting()``).
    public static let rebuildTakenUp = "settle ledger rebuild"

    /// The lines whose holding another run than `run` ended at or after `since` without moving
    /// them (rejected, reported failed, or cancelled; not settled, not netted), each with who
    /// ended it ("run …", or "settle cancel"): lines a later run decided against after a plan was
    /// made. A line a later run moved is no such decision: its order moved there too; nor is a
    /// payout line Stripe refused or whose payout came back, which stops no other line of its
    /// order (payouts go last; audit 27 C1, C2: such a payout, reported by a later run, stopped
    /// the order's waiting lines in an older folder, and one was lost).
    public func linesTakenUp(since: Date, notBy run: String) throws(LedgerError) -> [String: String] {
        var found: [String: String] = [:]
        let netted =
            version >= 4 ? "AND NOT EXISTS (SELECT 1 FROM netted_lines n WHERE n.line_id = h.line_id)" : ""
        // `+h.state`: searched by when the holding ended (`held_lines_by_end`, the few since the
        // plan), not by state (every line ever released).
        try db.query(
            """
            SELECT h.line_id, h.ended_run, h.state FROM held_lines h
            WHERE +h.state IN ('released', 'cancelled') AND h.ended_at >= ?
              AND (h.ended_run IS NULL OR h.ended_run != ?)
              AND NOT EXISTS (
                SELECT 1 FROM lines l JOIN instructions i ON i.id = l.instruction_id
                WHERE l.line_id = h.line_id
                  AND (l.status = 'settled' OR i.kind = 'payout'))
              \(netted)
            """, [.integer(since.ledgerMilliseconds), .text(run)]
        ) { row in
            found[row.text(0) ?? ""] =
                row.text(2) == HeldLine.State.cancelled.rawValue
                ? "settle cancel"
                : row.text(1) == Self.rebuildRun ? Self.rebuildTakenUp : "run \(row.text(1) ?? "")"
        }
        return found
    }

    /// Records the orders a run's files decided against: each with the line that decided it
    /// (rejected by a rule, refused by Stripe) and why, at `at`: when the run's plan was made,
    /// so that a re-apply of an old folder does not date its old decisions after newer plans.
    public func recordDecidedOrders(_ orders: [String: (line: String, reason: String)], run: String, at: Date)
        throws(LedgerError)
    {
        guard version >= 7, !orders.isEmpty else { return }
        let now = at.ledgerMilliseconds
        try db.transaction { () throws(LedgerError) in
            for (order, decided) in orders {
                try db.run(
                    """
                    INSERT INTO decided_orders (group_key, run_id, line_id, reason, decided_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(group_key, run_id) DO UPDATE SET line_id = excluded.line_id,
                        reason = excluded.reason, decided_at = excluded.decided_at
                    """, [.text(order), .text(run), .text(decided.line), .text(decided.reason), .integer(now)])
            }
        }
    }

    /// The orders another run than `run`, planned after `since`, decided against (its apply's
    /// files rejected or saw refused a line of them), each with why (``recordDecidedOrders``).
    public func ordersDecided(since: Date, notBy run: String) throws(LedgerError) -> [String: String] {
        var found: [String: String] = [:]
        for decision in try decisions(after: since) where decision.run != run && found[decision.order] == nil {
            found[decision.order] =
                "run \(decision.run) decided against this order after this plan (line \(decision.line): "
                + "\(decision.reason)), so the order is that run's now (its files say what became of it): "
                + "nothing of it moves here"
        }
        return found
    }

    /// Of these orders (group keys), those a run decided against, each with its latest decision:
    /// the deciding line and why, naming the run (``recordDecidedOrders``).
    public func latestDecisions(groups: [String]) throws(LedgerError) -> [String: (line: String, reason: String)] {
        guard version >= 7, !groups.isEmpty else { return [:] }
        var found: [String: (line: String, reason: String)] = [:]
        var start = 0
        while start < groups.count {
            let chunk = groups[start..<min(start + 500, groups.count)]
            start += chunk.count
            try db.query(
                """
                SELECT group_key, line_id, reason, run_id FROM decided_orders
                WHERE group_key IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))
                ORDER BY decided_at
                """, chunk.map { .text($0) }
            ) { row in
                let line = row.text(1) ?? ""
                found[row.text(0) ?? ""] = (
                    line, Self.decision(run: row.text(3) ?? "", line: line, reason: row.text(2) ?? "")
                )
            }
        }
        return found
    }

    /// Every order a run decided against after `since`, with its latest decision: when and
    /// why (``recordDecidedOrders``).
    public func decidedOrders(after since: Date) throws(LedgerError) -> [String: (at: Date, reason: String)] {
        var found: [String: (at: Date, reason: String)] = [:]
        for decision in try decisions(after: since) {
            found[decision.order] = (
                decision.at, Self.decision(run: decision.run, line: decision.line, reason: decision.reason)
            )
        }
        return found
    }

    /// How a decision reads in a reason: "run … decided against it (line …: …)".
    private static func decision(run: String, line: String, reason: String) -> String {
        "run \(run) decided against it (line \(line): \(reason))"
    }

    /// The decided orders recorded after `since`, oldest first.
    private func decisions(after since: Date) throws(LedgerError) -> [(
        order: String, run: String, line: String, reason: String, at: Date
    )] {
        guard version >= 7 else { return [] }
        var found: [(order: String, run: String, line: String, reason: String, at: Date)] = []
        try db.query(
            """
            SELECT group_key, run_id, line_id, reason, decided_at FROM decided_orders
            WHERE decided_at > ? ORDER BY decided_at
            """, [.integer(since.ledgerMilliseconds)]
        ) { row in
            found.append(
                (
                    row.text(0) ?? "", row.text(1) ?? "", row.text(2) ?? "", row.text(3) ?? "",
                    Date(ledgerMilliseconds: row.integer(4))
                ))
        }
        return found
    }

    /// Whether `settle cancel` dropped any line at or after `since` (any time when nil).
    public func anyCancelled(since: Date?) throws(LedgerError) -> Bool {
        var found = false
        try db.query(
            "SELECT 1 FROM held_lines WHERE state = 'cancelled' AND (ended_at IS NULL OR ended_at >= ?) LIMIT 1",
            [.integer(since?.ledgerMilliseconds ?? 0)]
        ) { _ in found = true }
        return found
    }

    /// Of `ids`, those `settle cancel` dropped at or after `since` (any time when nil).
    public func cancelledLines(_ ids: [String], since: Date?) throws(LedgerError) -> Set<String> {
        var result: Set<String> = []
        for id in ids {
            try db.query(
                "SELECT 1 FROM held_lines WHERE line_id = ? AND state = 'cancelled' AND (ended_at IS NULL OR ended_at >= ?)",
                [.text(id), .integer(since?.ledgerMilliseconds ?? 0)]
            ) { _ in result.insert(id) }
        }
        return result
    }

    /// The lines held in the given states: the run that began holding each, and when.
    public func heldLineStarts(_ states: [HeldLine.State]) throws(LedgerError) -> [String: (run: String, at: Date)] {
        var result: [String: (run: String, at: Date)] = [:]
        let list = states.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        try db.query("SELECT line_id, since_run, since_at FROM held_lines WHERE state IN (\(list))") { row in
            result[row.text(0) ?? ""] = (row.text(1) ?? "", Date(ledgerMilliseconds: row.integer(2)))
        }
        return result
    }

    /// The state of a line's holding, and the run that ended it; nil when the ledger never held it.
    public func holdState(of lineID: String) throws(LedgerError) -> (state: HeldLine.State, endedRun: String?)? {
        var found: (state: HeldLine.State, endedRun: String?)?
        try db.query("SELECT state, ended_run FROM held_lines WHERE line_id = ?", [.text(lineID)]) { row in
            found = (HeldLine.State(rawValue: row.text(0) ?? "") ?? .released, row.text(1))
        }
        return found
    }

    /// The run that holds (or last held) a line, in any state, since when, and the instruction
    /// it held it for; nil when the ledger never held it.
    public func holding(of lineID: String) throws(LedgerError) -> (run: String, since: Date, instruction: String?)? {
        var found: (run: String, since: Date, instruction: String?)?
        try db.query("SELECT since_run, since_at, instruction_id FROM held_lines WHERE line_id = ?", [.text(lineID)]) {
            row in
            found = (row.text(0) ?? "", Date(ledgerMilliseconds: row.integer(1)), row.text(2))
        }
        return found
    }

    /// The run whose files reported `payout` made for `lineID`, as the ledger held the line when
    /// the payout came back (``schemaVersion11``); nil when none did or it is not known.
    public func payoutReporter(_ payout: String, line lineID: String) throws(LedgerError) -> String? {
        guard version >= 11 else { return nil }
        return try firstText(
            "SELECT run_id FROM payout_reports WHERE stripe_id = ? AND line_id = ?", [.text(payout), .text(lineID)])
    }

    /// Records which run's files reported each payout made for a line (`settle ledger rebuild`,
    /// from the applied folders given, oldest first: the first report stands).
    public func recordPayoutReports(_ reports: [(payout: String, line: String, run: String)]) throws(LedgerError) {
        guard version >= 11, !reports.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for report in reports {
                try db.run(
                    "INSERT OR IGNORE INTO payout_reports (stripe_id, line_id, run_id) VALUES (?, ?, ?)",
                    [.text(report.payout), .text(report.line), .text(report.run)])
            }
        }
    }

    /// The run that reported the return of `lineID` whose text is `reason` (it ended the line's
    /// holding `returned`: ``schemaVersion11``); nil when none did or it is not known.
    public func returnReporter(_ lineID: String, reason: String) throws(LedgerError) -> String? {
        guard version >= 11 else { return nil }
        return try firstText(
            "SELECT run_id FROM return_reports WHERE line_id = ? AND reason = ?", [.text(lineID), .text(reason)])
    }

    /// The ids of the lines held in the given states (without their records).
    public func heldLineIDs(_ states: [HeldLine.State]) throws(LedgerError) -> Set<String> {
        var result: Set<String> = []
        let list = states.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        try db.query("SELECT line_id FROM held_lines WHERE state IN (\(list))") { row in
            result.insert(row.text(0) ?? "")
        }
        return result
    }
}
