public import Foundation

extension LedgerStore {
    /// Records a batch of instructions as in flight, claiming their lines, in one
    /// transaction. Commit this **before** the requests leave: after a crash the next run
    /// finds them and resolves them instead of paying again.
    ///
    /// An instruction already in flight or unknown under the same key is a re-send: only
    /// its `last_sent_at` moves. A failed one starts its new attempt (the attempt must be
    /// higher). Nothing is written if any instruction or line cannot be claimed.
    ///
    /// - Throws: ``LedgerError/lineClaimed(lineID:instructionID:status:)`` when a line is
    ///   held by another instruction that is in flight, unknown or settled;
    ///   ``LedgerError/instructionNotSendable(id:status:)`` when the instruction is settled,
    ///   or pending under another key.
    public func markInFlight(_ batch: [LedgerDispatch], at now: Date = Date()) throws(LedgerError) {
        let time = now.ledgerMilliseconds
        try markedTransaction { () throws(LedgerError) in
            for dispatch in batch {
                try markOne(dispatch, time: time)
            }
        }
    }

    private func markOne(_ dispatch: LedgerDispatch, time: Int64) throws(LedgerError) {
        if let existing = try instructionState(dispatch.id) {
            switch existing.status {
            case .settled:
                throw .instructionNotSendable(id: dispatch.id, status: .settled)
            case .inFlight, .unknown:
                guard existing.key == dispatch.idempotencyKey else {
                    throw .instructionNotSendable(id: dispatch.id, status: existing.status)
                }
                try db.run(
                    "UPDATE instructions SET last_sent_at = ? WHERE id = ?", [.integer(time), .text(dispatch.id)])
                return
            case .failed:
                guard dispatch.attempt > existing.attempt else {
                    throw .instructionNotSendable(id: dispatch.id, status: .failed)
                }
                // The object of the attempt that failed (a payout that came back) stays known as
                // that attempt's, so that no look-up takes it for the new one's.
                if version >= 6 {
                    try db.run(
                        """
                        INSERT OR IGNORE INTO earlier_objects (instruction_id, stripe_id, attempt)
                        SELECT id, stripe_id, attempt FROM instructions WHERE id = ? AND stripe_id IS NOT NULL
                        """, [.text(dispatch.id)])
                }
                // A new attempt is reported by its own run: no mark of the old one carries over.
                if version >= 7 {
                    try db.run("DELETE FROM unreported_outcomes WHERE instruction_id = ?", [.text(dispatch.id)])
                }
            }
        }
        for claim in dispatch.lines {
            if let holder = try line(claim.lineID), holder.instructionID != dispatch.id, holder.status != .failed {
                throw .lineClaimed(lineID: claim.lineID, instructionID: holder.instructionID, status: holder.status)
            }
        }
        try db.run(
            """
            INSERT INTO instructions (id, kind, group_key, payee, charge, currency, amount_minor, method, path,
                params, stripe_context, status, attempt, idempotency_key, first_sent_at, last_sent_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'in_flight', ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET
                kind = excluded.kind, group_key = excluded.group_key, payee = excluded.payee,
                charge = excluded.charge, currency = excluded.currency, amount_minor = excluded.amount_minor,
                method = excluded.method, path = excluded.path, params = excluded.params,
                stripe_context = excluded.stripe_context, status = 'in_flight', attempt = excluded.attempt,
                idempotency_key = excluded.idempotency_key, first_sent_at = excluded.first_sent_at,
                last_sent_at = excluded.last_sent_at, stripe_id = NULL, error_code = NULL,
                error_message = NULL, request_id = NULL
            """,
            [
                .text(dispatch.id), .text(dispatch.kind), .text(dispatch.group), .text(dispatch.payee),
                .text(dispatch.charge), .text(dispatch.currency), .integer(dispatch.amountMinor),
                .text(dispatch.method), .text(dispatch.path), .text(dispatch.params),
                SQLiteValue(dispatch.stripeContext),
                .integer(Int64(dispatch.attempt)), .text(dispatch.idempotencyKey), .integer(time), .integer(time),
            ])
        if version >= 8 {
            try db.run(
                "UPDATE instructions SET sent_run = ? WHERE id = ?", [SQLiteValue(writingRun), .text(dispatch.id)])
        }
        for claim in dispatch.lines {
            try db.run(
                """
                INSERT INTO lines (line_id, content, instruction_id, kind, amount_minor, status, stripe_id)
                VALUES (?, ?, ?, ?, ?, 'in_flight', NULL)
                ON CONFLICT(line_id) DO UPDATE SET content = excluded.content,
                    instruction_id = excluded.instruction_id, kind = excluded.kind,
                    amount_minor = excluded.amount_minor, status = 'in_flight', stripe_id = NULL
                """,
                [
                    .text(claim.lineID), .text(claim.content), .text(dispatch.id), .text(claim.kind),
                    .integer(claim.amountMinor),
                ])
        }
    }

