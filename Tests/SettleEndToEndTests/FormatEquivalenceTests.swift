import Foundation
import SettleTestSupport
import Testing

/// The CSV and the XML reader agree (SPEC §2): one generated export, written once as CSV and
/// once as XML, gives the same plan — `results.csv` equal in every column but `source` (which
/// must name each file at the line its record or `<line>` starts), `instructions.jsonl`,
/// `summary.csv` and `charges.csv` equal byte for byte (the run id is pinned), `errors.csv`
/// and `deferred.csv` equal cell by cell under the same column names (their column order is
/// each input's own), and the same exit status. A place a reason names (`duplicate_line_id`:
/// where the first copy is) is compared as the generated line it points at.
///
/// Each seed is one case; to replay one, run the test with `arguments: [seed]`. The failure
/// message names the folder that holds both inputs and both plans.
///
/// Only exports with an exact twin in both formats are generated. Left out on purpose, as the
/// formats differ there by design (SPEC §2.3, the schema):
/// - what only CSV can say: a record with the wrong number of fields or a stray quote
///   (`malformed_record`), columns outside the contract, a `metadata.` column with no key;
/// - what only the schema refuses: a value longer than 255 characters (1000 for
///   `description`), a missing `id`, `amount` or `currency` attribute, an attribute the
///   schema does not know, a metadata key given twice on one line — a schema error on an
///   `<order>` rejects all its lines, where CSV checks each line;
/// - control characters other than tab, LF and CR (XML 1.0 cannot carry them); tab, LF and CR
///   are written as character references in XML, since a literal one in an attribute value
///   is normalised to a space;
/// - a file rejected whole (settle's messages then name a position in each format's terms).
///
/// The metadata columns of the CSV header come in the order the XML first names their keys:
/// a file's metadata columns are in the file's order, which is the order of the
/// `metadata[…]` params of an instruction.
@Suite struct FormatEquivalenceTests {
    static let asOf = "2026-11-29"

