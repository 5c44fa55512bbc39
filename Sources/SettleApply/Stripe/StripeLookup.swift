public import SettleCore
import SettleHTTP
import SettleLedger

/// Read-only look-ups at Stripe and the reading of their answers: objects by
/// `metadata[settle_instruction]`, payout methods, charges.
enum StripeLookup {
    /// What a page of a look-up list said about an instruction's object.
    enum Result: Equatable {
        /// The object; for a payout that failed, came back or was canceled since, that status
        /// and its `status_details` reason.
        case found(stripeID: String, cameBack: String? = nil, reason: String? = nil)
        /// Not on this page; the next one is at this cursor (v1 id, or a v2 path).
        case nextPage(String)
        /// Stripe's list proves it was never made.
        case absent
        /// No proof either way.
        case failed(String)
    }

    /// Where to list the objects an instruction could have made. Transfers are listed by
    /// destination only: Stripe gives a transfer the charge's `transfer_group` when the
    /// charge has one, so a filter on the group settle sent could miss the object.
    static func path(for dispatch: LedgerDispatch, after cursor: String?) -> String {
        if let cursor, cursor.hasPrefix("/") { return cursor }  // a v2 next_page_url
        switch dispatch.kind {
        case "transfer":
            var query = [("destination", dispatch.payee), ("limit", "100")]
            if let cursor { query.append(("starting_after", cursor)) }
            return "/v1/transfers" + StripeAPI.query(query)
        case "reversal":
            var query = [("limit", "100")]
            if let cursor { query.append(("starting_after", cursor)) }
            return dispatch.path + StripeAPI.query(query)
        default:
            let params = try? JSON.parse(dispatch.params)
            let recipient = params?["to"]?["recipient"]?.stringValue ?? dispatch.payee
            return "/v2/money_management/outbound_payments"
                + StripeAPI.query([("recipient", recipient), ("limit", "100")])
        }
    }

    /// Reads one page of a look-up. `earlier`: the objects the ledger knows as the
    /// instruction's earlier attempts' (a payout that came back and was paid again keeps its
    /// instruction id); any other object with the instruction id is this attempt's, whatever
    /// its status: a payout that failed or came back was made, and the run that follows it
    /// reports it, so it never proves the object absent (that would pay it again).
    static func read(
        _ outcome: HTTPOutcome?, _ ending: CallEnding, instruction: String, kind: String, api: StripeAPI,
        earlier: Set<String> = []
    ) -> Result {
        guard let outcome, !ending.stopped else { return .failed("the run stopped first") }
        switch StripeAnswer(outcome) {
        case .object(let list):
            guard case .array(let items)? = list["data"] else { return .failed("the answer is not a list") }
            if let match = items.first(where: {
                $0["metadata"]?["settle_instruction"]?.stringValue == instruction
                    && !earlier.contains($0["id"]?.stringValue ?? "")
            }),
                let id = match["id"]?.stringValue, !id.isEmpty
            {
                let status = match["status"]?.stringValue ?? ""
                guard kind == "payout", ["failed", "returned", "canceled"].contains(status) else {
                    return .found(stripeID: id)
                }
                return .found(
                    stripeID: id, cameBack: status, reason: match["status_details"]?[status]?["reason"]?.stringValue)
            }
            if kind == "payout" {
                if let next = list["next_page_url"]?.stringValue, !next.isEmpty {
                    guard let path = api.path(of: next) else { return .failed("next_page_url on another host") }
                    return .nextPage(path)
                }
            } else if list["has_more"] == .bool(true) {
                guard let last = items.last?["id"]?.stringValue else { return .failed("has_more without ids") }
                return .nextPage(last)
            }
            return .absent
        case .error(let error):
            // The transfer itself does not exist: no reversal of it can.
            if kind == "reversal", error.status == 404, error.code == "resource_missing" { return .absent }
            return .failed("HTTP \(error.status) \(error.code): \(error.message)")
        case .noAnswer(let text):
            return .failed(text)
        }
    }

    // MARK: - Facts

    static func payoutMethodPath(_ method: String) -> String {
        "/v2/money_management/payout_methods/\(StripeAPI.percentEncode(method))"
    }

    static func chargePath(_ charge: String) -> String {
        "/v1/charges/\(StripeAPI.percentEncode(charge))" + StripeAPI.query([("expand[]", "balance_transaction")])
    }

