import Foundation
import SettleLedger
import Testing

/// A fresh folder per test, removed afterwards.
final class TemporaryFolder {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("settle-ledger-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    var ledgerPath: String { url.appendingPathComponent("ledger.sqlite").path }
    deinit { try? FileManager.default.removeItem(at: url) }
}

func transfer(
    _ id: String, lines: [String], amount: Int64 = 7000, charge: String = "ch_1", group: String = "ORDER100",
    destination: String = "acct_rest", attempt: Int = 1
) -> LedgerDispatch {
    LedgerDispatch(
        id: id, kind: "transfer", group: group, payee: destination, charge: charge, currency: "usd",
        amountMinor: amount, method: "POST", path: "/v1/transfers",
        params: #"{"amount":"\#(amount)","currency":"usd"}"#, stripeContext: nil, attempt: attempt,
        idempotencyKey: "settle-\(id)-a\(attempt)",
        lines: lines.map {
            LedgerLineClaim(lineID: $0, kind: "transfer", amountMinor: amount / Int64(lines.count), content: "c-\($0)")
        })
}

func reversal(_ id: String, of transferID: String, amount: Int64, line: String) -> LedgerDispatch {
    LedgerDispatch(
        id: id, kind: "reversal", group: "ORDER100", payee: "acct_rest", charge: "", currency: "usd",
        amountMinor: amount, method: "POST", path: "/v1/transfers/\(transferID)/reversals", params: "{}",
        stripeContext: nil, attempt: 1, idempotencyKey: "settle-\(id)-a1",
        lines: [LedgerLineClaim(lineID: line, kind: "reversal", amountMinor: amount, content: "c-\(line)")])
}

@Suite("LedgerStore")
struct LedgerStoreTests {
    @Test func secondOpenIsBusyUntilTheFirstCloses() throws {
        let folder = try TemporaryFolder()
        let first = try openTestLedger(path: folder.ledgerPath)
        #expect(throws: LedgerError.busy("another settle process is using \(folder.ledgerPath)")) {
            _ = try openTestLedger(path: folder.ledgerPath)
        }
        // Readers do not take the lock.
        let reader = try #require(try LedgerStore.openReadOnly(path: folder.ledgerPath))
        #expect(try reader.statusSummary().linesSettled == 0)
        first.close()
        let again = try openTestLedger(path: folder.ledgerPath)
        again.close()
    }