    @Test(arguments: 0..<30)
    func csvAndXMLOfOneExportGiveTheSamePlan(_ seed: Int) throws {
        var generator = ExportGenerator(seed: 0xF0_4A7E_0000 &+ UInt64(seed))
        let export = generator.export()
        let folder = SettleProcess.temporaryFolder()
        let csv = export.csv(random: &generator.random)
        let xml = export.xml(random: &generator.random)
        // Either may start with a byte order mark, and be gzipped (the name says which, for the
        // person replaying a seed; settle goes by the content).
        let csvFile = try Self.write(csv, to: folder, named: "orders.csv", random: &generator.random)
        let xmlFile = try Self.write(xml, to: folder, named: "orders.xml", random: &generator.random)
        // Half the seeds plan with a fresh ledger each, half with none (plan only warns).
        let withLedger = seed % 2 == 1
        let csvRun = try plan(csvFile, in: folder, name: "csv", withLedger: withLedger)
        let xmlRun = try plan(xmlFile, in: folder, name: "xml", withLedger: withLedger)
        let replay = Comment(rawValue: "seed \(seed): inputs and plans in \(folder.path)")

        #expect(csvRun.status == xmlRun.status, replay)
        #expect([0, 65].contains(csvRun.status), "\(csvRun.stderr)")

        let csvRows = Self.records(SettleProcess.read(csvRun.out.appendingPathComponent("results.csv")))
        let xmlRows = Self.records(SettleProcess.read(xmlRun.out.appendingPathComponent("results.csv")))
        try #require(csvRows.count == export.lineCount + 1, replay)
        try #require(xmlRows.count == export.lineCount + 1, replay)
        #expect(csvRows[0] == xmlRows[0], replay)
        let sourceColumn = try #require(csvRows[0].firstIndex(of: "source"))
        // A reason may name another line by its place (`duplicate_line_id`: where the first copy
        // is): that place is compared as the line it names.
        let csvPlaces = Self.places(of: csvFile, csv.sources)
        let xmlPlaces = Self.places(of: xmlFile, xml.sources)
        for index in 1..<csvRows.count {
            var (fromCSV, fromXML) = (csvRows[index], xmlRows[index])
            for column in fromCSV.indices where column != sourceColumn { fromCSV[column] = csvPlaces(fromCSV[column]) }
            for column in fromXML.indices where column != sourceColumn { fromXML[column] = xmlPlaces(fromXML[column]) }
            #expect(
                Self.dropping(sourceColumn, fromCSV) == Self.dropping(sourceColumn, fromXML),
                "\(replay): results row \(index)")
            #expect(fromCSV[sourceColumn] == "\(csvFile.path):\(csv.sources[index - 1])", replay)
            #expect(fromXML[sourceColumn] == "\(xmlFile.path):\(xml.sources[index - 1])", replay)
        }
        // errors.csv and deferred.csv keep each format's own columns (CSV: the input's header;
        // XML: every known column, then the metadata keys as first seen): the same rows, and
        // in each the same value under the same column name.
        for name in ["errors.csv", "deferred.csv"] {
            let fromCSV = Self.byColumn(SettleProcess.read(csvRun.out.appendingPathComponent(name)), places: csvPlaces)
            let fromXML = Self.byColumn(SettleProcess.read(xmlRun.out.appendingPathComponent(name)), places: xmlPlaces)
            guard fromCSV.count == fromXML.count else {
                Issue.record("\(replay): \(name) has \(fromCSV.count) rows from CSV, \(fromXML.count) from XML")
                continue
            }
            for (index, (csvRow, xmlRow)) in zip(fromCSV, fromXML).enumerated() {
                let differing = Set(csvRow.keys).union(xmlRow.keys).sorted().filter { column in
                    column != "source" && csvRow[column, default: ""] != xmlRow[column, default: ""]
                }
                #expect(
                    differing.isEmpty,
                    "\(replay): \(name) row \(index + 1) differs in \(differing.map { "\($0): \(csvRow[$0, default: ""]) | \(xmlRow[$0, default: ""])" })"
                )
            }
        }
        for name in ["instructions.jsonl", "summary.csv", "charges.csv"] {
            let fromCSV = SettleProcess.read(csvRun.out.appendingPathComponent(name))
            let fromXML = SettleProcess.read(xmlRun.out.appendingPathComponent(name))
            #expect(FileManager.default.fileExists(atPath: csvRun.out.appendingPathComponent(name).path), replay)
            #expect(fromCSV == fromXML, "\(replay): \(name) differs")
        }
    }

    private struct PlanRun {
        var out: URL
        var status: Int32
        var stderr: String
    }

    private func plan(_ input: URL, in folder: URL, name: String, withLedger: Bool) throws -> PlanRun {
        let out = folder.appendingPathComponent("plan-\(name)")
        var arguments = ["plan", input.path, "--out", out.path, "--as-of", Self.asOf, "-q"]
        if withLedger {
            let ledger = folder.appendingPathComponent("ledger-\(name).sqlite").path
            let created = try SettleProcess.run(["ledger", "init", "--ledger", ledger], in: folder)
            try #require(created.status == 0, "\(created.stderr)")
            arguments += ["--ledger", ledger]
        }
        // In the case's own folder, so that no `settle-ledger.sqlite` of the package is used.
        let outcome = try SettleProcess.run(arguments, environment: ["SETTLE_RUN_ID": "run_twins"], in: folder)
        return PlanRun(out: out, status: outcome.status, stderr: outcome.stderr)
    }

    private static func write(
        _ export: GeneratedExport.Written, to folder: URL, named name: String, random: inout SplitMix64
    ) throws -> URL {
        var data = export.data
        if export.isUTF8, random.chance(20) { data = Data([0xEF, 0xBB, 0xBF]) + data }
        let zipped = random.chance(25)
        if zipped { data = try gzipped(data) }
        let file = folder.appendingPathComponent(zipped ? name + ".gz" : name)
        try data.write(to: file)
        return file
    }

    /// Replaces each `file:line` of `file` in a text by the index of the generated line that
    /// starts there.
    private static func places(of file: URL, _ sources: [Int]) -> (String) -> String {
        let marker = file.path + ":"
        let lineAt = Dictionary(uniqueKeysWithValues: sources.enumerated().map { ($1, $0) })
        return { text in
            var parts = text.components(separatedBy: marker)
            for index in parts.indices.dropFirst() {
                let digits = parts[index].prefix { $0.isASCII && $0.isNumber }
                let line = Int(digits).flatMap { lineAt[$0] }.map { "line #\($0)" } ?? "?\(digits)"
                parts[index] = "<\(line)>" + parts[index].dropFirst(digits.count)
            }
            return parts.joined()
        }
    }

    /// The rows of an errors or deferred file as column name → value: known column names
    /// as settle matches them (spaces trimmed, any case), a reason's places as the lines they name.
    private static func byColumn(_ text: String, places: (String) -> String) -> [[String: String]] {
        let rows = records(text)
        guard let header = rows.first else { return [] }
        let names = header.map { name in
            let trimmed = name.trimmingCharacters(in: .whitespaces)
            return trimmed.lowercased().hasPrefix("metadata.") ? trimmed : trimmed.lowercased()
        }
        return rows.dropFirst().map { row in
            var cells: [String: String] = [:]
            for (name, value) in zip(names, row) { cells[name] = places(value) }
            return cells
        }
    }

    private static func dropping(_ column: Int, _ row: [String]) -> [String] {
        var row = row
        if column < row.count { row.remove(at: column) }
        return row
    }

    /// The records of a CSV text (RFC 4180: quoted fields may hold commas, quotes and newlines).
    private static func records(_ text: String) -> [[String]] {
        var records: [[String]] = []
        var record: [String] = []
        var field = ""
        var quoted = false
        var characters = Array(text.unicodeScalars).makeIterator()
        var pending: Unicode.Scalar?
        while let scalar = pending ?? characters.next() {
            pending = nil
            if quoted {
                if scalar == "\"" {
                    let next = characters.next()
                    if next == "\"" { field.unicodeScalars.append("\"") } else { quoted = false; pending = next }
                } else {
                    field.unicodeScalars.append(scalar)
                }
            } else if scalar == "\"" {
                quoted = true
            } else if scalar == "," {
                record.append(field)
                field = ""
            } else if scalar == "\n" {
                record.append(field)
                records.append(record)
                (record, field) = ([], "")
            } else if scalar != "\r" {
                field.unicodeScalars.append(scalar)
            }
        }
        if !field.isEmpty || !record.isEmpty { records.append(record + [field]) }
        return records
    }
}

