import Foundation
import SettleRead
import SettleTestSupport
import Testing

/// SPEC: an input is XML when its first non-blank character after an optional UTF-8 BOM is
/// `<`, after gzip is decompressed (multi-member allowed). The first chunk settle looks at is
/// read on while it holds only a BOM (or part of one) and blanks: a gzip member that holds
/// only those, or a pipe's first write of only those, no longer makes an XML export CSV
/// (audit 57 F2: it was rejected whole, `header_invalid`).
@Suite struct FormatDetectionTests {
    static let xml = Data(
        #"<orderExport xmlns="urn:settle:order-export:1"><order id="1"><line id="1-1" destination="acct_A" amount="10.00" currency="usd"/></order></orderExport>"#
            .utf8)

    /// The format settle tells from a source's first chunk, and every byte it hands out.
    static func detected(_ path: String) throws -> (InputFormat, Data) {
        let source = try ByteSource(path: path)
        let format = InputFormat.detect(try source.peek())
        var bytes = Data()
        while let chunk = try source.next() { bytes.append(contentsOf: chunk) }
        return (format, bytes)
    }

    /// `prefix` in two gzip members cut after `cut` bytes (a BOM split too), then the export.
    @Test(
        arguments: [
            ([0xEF, 0xBB, 0xBF], 1), ([0xEF, 0xBB, 0xBF], 2), ([0xEF, 0xBB, 0xBF], 3), ([0x0A], 1),
            ([0x20, 0x09, 0x0D, 0x0A], 2), ([0xEF, 0xBB, 0xBF, 0x0A, 0x0A], 3),
        ] as [([UInt8], Int)])
    func aFirstGzipMemberOfOnlyABOMOrBlanksIsStillXML(prefix: [UInt8], cut: Int) throws {
        let whole = Data(prefix) + Self.xml
        var members = Data()
        members.append(try gzipped(Data(prefix.prefix(cut))))
        if cut < prefix.count { members.append(try gzipped(Data(prefix.dropFirst(cut)))) }
        members.append(try gzipped(Self.xml))
        let path = NSTemporaryDirectory() + "members-\(UUID().uuidString).xml.gz"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try members.write(to: URL(fileURLWithPath: path))
        let (format, bytes) = try Self.detected(path)
        #expect(format == .xml)
        #expect(bytes == whole)
    }

    @Test func aCSVExportAfterABlankFirstMemberIsStillCSV() throws {
        let csv = Data("line_id,order_id,amount,currency,destination\n1,1,1.00,usd,acct_a\n".utf8)
        let path = NSTemporaryDirectory() + "members-\(UUID().uuidString).csv.gz"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try (try gzipped(Data([0xEF, 0xBB, 0xBF])) + (try gzipped(csv))).write(to: URL(fileURLWithPath: path))
        let (format, bytes) = try Self.detected(path)
        #expect(format == .csv)
        #expect(bytes == Data([0xEF, 0xBB, 0xBF]) + csv)
    }

    /// A pipe whose writer sends a BOM, pauses, then the export: read as XML whatever the pause.
    @Test func aPipesFirstWriteOfABOMIsStillXML() throws {
        let path = NSTemporaryDirectory() + "fifo-\(UUID().uuidString)"
        #expect(mkfifo(path, 0o600) == 0)
        defer { unlink(path) }
        let writer = Thread {
            let handle = FileHandle(forWritingAtPath: path)!
            handle.write(Data([0xEF, 0xBB, 0xBF]))
            usleep(300_000)
            handle.write(Self.xml)
            try? handle.close()
        }
        writer.start()
        let (format, bytes) = try Self.detected(path)
        #expect(format == .xml)
        #expect(bytes == Data([0xEF, 0xBB, 0xBF]) + Self.xml)
    }

    @Test func undecidedIsOnlyABOMAndBlanks() {
        func undecided(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { InputFormat.undecided($0) } }
        #expect(undecided([]))
        #expect(undecided([0xEF]))
        #expect(undecided([0xEF, 0xBB]))
        #expect(undecided([0xEF, 0xBB, 0xBF, 0x20, 0x0A]))
        #expect(!undecided([0xEF, 0x41]))
        #expect(!undecided([0x20, 0x3C]))
        #expect(!undecided([0xEF, 0xBB, 0xBF, 0x6C]))
        #expect(!undecided([0x0A, 0xEF, 0xBB, 0xBF]))
    }
}