    static func payoutMethodFact(_ outcome: HTTPOutcome?, _ ending: CallEnding, recipient: String, method: String)
        -> PayoutMethodFact
    {
        var fact = PayoutMethodFact(recipient: recipient, method: method, verdict: .unavailable("not checked"))
        guard let outcome, !ending.stopped else {
            fact.verdict = .unavailable("the run stopped first")
            return fact
        }
        fact.requestID = requestID(outcome)
        fact.checkedAt = stripeDate(outcome)
        switch StripeAnswer(outcome) {
        case .object(let body):
            // The payout method asked for, as Stripe describes one (audit 59 F4: an answer
            // without its id was taken for it).
            guard body["id"]?.stringValue == method, body["type"]?.stringValue != nil,
                body["object"].map({ $0.stringValue?.hasSuffix("payout_method") == true }) ?? true
            else {
                fact.verdict = .unavailable("the answer is not the payout method \(method)")
                return fact
            }
            let problems = usabilityProblems(body)
            fact.verdict = problems.isEmpty ? .usable : .refused(problems.joined(separator: ", "))
        case .error(let error) where saysNoSuch(error) || error.code == "invalid_payout_method":
            fact.verdict = .refused("\(error.code): \(error.message)")
        case .error(let error):
            fact.verdict = .unavailable("HTTP \(error.status) \(error.code)")
        case .noAnswer(let text):
            fact.verdict = .unavailable(text)
        }
        return fact
    }

    /// Usable for an instant USD Apple Pay payout (docs/RULES.md, Line rules).
    static func usabilityProblems(_ body: JSON) -> [String] {
        var problems: [String] = []
        if body["type"]?.stringValue != "apple_pay" { problems.append("not apple_pay") }
        if case .array(let speeds)? = body["available_payout_speeds"], speeds.contains(.string("instant")) {
        } else {
            problems.append("no instant speed")
        }
        if body["usage_status"]?["payments"]?.stringValue != "eligible" {
            problems.append("not eligible for payments (\(body["usage_status"]?["payments"]?.stringValue ?? "none"))")
        }
        if body["archived"] == .bool(true) { problems.append("archived") }
        if let restricted = body["restricted"], restricted != .bool(false), restricted != .null {
            problems.append("restricted")
        }
        if case .array(let currencies)? = body["apple_pay"]?["supported_currencies"],
            currencies.contains(.string("usd"))
        {
        } else {
            problems.append("usd not supported")
        }
        return problems
    }

    static func chargeFact(_ outcome: HTTPOutcome?, _ ending: CallEnding, charge: String) -> ChargeFact {
        var fact = ChargeFact(charge: charge, verdict: .unavailable("not checked"))
        guard let outcome, !ending.stopped else {
            fact.verdict = .unavailable("the run stopped first")
            return fact
        }
        fact.requestID = requestID(outcome)
        fact.checkedAt = stripeDate(outcome)
        switch StripeAnswer(outcome) {
        case .object(let body):
            // The charge asked for (audit 59 F4: an answer without its id, or another object,
            // was taken for it).
            guard body["id"]?.stringValue == charge, body["object"].map({ $0 == .string("charge") }) ?? true,
                let status = body["status"]?.stringValue, ["succeeded", "pending", "failed"].contains(status),
                case .int(let amount)? = body["amount"]
            else {
                fact.verdict = .unavailable("the answer is not the charge \(charge)")
                return fact
            }
            let balance = body["balance_transaction"]
            // Stripe's amounts fit in the plan's (12 digits of minor units): a larger one is not
            // a charge Stripe made, and charges.csv could not carry it (audit 29 spec F1: the
            // plan wrote it, its apply sent the transfer, then could not read the file back).
            let amounts = [amount, balance?["fee"]?.intValue ?? 0, body["amount_refunded"]?.intValue ?? 0]
            guard amounts.allSatisfy({ (0...MinorUnits.maximum).contains($0) }) else {
                fact.verdict = .unavailable("the answer is not a charge: an amount is out of range")
                return fact
            }
            fact.status = status
            fact.amountMinor = amount
            fact.currency = balance?["currency"]?.stringValue ?? body["currency"]?.stringValue
            if case .int(let fee)? = balance?["fee"] { fact.feeMinor = fee }
            if case .int(let refunded)? = body["amount_refunded"] { fact.refundedMinor = refunded }
            fact.paymentMethodType = body["payment_method_details"]?["type"]?.stringValue
            fact.paymentIntent = body["payment_intent"]?.stringValue
            switch status {
            case "succeeded": fact.verdict = .usable
            case "pending": fact.verdict = .pending
            default: fact.verdict = .refused("charge \(charge) failed")
            }
        case .error(let error) where saysNoSuch(error):
            fact.verdict = .refused("\(error.code): \(error.message)")
        case .error(let error):
            fact.verdict = .unavailable("HTTP \(error.status) \(error.code)")
        case .noAnswer(let text):
            fact.verdict = .unavailable(text)
        }
        return fact
    }

    /// Stripe's word that the object looked up does not exist: 404 `resource_missing` (v1) or
    /// `not_found` (v2). Any other refusal of a look-up (a 400 of any code, a 402) says nothing
    /// of the object, so it decides nothing: the fact is unavailable, the run says to run again
    /// later (audit 59 F1: a 400 on a charge look-up rejected the rest of an order whose first
    /// transfer had moved `charge_failed`, and recorded the charge as failed for good; F2: a 400
    /// on a payout method's rejected its orders `payout_method_unusable`).
    private static func saysNoSuch(_ error: StripeError) -> Bool {
        error.status == 404 && (error.code == "resource_missing" || error.code == "not_found")
    }