/// A generated order export, before it is written in either format.
private struct GeneratedExport {
    /// One `<order>`: its id and its order-level facts (by CSV column; empty: not given).
    struct Order {
        var id: String
        var facts: [String: String]
        var lines: [Line]
    }

    /// One `<line>`: its id, its own columns (empty: not given), the order facts it gives
    /// itself (mostly `sourceTransaction`; in CSV they replace the order's in its row), and its
    /// metadata (keys in the export's key order).
    struct Line {
        var id: String
        var fields: [String: String]
        var overrides: [String: String]
        var metadata: [(key: String, value: String)]
    }

    /// A written export: its bytes, whether a byte order mark may go before them (UTF-8), and,
    /// per line in input order, the 1-based physical line where its record or `<line>` starts.
    struct Written {
        var data: Data
        var isUTF8 = true
        var sources: [Int]
    }

    static let orderColumns = [
        "transfer_group", "payment_intent", "source_transaction", "charge_amount", "charge_currency", "charge_status",
        "charge_fee", "payment_method_type",
    ]
    static let lineColumns = [
        "kind", "amount", "currency", "destination", "recipient", "payout_method", "transfer", "transfer_on",
        "description", "destination_country",
    ]

    var orders: [Order]
    /// Metadata keys in the order the XML first names them.
    var metadataKeys: [String]
    /// Whether empty optional values are written as `name=""` (else left out) in XML.
    var writesEmptyAttributes: Bool

