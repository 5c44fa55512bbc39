import Foundation
import SettleLedger
import Testing

/// A time `seconds` after a fixed instant, so that orders and "since" are exact.
private func at(_ seconds: Int) -> Date { Date(timeIntervalSince1970: 1_764_400_000 + Double(seconds)) }

private func call(_ id: String, attempt: Int, at seconds: Int, _ outcome: String, http: Int?, request: String?)
    -> LedgerCall
{
    LedgerCall(
        instructionID: id, attempt: attempt, idempotencyKey: "settle-\(id)-a\(attempt)", sentAt: at(seconds),
        outcome: outcome, httpStatus: http, requestID: request, stripeDate: "Sat, 29 Nov 2025 07:0\(attempt):00 GMT")
}

private func held(
    _ id: String, _ state: HeldLine.State, amount: Int64, currency: String = "usd", code: String, reason: String,
    instruction: String? = nil, run: String, at seconds: Int
) -> HeldLine {
    HeldLine(
        lineID: id, state: state, payee: "acct_\(id)", amountMinor: amount, currency: currency, reasonCode: code,
        reason: reason, source: "orders.csv:\(seconds)", header: "line_id,amount", record: Array("\(id),1\n".utf8),
        instructionID: instruction, sinceRun: run, sinceAt: at(seconds))
}