    /// Records what became of an instruction, with the HTTP call that told (if any), in
    /// one transaction. `failed` releases the lines so that a later run may send them
    /// again under a new attempt.
    public func recordOutcome(
        instruction id: String, _ outcome: LedgerOutcome, requestID: String? = nil, call: LedgerCall? = nil
    ) throws(LedgerError) {
        try db.transaction { () throws(LedgerError) in
            try writeOutcome(instruction: id, outcome, requestID: requestID, call: call)
        }
    }

    private func writeOutcome(
        instruction id: String, _ outcome: LedgerOutcome, requestID: String?, call: LedgerCall?
    ) throws(LedgerError) {
        if let call { try insert(call) }
        let status: LedgerStatus
        var stripeID: String?
        var code: String?
        var message: String?
        switch outcome {
        case .settled(let id):
            status = .settled
            stripeID = id
        case .failed(let failureCode, let failureMessage):
            status = .failed
            code = failureCode
            message = failureMessage
        case .unknown(let unknownMessage):
            status = .unknown
            message = unknownMessage
        }
        // The run that settles it is kept: its own re-apply reports the object as made by it.
        let changed = try db.run(
            """
            UPDATE instructions SET status = ?1, stripe_id = ?2, error_code = ?3, error_message = ?4,
                request_id = COALESCE(?5, request_id),
                run_id = CASE WHEN ?1 = 'settled' THEN COALESCE(?7, run_id) ELSE run_id END
            WHERE id = ?6
            """,
            [
                .text(status.rawValue), SQLiteValue(stripeID), SQLiteValue(code), SQLiteValue(message),
                SQLiteValue(requestID), .text(id), SQLiteValue(writingRun),
            ])
        guard changed == 1 else { throw .unknownInstruction(id) }
        try db.run(
            "UPDATE lines SET status = ?, stripe_id = ? WHERE instruction_id = ?",
            [.text(status.rawValue), SQLiteValue(stripeID), .text(id)])
    }

    /// One write of ``commit(_:)``.
    public enum Write: Sendable {
        /// ``recordOutcome(instruction:_:requestID:call:)``.
        case outcome(instruction: String, LedgerOutcome, requestID: String?, call: LedgerCall?)
        /// ``recordCall(_:)``.
        case call(LedgerCall)
        /// ``notePayoutStatus(instruction:status:)``.
        case payoutStatus(instruction: String, status: String)
        /// An instruction an earlier run left open, found made by an apply that may not
        /// report it (``unreportedOutcomes()``): written with its outcome, in one commit.
        case unreported(instruction: String, run: String?)
    }