    var lineCount: Int { orders.reduce(0) { $0 + $1.lines.count } }

    /// The CSV column of a line's value, its order's facts copied into every line.
    private func value(_ column: String, _ line: Line, of order: Order) -> String {
        switch column {
        case "line_id": return line.id
        case "order_id": return order.id
        case _ where column.hasPrefix("metadata."):
            let key = column.dropFirst("metadata.".count)
            return line.metadata.first { $0.key == key }?.value ?? ""
        case _ where Self.orderColumns.contains(column):
            return line.overrides[column] ?? order.facts[column, default: ""]
        default: return line.fields[column, default: ""]
        }
    }

    /// As CSV: columns in a random order (metadata last, in key order), header names in any
    /// case and with spaces around, LF or CRLF, blank lines, fields quoted when they must be and
    /// sometimes when they need not be.
    func csv(random: inout SplitMix64) -> Written {
        let columns =
            (["line_id", "order_id"] + Self.orderColumns + Self.lineColumns).shuffled(using: &random)
            + metadataKeys.map { "metadata." + $0 }
        let newline = random.chance(50) ? "\r\n" : "\n"
        let header = columns.map { name in
            if name.hasPrefix("metadata.") { return name }
            return random.pick([name, name, name, name.uppercased(), " \(name) "])
        }
        var text = header.map(Self.csvQuoted).joined(separator: ",") + newline
        var sources: [Int] = []
        var physicalLine = 2
        for order in orders {
            for line in order.lines {
                if random.chance(4) {
                    text += newline
                    physicalLine += 1
                }
                sources.append(physicalLine)
                let fields = columns.map { column -> String in
                    let field = value(column, line, of: order)
                    return random.chance(5) ? Self.quoted(field) : Self.csvQuoted(field)
                }
                let record = fields.joined(separator: ",")
                physicalLine += 1 + record.unicodeScalars.filter { $0 == "\n" }.count
                text += record + newline
            }
        }
        return Written(data: Data(text.utf8), sources: sources)
    }

    /// A CSV field, quoted when it must be.
    static func csvQuoted(_ field: String) -> String {
        field.unicodeScalars.contains { ",\"\r\n".unicodeScalars.contains($0) } ? quoted(field) : field
    }

