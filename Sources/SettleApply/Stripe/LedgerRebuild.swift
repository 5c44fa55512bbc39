import Foundation
import SettleCore
import SettleHTTP
public import SettleLedger

/// `settle ledger rebuild --since DATE`: lists what settle created at Stripe (transfers,
/// their reversals, outbound payments, each carrying `metadata[settle_instruction]`) and
/// records it in the ledger as settled, so a lost ledger is recovered without paying twice.
public struct LedgerRebuild {
    public let configuration: ApplyConfiguration

    public init(configuration: ApplyConfiguration) { self.configuration = configuration }

    /// What the rebuild found.
    public struct Report: Sendable, Equatable {
        public var transfers = 0
        public var reversals = 0
        public var payouts = 0
        public var added = 0
        /// The instructions Stripe holds a live object of (settled now in the ledger).
        public var made: Set<String> = []
        public var requests = 0
        /// Instructions settled at Stripe whose lines no plan folder gave: the ledger is
        /// refused for planning and applying until a rebuild gives them.
        public var withoutLines: [String] = []
        /// Payouts Stripe has not posted yet: the next runs follow them; their lines are held
        /// as followed from the plan folders (``PlanFolder/holdFollowing(_:ledger:records:unlessSettled:)``).
        public var processing: Set<String> = []
        /// Payouts Stripe posted: a return can still come (``PayoutFollow/returnWindow``), so
        /// the next runs watch them as they watch the posted payouts of an apply; their lines
        /// are held, released, from the plan folders, for the run that learns of a return to
        /// report them.
        public var posted: Set<String> = []
        /// Payout instructions whose every payout came back (failed, returned, canceled), with
        /// the status of the last: their lines, held from the plan folders, are reported failed
        /// by the next run, which no run may have done before the ledger was lost.
        public var cameBack: [String: String] = [:]
        /// The last payout (Stripe id) of each of those instructions, whose return is the one
        /// to report: a folder that reported an earlier payout's return of the same line did
        /// not report this one (audit 38 Q7).
        public var cameBackPayout: [String: String] = [:]
        /// Every payout (Stripe id) that came back, of any attempt: the folders that reported one
        /// made are the ones that counted it (``LedgerStore/recordPayoutReports(_:)``).
        public var cameBackObjects: Set<String> = []
        /// Stripe's reason for each of those returns (the payout's `status_details`), where it
        /// gives one: the code the next run reports the lines `failed` with.
        public var cameBackReason: [String: String] = [:]
    }

