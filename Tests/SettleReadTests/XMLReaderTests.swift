import Foundation
import SettleCore
import Testing

@testable import SettleRead

// MARK: Test doubles

/// Collects what a reader delivers, copying the borrowed bytes during the call.
final class CollectingSink: RecordSink {
    struct Record {
        var fields: [String]
        var line: Int
        var spoolOffset: UInt64
        var spoolLength: UInt32
        var defect: RecordDefect?
    }

    var layout: FileLayout?
    var files: [String] = []
    var records: [Record] = []
    var endedLines: Int?
    var discarded = false

    func beginFile(name: String, layout: FileLayout) -> Int {
        files.append(name)
        self.layout = layout
        return files.count - 1
    }

    func record(_ record: RecordView, file: Int) {
        let fields = (0..<record.fields.count).map { String(decoding: record.value($0), as: UTF8.self) }
        records.append(
            Record(
                fields: fields, line: record.line, spoolOffset: record.spoolOffset,
                spoolLength: record.spoolLength, defect: record.defect))
    }

    func endFile(_ file: Int, lines: Int) { endedLines = lines }
    func discardFile(_ file: Int) { discarded = true }

    /// The value of a column of a record, by its layout name ("" when absent).
    func value(_ record: Record, _ name: String) -> String {
        guard let index = layout?.index(ofName: name), index < record.fields.count else { return "" }
        return record.fields[index]
    }

    func record(lineID: String) -> Record? {
        records.first { value($0, "line_id") == lineID }
    }
}

final class MemorySpool: RecordSpool {
    var bytes: [UInt8] = []
    var offset: UInt64 { UInt64(bytes.count) }
    func append(_ chunk: UnsafeRawBufferPointer) { bytes.append(contentsOf: chunk) }

    func slice(offset: UInt64, length: UInt32) -> [UInt8] {
        Array(bytes[Int(offset)..<Int(offset) + Int(length)])
    }
}

/// Parses RFC 4180 text into records (enough for spool round trips).
func parseCSV(_ bytes: [UInt8]) -> [[String]] {
    var records: [[String]] = []
    var fields: [String] = []
    var field: [UInt8] = []
    var index = 0
    var quoted = false
    while index < bytes.count {
        let byte = bytes[index]
        if quoted {
            if byte == 0x22 {
                if index + 1 < bytes.count, bytes[index + 1] == 0x22 {
                    field.append(0x22)
                    index += 1
                } else {
                    quoted = false
                }
            } else {
                field.append(byte)
            }
        } else if byte == 0x22 {
            quoted = true
        } else if byte == 0x2C {
            fields.append(String(decoding: field, as: UTF8.self))
            field = []
        } else if byte == 0x0A {
            fields.append(String(decoding: field, as: UTF8.self))
            records.append(fields)
            fields = []
            field = []
        } else {
            field.append(byte)
        }
        index += 1
    }
    return records
}

struct ReadOutcome {
    var sink: CollectingSink
    var spool: MemorySpool
    var rejection: FileRejectionReport?
}

func fixture(_ name: String) throws -> [UInt8] {
    let url = try #require(Bundle.module.url(forResource: name, withExtension: "xml", subdirectory: "Fixtures/xml"))
    return try [UInt8](Data(contentsOf: url))
}

/// Reads bytes through the reader, handed out in chunks of `chunkSize`.
/// `everyElement`: libxml2's validator on every element (the reference path), not only on
/// the elements the reader's own checks cannot vouch for.
func read(
    _ bytes: [UInt8], chunkSize: Int = 64 * 1024, limits: XMLReadLimits = XMLReadLimits(),
    name: String = "test.xml", everyElement: Bool = false
) -> ReadOutcome {
    let sink = CollectingSink()
    let spool = MemorySpool()
    let reader = XMLExportReader(schema: .orderExport, limits: limits, validatesEveryElement: everyElement)
    let rejection = bytes.withUnsafeBytes { all -> FileRejectionReport? in
        var position = 0
        return reader.read(
            name: name,
            next: {
                guard position < all.count else { return nil }
                let end = min(all.count, position + chunkSize)
                defer { position = end }
                return UnsafeRawBufferPointer(rebasing: all[position..<end])
            }, spool: spool, sink: sink)
    }
    return ReadOutcome(sink: sink, spool: spool, rejection: rejection)
}

