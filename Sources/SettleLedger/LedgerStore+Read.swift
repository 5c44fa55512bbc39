public import Foundation

extension LedgerStore {
    /// Starts one read transaction: every read until ``endSnapshot()`` sees the ledger as it
    /// was at the first one, whatever another process commits meanwhile, and no statement
    /// takes the WAL read lock on its own (a plan reads millions of times).
    public func beginSnapshot() throws(LedgerError) { try db.execute("BEGIN DEFERRED") }

    /// Ends the read transaction of ``beginSnapshot()``.
    public func endSnapshot() throws(LedgerError) { try db.execute("COMMIT") }

    /// The line as the ledger knows it, or nil if it was never claimed. A line that netted to
    /// zero is settled with no instruction (empty id) and no Stripe object.
    public func line(_ id: String) throws(LedgerError) -> LedgerLine? {
        var found: LedgerLine?
        func read(_ row: SQLiteRow) {
            found = LedgerLine(
                lineID: row.text(0) ?? "", content: row.text(1) ?? "", instructionID: row.text(2) ?? "",
                kind: row.text(3) ?? "", amountMinor: row.integer(4),
                status: LedgerStatus(rawValue: row.text(5) ?? "") ?? .unknown, stripeID: row.text(6))
        }
        if version >= 4 {
            try db.query(
                """
                SELECT line_id, content, instruction_id, kind, amount_minor, status, stripe_id FROM lines WHERE line_id = ?1
                UNION ALL
                SELECT line_id, content, '', kind, amount_minor, 'settled', NULL FROM netted_lines WHERE line_id = ?1
                """, text: id, row: read)
        } else {
            try db.query(
                "SELECT line_id, content, instruction_id, kind, amount_minor, status, stripe_id FROM lines WHERE line_id = ?",
                text: id, row: read)
        }
        return found
    }

    /// What stands allocated on a charge in `currency` (SPEC's over-allocation rule, at plan
    /// and again at apply): the transfers on it that are settled, in flight or unknown (an
    /// unknown one may exist, so it counts), less settle's settled reversals of the settled
    /// ones (their money went back: audit 38 Q2, the plan counted it still moved while the
    /// apply's re-check did not, and the same ledger gave opposite verdicts).
    public func transferredAmount(charge: String, currency: String) throws(LedgerError) -> Int64 {
        // The same sum as ``transferredAmounts(keys:found:)``, one charge at a time; a seeded
        // property test (LedgerBatchLookUpTests) holds the two to the same answers.
        var total: Int64 = 0
        try db.query(
            """
            SELECT COALESCE(SUM(
                i.amount_minor - CASE WHEN i.status = 'settled' THEN
                    (SELECT COALESCE(SUM(r.amount_minor), 0) FROM instructions r
                     WHERE r.kind = 'reversal' AND r.status = 'settled'
                       AND r.path = '/v1/transfers/' || i.stripe_id || '/reversals') ELSE 0 END), 0)
            FROM instructions AS i
            WHERE i.kind = 'transfer' AND i.charge = ? AND i.currency = ?
              AND i.status IN ('settled', 'in_flight', 'unknown')
            """, text: charge, currency
        ) { row in total = row.integer(0) }
        return total
    }

    /// The settled transfer recorded for a group and destination in `currency`, with what
    /// settle's reversals (settled, in flight or unknown) took back from it; with `charge`, only
    /// one funded by that charge. When there are several, the one with the most left; among
    /// equals the latest.
    public func transfer(group: String, destination: String, currency: String, charge: String? = nil)
        throws(LedgerError) -> LedgerTransfer?
    {
        var found: LedgerTransfer?
        try db.query(
            """
            SELECT t.stripe_id, t.amount_minor, t.charge,
                   (SELECT COALESCE(SUM(r.amount_minor), 0) FROM instructions r
                    WHERE r.kind = 'reversal' AND r.path = '/v1/transfers/' || t.stripe_id || '/reversals'
                      AND r.status IN ('settled', 'in_flight', 'unknown')) AS reversed,
                   t.currency, t.payee
            FROM instructions t
            WHERE t.kind = 'transfer' AND t.status = 'settled' AND t.group_key = ? AND t.payee = ?
              AND t.currency = ? AND t.stripe_id IS NOT NULL AND (?4 IS NULL OR t.charge = ?4)
            ORDER BY t.amount_minor - reversed DESC, t.rowid DESC LIMIT 1
            """, [.text(group), .text(destination), .text(currency), charge.map { .text($0) } ?? .null]
        ) { row in
            found = LedgerTransfer(
                stripeID: row.text(0) ?? "", amountMinor: row.integer(1), reversedMinor: row.integer(3),
                charge: row.text(2) ?? "", currency: row.text(4) ?? "", destination: row.text(5) ?? "")
        }
        return found
    }