    /// Commits answers that came in together, in order, in one transaction (one sync of the
    /// ledger instead of one per answer). Only for what happens *after* a request left:
    /// the in-flight entry before it leaves is ``markInFlight(_:at:)``'s own commit.
    /// Nothing is written when one of them fails.
    public func commit(_ writes: [Write]) throws(LedgerError) {
        guard !writes.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for write in writes {
                switch write {
                case .outcome(let id, let outcome, let requestID, let call):
                    try writeOutcome(instruction: id, outcome, requestID: requestID, call: call)
                case .call(let call): try insert(call)
                case .payoutStatus(let id, let status):
                    try db.run(
                        "UPDATE instructions SET payout_status = ? WHERE id = ? AND kind = 'payout'",
                        [.text(status), .text(id)])
                case .unreported(let id, let run):
                    try db.run(
                        """
                        INSERT OR IGNORE INTO unreported_outcomes (instruction_id, resolved_by, resolved_at)
                        VALUES (?, ?, ?)
                        """, [.text(id), SQLiteValue(run), .integer(Date().ledgerMilliseconds)])
                }
            }
        }
    }

    /// Records one HTTP call that did not decide the outcome (a retried try).
    public func recordCall(_ call: LedgerCall) throws(LedgerError) {
        try db.transaction { () throws(LedgerError) in try insert(call) }
    }

    private func insert(_ call: LedgerCall) throws(LedgerError) {
        try db.run(
            """
            INSERT INTO attempts (instruction_id, attempt, idempotency_key, sent_at, outcome, http_status, request_id,
                stripe_date)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(call.instructionID), .integer(Int64(call.attempt)), .text(call.idempotencyKey),
                .integer(call.sentAt.ledgerMilliseconds), .text(call.outcome),
                SQLiteValue(call.httpStatus.map { Int64($0) }),
                SQLiteValue(call.requestID), SQLiteValue(call.stripeDate),
            ])
    }

    private func instructionState(_ id: String) throws(LedgerError) -> (
        status: LedgerStatus, attempt: Int, key: String
    )? {
        var state: (LedgerStatus, Int, String)?
        try db.query("SELECT status, attempt, idempotency_key FROM instructions WHERE id = ?", [.text(id)]) { row in
            state = (LedgerStatus(rawValue: row.text(0) ?? "") ?? .unknown, Int(row.integer(1)), row.text(2) ?? "")
        }
        return state
    }
}

extension LedgerStore {
    /// A line that netted to zero in a plan: a transfer and its reversal of one run cancelled
    /// out, so nothing was sent and no instruction holds it.
    public struct NettedLine: Sendable, Equatable {
        public var lineID: String
        public var content: String
        public var kind: String
        public var amountMinor: Int64
        public var currency: String
        /// Its order's group (an order stopped at apply records none of its lines).
        public var group: String

        public init(
            lineID: String, content: String, kind: String, amountMinor: Int64, currency: String, group: String = ""
        ) {
            self.lineID = lineID
            self.content = content
            self.kind = kind
            self.amountMinor = amountMinor
            self.currency = currency
            self.group = group
        }
    }

    /// Records a plan's netted lines as settled (nothing sent), in one transaction, so a later
    /// export of either line is `already_settled`. A line recorded before (a re-apply) stays.
    public func recordNetted(_ lines: [NettedLine], run: String, at now: Date = Date()) throws(LedgerError) {
        guard !lines.isEmpty else { return }
        let time = now.ledgerMilliseconds
        try db.transaction { () throws(LedgerError) in
            for line in lines {
                try db.run(
                    """
                    INSERT INTO netted_lines (line_id, content, kind, amount_minor, currency, run_id, recorded_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(line_id) DO NOTHING
                    """,
                    [
                        .text(line.lineID), .text(line.content), .text(line.kind), .integer(line.amountMinor),
                        .text(line.currency), .text(run), .integer(time),
                    ])
            }
        }
    }

    /// An object settle made, as Stripe lists it (`metadata[settle_instruction]`), for
    /// `settle ledger rebuild`.
    public struct RestoredObject: Sendable, Equatable {
        public var instructionID: String
        public var kind: String
        public var stripeID: String
        public var group: String
        public var payee: String
        public var charge: String
        public var currency: String
        public var amountMinor: Int64
        public var path: String
        /// The key recorded for it (of ``attempt``), made by the caller from the one key format.
        public var idempotencyKey: String
        /// Which attempt of its instruction made it: 1, or one more than the payouts of the
        /// instruction that came back before it.
        public var attempt = 1
        /// A payout's status at Stripe (`processing`, `posted`): one still processing is
        /// followed by the next runs, as if this ledger had sent it. `failed`, `returned`,
        /// `canceled` (``cameBack``): it moved nothing, and only counts its instruction's attempts.
        public var payoutStatus: String?
        /// When Stripe made it, where its object says (a payout's `created`): recorded as when
        /// it was sent, so that a posted payout is watched for a return from then on
        /// (``PayoutFollow/returnWindow``), as the ledger that sent it watched it. Else the
        /// rebuild's time.
        public var createdAt: Date?

        /// The statuses of a payout whose money came back.
        public static let cameBack: Set<String> = ["failed", "returned", "canceled"]
        public var hasComeBack: Bool { payoutStatus.map { Self.cameBack.contains($0) } ?? false }

        public init(
            instructionID: String, kind: String, stripeID: String, group: String, payee: String, charge: String,
            currency: String, amountMinor: Int64, path: String, idempotencyKey: String, payoutStatus: String? = nil
        ) {
            self.idempotencyKey = idempotencyKey
            self.payoutStatus = payoutStatus
            self.instructionID = instructionID
            self.kind = kind
            self.stripeID = stripeID
            self.group = group
            self.payee = payee
            self.charge = charge
            self.currency = currency
            self.amountMinor = amountMinor
            self.path = path
        }
    }

    /// When a payout Stripe lists as come back is the answer to the attempt the ledger holds
    /// of its instruction (an `ON CONFLICT` clause's condition): the ledger has it settled (a
    /// backup from before the return), or in flight or unknown (the run that sent it died
    /// before the answer) at that attempt or an earlier one. Stripe's word then replaces the
    /// ledger's: failed, with its object (audit 69 F2: an in-flight payout stayed without its
    /// object, and the killed folder's apply took it for one never made and paid the lines
    /// again to the method that had returned it). A later attempt the ledger sent is its own.
    static let takesStripesWord = """
        (instructions.status = 'settled' OR (instructions.status IN ('in_flight', 'unknown') \
        AND instructions.attempt <= excluded.attempt))
        """

    /// Records objects found at Stripe as settled instructions, in one transaction. An
    /// instruction the ledger already holds is marked settled with Stripe's id (whatever it
    /// said before: Stripe's list is the truth); a new one is added, with its lines when
    /// `lines` has them (from the plan folders that made it). Returns how many were new.
    ///
    /// Stripe's objects name their instruction, not its lines: a restored instruction whose
    /// lines no plan folder gave is recorded in ``instructionsWithoutLines()``, and
    /// `plan`, `run` and `apply` refuse the ledger until a rebuild gives them (a line it
    /// settled would otherwise look new and be paid again).
    ///
    /// `runs`: the runs of the plan folders the rebuild was given, made since the date it
    /// listed from: what they sent is now known (``knowsRun(_:)``), so their folders may be
    /// applied again on this ledger.
    @discardableResult
    public func restore(
        _ objects: [RestoredObject], lines: [String: [LedgerLineClaim]] = [:], runs: [String] = [],
        at now: Date = Date()
    ) throws(LedgerError) -> Int {
        let rebuilt = try rebuiltRuns().union(runs).sorted().joined(separator: "\n")
        let time = now.ledgerMilliseconds
        var added = 0
        // A payout that came back used a key of its instruction: each is an attempt, and the
        // object of an earlier attempt, so that the fix fed back goes under a new key and no
        // look-up takes the old payout for the new one (audit 35 P1: the fix was refused
        // `idempotency_error`, then reported as the old payout that came back).
        var cameBack: [String: [RestoredObject]] = [:]
        for object in objects where object.hasComeBack { cameBack[object.instructionID, default: []].append(object) }
        let liveInstructions = Set(objects.filter { !$0.hasComeBack }.map(\.instructionID))
        try markedTransaction { () throws(LedgerError) in
            for (instruction, payouts) in cameBack.sorted(by: { $0.key < $1.key }) {
                let live = liveInstructions.contains(instruction)
                // The last attempt's payout is the instruction's own; the others its earlier objects.
                guard let latest = payouts.max(by: { $0.attempt < $1.attempt }) else { continue }
                if !live {
                    added += 1
                    // Dated at the rebuild, not at Stripe's `created`: which folder's run made it
                    // is not known here, and apply keeps a folder planned before the payout from
                    // sending its lines again (``ApplyEngine``'s came-back check): a date on
                    // Stripe's clock a little behind ours put an old run's own payout before its
                    // plan, and its re-apply paid the lines again (audit 51 F2; F1: a fed-back
                    // attempt that came back again). The clock only keeps lines from being sent:
                    // a fix planned before the rebuild is reported again, planned after it is paid.
                    let code = "payout_\(latest.payoutStatus ?? "returned")"
                    try db.run(
                        """
                        INSERT INTO instructions (id, kind, group_key, payee, charge, currency, amount_minor, method, path,
                            params, stripe_context, status, attempt, idempotency_key, first_sent_at, last_sent_at, stripe_id,
                            error_code, error_message, payout_status)
                        VALUES (?, ?, ?, ?, ?, ?, ?, 'POST', ?, '{}', NULL, 'failed', ?, ?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT(id) DO UPDATE SET attempt = MAX(instructions.attempt, excluded.attempt),
                            stripe_id = iif(\(Self.takesStripesWord), excluded.stripe_id, instructions.stripe_id),
                            error_code = iif(\(Self.takesStripesWord), excluded.error_code, instructions.error_code),
                            error_message =
                                iif(\(Self.takesStripesWord), excluded.error_message, instructions.error_message),
                            payout_status = excluded.payout_status,
                            status = iif(\(Self.takesStripesWord), 'failed', instructions.status)
                        """,
                        [
                            .text(instruction), .text(latest.kind), .text(latest.group), .text(latest.payee),
                            .text(latest.charge), .text(latest.currency), .integer(latest.amountMinor),
                            .text(latest.path), .integer(Int64(latest.attempt)), .text(latest.idempotencyKey),
                            .integer(time), .integer(time), .text(latest.stripeID), .text(code),
                            .text(
                                "restored by settle ledger rebuild from Stripe: the payout \(latest.stripeID) was "
                                    + "\(latest.payoutStatus ?? "returned") at Stripe"),
                            SQLiteValue(latest.payoutStatus),
                        ])
                    // A ledger rebuilt over (a backup from before the return) has it settled, with
                    // its lines: Stripe's word is that it came back, so they are failed under it,
                    // as in a new ledger (audit 64 F3: once a later payout paid its line, the
                    // instruction stayed settled without lines, and the rebuilt ledger was refused).
                    try db.run(
                        """
                        UPDATE lines SET status = 'failed', stripe_id = ?1
                        WHERE instruction_id = ?2 AND status IN ('settled', 'in_flight', 'unknown')
                          AND (SELECT stripe_id FROM instructions WHERE id = ?2) = ?1
                        """, [.text(latest.stripeID), .text(instruction)])
                    // Its lines, failed under it: released for a plan that feeds them back (made
                    // after the rebuild), never taken for lines no payout paid (audit 50 N2). A line a live object settled
                    // is that object's (below); one the ledger holds already keeps its claim.
                    for claim in lines[instruction] ?? [] {
                        try db.run(
                            """
                            INSERT INTO lines (line_id, content, instruction_id, kind, amount_minor, status, stripe_id)
                            VALUES (?, ?, ?, ?, ?, 'failed', ?) ON CONFLICT(line_id) DO NOTHING
                            """,
                            [
                                .text(claim.lineID), .text(claim.content), .text(instruction), .text(claim.kind),
                                .integer(claim.amountMinor), .text(latest.stripeID),
                            ])
                    }
                }
                if version >= 6 {
                    for payout in payouts where live || payout.stripeID != latest.stripeID {
                        try db.run(
                            "INSERT OR IGNORE INTO earlier_objects (instruction_id, stripe_id, attempt) VALUES (?, ?, ?)",
                            [.text(instruction), .text(payout.stripeID), .integer(Int64(payout.attempt))])
                    }
                }
            }
            for object in objects where !object.hasComeBack {
                let changed = try db.run(
                    """
                    UPDATE instructions SET status = 'settled', stripe_id = ?, error_code = NULL, error_message = NULL,
                        payout_status = ?
                    WHERE id = ?
                    """, [.text(object.stripeID), SQLiteValue(object.payoutStatus), .text(object.instructionID)])
                if changed == 1 {
                    try db.run(
                        "UPDATE lines SET status = 'settled', stripe_id = ? WHERE instruction_id = ?",
                        [.text(object.stripeID), .text(object.instructionID)])
                } else {
                    added += 1
                    let sent = object.createdAt.map { min($0, now).ledgerMilliseconds } ?? time
                    try db.run(
                        """
                        INSERT INTO instructions (id, kind, group_key, payee, charge, currency, amount_minor, method, path,
                            params, stripe_context, status, attempt, idempotency_key, first_sent_at, last_sent_at, stripe_id,
                            error_message, payout_status)
                        VALUES (?, ?, ?, ?, ?, ?, ?, 'POST', ?, '{}', NULL, 'settled', ?, ?, ?, ?, ?,
                            'restored by settle ledger rebuild from Stripe', ?)
                        """,
                        [
                            .text(object.instructionID), .text(object.kind), .text(object.group), .text(object.payee),
                            .text(object.charge), .text(object.currency), .integer(object.amountMinor),
                            .text(object.path), .integer(Int64(object.attempt)), .text(object.idempotencyKey),
                            .integer(sent), .integer(sent), .text(object.stripeID), SQLiteValue(object.payoutStatus),
                        ])
                }
                // Stripe's object settles its lines, whichever instruction held them before.
                for claim in lines[object.instructionID] ?? [] {
                    try db.run(
                        """
                        INSERT INTO lines (line_id, content, instruction_id, kind, amount_minor, status, stripe_id)
                        VALUES (?, ?, ?, ?, ?, 'settled', ?)
                        ON CONFLICT(line_id) DO UPDATE SET content = excluded.content,
                            instruction_id = excluded.instruction_id, kind = excluded.kind,
                            amount_minor = excluded.amount_minor, status = 'settled', stripe_id = excluded.stripe_id
                        """,
                        [
                            .text(claim.lineID), .text(claim.content), .text(object.instructionID), .text(claim.kind),
                            .integer(claim.amountMinor), .text(object.stripeID),
                        ])
                }
            }
            var missing: [String] = []
            try db.query(
                """
                SELECT i.id FROM instructions AS i
                WHERE i.status = 'settled' AND NOT EXISTS (SELECT 1 FROM lines AS l WHERE l.instruction_id = i.id)
                ORDER BY i.id
                """
            ) { row in missing.append(row.text(0) ?? "") }
            try db.run(
                """
                INSERT INTO settle_meta(key, value) VALUES ('instructions_without_lines', ?)
                ON CONFLICT(key) DO UPDATE SET value = excluded.value
                """, [.text(missing.joined(separator: "\n"))])
            try db.run(
                """
                INSERT INTO settle_meta(key, value) VALUES ('rebuilt_runs', ?)
                ON CONFLICT(key) DO UPDATE SET value = excluded.value
                """, [.text(rebuilt)])
            try db.run(
                """
                INSERT INTO settle_meta(key, value) VALUES ('rebuilt_at', ?)
                ON CONFLICT(key) DO UPDATE SET value = excluded.value
                """, [.text(String(time))])
        }
        return added
    }

    /// Ends a `settle ledger rebuild`: what Stripe holds is in (``restore(_:lines:runs:)``),
    /// and so is what the plan folders hold (the lines that wait, the charges counted, the
    /// orders decided). Only this clears the mark ``createForRebuild(path:)`` set: a rebuild
    /// that stops after the restore, at any of the folders' writes (a full disk), leaves a
    /// ledger that `plan`, `run` and `apply` refuse, and its warning about the lines it does
    /// not hold is not lost (audit 61 F4: the ledger was taken for whole, and the lines that
    /// waited were paid and reported by no run).
    ///
    /// A rebuild over a ledger that had lost commits (``rebuildDistrustsWaiting()``) ends the
    /// holdings of the lines it held waiting in the same transaction.
    public func finishRebuild() throws(LedgerError) {
        try markedTransaction { () throws(LedgerError) in
            if try meta(Self.distrustsWaiting) != nil {
                try stopCarrying(Array(try heldLineStarts([.waiting]).keys))
                try db.run("DELETE FROM settle_meta WHERE key = ?", [.text(Self.distrustsWaiting)])
            }
            try db.run("DELETE FROM settle_meta WHERE key = 'rebuild_unfinished'")
        }
    }

    /// Ends the holding of these waiting lines by the rebuild (inside a transaction): no run
    /// pays them until they are fed again, and they are listed not carried
    /// (``waitingLinesRebuildsDropped(line:)``, searched from `waiting_dropped_since`).
    func stopCarrying(_ lineIDs: [String]) throws(LedgerError) {
        guard !lineIDs.isEmpty else { return }
        if try meta(Self.waitingDroppedSince) == nil {
            try db.run(
                "INSERT INTO settle_meta(key, value) VALUES (?, ?)",
                [.text(Self.waitingDroppedSince), .text(String(Date().ledgerMilliseconds))])
        }
        _ = try updateHolding(lineIDs, to: .released, run: Self.rebuildRun, from: [.waiting])
    }

    /// The meta key of a rebuild over a ledger behind its mark, until it finishes.
    static let distrustsWaiting = "rebuild_distrusts_waiting"
    /// The meta key of when a rebuild first stopped holding lines waiting (milliseconds): the
    /// look-ups of such lines search the holdings ended since (``waitingLinesRebuildsDropped()``).
    static let waitingDroppedSince = "waiting_dropped_since"

    /// The lines this unfinished rebuild's ledger holds waiting that ``finishRebuild()`` will
    /// stop holding: all of them when it was opened behind its mark (a backup put back, a lost
    /// WAL; also when a rebuild over it stopped and is run again), none otherwise. Any of them
    /// may have been dropped by a `settle cancel` among the lost commits, which no plan folder
    /// records: held, the next run paid such a line with nothing fed back (audit 73, seed
    /// 2738). Not held, each is named to be fed again, as after a lost ledger.
    public func rebuildDistrustsWaiting() throws(LedgerError) -> [HeldLine] {
        guard try rebuildLostCommits() else { return [] }
        return try heldLines([.waiting])
    }

    /// Whether this unfinished rebuild's ledger lost commits: it was behind its mark, or lost
    /// (made new): the runs since its last backup, and the lines they deferred, are known to it
    /// only from the plan folders given.
    public func rebuildLostCommits() throws(LedgerError) -> Bool { try meta(Self.distrustsWaiting) != nil }

    /// The lines a rebuild stopped holding waiting (``finishRebuild()``) that no run has taken
    /// up since (held again, or sent): they wait nowhere until fed again; every rebuild names
    /// them (audit 76 G1: a second rebuild, given no folder that has them, said nothing of
    /// them), and `settle status` lists them as not carried. Searched by when a rebuild first
    /// ended such a holding (`held_lines_by_end`), not by state (every line ever released).
    /// `line`: only that line (its `settle status --line`).
    public func waitingLinesRebuildsDropped(line: String? = nil) throws(LedgerError) -> [HeldLine] {
        guard try hasTable("held_lines"), let first = try meta(Self.waitingDroppedSince).flatMap({ Int64($0) })
        else { return [] }
        return try heldLines(
            where: "ended_at >= ? AND +state = 'released' AND ended_run = ? "
                + "AND reason_code IN ('charge_pending', 'scheduled') "
                + "AND NOT EXISTS (SELECT 1 FROM lines l WHERE l.line_id = held_lines.line_id)"
                + (line == nil ? "" : " AND line_id = ?"),
            [.integer(first), .text(Self.rebuildRun)] + (line.map { [.text($0)] } ?? []))
    }

    /// The settled instructions a rebuild found at Stripe whose lines it could not learn (no
    /// plan folder given listed them); empty for a ledger never rebuilt.
    public func instructionsWithoutLines() throws(LedgerError) -> [String] {
        // Instruction ids (`ins_` and hex digits), one a line.
        (try meta("instructions_without_lines") ?? "").split(separator: "\n").map(String.init)
    }

    /// `settle ledger rebuild` on a lost ledger: a new one where the old one was (the mark
    /// of the lost one is replaced), to be filled by ``restore(_:at:)``. It is marked
    /// unfinished, durably, before anything is asked of Stripe, and only ``finishRebuild()``
    /// clears the mark: a rebuild that stops before (a plan folder it cannot read, Stripe out
    /// of reach, a kill) leaves a ledger that `plan`, `run` and `apply` refuse, never an empty
    /// one they would take for "nothing paid yet" (audit 11: the next run paid everything again).
    public static func createForRebuild(path: String) throws(LedgerError) -> LedgerStore {
        let store: LedgerStore
        if !FileManager.default.fileExists(atPath: path) || holdsNothing(path) {
            unlink(markPath(path))
            store = try create(path: path)
            store.lostCommits = true
        } else {
            store = try open(path: path, acceptingLostCommits: true)
        }
        try store.markedTransaction { () throws(LedgerError) in
            try store.db.run(
                """
                INSERT INTO settle_meta(key, value) VALUES ('rebuild_unfinished', '1')
                ON CONFLICT(key) DO UPDATE SET value = excluded.value
                """)
            if store.lostCommits {
                try store.db.run(
                    "INSERT OR REPLACE INTO settle_meta(key, value) VALUES (?, '1')", [.text(distrustsWaiting)])
            }
        }
        return store
    }

    /// Whether a `settle ledger rebuild` finished on this ledger: it knows what Stripe holds,
    /// also when that is nothing it records (only payouts that came back: audit 33 O3, a new
    /// ledger's probe then refused it for good).
    public func wasRebuilt() throws(LedgerError) -> Bool { try meta("rebuilt_at") != nil }

    /// When the last `settle ledger rebuild` on this ledger finished; nil when none did.
    public func rebuiltAt() throws(LedgerError) -> Date? {
        try meta("rebuilt_at").flatMap { Int64($0) }.map { Date(ledgerMilliseconds: $0) }
    }

    /// Ties the ledger to one Stripe mode (`test` or `live`): the first key that settles on it
    /// sets it; returns the mode it holds when that is another one (nothing is changed then).
    /// A ledger of one mode used with a key of the other would take that mode's objects for
    /// its own: a line paid in test mode `already_settled` for live (audit 35 C18).
    public func claimMode(_ mode: String) throws(LedgerError) -> String? {
        if let held = try meta("stripe_mode") { return held == mode ? nil : held }
        try db.run("INSERT INTO settle_meta(key, value) VALUES ('stripe_mode', ?)", [.text(mode)])
        return nil
    }

    /// Whether a `settle ledger rebuild` started on this ledger and did not finish.
    public func rebuildUnfinished() throws(LedgerError) -> Bool {
        var found = false
        try db.query("SELECT 1 FROM settle_meta WHERE key = 'rebuild_unfinished'") { _ in found = true }
        return found
    }

    /// Forgets the marks of ``unreportedOutcomes()`` that a folder has now reported.
    public func markReported(_ instructions: some Collection<String>) throws(LedgerError) {
        guard version >= 7, !instructions.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for id in instructions {
                try db.run("DELETE FROM unreported_outcomes WHERE instruction_id = ?", [.text(id)])
            }
        }
    }
}
