import Foundation
import SettleCore
import SettleTestSupport
import SettleWrite
import Testing

@testable import SettlePlanFolder

/// The rewrite after apply reads results.csv back record by record, through 1 MiB chunks:
/// records that straddle a chunk, quoted commas, quotes, LF and CR inside cells all come
/// back as written (seeded, so a failure can be replayed).
@Suite struct ResultsReaderTests {
    @Test(arguments: [1, 2, 3])
    func recordsComeBackAsWrittenAcrossChunks(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let alphabet = Array("abc,\"\n\r=+ 0123'".utf8)
        var rows: [[[UInt8]]] = []
        var text: [UInt8] = []
        // Past two chunks, with a cell longer than a chunk.
        while text.count < (5 << 19) {
            let count = Int(random.next() % 14) + 1
            var row: [[UInt8]] = []
            for _ in 0..<count {
                let length = random.next() % 97 == 0 ? Int(random.next() % (1 << 21)) : Int(random.next() % 24)
                row.append((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            }
            rows.append(row)
            for (index, cell) in row.enumerated() {
                if index > 0 { text.append(0x2C) }
                CSVField.append(cell, to: &text, guardFormula: false)
            }
            text.append(0x0A)
        }
        let path = NSTemporaryDirectory() + "settle-results-reader-\(UUID().uuidString).csv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(text).write(to: URL(fileURLWithPath: path))
        let reader = try #require(ResultsReader(path: path))
        var read: [[[UInt8]]] = []
        while let record = try reader.next() { read.append(record) }
        #expect(read.count == rows.count)
        #expect(read == rows)
    }
}
