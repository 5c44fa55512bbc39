import SettleCore
import Testing

/// Huge-page advice is advice: the arrays made and grown through it hold exactly what the
/// plain ones hold, above and below the size it acts on.
@Suite struct HugePagesTests {
    @Test(arguments: [0, 1, 1_000, 3_000_000])
    func anAdvisedArrayHoldsWhatAPlainOneHolds(count: Int) {
        let advised = HugePages.array(repeating: Int32(-1), count: count)
        #expect(advised == [Int32](repeating: -1, count: count))
        var grown = advised
        HugePages.append(7, count: count + 5, to: &grown)
        #expect(grown.count == 2 * count + 5)
        #expect(grown.prefix(count).allSatisfy { $0 == -1 })
        #expect(grown.suffix(count + 5).allSatisfy { $0 == 7 })
        #expect(advised.count == count)
    }
}
