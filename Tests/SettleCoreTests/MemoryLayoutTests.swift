import SettleCore
import SettleTestSupport
import Testing

/// The compact records a large plan holds millions of, and the bounds their narrow fields keep.
@Suite struct MemoryLayoutTests {
    @Test func planRowsAndChargeTotalsAreCompact() {
        #expect(MemoryLayout<PlanRow>.stride == 56)
        #expect(MemoryLayout<ChargeTotal>.stride == 24)
    }

    @Test func planRowKeepsTheWidestValuesItsFieldsHold() {
        var row = PlanRow(kind: .payout, group: .none, payee: Symbol(raw: 7), currency: .usd)
        row.linesStart = Int(Int32.max)
        row.linesCount = Int(Int32.max)
        row.attempt = Int(Int32.max)
        row.amount = 999_999_999_999
        #expect(row.linesStart == 2_147_483_647)
        #expect(row.linesCount == 2_147_483_647)
        #expect(row.attempt == 2_147_483_647)
        #expect(row.amount == 999_999_999_999)
        #expect(row.kind == .payout && row.payee == Symbol(raw: 7) && row.currency == .usd)
    }

    /// A value past 32 bits stops the run; it is never stored wrapped.
    @Test func planRowRefusesARangePast32Bits() async {
        await #expect(processExitsWith: .failure) {
            var row = PlanRow(kind: .transfer, group: .none, payee: .none, currency: .usd)
            row.linesStart = Int(Int32.max) + 1
        }
        await #expect(processExitsWith: .failure) {
            var row = PlanRow(kind: .transfer, group: .none, payee: .none, currency: .usd)
            row.attempt = -Int(Int32.max) - 2
        }
    }

    @Test func symbolsSurviveDroppingTheIndex() {
        let table = SymbolTable()
        var symbols: [Symbol] = []
        for number in 0..<5000 { symbols.append(table.intern("acct_\(number)")) }
        table.dropIndex()
        #expect(!table.hasIndex)
        // Reading needs no index.
        #expect(table.string(symbols[4321]) == "acct_4321")
        // An intern after it rebuilds the index: known strings keep their symbols.
        #expect(table.intern("acct_17") == symbols[17])
        #expect(table.hasIndex)
        for number in stride(from: 0, to: 5000, by: 7) { #expect(table.intern("acct_\(number)") == symbols[number]) }
        let fresh = table.intern("acct_new")
        #expect(fresh == Symbol(raw: 5001))
        #expect(table.count == 5001)
        // And it keeps growing as before.
        for number in 5000..<20000 { _ = table.intern("acct_\(number)") }
        #expect(table.intern("acct_19999") == Symbol(raw: 20001))
        #expect(table.intern("acct_new") == fresh)
        #expect(table.string(Symbol(raw: 20001)) == "acct_19999")
    }
}

/// ``SymbolSlots`` answers as a dictionary would, through its growth, for any symbols.
@Suite struct SymbolSlotsTests {
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func answersAsADictionaryThroughGrowth(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let slots = SymbolSlots(expected: Int.random(in: 0...3000, using: &random))
        var expected: [Int32: Int32] = [:]
        // Dense runs (as interned symbols come), far apart ones, Symbol.none and Int32.max - 1.
        let universe = Int32.random(in: 100...200_000, using: &random)
        for _ in 0..<Int.random(in: 1...40_000, using: &random) {
            let raw: Int32 =
                switch Int.random(in: 0..<20, using: &random) {
                case 0: 0
                case 1: Int32.max - 1
                default: Int32.random(in: 0..<universe, using: &random)
                }
            let value = Int32.random(in: 0...Int32.max, using: &random)
            slots.set(Symbol(raw: raw), value)
            expected[raw] = value
        }
        #expect(slots.count == expected.count)
        for (raw, value) in expected { #expect(slots[Symbol(raw: raw)] == value) }
        // Symbols never set have no slot.
        for _ in 0..<5000 {
            let raw = Int32.random(in: 0..<(universe * 2), using: &random)
            #expect(slots[Symbol(raw: raw)] == (expected[raw] ?? -1))
        }
    }
}

/// A reason stored again a moment later is shared, not kept once a line (audit 60 F2: 30 M
/// lines rejected for the same reason kept 30 M Strings); Stripe's refusals each keep their
/// own, since their code is keyed by it. Seeded: texts drawn from a small pool, in any order.
@Suite struct MessageStoreTests {
    @Test func repeatedReasonsAreStoredOnce() {
        let batch = Batch()
        var random = SplitMix64(seed: 0x60F2)
        // The attack's pattern: each line malformed, then a duplicate of the first line_id.
        let pair = ["the record has 1 fields, the header 5", "line_id x already appeared at f.csv:2"]
        for index in 0..<100_000 { _ = batch.addMessage(pair[index % 2]) }
        #expect(batch.messages == pair)
        // Any texts: each index reads back its own text.
        let pool = (0..<300).map { "reason \($0)" }
        for _ in 0..<20_000 {
            let text = pool[Int(random.next() % UInt64(pool.count))]
            #expect(batch.messages[Int(batch.addMessage(text))] == text)
        }
        #expect(batch.messages.count < 20_000, "\(batch.messages.count)")
        let stored = batch.messages.count
        batch.lines = [OrderLine(), OrderLine()]
        batch.setRefused(0, code: "account_invalid", message: "refused")
        batch.setRefused(1, code: "balance_insufficient", message: "refused")
        #expect(batch.messages.count == stored + 2)
        #expect(batch.reasonCode(of: batch.lines[0]) == "account_invalid")
        #expect(batch.reasonCode(of: batch.lines[1]) == "balance_insufficient")
    }
}