func readFixture(_ name: String, chunkSize: Int = 64 * 1024) throws -> ReadOutcome {
    read(try fixture(name), chunkSize: chunkSize)
}

// MARK: Valid exports

@Suite("XML export reader")
struct XMLReaderTests {
    @Test("the docs/RULES.md XML example yields its two lines with order values, line numbers and metadata")
    func specExample() throws {
        let outcome = try readFixture("valid")
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        #expect(sink.discarded == false)
        #expect(sink.endedLines == 2)
        #expect(sink.records.count == 2)

        let layout = try #require(sink.layout)
        #expect(Array(layout.names.prefix(Column.allCases.count)) == Column.allCases.map(\.csvName))
        for column in Column.allCases { #expect(layout.index(of: column) == column.rawValue) }
        #expect(layout.names.count == Column.allCases.count + 1)
        #expect(layout.names.last == "metadata.shift")
        #expect(layout.roles.last == .metadata(key: "shift"))

        let first = try #require(sink.record(lineID: "100-1"))
        #expect(first.line == 5)
        #expect(first.defect == nil)
        let expectedFirst: [String: String] = [
            "line_id": "100-1", "order_id": "100", "kind": "", "amount": "70.00", "currency": "usd",
            "transfer_group": "ORDER100", "destination": "acct_rest", "source_transaction": "ch_1",
            "payment_intent": "pi_1", "charge_amount": "100.00", "charge_currency": "usd",
            "charge_status": "succeeded", "charge_fee": "3.20", "payment_method_type": "card",
            "destination_country": "US", "recipient": "", "payout_method": "", "transfer": "",
            "transfer_on": "", "description": "", "metadata.shift": "",
        ]
        for (name, expected) in expectedFirst { #expect(sink.value(first, name) == expected, "\(name)") }

        let second = try #require(sink.record(lineID: "100-2"))
        #expect(second.line == 6, "the line where the multi-line <line> tag starts")
        #expect(second.defect == nil)
        #expect(sink.value(second, "kind") == "payout")
        #expect(sink.value(second, "recipient") == "acct_drv")
        #expect(sink.value(second, "payout_method") == "pm_ap_1")
        #expect(sink.value(second, "amount") == "20.00")
        #expect(sink.value(second, "order_id") == "100")
        #expect(sink.value(second, "source_transaction") == "ch_1")
        #expect(sink.value(second, "destination") == "")
        #expect(sink.value(second, "metadata.shift") == "evening")
    }

    @Test("results do not depend on how the bytes are chunked", arguments: [1, 2, 7, 64, 1 << 20])
    func chunking(chunkSize: Int) throws {
        for name in ["valid", "quoting", "line-schema-invalid", "order-schema-invalid"] {
            let whole = try readFixture(name)
            let pieces = try readFixture(name, chunkSize: chunkSize)
            #expect(pieces.rejection == nil)
            #expect(pieces.sink.records.map(\.fields) == whole.sink.records.map(\.fields), "\(name)")
            #expect(pieces.sink.records.map(\.line) == whole.sink.records.map(\.line), "\(name)")
            #expect(
                pieces.sink.records.map { $0.defect?.code } == whole.sink.records.map { $0.defect?.code }, "\(name)")
            #expect(pieces.spool.bytes == whole.spool.bytes, "\(name)")
        }
    }

    @Test("an empty export is valid and has no lines")
    func emptyExport() throws {
        let outcome = try readFixture("empty-export")
        #expect(outcome.rejection == nil)
        #expect(outcome.sink.records.isEmpty)
        #expect(outcome.sink.endedLines == 0)
    }

    // MARK: Schema errors

    @Test("a schema error inside a <line> rejects only that line")
    func lineSchemaError() throws {
        let outcome = try readFixture("line-schema-invalid")
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        #expect(sink.records.count == 5)
        #expect(sink.endedLines == 5)
        let codes = Dictionary(uniqueKeysWithValues: sink.records.map { (sink.value($0, "line_id"), $0.defect?.code) })
        #expect(codes == ["200-1": nil, "200-2": .schemaInvalid, "200-3": .schemaInvalid, "200-4": nil, "201-1": nil])
        let colour = try #require(sink.record(lineID: "200-2")?.defect)
        #expect(colour.message.contains("colour"))
        #expect(!colour.message.contains("urn:settle"))
        let note = try #require(sink.record(lineID: "200-3")?.defect)
        #expect(note.message.contains("note"))
        #expect(sink.record(lineID: "200-3")?.line == 6)
        #expect(sink.value(try #require(sink.record(lineID: "200-3")), "metadata.k") == "1")
    }

    @Test("a schema error on an <order>, early or late, rejects all its lines and only them")
    func orderSchemaError() throws {
        let outcome = try readFixture("order-schema-invalid")
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        let codes = Dictionary(uniqueKeysWithValues: sink.records.map { (sink.value($0, "line_id"), $0.defect?.code) })
        #expect(
            codes == [
                "300-1": .schemaInvalid, "300-2": .schemaInvalid,
                "301-1": .schemaInvalid, "301-2": .schemaInvalid, "302-1": nil,
            ])
        #expect(sink.record(lineID: "300-1")?.defect?.message.contains("discount") == true)
        #expect(sink.record(lineID: "301-2")?.defect?.message.contains("summary") == true)
        #expect(sink.value(try #require(sink.record(lineID: "300-2")), "charge_amount") == "9.00")
    }

