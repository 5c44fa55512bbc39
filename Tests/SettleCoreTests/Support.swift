import SettleCore
import SettleTestSupport

/// Builds batches from rows of column → value, through the same LineChecker the readers feed.
final class TestExport {
    let header: [String]
    private var rows: [[String: String]] = []

    init(_ header: [String] = TestExport.standardHeader) { self.header = header }

    static let standardHeader = [
        "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination",
        "source_transaction", "payment_intent", "charge_amount", "charge_currency", "charge_status", "charge_fee",
        "payment_method_type", "destination_country", "recipient", "payout_method", "transfer", "transfer_on",
        "description", "metadata.shift",
    ]

    @discardableResult
    func add(_ row: [String: String]) -> TestExport {
        rows.append(row)
        return self
    }

    /// A transfer line of a succeeded card charge (the seed's example shape).
    @discardableResult
    func transfer(
        _ id: String, order: String, amount: String, destination: String = "acct_rest",
        charge: String? = nil, chargeAmount: String = "100.00", currency: String = "usd",
        extra: [String: String] = [:]
    ) -> TestExport {
        var row: [String: String] = [
            "line_id": id, "order_id": order, "amount": amount, "currency": currency,
            "transfer_group": "ORDER\(order)", "destination": destination,
            "source_transaction": charge ?? "ch_\(order)", "charge_amount": chargeAmount,
            "charge_currency": currency, "charge_status": "succeeded", "payment_method_type": "card",
        ]
        row.merge(extra) { $1 }
        return add(row)
    }

    @discardableResult
    func payout(
        _ id: String, order: String, amount: String, recipient: String = "acct_drv",
        method: String = "pm_ap_1", extra: [String: String] = [:]
    ) -> TestExport {
        var row: [String: String] = [
            "line_id": id, "order_id": order, "kind": "payout", "amount": amount, "currency": "usd",
            "transfer_group": "ORDER\(order)", "recipient": recipient, "payout_method": method,
        ]
        row.merge(extra) { $1 }
        return add(row)
    }

    /// Checks the lines; returns the checker's batch.
    func batch(options: RuleOptions = TestExport.options()) -> Batch {
        LineChecker(options: options).checkRows(rows, header: header)
    }

    func plan(options: RuleOptions = TestExport.options(), history: (any SettlementHistory)? = nil) -> SettlementPlan {
        Planner(options: options, history: history).plan(batch(options: options))
    }

    static func options(
        asOf: String = "2026-11-29", country: String = "US",
        payouts: PayoutGrouping = .perRecipient
    ) -> RuleOptions {
        var options = RuleOptions(asOf: CivilDate.parse(asOf)!)
        options.platformCountry = country
        options.payouts = payouts
        return options
    }
}

extension SettlementPlan {
    /// status and reason code of a line, by id (the first line with that id).
    func outcome(_ id: String) -> (LineStatus, String) {
        let line = batch.lines.first { batch.text($0.lineID) == id }!
        return (line.status, line.reason.code)
    }

    /// The reason a person reads for a line's status, by id.
    func reason(_ id: String) -> String {
        batch.reasonText(of: batch.lines.first { batch.text($0.lineID) == id }!)
    }

    func outcomes(_ id: String) -> [(LineStatus, String)] {
        batch.lines.filter { batch.text($0.lineID) == id }.map { ($0.status, $0.reason.code) }
    }

    /// The instruction settling a line.
    func instruction(of id: String) -> PlanRow? {
        guard let index = batch.lines.firstIndex(where: { batch.text($0.lineID) == id }),
            instructionOfLine[index] >= 0
        else { return nil }
        return instructions[Int(instructionOfLine[index])]
    }

    func lineIDs(of instruction: PlanRow) -> [String] {
        lines(of: instruction).map { batch.text(batch.lines[Int($0)].lineID) }
    }
}

/// A ledger stand-in for the pure rules (the real SQLite ledger is tested in SettleLedgerTests).
final class RecordedHistory: SettlementHistory {
    var lines: [String: HistoricLine] = [:]
    var transferredByCharge: [String: Int64] = [:]
    var transfers: [String: RecordedTransfer] = [:]
    /// Transfers sent whose outcome is not known, by "group|destination|currency".
    var unsettled: [String: String] = [:]
    var attemptCounts: [String: Int] = [:]

    func lines(_ ids: [UnsafeRawBufferPointer], found: (Int, HistoricLine) -> Void) {
        for (position, id) in ids.enumerated() {
            if let line = lines[String(decoding: id, as: UTF8.self)] { found(position, line) }
        }
    }
    func transferred(_ charges: [(charge: UnsafeRawBufferPointer, currency: Currency)], found: (Int, Int64) -> Void) {
        for (position, key) in charges.enumerated() {
            if let amount = transferredByCharge[String(decoding: key.charge, as: UTF8.self)] { found(position, amount) }
        }
    }
    func recordedTransfer(group: String, destination: String, currency: String, charge: String?) -> RecordedTransfer? {
        transfers["\(group)|\(destination)|\(currency)"].flatMap { charge == nil || $0.charge == charge ? $0 : nil }
    }
    func unsettledTransfer(group: String, destination: String, currency: String, charge: String?) -> String? {
        charge == nil ? unsettled["\(group)|\(destination)|\(currency)"] : nil
    }
    func recordedTransfers(_ stripeIDs: [UnsafeRawBufferPointer], found: (Int, RecordedTransfer) -> Void) {
        for (position, id) in stripeIDs.enumerated() {
            let text = String(decoding: id, as: UTF8.self)
            if let transfer = transfers.values.first(where: { $0.stripeID == text }) { found(position, transfer) }
        }
    }
    func attempts(_ instructions: ArraySlice<PlanRow>, found: (Int, Int) -> Void) {
        for (position, instruction) in instructions.enumerated() {
            if let count = attemptCounts[instruction.id] { found(position, count) }
        }
    }
}
