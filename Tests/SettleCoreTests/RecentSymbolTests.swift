import SettleCore
import SettleTestSupport
import Testing

/// The line checker reuses the previous line's symbol for the ids an order's lines share
/// (order, charge, payment intent, group) when the bytes are equal. Generated runs of lines
/// whose ids repeat, change, are empty, are prefixes of each other or are not UTF-8 must get
/// exactly the symbols a fresh look-up gives: the text of each id, one symbol per text.
@Suite struct RecentSymbolTests {
    static let header = [
        "line_id", "order_id", "kind", "amount", "currency", "transfer_group", "destination",
        "source_transaction", "payment_intent",
    ]

    /// Ids drawn from a small pool of near neighbours: prefixes of each other, one byte apart,
    /// empty, and one that is not UTF-8.
    static func pool(_ stem: String) -> [[UInt8]] {
        [
            Array("\(stem)1".utf8), Array("\(stem)10".utf8), Array("\(stem)1x".utf8), Array("\(stem)2".utf8),
            [], Array("\(stem)1".utf8) + [0xFF], Array(stem.utf8),
        ]
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func idsGetTheSymbolsOfTheirText(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let checker = LineChecker(options: TestExport.options())
        let layout = try! FileLayout.csv(header: RecentSymbolTests.header, aliases: [:])
        let file = checker.beginFile(name: "test.csv", layout: layout)
        let orders = RecentSymbolTests.pool("o")
        let charges = RecentSymbolTests.pool("ch_")
        let intents = RecentSymbolTests.pool("pi_")
        let groups = RecentSymbolTests.pool("g")
        var previous: [[UInt8]] = [[], [], [], []]
        var expected: [[[UInt8]]] = []
        for index in 0..<600 {
            // Mostly the previous line's ids again (an order's lines), else a new draw.
            var ids = previous
            for column in 0..<4 where index == 0 || random.chance(35) {
                ids[column] = random.pick([orders, charges, intents, groups][column])
            }
            previous = ids
            expected.append(ids)
            let fields: [[UInt8]] = [
                Array("ln_\(index)".utf8), ids[0], Array("transfer".utf8), Array("1.00".utf8), Array("usd".utf8),
                ids[3], Array("acct_1".utf8), ids[1], ids[2],
            ]
            Self.feed(fields, line: index + 2, file: file, to: checker)
        }
        checker.endFile(file, lines: expected.count)
        checker.finishReading()
        let batch = checker.batch
        #expect(batch.lines.count == expected.count)
        var symbolOfText: [String: Symbol] = [:]
        func check(_ symbol: Symbol, _ text: String, _ what: String, _ line: Int) {
            #expect(batch.text(symbol) == text, "line \(line) \(what)")
            if let known = symbolOfText[text] {
                #expect(known == symbol, "line \(line) \(what): '\(text)' has two symbols")
            } else {
                symbolOfText[text] = symbol
            }
        }
        for (index, line) in batch.lines.enumerated() {
            let ids = expected[index]
            // An id that is not UTF-8 is kept readable (U+FFFD), as a fresh look-up keeps it.
            check(line.orderID, String(decoding: ids[0], as: UTF8.self), "order_id", index + 2)
            check(line.charge, String(decoding: ids[1], as: UTF8.self), "source_transaction", index + 2)
            check(line.paymentIntent, String(decoding: ids[2], as: UTF8.self), "payment_intent", index + 2)
            let group: [UInt8] =
                !ids[3].isEmpty
                ? ids[3]
                : !ids[2].isEmpty ? Array("group_".utf8) + ids[2] : !ids[0].isEmpty ? Array("order:".utf8) + ids[0] : []
            if group.isEmpty {
                #expect(line.group.isNone, "line \(index + 2) group")
            } else if String(validating: group, as: UTF8.self) != nil {
                check(line.group, String(decoding: group, as: UTF8.self), "group", index + 2)
            } else {
                // A derived key keeps the input's bytes; only its symbol's uniqueness is checked.
                #expect(!line.group.isNone, "line \(index + 2) group")
            }
        }
    }

    /// One record of raw field bytes, as the CSV reader hands it over.
    static func feed(_ fields: [[UInt8]], line: Int, file: Int, to checker: LineChecker) {
        let storage = fields.map { bytes -> UnsafeMutableRawBufferPointer in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            buffer.copyBytes(from: bytes)
            return buffer
        }
        defer { storage.forEach { $0.deallocate() } }
        let views = zip(storage, fields).map {
            UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0.0)[0..<$0.1.count])
        }
        views.withUnsafeBufferPointer {
            checker.record(RecordView(fields: $0, line: line, spoolOffset: 0, spoolLength: 0, defect: nil), file: file)
        }
    }
}
