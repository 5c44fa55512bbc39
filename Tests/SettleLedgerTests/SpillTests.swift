import SettleLedger
import Testing

/// The scratch table apply keeps per-instruction state in (outcomes, sums by instruction).
@Suite struct SpillTests {
    @Test func putReplacesAndAddSumsTheNumbersKeepingTheTexts() throws {
        let spill = try Spill()
        defer { spill.close() }
        #expect(spill.count == 0)
        #expect(try spill.get("a") == nil)
        try spill.put("a", first: "tr_1", second: "", numbers: [0])
        try spill.put("a", first: "", second: "gone", numbers: [5])
        let replaced = try #require(try spill.get("a"))
        #expect([replaced.key, replaced.first, replaced.second] == ["a", "", "gone"])
        #expect(replaced.numbers == [5, 0, 0, 0])
        try spill.add("ins_1", first: "usd", numbers: [100, 0, 0, 0])
        try spill.add("ins_1", first: "eur", numbers: [0, 30, 0, 1])
        try spill.add("ins_1", first: "usd", numbers: [7, 0, 0, 0])
        let summed = try #require(try spill.get("ins_1"))
        #expect([summed.first, summed.second] == ["usd", ""])
        #expect(summed.numbers == [107, 30, 0, 1])
        #expect(spill.count == 2)
        #expect(try spill.contains("ins_1"))
        #expect(try !spill.contains("ins_2"))
        var keys: [String] = []
        try spill.forEach { keys.append($0.key) }
        #expect(keys == ["a", "ins_1"])
    }

    /// More entries than its 2 MiB page cache holds: they go to the temporary file and
    /// come back intact.
    @Test func holdsMoreThanItsCache() throws {
        let spill = try Spill()
        defer { spill.close() }
        let count = 60_000
        for number in 0..<count {
            try spill.put(
                "ins_\(number)", first: "tr_\(number)", second: String(repeating: "x", count: 40),
                numbers: [Int64(number)])
        }
        #expect(spill.count == count)
        #expect(try spill.get("ins_12345")?.first == "tr_12345")
        #expect(try spill.get("ins_59999")?.numbers == [59999, 0, 0, 0])
    }
}
