public import Foundation
import SettleCore
import SettleHTTP

/// Before a new ledger's first request: did settle already pay from this Stripe account
/// (or reverse on it), with another ledger?
///
/// A ledger made afresh where a lost one was (its mark lost with it) knows nothing: every
/// line looks unpaid, and each instruction goes out again. Its key replays the object it
/// made only if it is the very same request, inside Stripe's 24 h window, and not a failed
/// attempt (v2 executes a failed attempt again): a line formed into another instruction (a
/// payout aggregated with a new line, a transfer summed with one, a payout that went split)
/// has another key, and is paid again at once (audit 32 N8); after the window every line is
/// (audit 16). Stripe's newest transfers and outbound payments say whether settle made
/// objects there before (`metadata[settle_instruction]`): any one, however recent, means
/// this account was settled with a ledger this one is not. Two requests, only while the
/// ledger has sent nothing; when a page of the newest 100 is full and none of it is
/// settle's, one more for the newest 100 made more than ``window`` before Stripe's time.
public struct EarlierLedgerProbe {
    public let configuration: ApplyConfiguration
    /// How far back the second page looks when the newest page is full of other objects.
    public static let window: TimeInterval = 23 * 3600

    public init(configuration: ApplyConfiguration) { self.configuration = configuration }

    /// An object settle made: its id and when Stripe made it.
    public struct Found: Sendable, Equatable {
        public var stripeID: String
        public var created: Date
    }

    /// The oldest such object among Stripe's newest 100 transfers and 100 outbound payments
    /// (and, past a full page none of which is settle's, the newest 100 made before the
    /// window); nil when there is none.
    /// Each page is retried until Stripe answers; throws when it cannot say.
    public func earlierObject() throws(ApplyError) -> Found? {
        var stripe = try StripeGet(configuration: configuration)
        var found: Found?
        /// Notes the objects of a list that settle made.
        func consider(_ objects: [JSON]) {
            for object in objects where object["metadata"]?["settle_instruction"] != nil {
                let created: Date? =
                    switch object["created"] {
                    case .int(let seconds)?: Date(timeIntervalSince1970: TimeInterval(seconds))
                    case .string(let text)?: ISO8601DateFormatter.withFractions(text)
                    default: nil
                    }
                guard let id = object["id"]?.stringValue, let created else { continue }
                if found == nil || created < found!.created { found = Found(stripeID: id, created: created) }
            }
        }
        /// One page (retried until Stripe answers): Stripe's time, and whether the page was
        /// full (there are older ones). A transfer's reversals count too: settle reverses
        /// transfers other tools made (a reversal line naming `tr_…`), and such a transfer
        /// carries no settle metadata of its own (audit 33 O1: a new ledger reversed it again).
        /// Stripe lists a transfer with its first reversals; one with more is asked for them.
        func page(_ path: String) throws(ApplyError) -> (now: Date, full: Bool) {
            let (body, date) = try stripe.answer(path)
            guard let now = date else { throw .factsUnavailable(["GET \(path.prefix(50)): no Date header"]) }
            let items = body["data"]?.arrayValue ?? []
            consider(items)
            for object in items {
                guard let reversals = object["reversals"] else { continue }
                consider(reversals["data"]?.arrayValue ?? [])
                if found == nil, reversals["has_more"] == .bool(true), let id = object["id"]?.stringValue {
                    let path =
                        "/v1/transfers/\(StripeAPI.percentEncode(id))/reversals" + StripeAPI.query([("limit", "100")])
                    consider(try stripe.answer(path).0["data"]?.arrayValue ?? [])
                }
            }
            return (now, items.count >= 100)
        }
        // The newest 100 of each; when none is settle's and there are more (the platform's own
        // transfers fill the page), the newest 100 made before the window, by Stripe's time.
        let transfers = try page("/v1/transfers" + StripeAPI.query([("limit", "100")]))
        if found == nil, transfers.full {
            let before = Int64(transfers.now.addingTimeInterval(-Self.window).timeIntervalSince1970)
            _ = try page("/v1/transfers" + StripeAPI.query([("created[lte]", String(before)), ("limit", "100")]))
        }
        let payouts = try page("/v2/money_management/outbound_payments" + StripeAPI.query([("limit", "100")]))
        if found == nil, payouts.full {
            let before = ISO8601DateFormatter().string(from: payouts.now.addingTimeInterval(-Self.window))
            _ = try page(
                "/v2/money_management/outbound_payments" + StripeAPI.query([("created_lte", before), ("limit", "100")]))
        }
        return found
    }
}

extension ISO8601DateFormatter {
    /// RFC 3339 with or without fractional seconds (v2 objects' `created`).
    static func withFractions(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
