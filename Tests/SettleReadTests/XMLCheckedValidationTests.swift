import SettleCore
import SettleTestSupport
import Testing

@testable import SettleRead

/// The reader validates with libxml2 only the top-level elements its own checks cannot vouch
/// for. These tests generate valid and broken exports from a seed and read each twice: with
/// libxml2's validator on every event and the usual way; verdicts, reason codes, messages,
/// positions, values and spool bytes must be the same.
@Suite("XML checked validation agrees with libxml2's")
struct XMLCheckedValidationTests {
    struct Outcome: Equatable {
        var rejection: FileRejectionReport?
        var records: [[String]]
        var lines: [Int]
        var defects: [String]
        var spool: [UInt8]
        var ended: Int?
    }

    static func read(_ bytes: [UInt8], chunkSize: Int, everyElement: Bool) -> Outcome {
        let outcome = SettleReadTests.read(bytes, chunkSize: chunkSize, name: "p.xml", everyElement: everyElement)
        let (rejection, sink, spool) = (outcome.rejection, outcome.sink, outcome.spool)
        return Outcome(
            rejection: rejection, records: sink.records.map(\.fields), lines: sink.records.map(\.line),
            defects: sink.records.map { $0.defect.map { "\($0.code.rawValue): \($0.message)" } ?? "" },
            spool: spool.bytes, ended: sink.endedLines)
    }

    static let orderAttributes = [
        "transferGroup", "paymentIntent", "sourceTransaction", "chargeAmount", "chargeCurrency", "chargeStatus",
        "chargeFee", "paymentMethodType", "destinationCountry",
    ]
    static let lineAttributes = [
        "kind", "destination", "recipient", "payoutMethod", "transfer", "transferOn", "description",
    ]

    /// A value, sometimes near or past a length limit, sometimes with entities or non-ASCII.
    static func value(_ random: inout SplitMix64, limit: Int) -> String {
        switch random.below(12) {
        case 0: return String(repeating: "a", count: limit + random.below(3) - 1)
        case 1: return String(repeating: "é", count: limit / 2 + random.below(3) * (limit / 2))
        case 2: return "R&amp;D &#38; &lt;x&gt; &quot;"
        case 3: return ""
        case 4: return String(repeating: "&amp;", count: limit / 4 + random.below(3))
        default: return "v\(random.below(1000))"
        }
    }

    /// An attribute that the schema refuses, or an element or text where none may be.
    static func mischief(_ random: inout SplitMix64, in element: String) -> String {
        switch random.below(10) {
        case 0: return " colour=\"red\""
        case 1: return " xml:lang=\"en\""
        case 2: return " x:extra=\"1\" xmlns:x=\"urn:other\""
        case 3: return " xsi:type=\"s:Line\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\""
        case 4: return element == "order" ? " amount=\"1.00\"" : " id2=\"1\""
        default: return ""
        }
    }

    static func child(_ random: inout SplitMix64) -> String {
        random.pick([
            "<note/>", "text", "<![CDATA[ ]]>", "<![CDATA[x]]>", "&amp;", "<o:line xmlns:o=\"urn:other\"/>",
            "<metadata key=\"k\" value=\"v\"/>", "<line id=\"n\" amount=\"1\" currency=\"usd\"/>", "<!-- c -->",
            "<?pi x?>", "  \n ", "&#32;",
        ])
    }

