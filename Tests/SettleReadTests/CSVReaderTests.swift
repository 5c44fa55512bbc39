import Foundation
import SettleCore
import SettleRead
import Testing

/// docs/RULES.md, Input: the CSV reader at the byte level, and whole-file rejections.
@Suite struct CSVReaderTests {
    static func fixture(_ name: String) -> String {
        Bundle.module.path(forResource: "Fixtures/csv/\(name)", ofType: nil)!
    }

    /// Reads a fixture; returns the sink, the failure and the spool's bytes (inflated).
    static func read(_ name: String, aliases: [String: String] = [:], limits: ReadLimits = ReadLimits())
        throws -> (RecordingSink, ReadFailure?, [UInt8])
    {
        let spoolPath = NSTemporaryDirectory() + "spool-\(UUID().uuidString).csv"
        defer { try? FileManager.default.removeItem(atPath: spoolPath) }
        let sink = RecordingSink()
        let source = try ByteSource(path: fixture(name))
        let spool = try SpoolWriter(path: spoolPath)
        source.spool(into: spool)
        let failure = CSVExportReader(aliases: aliases, limits: limits).read(name: name, source: source, sink: sink)
        source.finishReading()
        #expect(spool.finish() == nil)
        return (sink, failure, try inflated(spoolPath))
    }

