import SettleCore
import SettleTestSupport
import Testing

/// The line checker interns a line's ids on a second thread, in chunks of lines (see
/// IdentityStage). Generated files of thousands of lines (several chunks each), with line_ids
/// repeating within and across files, bad lines, a file rejected whole after some of its
/// chunks were handed on, and the batch read while a file is still being read, must give
/// exactly what one thread gives: every kept line once, in order, with the symbols of its own
/// text, and a later copy of a line_id rejected as a duplicate of the first kept copy.
@Suite struct IdentityStageTests {
    static let header = ["line_id", "order_id", "kind", "amount", "currency", "destination", "source_transaction"]

    struct Fed {
        var file: Int
        var line: Int
        var id: String
        var order: String
        var badAmount: Bool
    }

    @Test(arguments: [11, 12, 13] as [UInt64])
    func linesComeOutAsOneThreadWouldGiveThem(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let checker = LineChecker(options: TestExport.options())
        let layout = try! FileLayout.csv(header: IdentityStageTests.header, aliases: [:])
        var kept: [Fed] = []
        let discarded = Int(seed % 3)  // each seed rejects another file: first, middle or last
        for fileNumber in 0..<3 {
            let name = "day\(fileNumber).csv"
            let file = checker.beginFile(name: name, layout: layout)
            var fed: [Fed] = []
            let count = 3000 + Int(random.next() % 6000)
            for index in 0..<count {
                // Ids from a pool small enough that about one line in six repeats an earlier one.
                let id = "ln_\(random.next() % 40_000)"
                let order = "o_\(index / 3)"
                let badAmount = random.chance(5)
                fed.append(Fed(file: file, line: index + 2, id: id, order: order, badAmount: badAmount))
                let fields: [[UInt8]] = [
                    Array(id.utf8), Array(order.utf8), Array("transfer".utf8),
                    Array((badAmount ? "1.001" : "1.00").utf8), Array("usd".utf8), Array("acct_1".utf8),
                    Array("ch_\(index / 3)".utf8),
                ]
                RecentSymbolTests.feed(fields, line: index + 2, file: file, to: checker)
                if index == count / 2 {
                    // Reading the batch mid-file waits for the lines so far; reading goes on.
                    #expect(checker.batch.lines.count == kept.count + fed.count)
                }
            }
            #expect(checker.lineCount == kept.count + fed.count)
            if fileNumber == discarded {
                checker.discardFile(file)
                #expect(checker.lineCount == kept.count)
            } else {
                checker.endFile(file, lines: count)
                kept += fed
            }
        }
        checker.finishReading()
        let batch = checker.batch
        #expect(batch.lines.count == kept.count)
        guard batch.lines.count == kept.count else { return }
        var firstOf: [String: Fed] = [:]
        var duplicates = 0
        for (line, fed) in zip(batch.lines, kept) {
            let place = "day\(fed.file).csv:\(fed.line)"
            #expect(Int(line.file) == fed.file && Int(line.sourceLine) == fed.line, "\(place) out of order")
            #expect(batch.text(line.lineID) == fed.id, "\(place) line_id")
            #expect(batch.text(line.orderID) == fed.order, "\(place) order_id")
            #expect(batch.text(line.payee) == "acct_1", "\(place) destination")
            if let first = firstOf[fed.id] {
                duplicates += 1
                #expect(line.reason == .duplicateLineID, "\(place) repeats \(fed.id)")
                #expect(
                    batch.reasonText(of: line)
                        == "line_id \(fed.id) already appeared at day\(first.file).csv:\(first.line); the first copy counts"
                )
            } else {
                firstOf[fed.id] = fed
                #expect(line.reason == (fed.badAmount ? .amountInvalid : .none), "\(place) reason")
            }
        }
        // The pool makes repeats certain: the duplicate path was taken.
        #expect(duplicates > 300)
    }
}