    @Test("a <line> outside any <order> is still reported, rejected schema_invalid")
    func strayLine() throws {
        let outcome = try readFixture("quoting")
        #expect(outcome.rejection == nil)
        let stray = try #require(outcome.sink.record(lineID: "stray"))
        #expect(stray.defect?.code == .schemaInvalid)
        #expect(stray.line == 16)
        #expect(outcome.sink.value(stray, "order_id") == "")
        #expect(outcome.sink.record(lineID: "Q1-1")?.defect == nil)
    }

    /// libxml2's validator checks nothing of the root's content after a stray <line>: every
    /// line after it is rejected, both ways, never read unchecked (audit 60 F1: a misspelled
    /// `transferOnn` moved money at once, a `kindd="reversal"` was planned as a transfer).
    @Test("the lines after a <line> outside any <order> are rejected, not read unchecked", arguments: [false, true])
    func linesAfterAStrayLine(everyElement: Bool) throws {
        let document = """
            <orderExport xmlns="urn:settle:order-export:1">
            <order id="0"><line id="before" amount="1.00" currency="usd" destination="acct_a"/></order>
            <line id="stray" destination="acct_a" amount="1.00" currency="usd"/>
            <order id="1">
            <line id="held" destination="acct_a" amount="10.00" currency="usd" transferOnn="2099-01-01"/>
            <line id="reversed" destination="acct_a" amount="2.00" currency="usd" kindd="reversal"/>
            </order>
            <order id="2"><line id="fine" amount="1.00" currency="usd" destination="acct_c"/></order>
            </orderExport>

            """
        let outcome = read(Array(document.utf8), everyElement: everyElement)
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        #expect(sink.records.map { sink.value($0, "line_id") } == ["before", "stray", "held", "reversed", "fine"])
        #expect(sink.record(lineID: "before")?.defect == nil)
        #expect(sink.record(lineID: "stray")?.defect?.code == .schemaInvalid)
        for id in ["held", "reversed", "fine"] {
            let defect = try #require(sink.record(lineID: id)?.defect, "\(id)")
            #expect(
                defect.code == .schemaInvalid && defect.message.contains("outside any <order> came before it"), "\(id)")
        }
    }

    @Test(
        "a <line> inside a <line> is a line of its own, rejected schema_invalid, and the order's other lines stay",
        arguments: [false, true])
    func lineInsideALine(everyElement: Bool) throws {
        let document = """
            <orderExport xmlns="urn:settle:order-export:1">
            <order id="1">
            <line id="a" amount="1" currency="usd" destination="acct_a">
              <line id="b" amount="5" currency="usd" destination="acct_b"/>
              <metadata key="k" value="v"/>
            </line>
            </order>
            <order id="2"><line id="c" amount="1" currency="usd" destination="acct_c"/></order>
            </orderExport>

            """
        let outcome = read(Array(document.utf8), everyElement: everyElement)
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        #expect(sink.records.map { sink.value($0, "line_id") } == ["a", "b", "c"])
        let inner = try #require(sink.record(lineID: "b"))
        #expect(inner.defect?.code == .schemaInvalid)
        #expect(inner.line == 4)
        #expect(sink.value(inner, "order_id") == "1")
        #expect(sink.record(lineID: "a")?.defect?.code == .schemaInvalid)
        #expect(sink.record(lineID: "c")?.defect == nil)
    }

    @Test("a duplicate metadata key rejects its line")
    func duplicateMetadataKey() throws {
        let xml = """
            <orderExport xmlns="urn:settle:order-export:1"><order id="1">
            <line id="1-1" amount="1.00" currency="usd"><metadata key="a" value="1"/><metadata key="a" value="2"/></line>
            <line id="1-2" amount="1.00" currency="usd"><metadata key="a" value="3"/></line>
            </order></orderExport>
            """
        let outcome = read(Array(xml.utf8))
        #expect(outcome.rejection == nil)
        #expect(outcome.sink.record(lineID: "1-1")?.defect?.code == .schemaInvalid)
        #expect(outcome.sink.record(lineID: "1-2")?.defect == nil)
    }

    @Test("a missing required attribute rejects the line")
    func missingAttribute() {
        let xml = """
            <orderExport xmlns="urn:settle:order-export:1"><order id="1">
            <line id="1-1" currency="usd"/>
            </order></orderExport>
            """
        let outcome = read(Array(xml.utf8))
        #expect(outcome.rejection == nil)
        #expect(outcome.sink.records.first?.defect?.code == .schemaInvalid)
        #expect(outcome.sink.records.first?.defect?.message.contains("amount") == true)
    }

    @Test("a schema error outside any order rejects the file as not an export")
    func rootLevelSchemaError() throws {
        let outcome = try readFixture("root-level-invalid")
        #expect(outcome.rejection?.code == .xmlNotAnExport)
        #expect(outcome.rejection?.line == 5)
        #expect(outcome.sink.discarded)
    }

    // MARK: Whole-file rejections

    @Test(
        "documents rejected whole, with the file code and the line",
        arguments: [
            ("malformed", FileRejection.xmlMalformed, 7),
            ("truncated", .xmlMalformed, 5),
            ("doctype", .xmlDoctypeForbidden, 2),
            ("xxe", .xmlDoctypeForbidden, 2),
            ("billion-laughs", .xmlDoctypeForbidden, 2),
            ("wrong-root", .xmlNotAnExport, 1),
            ("wrong-namespace", .xmlNotAnExport, 1),
            ("deep", .xmlMalformed, 4),
        ])
    func rejectedWhole(name: String, code: FileRejection, line: Int) throws {
        let loadsBefore = LibXML.refusedLoads.load(ordering: .relaxed)
        for chunkSize in [1, 64 * 1024] {
            let outcome = try readFixture(name, chunkSize: chunkSize)
            let rejection = try #require(outcome.rejection, "\(name) must be rejected")
            #expect(rejection.code == code, "\(name): \(rejection.message)")
            #expect(rejection.line == line, "\(name): \(rejection.message)")
            #expect(!rejection.message.isEmpty)
            #expect(outcome.sink.discarded, "\(name)")
            #expect(outcome.sink.endedLines == nil, "\(name)")
        }
        #expect(LibXML.refusedLoads.load(ordering: .relaxed) == loadsBefore, "nothing was even asked for")
    }

    @Test("the XXE document never reads the file it names")
    func xxeReadsNothing() throws {
        let outcome = try readFixture("xxe")
        #expect(outcome.rejection?.code == .xmlDoctypeForbidden)
        #expect(!outcome.sink.records.contains { $0.fields.contains { $0.contains("root:") } })
        #expect(
            !outcome.spool.bytes.contains(0x3A)
                || !String(decoding: outcome.spool.bytes, as: UTF8.self).contains("root:"))
    }

    @Test("text that is not XML at all, or only blanks, is malformed")
    func notXML() {
        for text in ["not xml at all\n", "   \n\n", "<orderExport xmlns=\"urn:settle:order-export:1\">"] {
            let outcome = read(Array(text.utf8))
            #expect(outcome.rejection?.code == .xmlMalformed, "\(text)")
        }
    }

    @Test("an error of the byte source rejects the file with the source's code")
    func byteSourceError() throws {
        let bytes = try fixture("valid")
        let sink = CollectingSink()
        var calls = 0
        let rejection = bytes.withUnsafeBytes { all in
            XMLExportReader().read(
                name: "cut.xml.gz",
                next: {
                    calls += 1
                    if calls == 1 { return UnsafeRawBufferPointer(rebasing: all[0..<200]) }
                    throw FileRejectionReport(code: .gzipTruncated, message: "the gzip stream ends early", line: 0)
                }, spool: MemorySpool(), sink: sink)
        }
        #expect(rejection?.code == .gzipTruncated)
        #expect(sink.discarded)
    }

    // MARK: Limits

    @Test("an attribute value over the field limit rejects its line field_too_long")
    func fieldTooLong() {
        var limits = XMLReadLimits()
        limits.maxFieldBytes = 300
        let long = String(repeating: "x", count: 301)
        let xml = """
            <orderExport xmlns="urn:settle:order-export:1">
            <order id="1"><line id="1-1" amount="1.00" currency="usd" description="\(long)"/>
            <line id="1-2" amount="1.00" currency="usd"/></order>
            <order id="2" transferGroup="\(long)"><line id="2-1" amount="1.00" currency="usd"/></order>
            </orderExport>
            """
        let outcome = read(Array(xml.utf8), limits: limits)
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        #expect(sink.record(lineID: "1-1")?.defect?.code == .fieldTooLong)
        #expect(sink.record(lineID: "1-2")?.defect == nil)
        #expect(sink.record(lineID: "2-1")?.defect?.code == .fieldTooLong)
        #expect(sink.value(sink.record(lineID: "1-1")!, "description") == long, "the original value is kept")
    }

    @Test("an order larger than the order limit rejects the file")
    func orderTooLarge() {
        var limits = XMLReadLimits()
        limits.maxOrderBytes = 4096
        var xml = "<orderExport xmlns=\"urn:settle:order-export:1\"><order id=\"1\">\n"
        for index in 0..<200 { xml += "<line id=\"1-\(index)\" amount=\"1.00\" currency=\"usd\"/>\n" }
        xml += "</order></orderExport>\n"
        let outcome = read(Array(xml.utf8), limits: limits)
        #expect(outcome.rejection?.code == .xmlMalformed)
        #expect(outcome.rejection?.line == 1)
    }

    @Test("many orders stream through with bounded buffering")
    func manyOrders() {
        var xml = "<orderExport xmlns=\"urn:settle:order-export:1\">\n"
        for order in 0..<3000 {
            xml += "<order id=\"\(order)\" sourceTransaction=\"ch_\(order)\">\n"
            for line in 0..<3 {
                xml +=
                    "  <line id=\"\(order)-\(line)\" destination=\"acct_\(line)\" amount=\"\(line).50\" currency=\"usd\">"
                xml += "<metadata key=\"k\(line)\" value=\"v\(order)\"/></line>\n"
            }
            xml += "</order>\n"
        }
        xml += "</orderExport>\n"
        let outcome = read(Array(xml.utf8), chunkSize: 4096)
        #expect(outcome.rejection == nil)
        let sink = outcome.sink
        #expect(sink.records.count == 9000)
        #expect(sink.endedLines == 9000)
        #expect(sink.layout?.names.suffix(3) == ["metadata.k0", "metadata.k1", "metadata.k2"])
        let last = sink.records[8999]
        #expect(sink.value(last, "line_id") == "2999-2")
        #expect(sink.value(last, "source_transaction") == "ch_2999")
        #expect(sink.value(last, "metadata.k2") == "v2999")
        #expect(last.line == 1 + 2999 * 5 + 4)
        #expect(sink.records.allSatisfy { $0.defect == nil })
    }

    // MARK: Spool

    @Test("spool records read back to the values of each layout column")
    func spoolRoundTrip() throws {
        for name in ["valid", "quoting", "line-schema-invalid"] {
            let outcome = try readFixture(name)
            let sink = outcome.sink
            let layout = try #require(sink.layout)
            let all = parseCSV(outcome.spool.bytes)
            #expect(all.first == Column.allCases.map(\.csvName), "the header comes first")
            for record in sink.records {
                let bytes = outcome.spool.slice(offset: record.spoolOffset, length: record.spoolLength)
                #expect(bytes.last == 0x0A)
                let parsed = parseCSV(bytes)
                #expect(parsed.count == 1)
                let fields = try #require(parsed.first)
                #expect(fields.count <= layout.count)
                for index in 0..<layout.count {
                    let spooled = index < fields.count ? fields[index] : ""
                    // A record ends at the columns known when it was read (schema_refused
                    // comes with the first line the schema refused).
                    let field = index < record.fields.count ? record.fields[index] : ""
                    #expect(spooled == field, "\(name) \(layout.names[index])")
                }
            }
        }
    }

    @Test("values that need quoting survive, entities decoded and line overriding order")
    func quotingValues() throws {
        let outcome = try readFixture("quoting")
        let sink = outcome.sink
        let first = try #require(sink.record(lineID: "Q1-1"))
        #expect(first.line == 5)
        #expect(sink.value(first, "description") == "say \"hi\", then\na new line & more <tags> — café")
        #expect(sink.value(first, "transfer_group") == "group, with comma")
        #expect(sink.value(first, "source_transaction") == "ch_override")
        #expect(sink.value(first, "metadata.note") == "a,b")
        #expect(sink.value(first, "metadata.empty") == "")
        #expect(sink.value(first, "metadata.R&D") == "&&#38;", "&amp; and &#38; decode to & and nothing else does")
        let second = try #require(sink.record(lineID: "Q1-2"))
        #expect(sink.value(second, "transfer_group") == "", "a present empty attribute overrides the order's")
        #expect(sink.value(second, "source_transaction") == "ch_q")
        #expect(sink.value(second, "metadata.zeta") == "\rcr")
        #expect(sink.value(second, "metadata.note") == "")
        let spoolText = String(decoding: outcome.spool.bytes, as: UTF8.self)
        #expect(spoolText.contains("\"say \"\"hi\"\", then\na new line & more <tags> — café\""))
    }

    // MARK: Encodings and line ends

    @Test("CRLF line ends, a BOM and a Latin-1 document read like UTF-8 with LF")
    func encodingsAndLineEnds() throws {
        let lf = try fixture("valid")
        let reference = read(lf)
        let crlf = read(Array(String(decoding: lf, as: UTF8.self).replacing("\n", with: "\r\n").utf8))
        let bom = read([0xEF, 0xBB, 0xBF] + lf)
        for outcome in [crlf, bom] {
            #expect(outcome.rejection == nil)
            #expect(outcome.sink.records.map(\.fields) == reference.sink.records.map(\.fields))
            #expect(outcome.sink.records.map(\.line) == [5, 6])
        }
        var latin1 = Array(
            "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<orderExport xmlns=\"urn:settle:order-export:1\">\n<order id=\"1\">\n<line id=\"1-1\" amount=\"1.00\" currency=\"eur\" description=\"caf"
                .utf8)
        latin1 += [0xE9] + Array("\"/></order></orderExport>\n".utf8)
        let outcome = read(latin1, chunkSize: 3)
        #expect(outcome.rejection == nil)
        #expect(outcome.sink.records.first.map { outcome.sink.value($0, "description") } == "café")
        #expect(outcome.sink.records.first?.line == 4)
    }

    @Test("bytes that are not UTF-8 make the document malformed")
    func invalidUTF8() {
        var bytes = Array("<orderExport xmlns=\"urn:settle:order-export:1\"><order id=\"1\">\n<line id=\"".utf8)
        bytes += [0xC3, 0x28] + Array("\" amount=\"1.00\" currency=\"usd\"/></order></orderExport>".utf8)
        let outcome = read(bytes)
        #expect(outcome.rejection?.code == .xmlMalformed)
        #expect(outcome.rejection?.line == 2)
    }

    // MARK: Schema

    @Test("the built-in schema is schemas/order-export.xsd, and compiles")
    func builtInSchema() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let file = try String(contentsOf: root.appendingPathComponent("schemas/order-export.xsd"), encoding: .utf8)
        #expect(OrderExportSchema.text + "\n" == file)
        _ = XMLSchema.orderExport
        #expect(throws: XMLSchemaError.self) { try XMLSchema(xsd: Array("<notASchema/>".utf8)) }
    }
}