    /// The id of a transfer for a group and destination in `currency` (with `charge`, funded by
    /// that charge) that was sent and whose outcome is not known yet (in flight or unknown), nil
    /// when there is none: a reversal of that order waits for it rather than being refused.
    public func unsettledTransfer(group: String, destination: String, currency: String, charge: String? = nil)
        throws(LedgerError) -> String?
    {
        var found: String?
        try db.query(
            """
            SELECT id FROM instructions
            WHERE kind = 'transfer' AND status IN ('in_flight', 'unknown') AND group_key = ? AND payee = ?
              AND currency = ? AND (?4 IS NULL OR charge = ?4)
            ORDER BY rowid DESC LIMIT 1
            """, [.text(group), .text(destination), .text(currency), charge.map { .text($0) } ?? .null]
        ) { row in found = row.text(0) }
        return found
    }

    /// The Stripe objects of the instruction's earlier attempts (``schemaVersion6``).
    public func earlierObjects(instruction id: String) throws(LedgerError) -> Set<String> {
        guard version >= 6 else { return [] }
        var found: Set<String> = []
        try db.query("SELECT stripe_id FROM earlier_objects WHERE instruction_id = ?", [.text(id)]) { row in
            if let stripeID = row.text(0) { found.insert(stripeID) }
        }
        return found
    }

    /// Instructions an earlier run left open that an apply found made and no folder has
    /// reported yet (``schemaVersion7``): the next folder with a row of their lines reports them.
    public func unreportedOutcomes() throws(LedgerError) -> Set<String> {
        guard version >= 7 else { return [] }
        var found: Set<String> = []
        try db.query("SELECT instruction_id FROM unreported_outcomes") { row in
            if let id = row.text(0) { found.insert(id) }
        }
        return found
    }

    /// The orders (groups) with a transfer or reversal that Stripe refused when it was sent at
    /// or after `since`, whose lines that refusal still holds (no later attempt or other
    /// instruction settled them): each order's first such instruction, with Stripe's code and
    /// message. A payout of such an order does not go (the order moves whole or not at all).
    public func refusedOrders(since: Date) throws(LedgerError) -> [String: (instruction: String, reason: String)] {
        try refusals(since: since).compactMapValues { $0.first.map { ($0.instruction, $0.reason) } }
    }

    /// Every such refusal (``refusedOrders(since:)``) of each order, by instruction id.
    public func refusals(since: Date) throws(LedgerError) -> [String: [(
        instruction: String, reason: String, sentBy: String?
    )]] {
        var found: [String: [(instruction: String, reason: String, sentBy: String?)]] = [:]
        let sentRun = version >= 8 ? "i.sent_run" : "NULL"
        try db.query(
            """
            SELECT i.group_key, i.id, COALESCE(i.error_code, ''), COALESCE(i.error_message, ''),
                   \(sentRun) FROM instructions i
            WHERE i.kind IN ('transfer', 'reversal') AND i.status = 'failed' AND i.group_key <> ''
              AND COALESCE(i.error_code, '') <> ? AND i.last_sent_at >= ?
              AND EXISTS (SELECT 1 FROM lines l WHERE l.instruction_id = i.id AND l.status = 'failed')
            ORDER BY i.id
            """, [.text(LedgerOutcome.notSentCode), .integer(since.ledgerMilliseconds)]
        ) { row in
            found[row.text(0) ?? "", default: []].append(
                (row.text(1) ?? "", "\(row.text(2) ?? ""): \(row.text(3) ?? "")", row.text(4)))
        }
        return found
    }

    /// How many attempts (idempotency keys) the instruction has used: 0 if never sent.
    /// The next new attempt is this + 1.
    public func attempts(instruction id: String) throws(LedgerError) -> Int {
        var count = 0
        try db.query("SELECT attempt FROM instructions WHERE id = ?", text: id) { row in
            count = Int(row.integer(0))
        }
        return count
    }

    /// The instruction row, or nil.
    public func instruction(_ id: String) throws(LedgerError) -> LedgerInstruction? {
        try instructions(where: "id = ?", [.text(id)]).first
    }

    /// Every instruction that is in flight or unknown, oldest first: what a run must
    /// resolve before it sends anything.
    public func unresolvedInstructions() throws(LedgerError) -> [LedgerInstruction] {
        try instructions(where: "status IN ('in_flight', 'unknown')", [])
    }