    /// - Parameters:
    ///   - since: Unix seconds; objects created before are not listed.
    ///   - linesOf: the lines of the instructions found, from the plan folders that made them
    ///     (Stripe's objects carry the instruction's id, not its lines), given what Stripe made
    ///     of each payout (minor units).
    ///   - runs: the runs of the plan folders given that were made since then
    ///     (``LedgerStore/knowsRun(_:)``: their folders may be applied again on this ledger).
    public func run(
        ledger: LedgerStore, since: Int64, runs: [String] = [],
        linesOf: (Set<String>, _ payoutAmounts: [String: Int64]) throws(ApplyError) -> (
            lines: [String: [LedgerLineClaim]], chargeKeys: [String: String]
        ) = { _, _ in ([:], [:]) }
    ) throws(ApplyError) -> Report {
        var stripe = try StripeGet(configuration: configuration)
        var report = Report()
        var objects: [LedgerStore.RestoredObject] = []
        /// Stripe's reason for each payout that came back, by its id.
        var reasons: [String: String] = [:]
        func get(_ path: String) throws(ApplyError) -> JSON {
            defer { report.requests = stripe.requests }
            return try stripe.object(path)
        }
        // Transfers, newest first, page by page; each one's reversals.
        var cursor: String?
        repeat {
            var query = [("created[gte]", String(since)), ("limit", "100")]
            if let cursor { query.append(("starting_after", cursor)) }
            let page = try get("/v1/transfers" + StripeAPI.query(query))
            let items = page["data"]?.arrayValue ?? []
            for transfer in items {
                guard let id = transfer["id"]?.stringValue else { continue }
                if let instruction = transfer["metadata"]?["settle_instruction"]?.stringValue {
                    report.transfers += 1
                    objects.append(
                        .init(
                            instructionID: instruction, kind: "transfer", stripeID: id,
                            group: transfer["transfer_group"]?.stringValue ?? "",
                            payee: transfer["destination"]?.stringValue ?? "",
                            charge: transfer["source_transaction"]?.stringValue ?? "",
                            currency: transfer["currency"]?.stringValue ?? "",
                            amountMinor: transfer["amount"]?.intValue ?? 0, path: "/v1/transfers",
                            idempotencyKey: IdempotencyKey.make(instruction: instruction, attempt: 1)))
                }
                if (transfer["amount_reversed"]?.intValue ?? 0) > 0 {
                    var reversalCursor: String?
                    let path = "/v1/transfers/\(StripeAPI.percentEncode(id))/reversals"
                    repeat {
                        var reversalQuery = [("limit", "100")]
                        if let reversalCursor { reversalQuery.append(("starting_after", reversalCursor)) }
                        let reversals = try get(path + StripeAPI.query(reversalQuery))
                        let list = reversals["data"]?.arrayValue ?? []
                        for reversal in list {
                            guard let reversalID = reversal["id"]?.stringValue,
                                let instruction = reversal["metadata"]?["settle_instruction"]?.stringValue
                            else { continue }
                            report.reversals += 1
                            objects.append(
                                .init(
                                    instructionID: instruction, kind: "reversal", stripeID: reversalID,
                                    group: transfer["transfer_group"]?.stringValue ?? "",
                                    payee: transfer["destination"]?.stringValue ?? "", charge: "",
                                    currency: reversal["currency"]?.stringValue ?? "",
                                    amountMinor: reversal["amount"]?.intValue ?? 0, path: path,
                                    idempotencyKey: IdempotencyKey.make(instruction: instruction, attempt: 1)))
                        }
                        reversalCursor =
                            reversals["has_more"] == .bool(true) ? list.last?["id"]?.stringValue : nil
                    } while reversalCursor != nil
                }
            }
            cursor = page["has_more"] == .bool(true) ? items.last?["id"]?.stringValue : nil
        } while cursor != nil
        // Outbound payments (v2): every recipient, from the date on.
        try stripe.outboundPayments(since: Date(timeIntervalSince1970: TimeInterval(since))) {
            (payment) throws(ApplyError) in
            guard let id = payment["id"]?.stringValue,
                let instruction = payment["metadata"]?["settle_instruction"]?.stringValue
            else { return }
            // A payout that failed or came back moved nothing: its lines stay free for a new
            // attempt, which must not reuse its key (``LedgerStore/restore``).
            let status = payment["status"]?.stringValue ?? ""
            if !LedgerStore.RestoredObject.cameBack.contains(status) { report.payouts += 1 }
            objects.append(
                .init(
                    instructionID: instruction, kind: "payout", stripeID: id, group: "",
                    payee: payment["to"]?["recipient"]?.stringValue ?? "", charge: "",
                    currency: payment["amount"]?["currency"]?.stringValue ?? "usd",
                    amountMinor: payment["amount"]?["value"]?.intValue ?? 0,
                    path: "/v2/money_management/outbound_payments",
                    idempotencyKey: IdempotencyKey.make(instruction: instruction, attempt: 1),
                    payoutStatus: status.isEmpty ? "processing" : status))
            objects[objects.count - 1].createdAt = payment["created"]?.stringValue.flatMap(
                ISO8601DateFormatter.withFractions)
            if let reason = payment["status_details"]?[status]?["reason"]?.stringValue {
                reasons[id] = reason
            }
            if status == "posted" {
                report.posted.insert(instruction)
            } else if !LedgerStore.RestoredObject.cameBack.contains(status) {
                report.processing.insert(instruction)
            }
        }
        report.requests = stripe.requests
        // Each payout of an instruction that came back took an attempt (its key): the oldest
        // is attempt 1 (outbound payments are listed newest first), and one Stripe holds is
        // the one after them.
        var cameBack: [String: Int] = [:]
        for index in objects.indices.reversed() where objects[index].hasComeBack {
            let count = (cameBack[objects[index].instructionID] ?? 0) + 1
            cameBack[objects[index].instructionID] = count
            objects[index].attempt = count
        }
        let live = Set(objects.filter { !$0.hasComeBack }.map(\.instructionID))
        report.cameBackObjects = Set(objects.filter { $0.hasComeBack && $0.kind == "payout" }.map(\.stripeID))
        for object in objects where object.hasComeBack && !live.contains(object.instructionID) {
            if report.cameBack[object.instructionID] == nil || object.attempt == cameBack[object.instructionID] {
                report.cameBack[object.instructionID] = object.payoutStatus
                report.cameBackPayout[object.instructionID] = object.stripeID
                report.cameBackReason[object.instructionID] = reasons[object.stripeID]
            }
        }
        for index in objects.indices where objects[index].kind == "payout" {
            if !objects[index].hasComeBack {
                objects[index].attempt = (cameBack[objects[index].instructionID] ?? 0) + 1
            }
            objects[index].idempotencyKey = IdempotencyKey.make(
                instruction: objects[index].instructionID, attempt: objects[index].attempt)
        }
        report.made = Set(objects.filter { !$0.hasComeBack }.map(\.instructionID))
        // The lines of the payouts that came back too: the rebuilt ledger holds them failed
        // under the payout that last paid them, as the ledger that followed it did, so that an
        // old folder applied again, or a run, does not take them for lines never paid (audit 50
        // N2: an old folder's re-apply paid them again, to the method Stripe had closed, with
        // nobody feeding them back).
        var payoutAmounts: [String: Int64] = [:]
        for object in objects where object.kind == "payout" { payoutAmounts[object.instructionID] = object.amountMinor }
        let (lines, chargeKeys) = try linesOf(report.made.union(report.cameBack.keys), payoutAmounts)
        // A transfer that names no charge is recorded under its plan's charge key (its payment
        // intent), as the apply that sent it recorded it.
        for index in objects.indices where objects[index].kind == "transfer" && objects[index].charge.isEmpty {
            objects[index].charge = chargeKeys[objects[index].instructionID] ?? ""
        }
        do {
            report.added = try ledger.restore(objects, lines: lines, runs: runs)
            report.withoutLines = try ledger.instructionsWithoutLines()
        } catch {
            throw .ledger(error)
        }
        return report
    }
}
