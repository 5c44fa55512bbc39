import Foundation

/// The `charges` table: each charge counted once (its gross and fee in summary.csv), in the
/// run that first allocated from it.
extension LedgerStore {
    /// Whether the ledger has the `charges` table (a version 1 ledger read without migrating
    /// has none: nothing was counted in it).
    private func hasChargesTable() throws(LedgerError) -> Bool {
        if let known = chargesTableKnown { return known }
        var exists = false
        try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'charges'") { _ in exists = true }
        // Only a writable store migrates (and so creates it): a read-only one can keep the answer.
        if !isWritable { chargesTableKnown = exists }
        return exists
    }

    /// Records the payment intent each charge's lines named with it (`charge_intents`); a
    /// link already recorded keeps its run.
    public func recordChargeIntents(_ links: [(charge: String, intent: String)], run: String) throws(LedgerError) {
        guard !links.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for link in links {
                _ = try db.run(
                    "INSERT INTO charge_intents(charge, intent, run_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    [.text(link.charge), .text(link.intent), .text(run)])
            }
        }
    }

    /// The charges earlier runs' lines named with these payment intents (a JSON array of
    /// strings): `found(position, charge)` for each link.
    public func chargesOfIntents(keys: UnsafeRawBufferPointer, found: (Int, String) -> Void) throws(LedgerError) {
        var exists = false
        try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'charge_intents'") { _ in
            exists = true
        }
        guard exists else { return }
        try db.query(
            """
            SELECT k.key, l.charge
            FROM json_each(?1) AS k CROSS JOIN charge_intents AS l ON l.intent = k.value
            """, json: keys
        ) { row in if let charge = row.text(1) { found(Int(row.integer(0)), charge) } }
    }

    /// The run that counted the charge, or nil when no run has.
    public func chargeFirstRun(_ charge: String) throws(LedgerError) -> String? {
        guard try hasChargesTable() else { return nil }
        var run: String?
        try db.query("SELECT first_run FROM charges WHERE charge = ?", text: charge) { row in run = row.text(0) }
        return run
    }

    /// The charge as the run that counted it recorded it (currency, gross, fee, status).
    public func countedCharge(_ charge: String) throws(LedgerError) -> (
        currency: String, gross: Int64, fee: Int64, status: String
    )? {
        guard try hasChargesTable() else { return nil }
        var found: (String, Int64, Int64, String)?
        try db.query("SELECT currency, gross_minor, fee_minor, status FROM charges WHERE charge = ?", [.text(charge)]) {
            row in found = (row.text(0) ?? "", row.integer(1), row.integer(2), row.text(3) ?? "")
        }
        return found
    }

    /// Records the charges a run counted; a charge already recorded keeps its first run.
    public func recordCharges(
        _ rows: [(charge: String, currency: String, run: String, gross: Int64, fee: Int64, status: String)]
    ) throws(LedgerError) {
        guard !rows.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for row in rows {
                _ = try db.run(
                    """
                    INSERT INTO charges(charge, currency, first_run, gross_minor, fee_minor, status)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(charge) DO NOTHING
                    """,
                    [
                        .text(row.charge), .text(row.currency), .text(row.run), .integer(row.gross),
                        .integer(row.fee), .text(row.status),
                    ])
            }
        }
    }

    /// What earlier runs moved on a charge, as Stripe holds it: its settled transfers less
    /// settle's settled reversals of them, in minor units of `currency`.
    public func transferredBefore(charge: String, currency: String) throws(LedgerError) -> Int64 {
        // No run has an empty id: every run's transfers count.
        try transferredBefore(charge: charge, currency: currency, excluding: "")
    }

    /// What runs other than `run` transferred on a charge and did not reverse, as an apply
    /// reports it when it ends: the transfers another run settled meanwhile count (a plan
    /// applied a day late), this run's own transfers and reversals do not.
    public func transferredBefore(charge: String, currency: String, excluding run: String) throws(LedgerError)
        -> Int64
    {
        var net: Int64 = 0
        try db.query(
            """
            SELECT COALESCE(SUM(t.amount_minor), 0)
                 - COALESCE(SUM((SELECT COALESCE(SUM(r.amount_minor), 0) FROM instructions r
                                 WHERE r.kind = 'reversal' AND r.status = 'settled' AND r.run_id IS NOT ?3
                                   AND r.path = '/v1/transfers/' || t.stripe_id || '/reversals')), 0)
            FROM instructions t
            WHERE t.kind = 'transfer' AND t.status = 'settled' AND t.charge = ?1 AND t.currency = ?2
              AND t.run_id IS NOT ?3
            """, [.text(charge), .text(currency), .text(run)]
        ) { row in net = row.integer(0) }
        return net
    }

    /// ``chargeFirstRun(_:)`` of the charges of `keys` (a JSON array of charge ids) that a
    /// run counted: `found(position, run, (currency, fee, gross))`, with the currency, fee and gross that run
    /// recorded. One statement for the batch (see ``lines(keys:found:)``).
    public func chargeFirstRuns(
        keys: UnsafeRawBufferPointer, found: (Int, String, (currency: String, fee: Int64, gross: Int64)) -> Void
    )
        throws(LedgerError)
    {
        guard try hasChargesTable() else { return }
        try db.query(
            """
            SELECT k.key, c.first_run, c.currency, c.fee_minor, c.gross_minor
            FROM json_each(?1) AS k CROSS JOIN charges AS c ON c.charge = k.value
            """,
            json: keys
        ) { row in
            if let run = row.text(1) {
                found(Int(row.integer(0)), run, (row.text(2) ?? "", row.integer(3), row.integer(4)))
            }
        }
    }

    /// The gross the run that counted each charge of `keys` (a JSON array of `[charge,
    /// currency]` pairs) recorded, in that currency: `found(position, gross)`.
    public func countedGross(keys: UnsafeRawBufferPointer, found: (Int, Int64) -> Void) throws(LedgerError) {
        guard try hasChargesTable() else { return }
        try db.query(
            """
            SELECT k.key, c.gross_minor
            FROM json_each(?1) AS k CROSS JOIN charges AS c ON c.charge = k.value ->> 0 AND c.currency = k.value ->> 1
            """,
            json: keys
        ) { row in found(Int(row.integer(0)), row.integer(1)) }
    }

    /// ``transferredBefore(charge:currency:)`` of the charges of `keys` (a JSON array of
    /// `[charge, currency]` pairs) that have settled transfers: `found(position, net)`.
    public func transferredBefore(keys: UnsafeRawBufferPointer, found: (Int, Int64) -> Void) throws(LedgerError) {
        try db.query(
            """
            SELECT k.key, COALESCE(SUM(t.amount_minor), 0)
                 - COALESCE(SUM((SELECT COALESCE(SUM(r.amount_minor), 0) FROM instructions r
                                 WHERE r.kind = 'reversal' AND r.status = 'settled'
                                   AND r.path = '/v1/transfers/' || t.stripe_id || '/reversals')), 0)
            FROM json_each(?1) AS k CROSS JOIN instructions AS t
              ON t.kind = 'transfer' AND t.status = 'settled' AND t.charge = k.value ->> 0 AND t.currency = k.value ->> 1
            GROUP BY k.key
            """, json: keys
        ) { row in found(Int(row.integer(0)), row.integer(1)) }
    }

    /// Records what a run paid out for the orders of each charge; an apply of the same run
    /// again replaces its figures (never adds them twice).
    public func recordChargePayouts(_ rows: [(charge: String, currency: String, amount: Int64)], run: String)
        throws(LedgerError)
    {
        guard version >= 4, !rows.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for row in rows {
                _ = try db.run(
                    """
                    INSERT INTO charge_payouts(charge, currency, run_id, paid_out_minor) VALUES (?, ?, ?, ?)
                    ON CONFLICT(charge, currency, run_id) DO UPDATE SET paid_out_minor = excluded.paid_out_minor
                    """, [.text(row.charge), .text(row.currency), .text(run), .integer(row.amount)])
            }
        }
    }

    /// Each payout object's share of each charge, as a run's apply settled it (`rows`:
    /// instruction, charge, currency, amount). The Stripe id is the instruction's now, so a
    /// payout paid again after it came back is a row of its own; an apply of the same run
    /// again replaces the amounts.
    public func recordPayoutCharges(
        _ rows: [(instruction: String, charge: String, currency: String, amount: Int64)], run: String
    ) throws(LedgerError) {
        guard version >= 5, !rows.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for row in rows {
                _ = try db.run(
                    """
                    INSERT INTO payout_charges(instruction_id, stripe_id, run_id, charge, currency, amount_minor)
                    SELECT id, stripe_id, ?2, ?3, ?4, ?5 FROM instructions
                    WHERE id = ?1 AND kind = 'payout' AND stripe_id IS NOT NULL
                    ON CONFLICT(stripe_id, charge, currency) DO UPDATE SET amount_minor = excluded.amount_minor
                    """,
                    [.text(row.instruction), .text(run), .text(row.charge), .text(row.currency), .integer(row.amount)])
            }
        }
    }

    /// What runs other than `run` paid out for the orders of a charge and kept, in minor
    /// units: their payouts, less those that came back.
    public func paidOutBefore(charge: String, currency: String, excluding run: String) throws(LedgerError) -> Int64 {
        guard version >= 4 else { return 0 }
        var total: Int64 = 0
        try db.query(
            """
            SELECT COALESCE(SUM(paid_out_minor), 0) FROM charge_payouts
            WHERE charge = ? AND currency = ? AND run_id <> ?
            """, [.text(charge), .text(currency), .text(run)]
        ) { row in total = row.integer(0) }
        guard version >= 5 else { return total }
        try db.query(
            """
            SELECT COALESCE(SUM(amount_minor), 0) FROM payout_charges
            WHERE charge = ? AND currency = ? AND run_id <> ? AND came_back = 1
            """, [.text(charge), .text(currency), .text(run)]
        ) { row in total -= row.integer(0) }
        return total
    }

    /// ``paidOutBefore(charge:currency:excluding:)`` of the charges of `keys` (a JSON array of
    /// `[charge, currency]` pairs), by any run (a plan's run is new): `found(position, amount)`,
    /// once for each charge with payouts.
    public func paidOutBefore(keys: UnsafeRawBufferPointer, found: (Int, Int64) -> Void) throws(LedgerError) {
        guard version >= 4 else { return }
        var kept: [Int: Int64] = [:]
        try db.query(
            """
            SELECT k.key, SUM(p.paid_out_minor)
            FROM json_each(?1) AS k CROSS JOIN charge_payouts AS p
              ON p.charge = k.value ->> 0 AND p.currency = k.value ->> 1
            GROUP BY k.key
            """, json: keys
        ) { row in kept[Int(row.integer(0)), default: 0] += row.integer(1) }
        if version >= 5 {
            try db.query(
                """
                SELECT k.key, SUM(p.amount_minor)
                FROM json_each(?1) AS k CROSS JOIN payout_charges AS p
                  ON p.charge = k.value ->> 0 AND p.currency = k.value ->> 1 AND p.came_back = 1
                GROUP BY k.key
                """, json: keys
            ) { row in kept[Int(row.integer(0)), default: 0] -= row.integer(1) }
        }
        for (position, amount) in kept.sorted(by: { $0.key < $1.key }) { found(position, amount) }
    }
}