    /// The HTTP calls recorded for an instruction, in order.
    public func calls(instruction id: String) throws(LedgerError) -> [LedgerCall] {
        var calls: [LedgerCall] = []
        try db.query(
            "SELECT attempt, idempotency_key, sent_at, outcome, http_status, request_id FROM attempts WHERE instruction_id = ? ORDER BY seq",
            [.text(id)]
        ) { row in
            calls.append(
                LedgerCall(
                    instructionID: id, attempt: Int(row.integer(0)), idempotencyKey: row.text(1) ?? "",
                    sentAt: Date(ledgerMilliseconds: row.integer(2)), outcome: row.text(3) ?? "",
                    httpStatus: row.optionalInteger(4).map { Int($0) }, requestID: row.text(5)))
        }
        return calls
    }

    /// Counts for `settle status`.
    public func statusSummary() throws(LedgerError) -> LedgerStatusSummary {
        var lines: [LedgerStatus: Int] = [:]
        try db.query("SELECT status, COUNT(*) FROM lines GROUP BY status") { row in
            if let status = LedgerStatus(rawValue: row.text(0) ?? "") { lines[status] = Int(row.integer(1)) }
        }
        var instructions: [LedgerStatus: Int] = [:]
        try db.query("SELECT status, COUNT(*) FROM instructions GROUP BY status") { row in
            if let status = LedgerStatus(rawValue: row.text(0) ?? "") { instructions[status] = Int(row.integer(1)) }
        }
        return LedgerStatusSummary(
            linesSettled: lines[.settled, default: 0],
            linesPending: lines[.inFlight, default: 0] + lines[.unknown, default: 0],
            linesFailed: lines[.failed, default: 0], instructions: instructions)
    }

    private func instructions(where condition: String, _ values: [SQLiteValue]) throws(LedgerError)
        -> [LedgerInstruction]
    {
        var rows: [LedgerInstruction] = []
        try db.query(
            """
            SELECT id, kind, group_key, payee, charge, currency, amount_minor, method, path, params,
                   stripe_context, status, attempt, idempotency_key, first_sent_at, last_sent_at,
                   stripe_id, error_code, error_message, request_id, run_id, \(version >= 8 ? "sent_run" : "NULL")
            FROM instructions WHERE \(condition) ORDER BY first_sent_at, rowid
            """, values
        ) { row in
            let dispatch = LedgerDispatch(
                id: row.text(0) ?? "", kind: row.text(1) ?? "", group: row.text(2) ?? "", payee: row.text(3) ?? "",
                charge: row.text(4) ?? "", currency: row.text(5) ?? "", amountMinor: row.integer(6),
                method: row.text(7) ?? "", path: row.text(8) ?? "", params: row.text(9) ?? "",
                stripeContext: row.text(10), attempt: Int(row.integer(12)), idempotencyKey: row.text(13) ?? "",
                lines: [])
            rows.append(
                LedgerInstruction(
                    dispatch: dispatch, status: LedgerStatus(rawValue: row.text(11) ?? "") ?? .unknown,
                    firstSentAt: Date(ledgerMilliseconds: row.integer(14)),
                    lastSentAt: Date(ledgerMilliseconds: row.integer(15)), stripeID: row.text(16),
                    errorCode: row.text(17), errorMessage: row.text(18), requestID: row.text(19),
                    settledBy: row.text(20), sentBy: row.text(21)))
        }
        for index in rows.indices {
            try db.query(
                "SELECT line_id, kind, amount_minor, content FROM lines WHERE instruction_id = ? ORDER BY line_id",
                [.text(rows[index].id)]
            ) { row in
                rows[index].dispatch.lines.append(
                    LedgerLineClaim(
                        lineID: row.text(0) ?? "", kind: row.text(1) ?? "", amountMinor: row.integer(2),
                        content: row.text(3) ?? ""))
            }
        }
        return rows
    }

    // MARK: - Batches of look-ups
    //
    // A plan of millions of lines looks up millions of keys, and one statement per key costs
    // about 2 µs of SQLite's own work (statement set-up, cursor, reset). These take a batch
    // of keys as a JSON array, joined to the table through its key's index (`json_each`), and
    // hand back only the hits, each with its position in the array. Keys are compared as the
    // one-key look-ups compare them.

