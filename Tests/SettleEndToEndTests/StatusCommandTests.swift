import Foundation
import SettleLedger
import Testing

/// `settle status` and `settle cancel` run as a user would, on a ledger made by
/// `settle ledger init` and filled through the ledger's write API.
@Suite struct StatusCommandTests {
    /// A time `seconds` after 2025-11-29T07:06:40Z.
    static func at(_ seconds: Int) -> Date { Date(timeIntervalSince1970: 1_764_400_000 + Double(seconds)) }

    static func transfer(_ id: String, line: String, amount: Int64, payee: String, attempt: Int = 1) -> LedgerDispatch {
        LedgerDispatch(
            id: id, kind: "transfer", group: "ORDER-\(line)", payee: payee, charge: "ch_\(line)", currency: "usd",
            amountMinor: amount, method: "POST", path: "/v1/transfers", params: "{}", stripeContext: nil,
            attempt: attempt, idempotencyKey: "settle-\(id)-a\(attempt)",
            lines: [LedgerLineClaim(lineID: line, kind: "transfer", amountMinor: amount, content: "c-\(line)")])
    }

    static func waiting(_ id: String, amount: Int64, code: String, reason: String, at seconds: Int) -> HeldLine {
        HeldLine(
            lineID: id, state: .waiting, payee: "acct_\(id)", amountMinor: amount, currency: "usd", reasonCode: code,
            reason: reason, source: "orders.csv:\(seconds)", header: "line_id,order_id,amount,currency",
            record: Array("\(id),order-\(id),\(amount / 100),usd\n".utf8),
            sinceRun: "run_1", sinceAt: at(seconds))
    }