    @Test func lockIsHeldAgainstAnotherProcess() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        defer { store.close() }
        // flock(1) in another process cannot take the lock while we hold it.
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        probe.arguments = ["-n", folder.ledgerPath + ".lock", "true"]
        try probe.run()
        probe.waitUntilExit()
        #expect(probe.terminationStatus == 1)
    }

    /// Text goes in and out of SQLite with its length: an inner NUL does not end an id, so
    /// "A\0B" and "A" stay two lines (before, both were "A" in the ledger).
    @Test func anInnerNULDoesNotEndAnID() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        defer { store.close() }
        try store.markInFlight([transfer("T\u{0}1", lines: ["A\u{0}B"])], at: Date())
        try store.recordOutcome(instruction: "T\u{0}1", .settled(stripeID: "tr_1"))
        #expect(try store.line("A") == nil)
        #expect(try store.line("A\u{0}B")?.instructionID == "T\u{0}1")
        #expect(try store.instruction("T") == nil)
        #expect(try store.lines(ofInstruction: "T\u{0}1") == ["A\u{0}B"])
    }

    @Test func openReadOnlyReturnsNilWithoutAFile() throws {
        let folder = try TemporaryFolder()
        #expect(try LedgerStore.openReadOnly(path: folder.ledgerPath) == nil)
        #expect(!FileManager.default.fileExists(atPath: folder.ledgerPath))
    }

    @Test func journalIsWALAndSchemaVersioned() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.markInFlight([transfer("ins_a", lines: ["L1"])])
        #expect(FileManager.default.fileExists(atPath: folder.ledgerPath + "-wal"))
        store.close()
        let output = try sqlite(
            folder.ledgerPath, "SELECT value FROM settle_meta WHERE key='schema_version'; PRAGMA journal_mode;")
        #expect(output == "12\nwal\n")
    }

    /// A version 2 ledger (whose held lines could not be `unresolved`) is migrated on open:
    /// every held row kept, the schema version 3, and an unresolved line can be held. A plan
    /// (read-only, no migration) still reads a version 2 ledger.
    @Test func aVersion2LedgerIsMigratedKeepingItsHeldLines() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        let waiting = HeldLine(
            lineID: "W1", state: .waiting, payee: "acct_w", amountMinor: 500, currency: "usd", reasonCode: "scheduled",
            reason: "later", source: "orders.csv:2", header: "line_id,amount", record: Array("W1,5\n".utf8),
            sinceRun: "run_1")
        try store.hold([waiting])
        store.close()
        // Back to version 2: held_lines as version 2 made it, the version number 2.
        _ = try sqlite(
            folder.ledgerPath,
            """
            CREATE TABLE h2 (line_id TEXT PRIMARY KEY, state TEXT NOT NULL CHECK (state IN ('waiting', 'following', 'returned', 'cancelled', 'released')), payee TEXT NOT NULL, amount_minor INTEGER NOT NULL, currency TEXT NOT NULL, reason_code TEXT NOT NULL, reason TEXT NOT NULL, source TEXT NOT NULL, header TEXT NOT NULL, record BLOB NOT NULL, instruction_id TEXT, since_run TEXT NOT NULL, since_at INTEGER NOT NULL, ended_run TEXT, ended_at INTEGER);
            INSERT INTO h2 SELECT * FROM held_lines; DROP TABLE held_lines; ALTER TABLE h2 RENAME TO held_lines;
            DROP INDEX instructions_by_stripe_id; DROP TABLE earlier_objects; DROP TABLE failed_charges; DROP TABLE payout_reports; ALTER TABLE instructions DROP COLUMN sent_run; UPDATE settle_meta SET value = '2' WHERE key = 'schema_version'; COMMIT
            """)
        #expect(try sqlite(folder.ledgerPath, "SELECT value FROM settle_meta WHERE key='schema_version'") == "2\n")
        let reader = try #require(try LedgerStore.openReadOnly(path: folder.ledgerPath))
        #expect(try reader.heldLines([.waiting]).map(\.lineID) == ["W1"])
        reader.close()
        let migrated = try LedgerStore.open(path: folder.ledgerPath)
        #expect(try migrated.heldLines([.waiting]).map(\.record) == [Array("W1,5\n".utf8)])
        var unresolved = waiting
        unresolved.lineID = "U1"
        unresolved.state = .unresolved
        try migrated.hold([unresolved])
        #expect(try migrated.heldLines([.unresolved]).map(\.lineID) == ["U1"])
        migrated.close()
        #expect(try sqlite(folder.ledgerPath, "SELECT value FROM settle_meta WHERE key='schema_version'") == "12\n")
        #expect(
            try sqlite(folder.ledgerPath, "SELECT name FROM sqlite_master WHERE name = 'payout_reports'")
                == "payout_reports\n")
        #expect(
            try sqlite(folder.ledgerPath, "SELECT name FROM sqlite_master WHERE name = 'cancelled_contents'")
                == "cancelled_contents\n")
        #expect(
            try sqlite(folder.ledgerPath, "SELECT name FROM sqlite_master WHERE name = 'instructions_by_stripe_id'")
                == "instructions_by_stripe_id\n")
        // Version 8: who sent each instruction's last attempt.
        #expect(
            try sqlite(folder.ledgerPath, "SELECT name FROM pragma_table_info('instructions') WHERE name = 'sent_run'")
                == "sent_run\n")
        // Version 4: the netted lines' table, empty; version 5: the payouts' shares of charges;
        // version 6: the objects of earlier attempts.
        #expect(try sqlite(folder.ledgerPath, "SELECT COUNT(*) FROM netted_lines") == "0\n")
        #expect(try sqlite(folder.ledgerPath, "SELECT COUNT(*) FROM payout_charges") == "0\n")
        #expect(try sqlite(folder.ledgerPath, "SELECT COUNT(*) FROM earlier_objects") == "0\n")
        // Version 9: the charges Stripe said failed.
        #expect(try sqlite(folder.ledgerPath, "SELECT COUNT(*) FROM failed_charges") == "0\n")
    }

    /// A failed charge is remembered once, by the run that learned it first; a second record
    /// adds the payment intent the first did not know. An older ledger read without migrating
    /// has none.
    @Test func failedChargesAreRememberedOnceWithTheirIntent() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.recordFailedCharges([
            FailedCharge(charge: "ch_b", run: "run_1", checkedAt: "t1", requestID: "req_1"),
            FailedCharge(
                charge: "ch_a", refusal: "resource_missing: No such charge", run: "run_1", checkedAt: "t1",
                requestID: "req_2"),
        ])
        try store.recordFailedCharges([
            FailedCharge(charge: "ch_b", paymentIntent: "pi_b", run: "run_2", checkedAt: "t2", requestID: "req_3")
        ])
        #expect(
            try store.failedCharges() == [
                FailedCharge(
                    charge: "ch_a", refusal: "resource_missing: No such charge", run: "run_1", checkedAt: "t1",
                    requestID: "req_2"),
                FailedCharge(charge: "ch_b", paymentIntent: "pi_b", run: "run_1", checkedAt: "t1", requestID: "req_1"),
            ])
        store.close()
        _ = try sqlite(
            folder.ledgerPath,
            "DROP TABLE failed_charges; UPDATE settle_meta SET value = '8' WHERE key = 'schema_version'; COMMIT")
        let reader = try #require(try LedgerStore.openReadOnly(path: folder.ledgerPath))
        #expect(try reader.failedCharges() == [])
        reader.close()
    }

    @Test func inFlightIsCommittedAndVisibleToAnotherConnectionBeforeAnyOutcome() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        let sentAt = Date(timeIntervalSince1970: 1_800_000_000)
        try store.markInFlight(
            [
                transfer("ins_a", lines: ["L1", "L2"]),
                transfer("ins_b", lines: ["L3"], amount: 2000, destination: "acct_b"),
            ], at: sentAt)
        // A second connection (as a crash-restarted process would have) sees it.
        let reader = try #require(try LedgerStore.openReadOnly(path: folder.ledgerPath))
        let row = try #require(try reader.instruction("ins_a"))
        #expect(row.status == .inFlight)
        #expect(row.idempotencyKey == "settle-ins_a-a1")
        #expect(row.attempt == 1)
        #expect(row.firstSentAt == sentAt)
        #expect(row.dispatch.lines.map(\.lineID) == ["L1", "L2"])
        #expect(try reader.line("L3")?.status == .inFlight)
        #expect(try reader.unresolvedInstructions().map(\.id) == ["ins_a", "ins_b"])
        #expect(try reader.transferredAmount(charge: "ch_1", currency: "usd") == 9000)
        let summary = try reader.statusSummary()
        #expect(summary.linesPending == 3)
        #expect(summary.instructions == [.inFlight: 2])
    }

    @Test func settledOutcomeSettlesLinesAndCallsAreRecorded() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.markInFlight([transfer("ins_a", lines: ["L1", "L2"])])
        let now = Date()
        try store.recordCall(
            LedgerCall(
                instructionID: "ins_a", attempt: 1, idempotencyKey: "settle-ins_a-a1", sentAt: now, outcome: "retry",
                httpStatus: 503, requestID: "req_1"))
        try store.recordOutcome(
            instruction: "ins_a", .settled(stripeID: "tr_123"), requestID: "req_2",
            call: LedgerCall(
                instructionID: "ins_a", attempt: 1, idempotencyKey: "settle-ins_a-a1", sentAt: now, outcome: "settled",
                httpStatus: 200, requestID: "req_2"))
        let line = try #require(try store.line("L2"))
        #expect(
            line
                == LedgerLine(
                    lineID: "L2", content: "c-L2", instructionID: "ins_a", kind: "transfer", amountMinor: 3500,
                    status: .settled, stripeID: "tr_123"))
        let row = try #require(try store.instruction("ins_a"))
        #expect(row.status == .settled)
        #expect(row.stripeID == "tr_123")
        #expect(row.requestID == "req_2")
        #expect(
            try store.calls(instruction: "ins_a").map { "\($0.outcome):\($0.httpStatus ?? 0):\($0.requestID ?? "")" }
                == ["retry:503:req_1", "settled:200:req_2"])
        #expect(try store.unresolvedInstructions().isEmpty)
        #expect(try store.attempts(instruction: "ins_a") == 1)
        #expect(try store.attempts(instruction: "ins_none") == 0)
        #expect(
            try store.statusSummary()
                == LedgerStatusSummary(linesSettled: 2, linesPending: 0, linesFailed: 0, instructions: [.settled: 1]))
        // A settled instruction is never sent again.
        #expect(throws: LedgerError.instructionNotSendable(id: "ins_a", status: .settled)) {
            try store.markInFlight([transfer("ins_a", lines: ["L1", "L2"], attempt: 2)])
        }
    }

    @Test func failureReleasesLinesForANewAttempt() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.markInFlight([transfer("ins_a", lines: ["L1"])])
        try store.recordOutcome(
            instruction: "ins_a", .failed(code: "balance_insufficient", message: "Insufficient funds"))
        #expect(try store.line("L1")?.status == .failed)
        #expect(try store.transferredAmount(charge: "ch_1", currency: "usd") == 0)
        let failed = try #require(try store.instruction("ins_a"))
        #expect(failed.errorCode == "balance_insufficient")
        #expect(failed.errorMessage == "Insufficient funds")
        // The same attempt number again is refused; attempt 2 is fine.
        #expect(throws: LedgerError.instructionNotSendable(id: "ins_a", status: .failed)) {
            try store.markInFlight([transfer("ins_a", lines: ["L1"], attempt: 1)])
        }
        try store.markInFlight([transfer("ins_a", lines: ["L1"], attempt: 2)])
        let second = try #require(try store.instruction("ins_a"))
        #expect(second.status == .inFlight)
        #expect(second.idempotencyKey == "settle-ins_a-a2")
        #expect(second.errorCode == nil)
        #expect(try store.attempts(instruction: "ins_a") == 2)
        // A released line may also move to another instruction.
        try store.recordOutcome(instruction: "ins_a", .failed(code: "x", message: "y"))
        try store.markInFlight([transfer("ins_other", lines: ["L1"])])
        #expect(try store.line("L1")?.instructionID == "ins_other")
    }

    @Test func aLineHeldByAnotherInstructionCannotBeClaimedAndTheBatchIsAtomic() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.markInFlight([transfer("ins_a", lines: ["L1"])])
        try store.recordOutcome(instruction: "ins_a", .unknown(message: "timeout"))
        #expect(throws: LedgerError.lineClaimed(lineID: "L1", instructionID: "ins_a", status: .unknown)) {
            try store.markInFlight([transfer("ins_c", lines: ["L9"], charge: "ch_9"), transfer("ins_b", lines: ["L1"])])
        }
        // Nothing of the refused batch was written.
        #expect(try store.instruction("ins_c") == nil)
        #expect(try store.line("L9") == nil)
        // A re-send of the unknown one under the same key is allowed; another key is not.
        try store.markInFlight([transfer("ins_a", lines: ["L1"])])
        #expect(try store.instruction("ins_a")?.status == .unknown)
        #expect(throws: LedgerError.instructionNotSendable(id: "ins_a", status: .unknown)) {
            try store.markInFlight([transfer("ins_a", lines: ["L1"], attempt: 2)])
        }
    }

    /// A reversal that names its charge asks for the order's transfer funded by that charge
    /// (audit 87 F1), settled or still unknown; without a charge, the one with the most left.
    @Test func transferLookupByCharge() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.markInFlight([
            transfer("ins_a", lines: ["A1"], amount: 3000, charge: "ch_a"),
            transfer("ins_b", lines: ["B1"], amount: 2000, charge: "ch_b"),
            transfer("ins_c", lines: ["C1"], amount: 1000, charge: "ch_c"),
        ])
        try store.recordOutcome(instruction: "ins_a", .settled(stripeID: "tr_a"))
        try store.recordOutcome(instruction: "ins_b", .settled(stripeID: "tr_b"))
        func found(_ charge: String?) throws -> String? {
            try store.transfer(group: "ORDER100", destination: "acct_rest", currency: "usd", charge: charge)?.stripeID
        }
        #expect(
            try [found(nil), found("ch_a"), found("ch_b"), found("ch_c"), found("ch_z")] == [
                "tr_a", "tr_a", "tr_b", nil, nil,
            ])
        func unsettled(_ charge: String?) throws -> String? {
            try store.unsettledTransfer(group: "ORDER100", destination: "acct_rest", currency: "usd", charge: charge)
        }
        #expect(try [unsettled(nil), unsettled("ch_c"), unsettled("ch_a")] == ["ins_c", "ins_c", nil])
    }

    @Test func transferLookupIsNetOfReversals() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        try store.markInFlight([transfer("ins_t", lines: ["L1"], amount: 7000)])
        #expect(try store.transfer(group: "ORDER100", destination: "acct_rest", currency: "usd") == nil)
        try store.recordOutcome(instruction: "ins_t", .settled(stripeID: "tr_9"))
        try store.markInFlight([
            reversal("ins_r1", of: "tr_9", amount: 1500, line: "R1"),
            reversal("ins_r2", of: "tr_9", amount: 500, line: "R2"),
        ])
        try store.recordOutcome(instruction: "ins_r1", .settled(stripeID: "trr_1"))
        try store.recordOutcome(instruction: "ins_r2", .failed(code: "balance_insufficient", message: "no"))
        #expect(
            try store.transfer(group: "ORDER100", destination: "acct_rest", currency: "usd")
                == LedgerTransfer(
                    stripeID: "tr_9", amountMinor: 7000, reversedMinor: 1500, charge: "ch_1", currency: "usd",
                    destination: "acct_rest"))
        // Found by its Stripe id too, with the currency Stripe reverses it in.
        var byID: [LedgerTransfer] = []
        try Array(#"["tr_9","tr_none"]"#.utf8).withUnsafeBytes { keys in
            try store.transfers(stripeIDs: keys) { byID.append($0) }
        }
        #expect(
            byID == [
                LedgerTransfer(
                    stripeID: "tr_9", amountMinor: 7000, reversedMinor: 1500, charge: "ch_1", currency: "usd",
                    destination: "acct_rest")
            ])
        #expect(try store.transfer(group: "ORDER100", destination: "acct_rest", currency: "eur") == nil)
        #expect(try store.transfer(group: "OTHER", destination: "acct_rest", currency: "usd") == nil)
        // What stands allocated on the charge: the transfer less its settled reversal (the
        // failed one took nothing back; audit 38 Q2).
        #expect(try store.transferredAmount(charge: "ch_1", currency: "usd") == 5500)
        #expect(try store.transferredAmount(charge: "ch_1", currency: "eur") == 0)
    }

    /// A plan reads the ledger in one snapshot: what another process commits meanwhile is
    /// not half seen (a line settled but not the transfer that settled it), and it shows
    /// once the snapshot ends.
    @Test func aSnapshotSeesTheLedgerAsOfItsFirstRead() throws {
        let folder = try TemporaryFolder()
        let writer = try openTestLedger(path: folder.ledgerPath)
        try writer.markInFlight([transfer("ins_a", lines: ["L1"])], at: Date(timeIntervalSince1970: 1_800_000_000))
        let reader = try #require(try LedgerStore.openReadOnly(path: folder.ledgerPath))
        try reader.beginSnapshot()
        #expect(try reader.line("L1")?.status == .inFlight)
        #expect(try reader.line("L2") == nil)
        try writer.markInFlight(
            [transfer("ins_b", lines: ["L2"], amount: 2000)], at: Date(timeIntervalSince1970: 1_800_000_100))
        #expect(try reader.line("L2") == nil)
        #expect(try reader.transferredAmount(charge: "ch_1", currency: "usd") == 7000)
        try reader.endSnapshot()
        #expect(try reader.line("L2")?.status == .inFlight)
        #expect(try reader.transferredAmount(charge: "ch_1", currency: "usd") == 9000)
    }

    @Test func ledgerSurvivesReopen() throws {
        let folder = try TemporaryFolder()
        do {
            let store = try openTestLedger(path: folder.ledgerPath)
            try store.markInFlight([transfer("ins_a", lines: ["L1"])])
            try store.recordOutcome(instruction: "ins_a", .settled(stripeID: "tr_1"))
        }
        let store = try openTestLedger(path: folder.ledgerPath)
        #expect(try store.line("L1")?.stripeID == "tr_1")
    }
}

func sqlite(_ path: String, _ sql: String) throws -> String {
    let process = Process()
    let pipe = Pipe()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
        "python3", "-c",
        "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor s in sys.argv[2].split(';'):\n  s=s.strip()\n  if s:\n    for r in c.execute(s): print(*r)",
        path, sql,
    ]
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