    /// The lines of `keys` (a JSON array of line ids) that the ledger knows: `found(position, line)`.
    public func lines(keys: UnsafeRawBufferPointer, found: (Int, LedgerLine) -> Void) throws(LedgerError) {
        func read(_ row: SQLiteRow) {
            found(
                Int(row.integer(0)),
                LedgerLine(
                    lineID: row.text(1) ?? "", content: row.text(2) ?? "", instructionID: row.text(3) ?? "",
                    kind: row.text(4) ?? "", amountMinor: row.integer(5),
                    status: LedgerStatus(rawValue: row.text(6) ?? "") ?? .unknown, stripeID: row.text(7)))
        }
        if version >= 4 {
            // A line that netted to zero reads as settled, with no instruction and no Stripe id.
            try db.query(
                """
                SELECT k.key, l.line_id, l.content, l.instruction_id, l.kind, l.amount_minor, l.status, l.stripe_id
                FROM json_each(?1) AS k CROSS JOIN lines AS l ON l.line_id = k.value
                UNION ALL
                SELECT k.key, n.line_id, n.content, '', n.kind, n.amount_minor, 'settled', NULL
                FROM json_each(?1) AS k CROSS JOIN netted_lines AS n ON n.line_id = k.value
                """, json: keys, row: read)
        } else {
            try db.query(
                """
                SELECT k.key, l.line_id, l.content, l.instruction_id, l.kind, l.amount_minor, l.status, l.stripe_id
                FROM json_each(?1) AS k CROSS JOIN lines AS l ON l.line_id = k.value
                """, json: keys, row: read)
        }
    }

    /// ``attempts(instruction:)`` of the instructions of `keys` (a JSON array of instruction
    /// ids) that the ledger knows: `found(position, attempts)`.
    public func attempts(keys: UnsafeRawBufferPointer, found: (Int, Int) -> Void) throws(LedgerError) {
        try db.query(
            "SELECT k.key, i.attempt FROM json_each(?1) AS k CROSS JOIN instructions AS i ON i.id = k.value",
            json: keys
        ) { row in found(Int(row.integer(0)), Int(row.integer(1))) }
    }

    /// ``transferredAmount(charge:currency:)`` of the charges of `keys` (a JSON array of
    /// `[charge, currency]` pairs) that have such transfers: `found(position, amount)`.
    public func transferredAmounts(keys: UnsafeRawBufferPointer, found: (Int, Int64) -> Void) throws(LedgerError) {
        try db.query(
            """
            SELECT k.key, COALESCE(SUM(
                i.amount_minor - CASE WHEN i.status = 'settled' THEN
                    (SELECT COALESCE(SUM(r.amount_minor), 0) FROM instructions r
                     WHERE r.kind = 'reversal' AND r.status = 'settled'
                       AND r.path = '/v1/transfers/' || i.stripe_id || '/reversals') ELSE 0 END), 0)
            FROM json_each(?1) AS k CROSS JOIN instructions AS i
              ON i.kind = 'transfer' AND i.charge = k.value ->> 0 AND i.currency = k.value ->> 1
             AND i.status IN ('settled', 'in_flight', 'unknown')
            GROUP BY k.key
            """, json: keys
        ) { row in found(Int(row.integer(0)), row.integer(1)) }
    }

    /// The settled transfers settle made under the Stripe ids of `keys` (a JSON array), each
    /// with what settle's reversals (settled, in flight or unknown) took back from it; each
    /// transfer found once. Through the Stripe-id index (version 3; `+status` keeps SQLite
    /// from the status index, which nearly every transfer matches); a version 2 ledger read
    /// by `plan` as it is has none, and SQLite scans its instructions once a batch.
    public func transfers(stripeIDs keys: UnsafeRawBufferPointer, found: (LedgerTransfer) -> Void) throws(LedgerError) {
        try db.query(
            """
            SELECT t.stripe_id, t.amount_minor, t.charge,
                   (SELECT COALESCE(SUM(r.amount_minor), 0) FROM instructions r
                    WHERE r.kind = 'reversal' AND r.path = '/v1/transfers/' || t.stripe_id || '/reversals'
                      AND r.status IN ('settled', 'in_flight', 'unknown')),
                   t.currency, t.payee
            FROM instructions AS t
            WHERE t.kind = 'transfer' AND +t.status = 'settled' AND t.stripe_id IN (SELECT value FROM json_each(?1))
            """, json: keys
        ) { row in
            found(
                LedgerTransfer(
                    stripeID: row.text(0) ?? "", amountMinor: row.integer(1), reversedMinor: row.integer(3),
                    charge: row.text(2) ?? "", currency: row.text(4) ?? "", destination: row.text(5) ?? ""))
        }
    }
}