/// A ledger with one line in each state `settle status` tells apart.
private func filledLedger(_ path: String) throws -> LedgerStore {
    let store = try openTestLedger(path: path)
    try store.recordRun(
        LedgerRun(
            id: "run_1", command: "run", asOf: "2025-11-29", folder: "/srv/out/1", startedAt: at(0), endedAt: at(50),
            exitStatus: 75, counts: #"{"settled":2,"unknown":2}"#))
    try store.recordRun(LedgerRun(id: "run_2", command: "plan", asOf: "2025-11-30", folder: nil, startedAt: at(60)))
    // Settled at once.
    try store.markInFlight([transfer("T_OK", lines: ["ok-1"], amount: 7000)], at: at(1))
    try store.recordOutcome(instruction: "T_OK", .settled(stripeID: "tr_ok"), requestID: "req_ok")
    // Sent, outcome not known; and in flight with no answer.
    try store.markInFlight([transfer("T_UNK", lines: ["unk-1"], amount: 1250, destination: "acct_u")], at: at(3))
    try store.recordOutcome(instruction: "T_UNK", .unknown(message: "timeout after 30 s"))
    try store.markInFlight([transfer("T_FLY", lines: ["fly-1"], amount: 990, destination: "acct_f")], at: at(2))
    // Refused for good, with Stripe's Request-Id.
    try store.markInFlight([transfer("T_BAD", lines: ["bad-1"], amount: 4400, destination: "acct_b")], at: at(4))
    try store.recordOutcome(
        instruction: "T_BAD", .failed(code: "account_invalid", message: "the destination account is closed"),
        requestID: "req_bad", call: call("T_BAD", attempt: 1, at: 5, "failed", http: 400, request: "req_bad"))
    // Released as never sent: not failed, it goes again.
    try store.markInFlight([transfer("T_NS", lines: ["ns-1"], amount: 300)], at: at(6))
    try store.recordOutcome(instruction: "T_NS", .failed(code: LedgerOutcome.notSentCode, message: "never left"))
    // Failed, then settled under a second attempt: settled.
    try store.markInFlight([transfer("T_AGAIN", lines: ["again-1"], amount: 5000)], at: at(7))
    try store.recordOutcome(
        instruction: "T_AGAIN", .failed(code: "rate_limit", message: "429 too often"),
        call: call("T_AGAIN", attempt: 1, at: 8, "failed", http: 429, request: "req_a1"))
    try store.markInFlight([transfer("T_AGAIN", lines: ["again-1"], amount: 5000, attempt: 2)], at: at(9))
    try store.recordOutcome(
        instruction: "T_AGAIN", .settled(stripeID: "tr_again"), requestID: "req_a2",
        call: call("T_AGAIN", attempt: 2, at: 10, "settled", http: 200, request: "req_a2"))
    // A payout that came back: its line is returned, listed once as failed.
    let payout = LedgerDispatch(
        id: "P_BACK", kind: "payout", group: "payouts", payee: "rcp_back", charge: "", currency: "eur",
        amountMinor: 2100, method: "POST", path: "/v2/money_management/outbound_payments", params: "{}",
        stripeContext: nil, attempt: 1, idempotencyKey: "settle-P_BACK-a1",
        lines: [LedgerLineClaim(lineID: "back-1", kind: "payout", amountMinor: 2100, content: "c-back-1")])
    try store.markInFlight([payout], at: at(11))
    try store.recordOutcome(instruction: "P_BACK", .settled(stripeID: "obp_back"))
    try store.hold([
        held(
            "back-1", .following, amount: 2100, currency: "eur", code: "payout_processing", reason: "posting",
            instruction: "P_BACK", run: "run_1", at: 12)
    ])
    try store.recordPayoutStatus(instruction: "P_BACK", status: "returned", reason: "account_closed")
    // Waiting lines; one cancelled; a returned row whose line was sent again and settled.
    try store.hold([
        held(
            "wait-2", .waiting, amount: 1800, code: "scheduled", reason: "scheduled for 2025-12-05", run: "run_1",
            at: 14),
        held(
            "wait-1", .waiting, amount: 2500, code: "charge_pending", reason: "the charge is pending", run: "run_1",
            at: 13),
        held("gone-1", .waiting, amount: 100, code: "scheduled", reason: "later", run: "run_1", at: 15),
        held("again-1", .returned, amount: 5000, code: "payout_failed", reason: "stale", run: "run_1", at: 16),
    ])
    #expect(try store.endHolding(["gone-1"], to: .cancelled, run: "cancel_1") == 1)
    return store
}

@Suite("Status reads")
struct StatusReadTests {
    @Test func listsEachLineOnceByItsLatestState() throws {
        let folder = try TemporaryFolder()
        let store = try filledLedger(folder.ledgerPath)
        defer { store.close() }
        let lines = try store.statusLines()

        #expect(lines.unknown.map(\.lineID) == ["fly-1", "unk-1"])
        #expect(
            lines.unknown[0]
                == LedgerStatusLine(
                    lineID: "fly-1", state: .inFlight, payee: "acct_f", amountMinor: 990, currency: "usd",
                    reasonCode: nil,
                    reason: "may have reached Stripe, no answer recorded (the next run asks Stripe and resolves it)",
                    since: at(2),
                    instructionID: "T_FLY"))
        #expect(
            lines.unknown[1]
                == LedgerStatusLine(
                    lineID: "unk-1", state: .unknown, payee: "acct_u", amountMinor: 1250, currency: "usd",
                    reasonCode: nil, reason: "timeout after 30 s", since: at(3), instructionID: "T_UNK"))

        // Not ns-1 (never sent), not again-1 (settled at its second attempt).
        #expect(lines.failed.map(\.lineID) == ["bad-1", "back-1"])
        #expect(
            lines.failed[0]
                == LedgerStatusLine(
                    lineID: "bad-1", state: .failed, payee: "acct_b", amountMinor: 4400, currency: "usd",
                    reasonCode: "account_invalid", reason: "the destination account is closed", since: at(5),
                    instructionID: "T_BAD"))
        #expect(
            lines.failed[1]
                == LedgerStatusLine(
                    lineID: "back-1", state: .returned, payee: "acct_back-1", amountMinor: 2100, currency: "eur",
                    reasonCode: "account_closed",
                    reason: "the payout obp_back was returned at Stripe after it was accepted (account_closed)",
                    since: at(12),
                    sinceRun: "run_1", instructionID: "P_BACK", stripeID: "obp_back"))

        // Oldest first; not the cancelled one.
        #expect(lines.waiting.map(\.lineID) == ["wait-1", "wait-2"])
        #expect(
            lines.waiting[0]
                == LedgerStatusLine(
                    lineID: "wait-1", state: .waiting, payee: "acct_wait-1", amountMinor: 2500, currency: "usd",
                    reasonCode: "charge_pending", reason: "the charge is pending", since: at(13), sinceRun: "run_1"))
    }

    @Test func aLineHistoryHasEveryAttemptWithItsRequestIDs() throws {
        let folder = try TemporaryFolder()
        let store = try filledLedger(folder.ledgerPath)
        defer { store.close() }
        let history = try #require(try store.lineHistory("again-1"))
        #expect(history.status == "settled")
        #expect(history.line?.stripeID == "tr_again")
        #expect(history.instruction?.attempt == 2)
        #expect(history.instruction?.requestID == "req_a2")
        #expect(history.instruction?.firstSentAt == at(9))
        #expect(history.calls.map(\.attempt) == [1, 2])
        #expect(history.calls.map(\.requestID) == ["req_a1", "req_a2"])
        #expect(history.calls.map(\.httpStatus) == [429, 200])
        #expect(history.calls.map(\.idempotencyKey) == ["settle-T_AGAIN-a1", "settle-T_AGAIN-a2"])
        #expect(history.calls[1].stripeDate == "Sat, 29 Nov 2025 07:02:00 GMT")
        #expect(history.held?.state == .returned)
        #expect(history.runs.map(\.id) == ["run_1"])
    }

    @Test func statusOfEachKindOfLine() throws {
        let folder = try TemporaryFolder()
        let store = try filledLedger(folder.ledgerPath)
        defer { store.close() }
        let expected = [
            "ok-1": "settled", "unk-1": "unknown", "fly-1": "in_flight", "bad-1": "failed", "ns-1": "not_sent",
            "back-1": "returned", "wait-1": "waiting", "gone-1": "cancelled",
        ]
        for (id, status) in expected {
            #expect(try store.lineHistory(id)?.status == status, "\(id)")
        }
        #expect(try store.lineHistory("nobody-1") == nil)
        let cancelled = try #require(try store.lineHistory("gone-1"))
        #expect(cancelled.held?.endedRun == "cancel_1")
        #expect(cancelled.heldEndedAt != nil)
        #expect(cancelled.line == nil)
        #expect(cancelled.calls.isEmpty)
    }

    @Test func runsOldestFirst() throws {
        let folder = try TemporaryFolder()
        let store = try filledLedger(folder.ledgerPath)
        defer { store.close() }
        let runs = try store.recordedRuns()
        #expect(runs.map(\.id) == ["run_1", "run_2"])
        #expect(runs[0].exitStatus == 75)
        #expect(runs[0].endedAt == at(50))
        #expect(runs[0].counts == #"{"settled":2,"unknown":2}"#)
        #expect(runs[1].endedAt == nil)
    }

    @Test func anEmptyLedgerListsNothing() throws {
        let folder = try TemporaryFolder()
        let store = try openTestLedger(path: folder.ledgerPath)
        defer { store.close() }
        #expect(try store.statusLines() == LedgerStatusLines(unknown: [], failed: [], waiting: []))
        #expect(try store.recordedRuns().isEmpty)
    }
}
