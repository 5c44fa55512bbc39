public import SettleCore
import SettleHTTP

/// Stripe's facts before the plan (`run`, `plan --online`): read-only look-ups of every
/// payout method and charge the batch depends on, rate-limited and retried like every other
/// call, turned into the ``StripeFacts`` the planner takes. Needs no ledger.
public struct FactsLookup {
    public let configuration: ApplyConfiguration

    public init(configuration: ApplyConfiguration) { self.configuration = configuration }

    /// - Throws: ``ApplyError/keyRefused(_:)`` when Stripe refuses the key,
    ///   ``ApplyError/factsUnavailable(_:)`` when an answer was not Stripe's (5xx, time-out,
    ///   garbage): nothing is planned from a guess.
    public func facts(for request: FactsRequest) throws(ApplyError) -> (StripeFacts, LookedUpFacts) {
        guard !request.isEmpty else { return (.empty, LookedUpFacts()) }
        let looked = try FactsScheduler(configuration: configuration).run(
            payoutMethods: request.payoutMethods.map { ($0.recipient, $0.method) }, charges: request.charges)
        let unavailable = looked.unavailable
        if !unavailable.isEmpty { throw .factsUnavailable(unavailable) }
        var facts = StripeFacts()
        for method in looked.payoutMethods {
            let verdict: StripeFacts.PayoutMethodVerdict
            switch method.verdict {
            case .usable, .pending: verdict = .usable
            case .refused(let why), .unavailable(let why): verdict = .refused(reason: why)
            }
            facts.payoutMethods[.init(recipient: method.recipient, method: method.method)] = .init(
                verdict: verdict, requestID: method.requestID ?? "", checkedAt: method.checkedAt ?? "")
        }
        for charge in looked.charges {
            // A charge Stripe does not know funds nothing: its lines are rejected charge_failed.
            let status: ChargeStatus =
                switch charge.status {
                case "succeeded": .succeeded
                case "pending": .pending
                default: .failed
                }
            let currency = charge.currency.flatMap { Currency($0) } ?? Currency.usd
            let fact = StripeFacts.Charge(
                status: status, amount: (charge.amountMinor ?? 0) - (charge.refundedMinor ?? 0), currency: currency,
                fee: charge.feeMinor, paymentMethodType: charge.paymentMethodType, requestID: charge.requestID ?? "",
                checkedAt: charge.checkedAt ?? "", refusal: charge.status == nil ? Self.refusal(charge.verdict) : nil)
            facts.charges[charge.charge] = fact
            if status == .failed, let intent = charge.paymentIntent { facts.failedIntents[intent] = fact }
            if let intent = charge.paymentIntent, !intent.isEmpty { facts.intentOfCharge[charge.charge] = intent }
        }
        return (facts, looked)
    }
}

extension FactsLookup {
    /// Stripe's answers about these charges alone, as looked up: what a run taking over an
    /// apply that never ended, or a ledger rebuild, asks again (no plan is made from them).
    ///
    /// - Throws: ``ApplyError/factsUnavailable(_:)`` when an answer was not Stripe's.
    public func charges(_ ids: [String]) throws(ApplyError) -> [ChargeFact] {
        guard !ids.isEmpty else { return [] }
        let looked = try FactsScheduler(configuration: configuration).run(payoutMethods: [], charges: ids)
        let unavailable = looked.unavailable
        if !unavailable.isEmpty { throw .factsUnavailable(unavailable) }
        return looked.charges
    }

    /// Why a charge look-up gave no charge (a 404 or another refusal).
    static func refusal(_ verdict: FactVerdict) -> String? {
        if case .refused(let why) = verdict { return why }
        return nil
    }
}

/// The look-ups on their own client and scheduler.
final class FactsScheduler {
    let configuration: ApplyConfiguration
    /// Look-ups in a row with no answer at all after which Stripe is taken as out of reach.
    static let unreachableAfter = 5
    /// The calls the look-ups made (every try), for the run's report.
    private(set) var counters = CallCounters()
    init(configuration: ApplyConfiguration) { self.configuration = configuration }

    func run(payoutMethods: [(recipient: String, method: String)], charges: [String]) throws(ApplyError)
        -> LookedUpFacts
    {
        let api = try StripeAPI(configuration: configuration)
        let client = try HTTPClient.forStripe(configuration)
        let scheduler = CallScheduler(configuration: configuration)
        var result = LookedUpFacts()
        var refusedKey: String?
        func noteKey(_ outcome: HTTPOutcome?) {
            if case .response(let response)? = outcome, response.status == 401 || response.status == 403 {
                refusedKey = "Stripe refused the API key (HTTP \(response.status))"
                scheduler.stopped = true
            }
        }
        // Stripe out of reach (no answer at all, after each look-up's own tries): after a few
        // look-ups in a row, the rest are not tried and the run stops, 75 (audit 54 F8: every
        // look-up was tried 5 times, for hours at full size, the ledger locked meanwhile).
        var unanswered = 0
        var unreachable: String?
        func noteReach(_ outcome: HTTPOutcome?, _ ending: CallEnding) {
            guard !ending.stopped else { return }
            if case .response? = outcome {
                unanswered = 0
                return
            }
            unanswered += 1
            guard unanswered >= FactsScheduler.unreachableAfter, unreachable == nil else { return }
            var why = "no answer"
            if case .transportError(_, let message)? = outcome { why = message }
            unreachable =
                "Stripe could not be reached: \(unanswered) look-ups in a row got no answer (\(why)); "
                + "nothing was sent, run again later"
            scheduler.stopped = true
        }
        var done = 0
        let total = payoutMethods.count + charges.count
        let progress: () -> Void = { [configuration] in
            done += 1
            configuration.progress(ApplyProgress(phase: "look-up", done: done, total: total))
        }
        for (recipient, method) in payoutMethods {
            scheduler.enqueue(
                Call(
                    request: api.request(
                        method: "GET", path: StripeLookup.payoutMethodPath(method), context: recipient),
                    label: "payout method \(method)"
                ) { outcome, ending in
                    noteKey(outcome)
                    noteReach(outcome, ending)
                    result.payoutMethods.append(
                        StripeLookup.payoutMethodFact(outcome, ending, recipient: recipient, method: method))
                    progress()
                })
        }
        for charge in charges {
            scheduler.enqueue(
                Call(
                    request: api.request(method: "GET", path: StripeLookup.chargePath(charge)),
                    label: "charge \(charge)"
                ) { outcome, ending in
                    noteKey(outcome)
                    noteReach(outcome, ending)
                    result.charges.append(StripeLookup.chargeFact(outcome, ending, charge: charge))
                    progress()
                })
        }
        client.run(source: scheduler)
        scheduler.finishStopped()
        counters = scheduler.counters
        if let refusedKey { throw .keyRefused(refusedKey) }
        if let unreachable { throw .transport(unreachable) }
        result.payoutMethods.sort { ($0.recipient, $0.method) < ($1.recipient, $1.method) }
        result.charges.sort { $0.charge < $1.charge }
        return result
    }
}