    static func document(seed: UInt64) -> String {
        var random = SplitMix64(seed: seed)
        let broken = random.chance(70)
        var xml = random.chance(50) ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" : ""
        let prefixed = random.chance(15)
        let root = prefixed ? "s:orderExport" : "orderExport"
        let ns = prefixed ? "xmlns:s=\"urn:settle:order-export:1\"" : "xmlns=\"urn:settle:order-export:1\""
        let q = prefixed ? "s:" : ""
        xml += "<\(root) \(ns)"
        if broken, random.chance(4) {
            xml += random.pick([
                " version=\"1\"", " xsi:schemaLocation=\"a b\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"",
            ])
        }
        xml += ">\n"
        for orderIndex in 0..<(1 + random.below(5)) {
            if broken, random.chance(4) {
                xml += random.pick([
                    "  text at the root\n", "  <foreign/>\n", "  <o:order xmlns:o=\"urn:other\" id=\"z\"/>\n",
                    "  <![CDATA[ ]]>\n", "  <\(q)line id=\"stray\(orderIndex)\" amount=\"1.00\" currency=\"usd\"/>\n",
                    "  <\(q)line id=\"stray\" colour=\"x\"><\(q)metadata key=\"\" value=\"v\"/></\(q)line>\n",
                ])
            }
            xml += "  <\(q)order id=\"\(random.chance(3) ? value(&random, limit: 255) : "O\(orderIndex)")\""
            if broken, random.chance(5) { xml = String(xml.dropLast(xml.hasSuffix("\"") ? 0 : 0)) }
            for name in orderAttributes where random.chance(40) {
                xml += " \(name)=\"\(broken && random.chance(10) ? value(&random, limit: 255) : "x")\""
            }
            if broken, random.chance(10) { xml += mischief(&random, in: "order") }
            if broken, random.chance(3) { xml = xml.replacingOccurrences(of: "id=\"O\(orderIndex)\"", with: "") }
            xml += random.chance(10) ? "\n         " : ""
            xml += ">\n"
            let lineCount = broken && random.chance(5) ? 0 : 1 + random.below(3)
            for lineIndex in 0..<lineCount {
                var attributes: [(String, String)] = [
                    ("id", "O\(orderIndex)-\(lineIndex)"), ("amount", "1.00"), ("currency", "usd"),
                ]
                if broken, random.chance(8) { attributes.remove(at: random.below(3)) }
                for name in lineAttributes + orderAttributes where random.chance(15) {
                    let limit = name == "description" ? 1000 : 255
                    attributes.append((name, broken && random.chance(20) ? value(&random, limit: limit) : "y"))
                }
                xml += "    <\(q)line"
                for (name, text) in attributes { xml += (random.chance(10) ? "\n      " : " ") + "\(name)=\"\(text)\"" }
                if broken, random.chance(10) { xml += mischief(&random, in: "line") }
                var content = ""
                for _ in 0..<random.below(3) {
                    let key =
                        broken && random.chance(10)
                        ? random.pick(["", String(repeating: "k", count: 256), "k"]) : "k\(random.below(4))"
                    let text = broken && random.chance(10) ? value(&random, limit: 1000) : "m"
                    var metadata = "<\(q)metadata key=\"\(key)\" value=\"\(text)\""
                    if broken, random.chance(8) { metadata += random.pick([" extra=\"1\"", ""]) }
                    if broken, random.chance(5) {
                        metadata = "<\(q)metadata value=\"\(text)\""
                    }
                    if broken, random.chance(8) {
                        metadata += ">\(child(&random))</\(q)metadata>"
                    } else {
                        metadata += "/>"
                    }
                    content += "\n      " + metadata
                }
                if broken, random.chance(8) { content += child(&random) }
                xml += content.isEmpty && random.chance(70) ? "/>\n" : ">\(content)\n    </\(q)line>\n"
            }
            if broken, random.chance(6) { xml += "    " + child(&random) + "\n" }
            xml += "  </\(q)order>\n"
        }
        if broken, random.chance(3) { xml += "<!DOCTYPE x>" }
        if broken, random.chance(3) { xml += "  <unclosed>\n" }
        xml += "</\(root)>\n"
        return xml
    }

    @Test("generated valid and broken exports read the same both ways", arguments: 0..<8)
    func agree(batch: Int) {
        var suspectDocuments = 0
        for index in 0..<60 {
            let seed = UInt64(batch * 1000 + index)
            let text = Self.document(seed: seed)
            let bytes = Array(text.utf8)
            let chunkSize = [1 << 16, 7, 100][index % 3]
            let slow = Self.read(bytes, chunkSize: chunkSize, everyElement: true)
            let fast = Self.read(bytes, chunkSize: chunkSize, everyElement: false)
            #expect(fast == slow, "seed \(seed):\n\(text)")
            if slow.rejection != nil || slow.defects.contains(where: { $0.hasPrefix("schema_invalid") }) {
                suspectDocuments += 1
            }
        }
        // The generator must exercise the re-validation, not only clean documents.
        #expect(suspectDocuments >= 2)
    }

    @Test("a document in another encoding is read validating every element, with the same result")
    func otherEncoding() {
        let text =
            "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<orderExport xmlns=\"urn:settle:order-export:1\">\n"
            + "<order id=\"1\"><line id=\"1-1\" amount=\"1.00\" currency=\"usd\" colour=\"r\"/>"
            + "<line id=\"1-2\" amount=\"1.00\" currency=\"usd\" description=\"caf\u{E9}\"/></order></orderExport>\n"
        let bytes = text.unicodeScalars.map { UInt8($0.value) }
        for chunkSize in [1, 1 << 16] {
            let slow = Self.read(bytes, chunkSize: chunkSize, everyElement: true)
            let fast = Self.read(bytes, chunkSize: chunkSize, everyElement: false)
            #expect(fast == slow)
            #expect(
                fast.defects.first?.contains("colour") == true, "\(fast.defects) \(String(describing: fast.rejection))")
            #expect(fast.defects.count == 2)
        }
    }
}
