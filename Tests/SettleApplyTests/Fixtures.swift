import Foundation
import SettleApply
import SettleCore
import SettleLedger
import SettleTestSupport

func transferInstruction(
    _ id: String, amount: Int64 = 7000, destination: String = "acct_rest", charge: String = "ch_1",
    group: String = "ORDER100", lines: [String]? = nil, preflightCharge: Bool = false
) -> Instruction {
    var params: JSON = [
        "amount": .string(String(amount)), "currency": .string("usd"), "destination": .string(destination),
        "transfer_group": .string(group), "metadata[settle_instruction]": .string(id),
        "description": .string("Order 100 & co/é"),
    ]
    if !charge.isEmpty { params["source_transaction"] = .string(charge) }
    let lineIDs = lines ?? ["\(id)-L1"]
    return Instruction(
        id: id, kind: .transfer, path: "/v1/transfers", params: params,
        lines: lineIDs.map {
            .init(lineID: $0, kind: "transfer", amountMinor: amount / Int64(lineIDs.count), content: "c\($0)")
        },
        group: group, payee: destination, charge: charge, currency: "usd", amountMinor: amount,
        preflight: .init(charge: preflightCharge ? charge : nil))
}

func payoutInstruction(
    _ id: String, amount: Int64 = 2000, method: String = "pm_ap_1", recipient: String = "acct_drv",
    account: String? = nil
) -> Instruction {
    let params: JSON = [
        "from": ["financial_account": account.map { .string($0) } ?? .null, "currency": "usd"],
        "to": ["recipient": .string(recipient), "payout_method": .string(method), "currency": "usd"],
        "amount": ["value": .int(amount), "currency": "usd"],
        "delivery_options": ["speed": "instant"],
        "description": "driver payout",
        "metadata": ["settle_instruction": .string(id)],
    ]
    return Instruction(
        id: id, kind: .payout, path: "/v2/money_management/outbound_payments", params: params,
        lines: [.init(lineID: "\(id)-L1", kind: "payout", amountMinor: amount, content: "c\(id)")],
        group: "", payee: recipient, currency: "usd", amountMinor: amount,
        preflight: .init(payoutMethod: method, recipient: recipient))
}

/// Collects log lines from the engine (which may call from its thread).
final class LogCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String] = []
    func append(_ line: String) { lock.withLock { storage.append(line) } }
    var lines: [String] { lock.withLock { storage } }
}

func configuration(
    _ sandbox: Sandbox, logs: LogCollector? = nil, maxTries: Int = 5, rate: Double = 200, concurrency: Int = 8,
    financialAccount: String? = "fa_1", now: @escaping @Sendable () -> Date = { Date() }
) -> ApplyConfiguration {
    ApplyConfiguration(
        apiBase: sandbox.base, apiKey: APIKey(testKey), rate: rate, concurrency: concurrency,
        financialAccount: financialAccount, totalTimeout: .seconds(10), maxTries: maxTries,
        retryBase: .milliseconds(20),
        logger: { level, message in logs?.append("\(level): \(message)") }, now: now)
}

func runEngine(
    _ sandbox: Sandbox, _ plan: [Instruction], configuration config: ApplyConfiguration? = nil,
    payoutOrders: [String: [String: String]]? = nil
) throws -> ApplyReport {
    let ledger = try openTestLedger(path: sandbox.ledgerPath)
    defer { ledger.close() }
    let engine = try ApplyEngine(configuration: config ?? configuration(sandbox), ledger: ledger)
    if let payoutOrders {
        // As the plan folder reads them: only the rows asked for.
        engine.payoutOrders = { (wanted) throws(ApplyError) in
            var kept: [String: [String: String]] = [:]
            for (id, lines) in payoutOrders {
                let rows = lines.filter { wanted(id, $0.value) }
                if !rows.isEmpty { kept[id] = rows }
            }
            return kept
        }
    }
    return try engine.run(plan)
}