    static func quoted(_ field: String) -> String { "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// As XML: order facts on `<order>`, line values on `<line>`, metadata as children. The
    /// layout varies as a person's or a tool's would: attributes on several lines, comments
    /// between lines, a `destinationCountry` all of an order's lines share given on `<order>`
    /// (the schema allows it there, and a line takes its order's values), or an order's facts
    /// on each of its lines instead, attributes in any order, a namespace prefix,
    /// CRLF, ISO-8859-1 (which libxml2 converts, and the reader then reads validating).
    func xml(random: inout SplitMix64) -> Written {
        let prefix = random.chance(25) ? "s:" : ""
        let latin1 = random.chance(10)
        var text = ""
        var newlines = 0
        func write(_ piece: String) {
            text += piece
            newlines += piece.utf8.count { $0 == 0x0A }
        }
        func attribute(_ column: String, _ value: String, required: Bool = false) -> String {
            guard required || !value.isEmpty || writesEmptyAttributes else { return "" }
            let name = column.split(separator: "_").enumerated().map { $0 == 0 ? String($1) : $1.capitalized }.joined()
            return "\(name)=\"\(Self.xmlEscaped(value, latin1: latin1))\""
        }
        var sources: [Int] = []
        write("<?xml version=\"1.0\" encoding=\"\(latin1 ? "ISO-8859-1" : "UTF-8")\"?>\n")
        write("<\(prefix)orderExport xmlns\(prefix.isEmpty ? "" : ":s")=\"urn:settle:order-export:1\">\n")
        for order in orders {
            let countries = Set(order.lines.map { $0.fields["destination_country", default: ""] })
            let hoisted = countries.count == 1 && countries.first != "" && random.chance(50) ? countries.first : nil
            // Sometimes every line gives the order's facts itself, and the <order> only its id.
            let factsOnLines = random.chance(10)
            var attributes = ["id=\"\(Self.xmlEscaped(order.id, latin1: latin1))\""]
            if !factsOnLines { attributes += Self.orderColumns.map { attribute($0, order.facts[$0, default: ""]) } }
            if let hoisted { attributes.append(attribute("destination_country", hoisted)) }
            attributes = attributes.filter { !$0.isEmpty }.shuffled(using: &random)
            write("  <\(prefix)order " + attributes.joined(separator: " ") + ">\n")
            for line in order.lines {
                if random.chance(10) { write("    <!-- line \(sources.count + 1) -->\n") }
                if random.chance(3) {
                    // Past the reader's 256 KiB chunk, so that a chunk ends in one of the next lines.
                    write("    <!-- " + String(repeating: "pad ", count: random.int(65_000...65_600)) + "-->\n")
                }
                sources.append(newlines + 1)
                var attributes = ["id=\"\(Self.xmlEscaped(line.id, latin1: latin1))\""]
                for column in Self.lineColumns where !(column == "destination_country" && hoisted != nil) {
                    let required = column == "amount" || column == "currency"
                    attributes.append(attribute(column, line.fields[column, default: ""], required: required))
                }
                for column in Self.orderColumns {
                    if let own = line.overrides[column] {
                        attributes.append(attribute(column, own, required: true))
                    } else if factsOnLines {
                        attributes.append(attribute(column, order.facts[column, default: ""]))
                    }
                }
                let separator = random.chance(15) ? "\n        " : " "
                attributes = attributes.filter { !$0.isEmpty }.shuffled(using: &random)
                write("    <\(prefix)line " + attributes.joined(separator: separator))
                if line.metadata.isEmpty {
                    write("/>\n")
                } else {
                    write(">\n")
                    for (key, value) in line.metadata {
                        let pair =
                            "key=\"\(Self.xmlEscaped(key, latin1: latin1))\" value=\"\(Self.xmlEscaped(value, latin1: latin1))\""
                        write("      <\(prefix)metadata \(pair)/>\n")
                    }
                    write("    </\(prefix)line>\n")
                }
            }
            write("  </\(prefix)order>\n")
        }
        write("</\(prefix)orderExport>\n")
        if random.chance(30) { text = text.replacingOccurrences(of: "\n", with: "\r\n") }
        guard latin1 else { return Written(data: Data(text.utf8), sources: sources) }
        return Written(data: Data(text.unicodeScalars.map { UInt8($0.value) }), isUTF8: false, sources: sources)
    }

    /// An attribute value: markup escaped, and tab, LF and CR as character references (a literal
    /// one would be normalised to a space); in ISO-8859-1, characters past it too.
    static func xmlEscaped(_ value: String, latin1: Bool) -> String {
        var out = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\t": out += "&#9;"
            case "\n": out += "&#10;"
            case "\r": out += "&#13;"
            case _ where latin1 && scalar.value > 0xFF: out += "&#\(scalar.value);"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

/// Generates small exports that exercise the rules: valid and invalid values, shared charges
/// and groups, pending and failed charges, bank debits, reversals, payouts, deferred dates,
/// duplicate line ids.
private struct ExportGenerator {
    var random: SplitMix64
    /// 1 when the export has bad values (ids, amounts, dates…), else 0: the weight of every
    /// bad choice is multiplied by it.
    private var noise = 1
    /// 1 when the export has lines that break a rule (duplicates, charges that disagree, are
    /// failed or over-allocated, reversals without a target), else 0. A clean export (neither)
    /// mostly plans, defers, nets and aggregates, and exits 0.
    private var conflict = 1

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    /// Currencies and their decimals in the input (ISK and UGX take whole units).
    static let currencies: [(code: String, decimals: Int)] = [
        ("usd", 2), ("usd", 2), ("usd", 2), ("eur", 2), ("gbp", 2), ("cad", 2), ("jpy", 0), ("krw", 0),
        ("kwd", 3), ("bhd", 3), ("isk", 0), ("ugx", 0),
    ]
    static let invalidAmounts = [
        "", "0", "0.00", "-5.00", "+5.00", "1,000.00", "1e3", " 5.00", "5.00 ", "5.001", "1.235", "abc", "12.5",
        "1234567890123", ".5", "5.", "１２",
    ]
    static let descriptions = [
        "Order food", "with, a comma", "say \"hi\"", "two\nlines", "crlf\r\nline", "=cmd|' /C calc'!A0", "café ☕",
        "tab\there", "'quoted", "<b>&amp;</b>", " padded ",
    ]
    static let metadataValues = ["evening", "lunch", "a,b", "q\"uote", "+1", "Zürich", "x y", "multi\nline"]
    static let keys = ["shift", "city", "note", "ref", "Shift", "a.b", "x y", "ключ", "k,1", "settle_instruction"]

    mutating func export() -> GeneratedExport {
        let level = random.below(3)
        (noise, conflict) = (level == 2 ? 1 : 0, level >= 1 ? 1 : 0)
        var orders: [GeneratedExport.Order] = []
        var lineIDs: [String] = []
        for number in 0..<random.int(5...20) {
            orders.append(order(number, previous: orders, lineIDs: &lineIDs))
        }
        var keys: [String] = []
        for line in orders.flatMap(\.lines) {
            for (key, _) in line.metadata where !keys.contains(key) { keys.append(key) }
        }
        return GeneratedExport(orders: orders, metadataKeys: keys, writesEmptyAttributes: random.chance(30))
    }

    private mutating func order(
        _ number: Int, previous: [GeneratedExport.Order], lineIDs: inout [String]
    ) -> GeneratedExport.Order {
        var id = "\(100 + number)"
        if conflict > 0, !previous.isEmpty, random.chance(5) { id = random.pick(previous).id }
        if random.chance(3) {
            id = random.pick(["O,\(number)", "=\(number)+1", "Ord \"\(number)\"", ""].dropLast(1 - noise))
        }
        let currency = random.pick(Self.currencies)
        var facts: [String: String] = [:]
        facts["transfer_group"] = pickWeighted([
            (35, ""), (50, "TG\(number)"), (10, "TG-shared\(random.int(0...2))"), (5, "=SUM(A1)"),
            // At the limits: 255 characters is what the schema allows (so no longer), and 255
            // bytes what settle does (so 203 characters in 403 bytes are too long in both).
            (2, String(repeating: random.pick(["g", "&"]), count: 253) + "\(number % 10)\(number / 10)"),
            (2 * noise, "TG\(number % 10)" + String(repeating: "é", count: 200)),
        ])
        facts["payment_intent"] = pickWeighted([
            (40, ""), (45, "pi_\(number)"), (10 * conflict, "pi_shared\(random.int(0...2))"),
            (5 * noise, "px_\(number)"),
        ])
        facts["source_transaction"] = pickWeighted([
            (30, ""), (50, "ch_\(number)"), (10, "py_\(number)"), (5 * conflict, "ch_shared\(random.int(0...1))"),
            (5 * noise, "tr_\(number)"),
        ])
        facts["charge_status"] = pickWeighted([
            (40, ""), (40, "succeeded"), (5, "pending"), (4 * conflict, "failed"),
            (5 * noise, random.pick(["Succeeded", "refunded"])),
        ])
        facts["payment_method_type"] = pickWeighted([
            (50, ""), (30, "card"),
            (20, random.pick(["sepa_debit", "au_becs_debit", "bacs_debit", "us_bank_account", "acss_debit"])),
        ])
        facts["charge_currency"] = pickWeighted([
            (40, ""), (50, currency.code), (5 * conflict, random.pick(Self.currencies).code),
            (5, currency.code.uppercased()),
        ])
        var lines: [GeneratedExport.Line] = []
        var transferMinor = 0
        var transfers: [(destination: String, minor: Int)] = []
        for index in 0..<random.int(1...4) {
            var lineID = "\(id)-\(index + 1)"
            if conflict > 0, !lineIDs.isEmpty, random.chance(5) { lineID = random.pick(lineIDs) }
            if random.chance(2) { lineID = random.pick(["L,\(number)", "=\(number)", ""].dropLast(1 - noise)) }
            if random.chance(1) { lineID = String(repeating: "<", count: 249) + "\(100_000 + number * 10 + index)" }
            lineIDs.append(lineID)
            var line = GeneratedExport.Line(id: lineID, fields: [:], overrides: [:], metadata: [])
            var lineCurrency = currency
            if noise > 0, random.chance(10) { lineCurrency = random.pick(Self.currencies) }
            line.fields["currency"] = pickWeighted([
                (92, lineCurrency.code), (4, lineCurrency.code.uppercased()), (2 * noise, "xyz"), (2 * noise, ""),
            ])
            let minor = lineCurrency.decimals == 3 ? random.int(1...9_999) * 10 : random.int(1...99_999)
            let valid = noise == 0 || !random.chance(12)
            line.fields["amount"] =
                valid ? amountText(minor, decimals: lineCurrency.decimals) : random.pick(Self.invalidAmounts)
            switch random.int(0...(noise > 0 ? 99 : 94)) {
            case 0..<55:
                line.fields["kind"] = random.chance(85) ? "transfer" : ""
                let destination = pickWeighted([
                    (92, "acct_d\(random.int(0...5))"), (5 * noise, "acc_x"), (3 * noise, ""),
                ])
                line.fields["destination"] = destination
                line.fields["destination_country"] = pickWeighted([
                    (50, ""), (40, random.pick(["US", "CA", "GB", "DE", "FR", "CH", "us", "de"])),
                    (10 * noise, random.pick(["JP", "BR", "AU", "ZZ"])),
                ])
                if valid, lineCurrency.code == currency.code {
                    transferMinor += minor
                    transfers.append((destination, minor))
                }
            case 55..<77:
                let method = pickWeighted([(90, "pm_ap_\(random.int(0...2))"), (10 * noise, "")])
                line.fields["kind"] = method.isEmpty || random.chance(70) ? "payout" : ""
                line.fields["recipient"] = pickWeighted([(95, "acct_r\(random.int(0...3))"), (5 * noise, "rcpt_9")])
                line.fields["payout_method"] = method
                line.fields["destination_country"] = pickWeighted([(60, ""), (30, "US"), (10 * noise, "CA")])
                if noise == 0 || random.chance(85) {
                    line.fields["currency"] = "usd"
                    line.fields["amount"] = valid ? amountText(minor, decimals: 2) : line.fields["amount"]
                }
            case 77..<95:
                line.fields["kind"] = "reversal"
                if let target = transfers.last, random.chance(60) {
                    line.fields["destination"] = target.destination
                    let part =
                        conflict == 0 || random.chance(85) ? max(1, target.minor / random.int(2...4)) : target.minor + 1
                    let step = lineCurrency.decimals == 3 ? 10 : 1  // three decimals end in 0
                    line.fields["amount"] = amountText((part + step - 1) / step * step, decimals: lineCurrency.decimals)
                } else if conflict == 0 || random.chance(60) {
                    line.fields["transfer"] = pickWeighted([(90, "tr_\(random.int(0...3))"), (10 * noise, "ch_9")])
                } else {
                    line.fields["destination"] = "acct_d\(random.int(0...5))"
                }
            default:
                line.fields["kind"] = random.pick(["refund", "TRANSFER", "Payout"])
                line.fields["destination"] = "acct_d\(random.int(0...5))"
            }
            if random.chance(20) {
                line.fields["transfer_on"] = pickWeighted([
                    (80, random.pick(["2026-11-29", "2026-11-30", "2026-12-24", "2026-11-01", "2027-01-15"])),
                    (20 * noise, random.pick(["2026-13-01", "29.11.2026", "2027-02-30", "2026-11-29T00:00"])),
                ])
            }
            if random.chance(30) {
                line.fields["description"] = pickWeighted([
                    (95, random.pick(Self.descriptions)), (2, String(repeating: "d", count: 1000)),
                    (2, String(repeating: "&<", count: 500)), (2, String(repeating: "é", count: 500)),
                    (2 * noise, String(repeating: "é", count: 1000)),
                    (2 * noise, String(repeating: "ü", count: 600)),
                ])
            }
            if random.chance(30) {
                // Stripe's limits, which settle checks: keys to 40 bytes, values to 500.
                let long = (
                    key: String(repeating: "k", count: 40 + noise), value: String(repeating: "v", count: 500 + noise)
                )
                for key in Self.keys + [long.key]
                where random.chance(key == long.key ? 5 : Self.keys.prefix(4).contains(key) ? 40 : 8) {
                    let value = pickWeighted([(3, long.value), (4, ""), (93, random.pick(Self.metadataValues))])
                    line.metadata.append((key, value))
                }
            }
            if conflict > 0 || line.fields["kind"] != "reversal", random.chance(10) {
                line.overrides["source_transaction"] = random.pick(
                    ["ch_line\(number)", "", "py_line\(number)", "src_bad"].dropLast(1 - noise))
            }
            if conflict > 0, random.chance(5) {
                // Another order fact of its own (the schema allows any on a line).
                let step = currency.decimals == 3 ? 10 : 1
                let own = [
                    "transfer_group": "TG-line\(number)", "payment_intent": "pi_line\(number)",
                    "charge_amount": amountText(random.int(1...99_999) * step, decimals: currency.decimals),
                    "charge_currency": currency.code, "charge_status": random.pick(["succeeded", "pending"]),
                    "charge_fee": "0", "payment_method_type": random.pick(["card", "sepa_debit"]),
                ]
                let column = random.pick(own.keys.sorted())
                line.overrides[column] = random.chance(30) ? "" : own[column]
            }
            lines.append(line)
        }
        let chargeMinor: Int
        switch random.int(0...(conflict > 0 ? 99 : 89)) {
        case 0..<65: chargeMinor = transferMinor + random.int(0...5_000) * (currency.decimals == 3 ? 10 : 1)
        case 65..<90: chargeMinor = transferMinor
        default: chargeMinor = max(0, transferMinor - (currency.decimals == 3 ? 10 : 1))
        }
        facts["charge_amount"] = pickWeighted([
            (40, ""), (57, amountText(max(chargeMinor, 1), decimals: currency.decimals)), (3 * noise, "abc"),
        ])
        facts["charge_fee"] = pickWeighted([
            (50, ""),
            (47, amountText(random.int(1...500) * (currency.decimals == 3 ? 10 : 1), decimals: currency.decimals)),
            (3 * noise, "-1"),
        ])
        return GeneratedExport.Order(id: id, facts: facts, lines: lines)
    }

    /// A valid amount in major units, sometimes with fewer decimals or an extra zero.
    private mutating func amountText(_ minor: Int, decimals: Int) -> String {
        guard decimals > 0 else { return "\(minor)" }
        var scale = 1
        for _ in 0..<decimals { scale *= 10 }
        var fraction = String(minor % scale)
        fraction = String(repeating: "0", count: decimals - fraction.count) + fraction
        if random.chance(15) { while fraction.last == "0" { fraction.removeLast() } }
        if random.chance(10) { fraction += "0" }
        return fraction.isEmpty ? "\(minor / scale)" : "\(minor / scale).\(fraction)"
    }

    private mutating func pickWeighted(_ choices: [(weight: Int, value: String)]) -> String {
        var roll = random.below(choices.reduce(0) { $0 + $1.weight })
        for choice in choices {
            if roll < choice.weight { return choice.value }
            roll -= choice.weight
        }
        return choices[choices.count - 1].value
    }
}
