import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder
import SettleTestSupport
import SettleWrite

/// A small plan through the real rules: each row is column → value of the standard header.
func makePlan(_ rows: [[String: String]]) -> SettlementPlan {
    let header = [
        "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination", "source_transaction",
        "charge_amount", "charge_currency", "charge_status", "payment_method_type",
    ]
    var options = RuleOptions(asOf: CivilDate.parse("2026-11-29")!)
    options.platformCountry = "US"
    let batch = LineChecker(options: options).checkRows(rows, header: header)
    return Planner(options: options, history: nil).plan(batch)
}

/// A transfer line of a succeeded card charge.
func transferRow(_ id: String, order: String, amount: String, destination: String = "acct_rest") -> [String: String] {
    [
        "line_id": id, "order_id": order, "amount": amount, "currency": "usd", "transfer_group": "ORDER\(order)",
        "destination": destination, "source_transaction": "ch_\(order)", "charge_amount": "100.00",
        "charge_currency": "usd", "charge_status": "succeeded", "payment_method_type": "card",
    ]
}

/// A fresh folder under the temporary directory, removed by the caller.
func temporaryFolder() -> String {
    let path = NSTemporaryDirectory() + "settle-plan-folder-\(UUID().uuidString)"
    try! FileManager.default.createDirectory(atPath: path + "/.settle", withIntermediateDirectories: true)
    return path
}

/// Writes the folder apply needs with the module's writers: instructions.jsonl,
/// results.csv, the line index, and the sealed manifest listing them.
func writePlanFolder(_ plan: SettlementPlan, to folder: String) throws {
    let instructions = try InstructionsFile.write(path: folder + "/instructions.jsonl", plan: plan)
    let results = try ResultsFile.write(path: folder + "/results.csv", plan: plan)
    let index = try LineIndex.write(path: folder + "/" + LineIndex.name, plan: plan)
    var counts: [LineStatus: Int] = [:]
    for line in plan.batch.lines { counts[line.status, default: 0] += 1 }
    try Manifest.write(
        testManifest(
            outputs: [
                ("instructions.jsonl", instructions.sha256, instructions.rows),
                ("results.csv", results.sha256, results.rows), (LineIndex.name, index.sha256, index.rows),
            ], counts: counts, instructions: plan.instructions.count,
            payouts: plan.instructions.filter { $0.kind == .payout }.count), folder: folder)
}

func testManifest(outputs: [(String, String, Int)], counts: [LineStatus: Int], instructions: Int, payouts: Int)
    -> JSON
{
    [
        "instructions": .int(Int64(instructions)), "financial_account": .null,
        "instruction_kinds": [
            "transfer": .int(Int64(instructions - payouts)), "reversal": 0, "payout": .int(Int64(payouts)),
        ],
        "tool": "settle", "plan_format": .int(Int64(InstructionsFile.format)), "run_id": "run_test", "mode": "plan",
        "as_of": "2026-11-29", "inputs": [],
        "outputs": .object(outputs.map { ($0.0, ["sha256": .string($0.1), "rows": .int(Int64($0.2))]) }),
        "counts": .object(LineStatus.allCases.map { ($0.name, .int(Int64(counts[$0] ?? 0))) }),
        "correction_columns": [],
    ]
}

/// Re-seals a folder whose files were edited, as someone covering their tracks would.
func reseal(_ folder: String) throws {
    let manifest = try JSON.parse(FileManager.default.contents(atPath: folder + "/manifest.json")!)
    var outputs = manifest["outputs"]!.objectValue!
    for slot in outputs.indices {
        let data = FileManager.default.contents(atPath: folder + "/" + outputs[slot].0)!
        outputs[slot].1["sha256"] = .string(PlanFolder.sha256(data))
    }
    var updated = manifest
    updated["outputs"] = .object(outputs)
    try Manifest.write(updated, folder: folder)
}

func openTestLedger(path: String) throws(LedgerError) -> LedgerStore {
    if !FileManager.default.fileExists(atPath: path) { try LedgerStore.create(path: path).close() }
    return try LedgerStore.open(path: path)
}

/// The spool stand-in: every record is one field naming where it sits.
struct FixedRecords: SpoolRecordSource {
    func prefetch(_ wanted: some Sequence<(file: Int, offset: UInt64, length: UInt32)>) throws(WriteFailure) {}

    func fields(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [[UInt8]] {
        [Array("record \(file):\(offset)".utf8)]
    }

    func bytes(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [UInt8] {
        Array("record \(file):\(offset)\n".utf8)
    }
}

extension SettleError {
    /// The error a throwing step gave, or nil.
    static func of(_ step: () throws(SettleError) -> Void) -> SettleError? {
        do {
            try step()
            return nil
        } catch {
            return error
        }
    }
}
