import Foundation
import SettleCore
import SettleRead
import Testing

/// SPEC §2.1 and §2.3: the CSV reader at the byte level, and whole-file rejections.
@Suite struct CSVReaderTests {
    static func fixture(_ name: String) -> String {
        Bundle.module.path(forResource: "Fixtures/csv/\(name)", ofType: nil)!
    }

    /// Reads a fixture; returns the sink, the failure and the spool's bytes.
    static func read(_ name: String, aliases: [String: String] = [:], limits: ReadLimits = ReadLimits())
        throws -> (RecordingSink, ReadFailure?, [UInt8])
    {
        let spoolPath = NSTemporaryDirectory() + "spool-\(UUID().uuidString).csv"
        defer { try? FileManager.default.removeItem(atPath: spoolPath) }
        let sink = RecordingSink()
        let source = try ByteSource(path: fixture(name))
        let spool = try SpoolWriter(path: spoolPath)
        let failure = CSVExportReader(aliases: aliases, limits: limits)
            .read(name: name, source: source, spool: spool, sink: sink)
        spool.flush()
        let bytes = [UInt8](FileManager.default.contents(atPath: spoolPath) ?? Data())
        return (sink, failure, bytes)
    }

    @Test func readsPlainRecordsWithLineNumbers() throws {
        let (sink, failure, _) = try Self.read("plain.csv")
        #expect(failure == nil)
        #expect(
            sink.records.map(\.fields) == [
                ["1", "100", "70.00", "usd", "acct_a"], ["2", "100", "20.00", "usd", "acct_b"],
            ])
        #expect(sink.records.map(\.line) == [2, 3])
        #expect(sink.ended[0] == 2)
    }

    @Test func handlesBOMCRLFAndQuotes() throws {
        let (sink, failure, _) = try Self.read("bom-crlf.csv")
        #expect(failure == nil)
        #expect(sink.layouts[0].names == ["line_id", "order_id", "amount", "currency", "destination"])
        #expect(
            sink.records.map(\.fields) == [
                ["1", "100", "70.00", "usd", "acct_a"], ["2", "100", "20.00", "usd", "acct_b"],
            ])
    }

    @Test func quotedNewlinesCommasAndEscapesAndBlankLines() throws {
        let (sink, failure, _) = try Self.read("quoted.csv")
        #expect(failure == nil)
        let layout = sink.layouts[0]
        // Header names match case-insensitively after trimming; unknown columns are kept.
        #expect(layout.index(of: .lineID) == 0)
        #expect(layout.index(of: .orderID) == 1)
        #expect(layout.roles[5] == .extra)
        #expect(sink.records.count == 2)
        #expect(sink.records[0].fields[5] == "he said \"hi\", then\nleft")
        #expect(sink.records.map(\.line) == [2, 5])
    }

    @Test func aliasesMapOtherHeaderNames() throws {
        let (sink, failure, _) = try Self.read("quoted.csv", aliases: ["description": "note"])
        #expect(failure == nil)
        #expect(sink.layouts[0].index(of: .description) == 5)
    }

    @Test func malformedRecordsAreRejectedOneByOne() throws {
        let (sink, failure, _) = try Self.read("malformed.csv")
        #expect(failure == nil)
        #expect(
            sink.records.map { $0.defect?.code } == [nil, .malformedRecord, .malformedRecord, .malformedRecord, nil])
        #expect(sink.records.map(\.line) == [2, 3, 4, 5, 6])
    }

    @Test func unclosedQuoteRejectsTheFileWhole() throws {
        let (sink, failure, _) = try Self.read("unclosed.csv")
        #expect(failure?.code == .csvUnclosedQuote)
        #expect(failure?.position == "unclosed.csv:3")
        #expect(sink.records.isEmpty)
        #expect(sink.discarded == [0])
    }

    @Test func emptyFileAndHeaderOnly() throws {
        let (_, empty, _) = try Self.read("empty.csv")
        #expect(empty?.code == .emptyFile)
        let (sink, headerOnly, _) = try Self.read("header-only.csv")
        #expect(headerOnly == nil)
        #expect(sink.records.isEmpty)
        #expect(sink.ended[0] == 0)
    }

    @Test func missingRequiredColumnRejectsTheFile() throws {
        let (sink, failure, _) = try Self.read("missing-column.csv")
        #expect(failure?.code == .headerMissingColumn)
        #expect(failure?.message.contains("amount") == true)
        #expect(sink.layouts.isEmpty)
    }

    @Test func overLongFieldRejectsOnlyItsLine() throws {
        let (sink, failure, _) = try Self.read("long-field.csv")
        #expect(failure == nil)
        #expect(sink.records.map { $0.defect?.code } == [nil, .fieldTooLong, nil])
        var limits = ReadLimits()
        limits.maxRecordBytes = 4096
        let (small, smallFailure, _) = try Self.read("long-field.csv", limits: limits)
        #expect(smallFailure == nil)
        #expect(small.records.map { $0.defect?.code } == [nil, .fieldTooLong, nil])
        #expect(small.records.map(\.line) == [2, 3, 4])
    }

    @Test func gzipSingleAndMultiMember() throws {
        let (plain, failure, _) = try Self.read("plain.csv.gz")
        #expect(failure == nil)
        #expect(plain.records.count == 2)
        let (multi, multiFailure, _) = try Self.read("multi-member.csv.gz")
        #expect(multiFailure == nil)
        #expect(multi.records.map { $0.fields[0] } == ["1", "2"])
    }

    @Test func truncatedGzipAndBadCRCRejectTheFileWhole() throws {
        let (truncated, failure, _) = try Self.read("truncated.csv.gz")
        #expect(failure?.code == .gzipTruncated)
        #expect(truncated.records.isEmpty)
        let (corrupt, crcFailure, _) = try Self.read("bad-crc.csv.gz")
        #expect(crcFailure?.code == .gzipCorrupt)
        #expect(corrupt.records.isEmpty)
    }

    @Test func spoolKeepsEachRecordVerbatim() throws {
        let (sink, _, spool) = try Self.read("bom-crlf.csv")
        let second = sink.records[1]
        let text = String(
            decoding: spool[Int(second.spoolOffset)..<Int(second.spoolOffset) + Int(second.spoolLength)], as: UTF8.self)
        #expect(text == "\"2\",\"100\",\"20.00\",usd,\"acct_b\"\r\n")
    }

    @Test func invalidUTF8ReachesTheRulesAsBytes() throws {
        let (sink, failure, _) = try Self.read("bad-utf8.csv")
        #expect(failure == nil)
        #expect(sink.records.count == 1)
        let checker = LineChecker(options: RuleOptions(asOf: 0))
        let source = try ByteSource(path: Self.fixture("bad-utf8.csv"))
        let spool = try SpoolWriter(path: "/dev/null")
        _ = CSVExportReader().read(name: "bad-utf8.csv", source: source, spool: spool, sink: checker)
        #expect(checker.batch.lines.first?.reason == .encodingInvalid)
    }

    @Test func unreadablePathIsReported() {
        #expect(throws: ReadFailure.self) { try ByteSource(path: "/nonexistent/settle/input.csv") }
    }

    @Test func formatIsToldFromContent() {
        let xml = Array("\u{FEFF}  \n<orderExport/>".utf8)
        let csv = Array("line_id,order_id\n".utf8)
        xml.withUnsafeBytes { #expect(InputFormat.detect($0) == .xml) }
        csv.withUnsafeBytes { #expect(InputFormat.detect($0) == .csv) }
    }

    @Test func recordsSpanningChunkBoundariesAreReadWhole() throws {
        // ~1.5 MB: every 256 KiB read boundary falls somewhere inside a record, some inside
        // a quoted field holding a newline, a comma or an escaped quote.
        var text = "line_id,order_id,amount,currency,destination,note\r\n"
        for index in 1...12_000 {
            text +=
                "L\(index),\(index),\(index % 90 + 1).50,usd,acct_\(index),\"note \(index), \"\"quoted\"\"\nsecond line\"\r\n"
        }
        let path = NSTemporaryDirectory() + "chunks-\(UUID().uuidString).csv"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = RecordingSink()
        let failure = CSVExportReader().read(
            name: "chunks.csv", source: try ByteSource(path: path),
            spool: try SpoolWriter(path: "/dev/null"), sink: sink)
        #expect(failure == nil)
        #expect(sink.records.count == 12_000)
        #expect(sink.records.allSatisfy { $0.defect == nil && $0.fields.count == 6 })
        #expect(
            sink.records.last?.fields == [
                "L12000", "12000", "31.50", "usd", "acct_12000", "note 12000, \"quoted\"\nsecond line",
            ])
        // Two physical lines a record, after the header.
        #expect(sink.records.map(\.line) == (0..<12_000).map { 2 + 2 * $0 })
    }
}