    /// A file's bytes, inflated when gzip.
    static func inflated(_ path: String) throws -> [UInt8] {
        let source = try ByteSource(path: path)
        var bytes: [UInt8] = []
        while let chunk = try? source.next() { bytes.append(contentsOf: chunk) }
        return bytes
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
        _ = CSVExportReader().read(name: "bad-utf8.csv", source: source, sink: checker)
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
            name: "chunks.csv", source: try ByteSource(path: path), sink: sink)
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
    /// Reads `text` as a CSV file; returns the sink, the failure and the spool's bytes.
    static func read(text: [UInt8], limits: ReadLimits = ReadLimits()) throws -> (RecordingSink, ReadFailure?, [UInt8])
    {
        let path = NSTemporaryDirectory() + "text-\(UUID().uuidString).csv"
        let spoolPath = path + ".spool"
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: spoolPath)
        }
        try Data(text).write(to: URL(fileURLWithPath: path))
        let sink = RecordingSink()
        let spool = try SpoolWriter(path: spoolPath)
        let source = try ByteSource(path: path)
        source.spool(into: spool)
        let failure = CSVExportReader(limits: limits).read(name: "text.csv", source: source, sink: sink)
        source.finishReading()
        #expect(spool.finish() == nil)
        return (sink, failure, try inflated(spoolPath))
    }

    static func spooled(_ record: RecordingSink.Record, _ spool: [UInt8]) -> String {
        String(
            decoding: spool[Int(record.spoolOffset)..<Int(record.spoolOffset) + Int(record.spoolLength)], as: UTF8.self)
    }

    /// SPEC: LF or CRLF line ends. A CR alone is data, quoted or not, and no line end: the
    /// field keeps it and `source` counts LF lines (audit 35 C3: a lone CR cut an unquoted
    /// field short, made a line of the rest, and shifted every later line number).
    @Test func aLoneCRIsDataAndNoLineEnd() throws {
        let text =
            "line_id,order_id,amount,currency,note\n1,10,1.00,usd,\"a\rb\"\r\n\r\n2,20,2.00,usd,foo\rbar\n3,30,3.00,usd,\ry\r\n4,40,4.00,usd,z\r"
        let (sink, failure, spool) = try Self.read(text: Array(text.utf8))
        #expect(failure == nil)
        #expect(sink.records.map { $0.fields[0] } == ["1", "2", "3", "4"])
        #expect(sink.records.map { $0.fields[4] } == ["a\rb", "foo\rbar", "\ry", "z\r"])
        #expect(sink.records.allSatisfy { $0.defect == nil && $0.fields.count == 5 })
        // Line 3 is blank (a CRLF).
        #expect(sink.records.map(\.line) == [2, 4, 5, 6])
        // The spool is the input's bytes: a record's line end is the one it had.
        #expect(Self.spooled(sink.records[0], spool) == "1,10,1.00,usd,\"a\rb\"\r\n")
        #expect(Self.spooled(sink.records[1], spool) == "2,20,2.00,usd,foo\rbar\n")
        #expect(Self.spooled(sink.records[3], spool) == "4,40,4.00,usd,z\r")
    }

    /// A file with CR line ends (no LF) is rejected whole, saying so, not read as one line.
    @Test func aFileWithCRLineEndsIsRejectedWhole() throws {
        let text = "line_id,order_id,amount,currency\r1,10,1.00,usd\r2,20,2.00,usd\r"
        let (sink, failure, _) = try Self.read(text: Array(text.utf8))
        #expect(failure?.code == .headerInvalid)
        #expect(failure?.message.contains("CR") == true, "\(failure?.message ?? "")")
        #expect(sink.records.isEmpty)
    }

    /// 600 repeats: the record fits the first read chunk; 20 000 (320 KB): it is streamed.
    @Test(arguments: [600, 20_000])
    func overLongRecordKeepsItsIdsAndIsSpooledWhole(_ repeats: Int) throws {
        var limits = ReadLimits()
        limits.maxRecordBytes = 4096
        limits.maxFieldBytes = 1024
        // A quoted field with escapes, commas, CR and LF, longer than the record limit.
        let long = "\"" + String(repeating: "ab,\"\"c\r\nd\re", count: repeats) + "\""
        let record = "7,70,1.00,usd,\(long),after\r\n"
        let text = "line_id,order_id,amount,currency,note,more\n" + record + "8,80,2.00,usd,x,y\n"
        let (sink, failure, spool) = try Self.read(text: Array(text.utf8), limits: limits)
        #expect(failure == nil)
        #expect(sink.records.count == 2)
        let first = sink.records[0]
        #expect(first.defect?.code == .fieldTooLong)
        #expect(first.defect?.message.contains("note") == true)
        #expect(first.fields == ["7", "70", "1.00", "usd", "", "after"])
        #expect(Self.spooled(first, spool) == record)
        // A CRLF and a lone CR a repeat inside the quotes, then the record's CRLF.
        #expect(sink.records.map(\.line) == [2, 2 + repeats + 1])
        #expect(sink.records[1].fields == ["8", "80", "2.00", "usd", "x", "y"])
    }

    @Test func overLongRecordOverTheSpoolLimitOrWithALongIdRejectsTheFile() throws {
        var limits = ReadLimits()
        limits.maxRecordBytes = 4096
        limits.maxFieldBytes = 1024
        limits.maxSpooledRecordBytes = 100_000
        let header = "line_id,order_id,amount,currency,note\n"
        // Over a read chunk: streamed, and over the spool limit.
        let huge = header + "1,10,1.00,usd," + String(repeating: "x", count: 400_000) + "\n"
        let (sink, failure, _) = try Self.read(text: Array(huge.utf8), limits: limits)
        #expect(failure?.code == .unreadable)
        #expect(failure?.position == "text.csv:2")
        #expect(sink.discarded == [0])
        for text in [
            header + "2,20,1.00,usd,x\n" + String(repeating: "9", count: 2000) + ",10,1.00,usd,x\n",
            header + "1,\(String(repeating: "9", count: 5000)),1.00,usd,x\n",
        ] {
            let (sink, failure, _) = try Self.read(text: Array(text.utf8), limits: limits)
            #expect(failure?.code == .unreadable)
            #expect(sink.records.isEmpty)
        }
    }

    @Test func formulaGuardIsRemovedFromFilesSettleWrote() throws {
        let settleWritten =
            "line_id,order_id,amount,currency,note,reason_code,reason,source\n'=1,'abc,'-5,'+usd,\"'=a,b\",x,'-y,f:2\n"
        let (sink, failure, _) = try Self.read(text: Array(settleWritten.utf8))
        #expect(failure == nil)
        // Every cell loses exactly the guard: an amount cell has one when it is no number
        // (settle writes `-5` as it is, and `'-5` as `''-5`).
        #expect(sink.records[0].fields == ["=1", "'abc", "-5", "+usd", "=a,b", "x", "-y", "f:2"])
        let other = "line_id,order_id,amount,currency,note\n'=1,2,1.00,usd,'=x\n"
        let (plain, _, _) = try Self.read(text: Array(other.utf8))
        #expect(plain.records[0].fields == ["'=1", "2", "1.00", "usd", "'=x"])
    }
}
