import Glibc
import SettleCore
import SettleTestSupport
import Testing

/// Invariants of the rules and the planner on random batches (see Generator/). A failing case
/// prints its seed; `SETTLE_PROPERTY_SEED=<seed> SETTLE_PROPERTY_CASES=1 swift test --filter
/// PlannerPropertyTests` replays it. `make fuzz` runs many more cases.
@Suite struct PlannerPropertyTests {
    static let defaultCases = 300
    static let defaultSeed: UInt64 = 0x5E77_1E00

    @Test func invariantsHoldOnRandomBatches() throws {
        let cases = PropertyBudget.cases(default: Self.defaultCases)
        let first = PropertyBudget.seed(default: Self.defaultSeed)
        var failures = 0
        for offset in 0..<cases {
            let seed = first &+ UInt64(offset)
            let problems = try Self.check(seed: seed)
            if !problems.isEmpty {
                failures += 1
                let shown = problems.prefix(8).joined(separator: "\n  ")
                Issue.record("seed \(seed) (replay: SETTLE_PROPERTY_SEED=\(seed) SETTLE_PROPERTY_CASES=1):\n  \(shown)")
                if failures >= 5 { break }
            }
        }
    }

    /// Every property on one seed's case; what is wrong, as text.
    static func check(seed: UInt64) throws -> [String] {
        var generator = BatchGenerator(seed: seed)
        let generated = generator.generate()
        let crlf = seed % 3 == 0
        let plan = try CaseRunner.plan(generated, rows: generated.rows, crlf: crlf)
        var problems = Invariants.check(generated, rows: generated.rows, plan: plan)
        // The same input twice: identical output.
        let again = try CaseRunner.plan(generated, rows: generated.rows, crlf: crlf)
        if Snapshot(plan) != Snapshot(again) { problems.append("the same input planned twice gave different outputs") }
        // Another line order (copies of one line_id keep their order: the first copy counts).
        let shuffled = Self.reorder(generated.rows, using: &generator.random)
        let other = try CaseRunner.plan(generated, rows: shuffled, crlf: crlf)
        problems += Invariants.check(generated, rows: shuffled, plan: other).map { "reordered: " + $0 }
        if Snapshot(plan).instructions != Snapshot(other).instructions {
            problems.append(
                "another line order gave other instructions: \(Snapshot(plan).instructions) vs \(Snapshot(other).instructions)"
            )
        }
        if Snapshot(plan).statuses != Snapshot(other).statuses {
            problems.append("another line order gave other statuses")
        }
        return problems
    }

    /// Prints a case and its outcome (`SETTLE_PROPERTY_DUMP=<seed>`), to study a failure.
    @Test func dumpOneCase() throws {
        guard let text = getenv("SETTLE_PROPERTY_DUMP").map({ String(cString: $0) }), let seed = UInt64(text) else {
            return
        }
        var generator = BatchGenerator(seed: seed)
        let generated = generator.generate()
        let plan = try CaseRunner.plan(generated, rows: generated.rows, crlf: false)
        print(CaseRunner.csv(generated, rows: generated.rows, crlf: false))
        print(generated.facts, generated.ledgerCharges, generated.ledgerTransfers, generated.ledgerLines)
        for (index, line) in plan.batch.lines.enumerated() {
            print(
                plan.batch.text(line.lineID), plan.batch.text(line.group), line.status.name, line.reason.code,
                plan.batch.reasonText(of: line), plan.instructionOfLine[index])
        }
    }

    /// A random order in which rows sharing a line_id keep their relative order.
    static func reorder(_ rows: [GeneratedRow], using random: inout SplitMix64) -> [GeneratedRow] {
        let shuffled = rows.indices.shuffled(using: &random)
        var queues: [String: [Int]] = [:]
        for index in rows.indices { queues[rows[index]["line_id"], default: []].append(index) }
        var taken: [String: Int] = [:]
        return shuffled.map { slot in
            let id = rows[slot]["line_id"]
            let next = taken[id, default: 0]
            taken[id] = next + 1
            return rows[queues[id]![next]]
        }
    }
}

/// What a plan decided, in a form that does not depend on the input's line order.
struct Snapshot: Equatable {
    /// Sorted "id kind amount attempt [line ids]".
    var instructions: [String]
    /// Sorted "line_id#copy status".
    var statuses: [String]
    /// In input order: status, code and the reason a person reads.
    var lines: [String]

    init(_ plan: SettlementPlan) {
        let batch = plan.batch
        instructions = plan.instructions.map { instruction in
            let ids = plan.lines(of: instruction).map { batch.text(batch.lines[Int($0)].lineID) }.sorted()
            return "\(instruction.id) \(instruction.kind.name) \(instruction.amount) a\(instruction.attempt) \(ids)"
        }.sorted()
        var copies: [String: Int] = [:]
        statuses = batch.lines.map { line in
            let id = batch.text(line.lineID)
            copies[id, default: 0] += 1
            return "\(id)#\(copies[id]!) \(line.status.name)"
        }.sorted()
        lines = batch.lines.indices.map { index in
            let line = batch.lines[index]
            return
                "\(line.status.name) \(line.reason.code) \(batch.reasonText(of: line)) \(plan.instructionOfLine[index])"
        }
    }
}
