import Foundation
import SettleCore
import SettleRead
import Testing

/// Throughput of the XML reader on a big file; runs only when asked:
/// `SETTLE_XML_BENCH=/path/big.xml swift test -c release -Xswiftc -enable-testing --filter XMLReaderBenchmark`
/// (compare with `xmllint --stream --noout /path/big.xml`).
@Suite("XML reader benchmark")
struct XMLReaderBenchmarkTests {
    final class CountingSink: RecordSink {
        var records = 0
        var defects = 0
        var bytes = 0
        func beginFile(name: String, layout: FileLayout) -> Int { 0 }
        func record(_ record: RecordView, file: Int) {
            records += 1
            if record.defect != nil { defects += 1 }
            bytes += record.value(0).count
        }
        func endFile(_ file: Int, lines: Int) {}
        func discardFile(_ file: Int) {}
    }

    final class CountingSpool: RecordSpool {
        var offset: UInt64 = 0
        func append(_ bytes: UnsafeRawBufferPointer) { offset += UInt64(bytes.count) }
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["SETTLE_XML_BENCH"] != nil))
    func readBigFile() throws {
        let path = try #require(ProcessInfo.processInfo.environment["SETTLE_XML_BENCH"])
        let descriptor = open(path, O_RDONLY)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        let sink = CountingSink()
        let spool = CountingSpool()
        let clock = ContinuousClock()
        let start = clock.now
        let rejection = XMLExportReader().read(
            name: path,
            next: {
                let count = Foundation.read(descriptor, buffer.baseAddress, buffer.count)
                return count > 0 ? UnsafeRawBufferPointer(rebasing: buffer[0..<count]) : nil
            }, spool: spool, sink: sink)
        let elapsed = clock.now - start
        print(
            "XML bench: \(sink.records) records, \(sink.defects) defects, spool \(spool.offset) bytes, \(elapsed), rejection \(String(describing: rejection))"
        )
        #expect(rejection == nil)
    }
}
