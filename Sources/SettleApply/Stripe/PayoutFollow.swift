public import Foundation
import SettleHTTP
public import SettleLedger

/// Payouts followed to their end: each run first asks Stripe for every payout the ledger
/// holds as `processing` (`GET /v2/money_management/outbound_payments/{id}`). `posted`:
/// its lines are done. `failed`, `returned`, `canceled`: the money came back; the ledger
/// releases the lines (failed, with the `status_details` code) and marks them returned, so
/// this run reports them in its errors.csv. Anything that is not Stripe's answer leaves them
/// as they are.
///
/// A posted payout can still be returned by the recipient's bank: for ``returnWindow``
/// after it was sent, each run also lists the outbound payments made since the oldest such
/// payout (`created_gte`, pages of 100) and treats one that came back like a processing one
/// that did (audit 18 F3: a return after posting was never learned).
public struct PayoutFollow {
    public let configuration: ApplyConfiguration
    /// How long a posted payout is watched for a return.
    public static let returnWindow: TimeInterval = 30 * 24 * 3600

    public init(configuration: ApplyConfiguration) { self.configuration = configuration }

    public struct Report: Sendable, Equatable {
        public var checked = 0
        public var posted = 0
        public var cameBack: [String] = []
        public var stillProcessing = 0
        public var unavailable = 0
    }

    public func run(ledger: LedgerStore, runID: String) throws(ApplyError) -> Report {
        let payouts: [(instruction: String, stripeID: String)]
        do {
            payouts = try ledger.processingPayouts()
        } catch {
            throw .ledger(error)
        }
        let posted: [(instruction: String, stripeID: String, sentAt: Date, stripeDate: String?)]
        do {
            posted = try ledger.postedPayouts(sentSince: configuration.now().addingTimeInterval(-Self.returnWindow))
        } catch {
            throw .ledger(error)
        }
        var report = Report()
        guard !payouts.isEmpty || !posted.isEmpty else { return report }
        let api = try StripeAPI(configuration: configuration)
        let client = try HTTPClient.forStripe(configuration)
        let scheduler = CallScheduler(configuration: configuration)
        var answers: [(instruction: String, status: String, reason: String?, alreadyPosted: Bool)] = []
        var refusedKey: String?
        for payout in payouts {
            let path = "/v2/money_management/outbound_payments/\(StripeAPI.percentEncode(payout.stripeID))"
            scheduler.enqueue(
                Call(request: api.request(method: "GET", path: path), label: "payout \(payout.stripeID) status") {
                    outcome, ending in
                    if case .response(let response)? = outcome, response.status == 401 || response.status == 403 {
                        refusedKey = "Stripe refused the API key (HTTP \(response.status))"
                        scheduler.stopped = true
                    }
                    guard let outcome, !ending.stopped, case .object(let body) = StripeAnswer(outcome),
                        let status = body["status"]?.stringValue
                    else {
                        report.unavailable += 1
                        return
                    }
                    let detail = body["status_details"]?[status]?["reason"]?.stringValue
                    answers.append((payout.instruction, status, detail, false))
                })
        }
        client.run(source: scheduler)
        scheduler.finishStopped()
        if let refusedKey { throw .keyRefused(refusedKey) }
        answers += try returnsAfterPosting(posted, report: &report)
        do throws(LedgerError) {
            for answer in answers {
                report.checked += 1
                try ledger.recordPayoutStatus(
                    instruction: answer.instruction, status: answer.status, reason: answer.reason)
                switch answer.status {
                case "posted" where !answer.alreadyPosted:
                    report.posted += 1
                    let lines = try ledger.lines(ofInstruction: answer.instruction)
                    try ledger.endHolding(lines, to: .released, run: runID, from: [.following])
                case "failed", "returned", "canceled": report.cameBack.append(answer.instruction)
                default: report.stillProcessing += 1
                }
            }
        } catch {
            throw .ledger(error)
        }
        return report
    }

    /// The posted payouts of ``returnWindow`` that Stripe now lists as came back (failed,
    /// returned, canceled), as answers; none when Stripe cannot list them now (the next run
    /// asks again).
    private func returnsAfterPosting(
        _ posted: [(instruction: String, stripeID: String, sentAt: Date, stripeDate: String?)], report: inout Report
    ) throws(ApplyError) -> [(instruction: String, status: String, reason: String?, alreadyPosted: Bool)] {
        // Made when Stripe said it answered (its clock is the one `created_gte` compares
        // with), else when this machine sent it, whichever is earlier.
        let made = posted.map { payout in
            min(payout.sentAt, payout.stripeDate.flatMap(StripeGet.httpDate) ?? payout.sentAt)
        }
        guard let oldest = made.min() else { return [] }
        let instructionOf = Dictionary(posted.map { ($0.stripeID, $0.instruction) }, uniquingKeysWith: { a, _ in a })
        var found: [(instruction: String, status: String, reason: String?, alreadyPosted: Bool)] = []
        var stripe = try StripeGet(configuration: configuration)
        do throws(ApplyError) {
            // A day early: Stripe's clock is not this machine's.
            try stripe.outboundPayments(since: oldest.addingTimeInterval(-24 * 3600)) { payment in
                guard let id = payment["id"]?.stringValue, let instruction = instructionOf[id],
                    let status = payment["status"]?.stringValue, ["failed", "returned", "canceled"].contains(status)
                else { return }
                found.append((instruction, status, payment["status_details"]?[status]?["reason"]?.stringValue, true))
            }
        } catch {
            if case .keyRefused = error { throw error }
            report.unavailable += posted.count
            return []
        }
        return found
    }
}