/// The `failed_charges` table (``schemaVersion9``): Stripe's word that a charge failed.
extension LedgerStore {
    /// Records the charges a run's look-ups found failed; a charge already recorded keeps the
    /// run that first learned it.
    public func recordFailedCharges(_ charges: [FailedCharge]) throws(LedgerError) {
        guard version >= 9, !charges.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for charge in charges {
                _ = try db.run(
                    """
                    INSERT INTO failed_charges(charge, payment_intent, refusal, run_id, checked_at, request_id)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(charge) DO UPDATE
                    SET payment_intent = COALESCE(failed_charges.payment_intent, excluded.payment_intent)
                    """,
                    [
                        .text(charge.charge), SQLiteValue(charge.paymentIntent), SQLiteValue(charge.refusal),
                        .text(charge.run), .text(charge.checkedAt),
                        .text(charge.requestID),
                    ])
            }
        }
    }

    /// Forgets the charges a look-up found succeeded or pending since (a charge put right:
    /// Stripe's word now is the one that counts).
    public func forgetFailedCharges(_ charges: [String]) throws(LedgerError) {
        guard version >= 9, !charges.isEmpty else { return }
        try db.transaction { () throws(LedgerError) in
            for charge in charges { _ = try db.run("DELETE FROM failed_charges WHERE charge = ?", [.text(charge)]) }
        }
    }

    /// Every charge the ledger knows Stripe found failed, by charge id (a handful a day: a plan
    /// reads them all, then matches the batch's charges in memory).
    public func failedCharges() throws(LedgerError) -> [FailedCharge] {
        guard version >= 9 else { return [] }
        var found: [FailedCharge] = []
        try db.query(
            "SELECT charge, payment_intent, refusal, run_id, checked_at, request_id FROM failed_charges ORDER BY charge"
        ) { row in
            found.append(
                FailedCharge(
                    charge: row.text(0) ?? "", paymentIntent: row.text(1), refusal: row.text(2), run: row.text(3) ?? "",
                    checkedAt: row.text(4) ?? "", requestID: row.text(5) ?? ""))
        }
        return found
    }
}