    /// A ledger: one run; ok-1 settled; bad-1 failed; again-1 failed then settled; ns-1
    /// released as never sent; wait-1 and wait-2 waiting. `unknown`: also unk-1 unknown.
    static func ledger(unknown: Bool = false) throws -> String {
        let path = SettleProcess.temporaryFolder().appendingPathComponent("ledger.sqlite").path
        let created = try SettleProcess.run(["ledger", "init", "--ledger", path])
        #expect(created.status == 0, "ledger init: \(created.stderr)")
        let store = try LedgerStore.open(path: path)
        defer { store.close() }
        try store.recordRun(
            LedgerRun(
                id: "run_1", command: "run", asOf: "2025-11-29", folder: "/srv/out/1", startedAt: at(0),
                endedAt: at(50), exitStatus: 65, counts: #"{"settled":2,"failed":1,"deferred":2}"#))
        try store.markInFlight([transfer("T_OK", line: "ok-1", amount: 7000, payee: "acct_ok")], at: at(1))
        try store.recordOutcome(instruction: "T_OK", .settled(stripeID: "tr_ok"), requestID: "req_ok")
        try store.markInFlight([transfer("T_BAD", line: "bad-1", amount: 4400, payee: "acct_bad")], at: at(5))
        try store.recordOutcome(
            instruction: "T_BAD", .failed(code: "account_invalid", message: "the destination account is closed"),
            requestID: "req_bad",
            call: LedgerCall(
                instructionID: "T_BAD", attempt: 1, idempotencyKey: "settle-T_BAD-a1", sentAt: at(5),
                outcome: "failed", httpStatus: 400, requestID: "req_bad"))
        try store.markInFlight([transfer("T_NS", line: "ns-1", amount: 300, payee: "acct_ns")], at: at(6))
        try store.recordOutcome(instruction: "T_NS", .failed(code: LedgerOutcome.notSentCode, message: "never left"))
        try store.markInFlight([transfer("T_AGAIN", line: "again-1", amount: 5000, payee: "acct_again")], at: at(7))
        try store.recordOutcome(
            instruction: "T_AGAIN", .failed(code: "api_error", message: "500 from Stripe"),
            call: LedgerCall(
                instructionID: "T_AGAIN", attempt: 1, idempotencyKey: "settle-T_AGAIN-a1", sentAt: at(8),
                outcome: "failed", httpStatus: 500, requestID: "req_a1"))
        try store.markInFlight(
            [transfer("T_AGAIN", line: "again-1", amount: 5000, payee: "acct_again", attempt: 2)], at: at(9))
        try store.recordOutcome(
            instruction: "T_AGAIN", .settled(stripeID: "tr_again"), requestID: "req_a2",
            call: LedgerCall(
                instructionID: "T_AGAIN", attempt: 2, idempotencyKey: "settle-T_AGAIN-a2", sentAt: at(10),
                outcome: "settled", httpStatus: 200, requestID: "req_a2", stripeDate: "Sat, 29 Nov 2025 07:06:50 GMT"))
        if unknown {
            try store.markInFlight([transfer("T_UNK", line: "unk-1", amount: 1250, payee: "acct_unk")], at: at(11))
            try store.recordOutcome(instruction: "T_UNK", .unknown(message: "timeout after 30 s"))
        }
        try store.hold([
            waiting("wait-1", amount: 2500, code: "charge_pending", reason: "the charge is pending", at: 13),
            waiting("wait-2", amount: 1800, code: "scheduled", reason: "scheduled for 2025-12-05", at: 14),
        ])
        return path
    }

    static func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func statusText() throws {
        let path = try Self.ledger()
        let outcome = try SettleProcess.run(["status", "--ledger", path])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(
            outcome.stdout == """
                settle status: ledger \(path)
                  lines settled: 2
                  lines unknown (may have reached Stripe, outcome not known yet): 0
                  lines failed: 1
                  lines waiting (deferred): 2
                  instructions settled: 2
                  instructions in_flight: 0
                  instructions unknown: 0
                  instructions failed: 2
                runs: 1
                  run_1: run, as of 2025-11-29, started 2025-11-29T07:06:40Z, ended 2025-11-29T07:07:30Z, exit 65, settled 2, failed 1, deferred 2
                lines failed:
                  bad-1 44.00 usd (4400 minor units) to acct_bad, since 2025-11-29T07:06:45Z, instruction T_BAD: account_invalid: the destination account is closed
                lines waiting:
                  wait-1 25.00 usd (2500 minor units) to acct_wait-1, since 2025-11-29T07:06:53Z (run_1): charge_pending: the charge is pending
                  wait-2 18.00 usd (1800 minor units) to acct_wait-2, since 2025-11-29T07:06:54Z (run_1): scheduled: scheduled for 2025-12-05

                """)
    }

    @Test func statusJSON() throws {
        let path = try Self.ledger(unknown: true)
        let outcome = try SettleProcess.run(["status", "--ledger", path, "--json"])
        // A line whose outcome is not known yet: run again later.
        #expect(outcome.status == 75, "\(outcome.stderr)")
        let json = try Self.object(outcome.stdout)
        #expect(
            Set(json.keys) == [
                "ledger", "ledger_exists", "lines", "instructions", "runs", "waiting", "not_carried", "unknown",
                "failed", "refused",
            ])
        #expect(json["refused"] is NSNull)
        #expect(json["ledger"] as? String == path)
        #expect(json["ledger_exists"] as? Bool == true)
        #expect(
            json["lines"] as? [String: Int] == [
                "settled": 2, "unknown": 1, "failed": 1, "waiting": 2, "not_carried": 0,
            ])
        #expect(json["instructions"] as? [String: Int] == ["settled": 2, "in_flight": 0, "unknown": 1, "failed": 2])

        let runs = try #require(json["runs"] as? [[String: Any]])
        #expect(runs.count == 1)
        #expect(runs[0]["id"] as? String == "run_1")
        #expect(runs[0]["command"] as? String == "run")
        #expect(runs[0]["as_of"] as? String == "2025-11-29")
        #expect(runs[0]["folder"] as? String == "/srv/out/1")
        #expect(runs[0]["started_at"] as? String == "2025-11-29T07:06:40Z")
        #expect(runs[0]["ended_at"] as? String == "2025-11-29T07:07:30Z")
        #expect(runs[0]["exit_status"] as? Int == 65)
        #expect(runs[0]["counts"] as? [String: Int] == ["settled": 2, "failed": 1, "deferred": 2])
        #expect(runs[0]["continues"] is NSNull)

        let unknown = try #require(json["unknown"] as? [[String: Any]])
        #expect(unknown.count == 1)
        #expect(unknown[0]["line_id"] as? String == "unk-1")
        #expect(unknown[0]["state"] as? String == "unknown")
        #expect(unknown[0]["amount_minor"] as? Int == 1250)
        #expect(unknown[0]["amount"] as? String == "12.50")
        #expect(unknown[0]["currency"] as? String == "usd")
        #expect(unknown[0]["reason"] as? String == "timeout after 30 s")
        #expect(unknown[0]["since"] as? String == "2025-11-29T07:06:51Z")
        #expect(unknown[0]["instruction_id"] as? String == "T_UNK")

        // Not ns-1 (never sent: it goes again), not again-1 (failed, then settled).
        let failed = try #require(json["failed"] as? [[String: Any]])
        #expect(failed.map { $0["line_id"] as? String } == ["bad-1"])
        #expect(failed[0]["state"] as? String == "failed")
        #expect(failed[0]["payee"] as? String == "acct_bad")
        #expect(failed[0]["amount_minor"] as? Int == 4400)
        #expect(failed[0]["amount"] as? String == "44.00")
        #expect(failed[0]["reason_code"] as? String == "account_invalid")
        #expect(failed[0]["reason"] as? String == "the destination account is closed")
        #expect(failed[0]["since"] as? String == "2025-11-29T07:06:45Z")
        #expect(failed[0]["stripe_id"] is NSNull)

        let waiting = try #require(json["waiting"] as? [[String: Any]])
        #expect(waiting.map { $0["line_id"] as? String } == ["wait-1", "wait-2"])
        #expect(
            Set(waiting[0].keys) == [
                "line_id", "state", "payee", "amount_minor", "amount", "currency", "reason_code", "reason", "since",
                "since_run", "instruction_id", "stripe_id",
            ])
        #expect(waiting[0]["state"] as? String == "waiting")
        #expect(waiting[0]["amount_minor"] as? Int == 2500)
        #expect(waiting[0]["currency"] as? String == "usd")
        #expect(waiting[0]["reason_code"] as? String == "charge_pending")
        #expect(waiting[0]["since"] as? String == "2025-11-29T07:06:53Z")
        #expect(waiting[0]["since_run"] as? String == "run_1")
    }

    /// A run a later one took over is ended with no exit status of its own: a line's history
    /// says so, as the run list does, not "not ended" (audit 55 L1); a run still open says
    /// "not ended".
    @Test func aTakenOverRunIsEndedInALinesHistory() throws {
        let path = try Self.ledger()
        let store = try LedgerStore.open(path: path)
        try store.recordRun(
            LedgerRun(id: "run_k", command: "run", asOf: "2025-11-30", folder: "/srv/out/2", startedAt: Self.at(20)))
        try store.recordRun(
            LedgerRun(id: "run_open", command: "run", asOf: "2025-12-01", folder: "/srv/out/3", startedAt: Self.at(40)))
        try store.hold([
            HeldLine(
                lineID: "took-1", state: .waiting, payee: "acct_t", amountMinor: 900, currency: "usd",
                reasonCode: "scheduled", reason: "not sent: run run_k never ended (killed?)", source: "orders.csv:3",
                header: "line_id,order_id,amount,currency", record: Array("took-1,o-t,9.00,usd\n".utf8),
                sinceRun: "run_k", sinceAt: Self.at(21)),
            HeldLine(
                lineID: "open-1", state: .waiting, payee: "acct_o", amountMinor: 700, currency: "usd",
                reasonCode: "scheduled", reason: "scheduled", source: "orders.csv:4",
                header: "line_id,order_id,amount,currency", record: Array("open-1,o-o,7.00,usd\n".utf8),
                sinceRun: "run_open", sinceAt: Self.at(41)),
        ])
        try store.recordRun(
            LedgerRun(
                id: "run_k", command: "run", asOf: "2025-11-30", folder: "/srv/out/2", startedAt: Self.at(20),
                endedAt: Self.at(30)))
        store.close()
        let took = try SettleProcess.run(["status", "--ledger", path, "--line", "took-1"]).stdout
        #expect(took.contains("run run_k: run, as of 2025-11-30, ended, no exit status"), "\(took)")
        #expect(!took.contains("not ended"), "\(took)")
        let open = try SettleProcess.run(["status", "--ledger", path, "--line", "open-1"]).stdout
        #expect(open.contains("run run_open: run, as of 2025-12-01, not ended"), "\(open)")
    }

    @Test func oneLinesHistory() throws {
        let path = try Self.ledger()
        let outcome = try SettleProcess.run(["status", "--ledger", path, "--line", "again-1", "--json"])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let json = try Self.object(outcome.stdout)
        #expect(json["line_id"] as? String == "again-1")
        #expect(json["status"] as? String == "settled")
        #expect(json["amount_minor"] as? Int == 5000)
        #expect(json["currency"] as? String == "usd")
        #expect(json["stripe_id"] as? String == "tr_again")
        #expect(json["instruction_id"] as? String == "T_AGAIN")
        let history = try #require(json["history"] as? [[String: Any]])
        #expect(history.map { $0["event"] as? String } == ["call", "instruction", "call"])
        #expect(
            history.map { $0["at"] as? String } == [
                "2025-11-29T07:06:48Z", "2025-11-29T07:06:49Z", "2025-11-29T07:06:50Z",
            ])
        #expect(history[0]["attempt"] as? Int == 1)
        #expect(history[0]["http_status"] as? Int == 500)
        #expect(history[0]["request_id"] as? String == "req_a1")
        #expect(history[0]["idempotency_key"] as? String == "settle-T_AGAIN-a1")
        #expect(history[1]["attempt"] as? Int == 2)
        #expect(history[1]["status"] as? String == "settled")
        #expect(history[1]["stripe_id"] as? String == "tr_again")
        #expect(history[1]["request_id"] as? String == "req_a2")
        #expect(history[2]["request_id"] as? String == "req_a2")
        #expect(history[2]["stripe_date"] as? String == "Sat, 29 Nov 2025 07:06:50 GMT")

        let text = try SettleProcess.run(["status", "--ledger", path, "--line", "again-1"])
        #expect(text.status == 0)
        #expect(
            text.stdout == """
                settle status: line again-1 in the ledger \(path): settled
                  50.00 usd (5000 minor units), to acct_again, Stripe id tr_again
                  2025-11-29T07:06:48Z  call, attempt 1 (Idempotency-Key settle-T_AGAIN-a1): failed, HTTP 500, Request-Id req_a1
                  2025-11-29T07:06:49Z  instruction T_AGAIN: transfer to acct_again, 50.00 usd (5000 minor units), attempt 2 (Idempotency-Key settle-T_AGAIN-a2): settled tr_again, Request-Id req_a2
                  2025-11-29T07:06:50Z  call, attempt 2 (Idempotency-Key settle-T_AGAIN-a2): settled, HTTP 200, Request-Id req_a2, Stripe's Date Sat, 29 Nov 2025 07:06:50 GMT

                """)

        let waiting = try Self.object(
            try SettleProcess.run(["status", "--ledger", path, "--line", "wait-1", "--json"]).stdout)
        #expect(waiting["status"] as? String == "waiting")
        let events = try #require(waiting["history"] as? [[String: Any]])
        #expect(events.map { $0["event"] as? String } == ["run", "held"])
        #expect(events[1]["source"] as? String == "orders.csv:13")
        #expect(events[1]["reason_code"] as? String == "charge_pending")

        let notSent = try Self.object(
            try SettleProcess.run(["status", "--ledger", path, "--line", "ns-1", "--json"]).stdout)
        #expect(notSent["status"] as? String == "not_sent")
        let nobody = try SettleProcess.run(["status", "--ledger", path, "--line", "nobody-1", "--json"])
        #expect(nobody.status == 0)
        let none = try Self.object(nobody.stdout)
        #expect(none["status"] as? String == "not_in_ledger")
        #expect((none["history"] as? [Any])?.isEmpty == true)
    }

    @Test func cancelDropsWaitingLinesAndReportsTheOthers() throws {
        let path = try Self.ledger()
        let noIDs = try SettleProcess.run(["cancel", "--ledger", path])
        #expect(noIDs.status == 64)

        let outcome = try SettleProcess.run(["cancel", "wait-1", "ok-1", "nobody-1", "--ledger", path])
        #expect(outcome.status == 65, "\(outcome.stderr)")
        #expect(
            outcome.stdout
                == "cancelled wait-1: 25.00 usd (2500 minor units) to acct_wait-1, waiting since 2025-11-29T07:06:53Z (charge_pending: the charge is pending)\n"
        )
        #expect(outcome.stderr.contains("line ok-1 was not cancelled: it is settled, not waiting"))
        #expect(outcome.stderr.contains("line nobody-1 was not cancelled: it is not in the ledger"))

        let status = try Self.object(try SettleProcess.run(["status", "--ledger", path, "--json"]).stdout)
        #expect((status["waiting"] as? [[String: Any]])?.map { $0["line_id"] as? String } == ["wait-2"])
        let runs = try #require(status["runs"] as? [[String: Any]])
        #expect(runs.count == 2)
        let cancel = runs[1]
        let runID = try #require(cancel["id"] as? String)
        #expect(runID.hasPrefix("cancel_"))
        #expect(cancel["command"] as? String == "cancel")
        #expect(cancel["exit_status"] as? Int == 65)
        #expect(cancel["counts"] as? [String: Int] == ["cancelled": 1, "not_waiting": 2, "order_not_whole": 0])

        let line = try Self.object(
            try SettleProcess.run(["status", "--ledger", path, "--line", "wait-1", "--json"]).stdout)
        #expect(line["status"] as? String == "cancelled")
        let events = try #require(line["history"] as? [[String: Any]])
        #expect(events.last?["event"] as? String == "cancelled")
        #expect(events.last?["run"] as? String == runID)

        // Cancelled once: a second cancel of it is refused; the last waiting one goes.
        #expect(try SettleProcess.run(["cancel", "wait-1", "--ledger", path]).status == 65)
        #expect(try SettleProcess.run(["cancel", "wait-2", "--ledger", path]).status == 0)
        let after = try Self.object(try SettleProcess.run(["status", "--ledger", path, "--json"]).stdout)
        #expect((after["waiting"] as? [Any])?.isEmpty == true)
    }

    /// A cancel is recorded whole or not at all: when the ledger cannot record the cancel run's
    /// end (a full disk; here a trigger), nothing is cancelled, the command says it failed, and
    /// the same command once the ledger can be written cancels the lines (audit 61 F2: the lines
    /// were cancelled and the command said it failed; run again, it said they were not waiting).
    @Test func aCancelTheLedgerCannotRecordWholeCancelsNothing() throws {
        let path = try Self.ledger()
        try SettleProcess.onLedger(
            path,
            "CREATE TRIGGER refuse BEFORE UPDATE ON runs WHEN NEW.command = 'cancel' "
                + "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;")
        let failed = try SettleProcess.run(["cancel", "wait-1", "--ledger", path])
        #expect(failed.status == 75, "\(failed.stderr)")
        #expect(failed.stdout.isEmpty && failed.stderr.contains("database or disk is full"), "\(failed.stderr)")
        let still = try Self.object(try SettleProcess.run(["status", "--ledger", path, "--json"]).stdout)
        #expect((still["waiting"] as? [[String: Any]])?.map { $0["line_id"] as? String } == ["wait-1", "wait-2"])
        #expect((still["runs"] as? [Any])?.count == 1)

        try SettleProcess.onLedger(path, "DROP TRIGGER refuse;")
        let again = try SettleProcess.run(["cancel", "wait-1", "--ledger", path])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.hasPrefix("cancelled wait-1: "), "\(again.stdout)")
        let after = try Self.object(try SettleProcess.run(["status", "--ledger", path, "--json"]).stdout)
        #expect((after["waiting"] as? [[String: Any]])?.map { $0["line_id"] as? String } == ["wait-2"])
        let runs = try #require(after["runs"] as? [[String: Any]])
        #expect(runs.count == 2 && runs[1]["exit_status"] as? Int == 0, "\(runs)")
    }

    /// A group moves whole or not at all: cancelling one waiting line of an order whose other
    /// lines wait too would let them move without it later. Named together, they go.
    @Test func cancelTakesAWaitingOrderWholeOrNotAtAll() throws {
        let path = try Self.ledger()
        let header = "line_id,Order ID,transfer_group,payment_intent,amount,currency\n"
        func line(_ id: String, _ record: String) -> HeldLine {
            var held = Self.waiting(id, amount: 1000, code: "charge_pending", reason: "the charge is pending", at: 20)
            held.header = header
            held.record = Array((record + "\n").utf8)
            return held
        }
        let store = try LedgerStore.open(path: path)
        try store.hold([
            line("o9-1", "o9-1,9,ORD9,,10.00,usd"), line("o9-2", "o9-2,9,ORD9,,10.00,usd"),
            // One payment intent, no transfer_group: one group; its own order id does not split it.
            line("pi-1", "pi-1,5,,pi_5,10.00,usd"), line("pi-2", "pi-2,6,,pi_5,10.00,usd"),
            // By order id (mapped from "Order ID" by the config), and another order alone.
            line("o7-1", "o7-1,7,,,10.00,usd"), line("o7-2", "o7-2,7,,,10.00,usd"), line("o8-1", "o8-1,8,,,10.00,usd"),
        ])
        store.close()
        let config = SettleProcess.temporaryFolder().appendingPathComponent("settle.json")
        try Data(#"{"columns": {"order_id": "Order ID"}}"#.utf8).write(to: config)
        func cancel(_ ids: [String]) throws -> SettleProcess.Outcome {
            try SettleProcess.run(["cancel"] + ids + ["--ledger", path, "--config", config.path])
        }
        let part = try cancel(["o9-1", "pi-2", "o7-1", "o8-1"])
        #expect(part.status == 65, "\(part.stderr)")
        #expect(
            part.stderr.contains(
                "line o9-1 was not cancelled: o9-2 of its order wait in the ledger too and would move without it"))
        #expect(part.stderr.contains("line pi-2 was not cancelled: pi-1 of its order wait"))
        #expect(part.stderr.contains("line o7-1 was not cancelled: o7-2 of its order wait"))
        #expect(part.stdout.hasPrefix("cancelled o8-1: "))
        #expect(!part.stdout.contains("o9-1") && !part.stdout.contains("pi-2") && !part.stdout.contains("o7-1"))
        // Without the config that maps its order id, an order cannot be told apart: it stays.
        let noConfig = try SettleProcess.run(["cancel", "o7-1", "o7-2", "--ledger", path])
        #expect(noConfig.status == 65)
        #expect(noConfig.stderr.contains("line o7-1 was not cancelled: its order cannot be read from its record"))
        let whole = try cancel(["o9-2", "o9-1", "pi-1", "pi-2", "o7-1", "o7-2"])
        #expect(whole.status == 0, "\(whole.stderr)")
        let after = try Self.object(try SettleProcess.run(["status", "--ledger", path, "--json"]).stdout)
        #expect((after["waiting"] as? [[String: Any]])?.map { $0["line_id"] as? String } == ["wait-1", "wait-2"])
    }

    /// Runs a command (mount, umount); its exit status, nil when it cannot be started.
    static func system(_ arguments: [String]) -> Int32? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Whether this machine lets the tests mount a small tmpfs (root, with the capability):
    /// the one way to give SQLite a real read-only file system.
    static let canMount: Bool = {
        let probe = SettleProcess.temporaryFolder()
        guard system(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe.path]) == 0 else { return false }
        return system(["umount", probe.path]) == 0
    }()

    /// A ledger SQLite cannot open (here a read-only file system: SQLite cannot make the WAL's
    /// index beside it) is out of reach, 78 with SQLite's reason, for `plan` and `status`:
    /// not "not a settle ledger" (66), which sends the operator looking for a wrong file
    /// (audit 54 F4). The file is still a ledger once the file system is writable again.
    @Test(.enabled(if: canMount, "needs to mount a tmpfs"))
    func aLedgerOnAReadOnlyFileSystemIsOutOfReachNotSomeoneElses() throws {
        let folder = SettleProcess.temporaryFolder()
        let mount = folder.appendingPathComponent("mnt")
        try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
        #expect(Self.system(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mount.path]) == 0)
        defer { _ = Self.system(["umount", mount.path]) }
        let path = mount.appendingPathComponent("ledger.sqlite").path
        #expect(try SettleProcess.run(["ledger", "init", "--ledger", path]).status == 0)
        #expect(Self.system(["mount", "-o", "remount,ro", mount.path]) == 0)
        let export = folder.appendingPathComponent("orders.csv")
        try Data("line_id,order_id,kind,amount,currency,destination\nl1,o1,transfer,10.00,usd,acct_1\n".utf8)
            .write(to: export)

        let plan = try SettleProcess.run([
            "plan", export.path, "--ledger", path, "--out", folder.appendingPathComponent("out").path,
            "--as-of", "2026-11-29",
        ])
        #expect(plan.status == 78)
        #expect(plan.stderr.contains("cannot open ledger \(path): SQLite error 14: unable to open database file"))
        #expect(!plan.stderr.contains("not a settle ledger"))
        let status = try SettleProcess.run(["status", "--ledger", path])
        #expect(status.status == 78)
        #expect(status.stderr.contains("cannot open ledger \(path)"))
        #expect(!status.stderr.contains("not a settle ledger"))

        #expect(Self.system(["mount", "-o", "remount,rw", mount.path]) == 0)
        #expect(try SettleProcess.run(["status", "--ledger", path]).status == 0)
    }

    @Test func noLedgerNotALedgerAndAMissingOneForCancel() throws {
        let folder = SettleProcess.temporaryFolder()
        let missing = folder.appendingPathComponent("none.sqlite").path
        // No ledger at the path is not "nothing settled yet": a lost or misnamed ledger exits
        // 78 as for run, apply and cancel (audit 35 P9: it exited 0, and a monitor saw nothing).
        let none = try SettleProcess.run(["status", "--ledger", missing])
        #expect(none.status == 78)
        #expect(none.stdout.isEmpty)
        #expect(none.stderr.contains("there is no ledger at \(missing): create one with `settle ledger init"))
        let noneRun = try SettleProcess.run(["status", "--ledger", missing, "--json"])
        #expect(noneRun.status == 78)
        let noneJSON = try Self.object(noneRun.stdout)
        #expect(noneJSON["ledger_exists"] as? Bool == false)
        #expect((noneJSON["runs"] as? [Any])?.isEmpty == true)
        // The shape of a ledger's status, at zero (audit 19 F8: lines and instructions missing).
        #expect(
            noneJSON["lines"] as? [String: Int] == [
                "settled": 0, "unknown": 0, "failed": 0, "waiting": 0, "not_carried": 0,
            ])
        #expect(
            noneJSON["instructions"] as? [String: Int] == ["settled": 0, "in_flight": 0, "unknown": 0, "failed": 0])
        let ledger = try Self.object(try SettleProcess.run(["status", "--ledger", try Self.ledger(), "--json"]).stdout)
        #expect(Set(noneJSON.keys) == Set(ledger.keys))

        // A ledger that was there (its mark left beside it) and is gone says so.
        let lost = try Self.ledger()
        try FileManager.default.removeItem(atPath: lost)
        let gone = try SettleProcess.run(["status", "--ledger", lost])
        #expect(gone.status == 78)
        #expect(gone.stderr.contains("the ledger \(lost) is missing, but its mark \(lost).mark shows one was there"))

        let bogus = folder.appendingPathComponent("bogus.sqlite")
        try Data("not a database at all".utf8).write(to: bogus)
        let refused = try SettleProcess.run(["status", "--ledger", bogus.path])
        #expect(refused.status == 66)
        #expect(refused.stderr.contains("is not a settle ledger"))

        let cancel = try SettleProcess.run(["cancel", "wait-1", "--ledger", missing])
        #expect(cancel.status == 78)
        #expect(cancel.stderr.contains("there is no ledger at \(missing)"))
    }
}
