import SettleCore
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
