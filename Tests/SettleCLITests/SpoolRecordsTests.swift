import Foundation
import SettleCore
import SettleTestSupport
import SettleWrite
import Testing

@testable import SettleCLI

/// Records read back from a gzip spool: by positions in the inflated stream, in one pass.
@Suite struct SpoolRecordsTests {
    static func gzip(_ text: String) throws -> Data { try gzipped(Data(text.utf8)) }

    /// 30 000 records (about 1.3 MB inflated, several chunks), in two gzip members.
    static func spool() throws -> (folder: String, records: [(offset: UInt64, length: UInt32, text: String)]) {
        let folder = NSTemporaryDirectory() + "spool-records-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/.settle", withIntermediateDirectories: true)
        var halves = ["line_id,note\n", ""]
        var records: [(UInt64, UInt32, String)] = []
        var offset = UInt64(halves[0].utf8.count)
        for index in 0..<30_000 {
            let record = "L\(index),\"note \(index), \"\"quoted\"\"\"\(index % 7 == 0 ? "\r\n" : "\n")"
            records.append((offset, UInt32(record.utf8.count), record))
            offset += UInt64(record.utf8.count)
            halves[index < 15_000 ? 0 : 1] += record
        }
        let data = try gzip(halves[0]) + gzip(halves[1])
        try data.write(to: URL(fileURLWithPath: folder + "/.settle/input-1.csv.gz"))
        return (folder, records)
    }

    static func records(_ folder: String) throws -> SpoolRecords {
        let manifest = try JSON.parse(
            Data(#"{"spool": {".settle/input-1.csv.gz": {"sha256": "", "format": "csv.gz"}}}"#.utf8))
        return SpoolRecords(folder: folder, manifest: manifest)
    }

    @Test func prefetchReadsRecordsInAnyOrderInOnePass() throws {
        let (folder, all) = try Self.spool()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let records = try Self.records(folder)
        var generator = SystemRandomNumberGenerator()
        let wanted = Array(all.enumerated().filter { $0.offset % 13 == 0 }.map(\.element).shuffled(using: &generator))
        try records.prefetch(wanted.map { (file: 0, offset: $0.offset, length: $0.length) })
        for record in wanted {
            let fields = try records.fields(file: 0, offset: record.offset, length: record.length)
            let number = record.text.prefix { $0 != "," }.dropFirst()
            #expect(fields.map { String(decoding: $0, as: UTF8.self) } == ["L\(number)", "note \(number), \"quoted\""])
        }
        #expect(records.passes == 1)
    }

    @Test func readsInAscendingOrderMakeOnePassAndABackwardReadStartsAgain() throws {
        let (folder, all) = try Self.spool()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let records = try Self.records(folder)
        for record in all where record.offset % 3 == 0 {
            let fields = try records.fields(file: 0, offset: record.offset, length: record.length)
            #expect(String(decoding: fields[0], as: UTF8.self) == String(record.text.prefix { $0 != "," }))
        }
        #expect(records.passes == 1)
        _ = try records.fields(file: 0, offset: all[0].offset, length: all[0].length)
        #expect(records.passes == 2)
        // A record past the end is an error, never a short row.
        #expect(throws: WriteFailure.self) {
            try records.fields(file: 0, offset: all.last!.offset, length: all.last!.length + 10)
        }
    }
}
