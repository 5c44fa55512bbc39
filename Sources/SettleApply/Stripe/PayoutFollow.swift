import SettleHTTP
public import SettleLedger

/// Payouts followed to their end: each run first asks Stripe for every payout the ledger
/// holds as `processing` (`GET /v2/money_management/outbound_payments/{id}`). `posted`:
/// done. `failed`, `returned`, `canceled`: the money came back; the ledger releases the lines
/// (failed, with the `status_details` code) and marks them returned, so this run reports
/// them in its errors.csv. Anything that is not Stripe's answer leaves them as they are.
public struct PayoutFollow {
    public let configuration: ApplyConfiguration

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
        var report = Report()
        guard !payouts.isEmpty else { return report }
        let api = try StripeAPI(configuration: configuration)
        let client = try HTTPClient.forStripe(configuration)
        let scheduler = CallScheduler(configuration: configuration)
        var answers: [(instruction: String, status: String, reason: String?)] = []
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
                    answers.append((payout.instruction, status, detail))
                })
        }
        client.run(source: scheduler)
        scheduler.finishStopped()
        if let refusedKey { throw .keyRefused(refusedKey) }
        do throws(LedgerError) {
            for answer in answers {
                report.checked += 1
                try ledger.recordPayoutStatus(
                    instruction: answer.instruction, status: answer.status, reason: answer.reason)
                switch answer.status {
                case "posted":
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
}