    private static func requestID(_ outcome: HTTPOutcome) -> String? {
        if case .response(let response) = outcome { return response.header("request-id") }
        return nil
    }

    private static func stripeDate(_ outcome: HTTPOutcome) -> String? {
        if case .response(let response) = outcome { return response.header("date") }
        return nil
    }
}

/// What a look-up of one fact said.
public enum FactVerdict: Sendable, Equatable {
    case usable
    /// A charge that has not succeeded yet.
    case pending
    case refused(String)
    /// No answer from Stripe: a passing failure.
    case unavailable(String)
}

/// A payout method as Stripe described it.
public struct PayoutMethodFact: Sendable, Equatable {
    public var recipient: String
    public var method: String
    public var verdict: FactVerdict
    public var requestID: String?
    /// Stripe's `Date` of the answer.
    public var checkedAt: String?
}

/// A charge as Stripe described it.
public struct ChargeFact: Sendable, Equatable {
    public var charge: String
    public var verdict: FactVerdict
    public var status: String?
    public var amountMinor: Int64?
    public var refundedMinor: Int64?
    /// The balance transaction's currency (the one transfers must use).
    public var currency: String?
    public var feeMinor: Int64?
    public var paymentMethodType: String?
    /// The charge's `payment_intent`, when Stripe names one.
    public var paymentIntent: String?
    public var requestID: String?
    public var checkedAt: String?

    public init(charge: String, verdict: FactVerdict) {
        self.charge = charge
        self.verdict = verdict
    }
}

/// The answers of a batch of look-ups.
public struct LookedUpFacts: Sendable, Equatable {
    public var payoutMethods: [PayoutMethodFact] = []
    public var charges: [ChargeFact] = []

    public init() {}

    /// What could not be looked up, for messages.
    public var unavailable: [String] {
        payoutMethods.compactMap { fact in
            if case .unavailable(let why) = fact.verdict { return "payout method \(fact.method): \(why)" }
            return nil
        }
            + charges.compactMap { fact in
                if case .unavailable(let why) = fact.verdict { return "charge \(fact.charge): \(why)" }
                return nil
            }
    }

    /// What Stripe refused or still holds back (pending charges), for messages.
    public var refused: [String] {
        payoutMethods.compactMap { fact in
            if case .refused(let why) = fact.verdict { return "payout method \(fact.method): \(why)" }
            return nil
        }
            + charges.compactMap { fact in
                switch fact.verdict {
                case .refused(let why): return "charge \(fact.charge): \(why)"
                case .pending: return "charge \(fact.charge) is still pending"
                default: return nil
                }
            }
    }
}

extension LookedUpFacts {
    /// The facts as a manifest records them: the plan's `facts` (`run`, `plan --online`;
    /// `online` true) and what the apply of an offline plan looked up (`apply.facts`, no
    /// `online`). `ledger rebuild` reads the charges back.
    public func manifestJSON(online: Bool) -> JSON {
        func verdict(_ value: FactVerdict) -> (String, String) {
            switch value {
            case .usable: return ("usable", "")
            case .pending: return ("pending", "")
            case .refused(let why): return ("refused", why)
            case .unavailable(let why): return ("unavailable", why)
            }
        }
        func text(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }
        return .object(
            (online ? [("online", JSON.bool(true))] : []) + [
                (
                    "payout_methods",
                    .array(
                        payoutMethods.map { method in
                            let (name, why) = verdict(method.verdict)
                            return .object([
                                ("recipient", .string(method.recipient)), ("payout_method", .string(method.method)),
                                ("verdict", .string(name)), ("reason", .string(why)),
                                ("request_id", text(method.requestID)), ("checked_at", text(method.checkedAt)),
                            ])
                        })
                ),
                (
                    "charges",
                    .array(
                        charges.map { charge in
                            let (name, why) = verdict(charge.verdict)
                            return .object([
                                ("charge", .string(charge.charge)), ("status", text(charge.status)),
                                ("verdict", .string(name)), ("reason", .string(why)),
                                ("amount_minor", charge.amountMinor.map(JSON.int) ?? .null),
                                ("amount_refunded_minor", charge.refundedMinor.map(JSON.int) ?? .null),
                                ("currency", text(charge.currency)),
                                ("fee_minor", charge.feeMinor.map(JSON.int) ?? .null),
                                ("payment_method_type", text(charge.paymentMethodType)),
                                ("payment_intent", text(charge.paymentIntent)),
                                ("request_id", text(charge.requestID)), ("checked_at", text(charge.checkedAt)),
                            ])
                        })
                ),
            ])
    }
}
