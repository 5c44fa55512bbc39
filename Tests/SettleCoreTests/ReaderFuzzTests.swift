import Foundation
import SettleCore
import SettleRead
import SettleTestSupport
import Testing

/// Seeded fuzzing of the CSV reader and the amount parser: random and mutated bytes never
/// crash them, and every record is accounted for. A fixed number of rounds in the normal run;
/// `SETTLE_FUZZ_SECONDS=<n>` (see `make fuzz`) runs each for that long instead.
@Suite struct ReaderFuzzTests {
    static let seed: UInt64 = 0xF0_22ED

    /// Rounds until the budget is spent: a count, or a time when the environment asks for one.
    static func rounds(default count: Int, _ body: (UInt64) throws -> Void) rethrows {
        let first = PropertyBudget.seed(default: seed)
        if let seconds = PropertyBudget.fuzzSeconds {
            let deadline = ContinuousClock.now + .seconds(seconds)
            var round: UInt64 = 0
            while ContinuousClock.now < deadline {
                try body(first &+ round)
                round += 1
            }
            print("fuzzed \(round) rounds from seed \(first)")
        } else {
            for round in 0..<UInt64(count) { try body(first &+ round) }
        }
    }

    // MARK: - CSV reader

    /// Forwards to the line checker and counts what the reader hands over.
    final class CountingSink: RecordSink {
        let checker: LineChecker
        var records = 0
        var lastLine = 0
        var ended: Int? = nil
        var discarded = false
        var fields: [[String]] = []
        var problems: [String] = []

        init(options: RuleOptions) { checker = LineChecker(options: options) }

        func beginFile(name: String, layout: FileLayout) -> Int { checker.beginFile(name: name, layout: layout) }

        func record(_ record: RecordView, file: Int) {
            records += 1
            if record.line <= lastLine { problems.append("record at line \(record.line) after line \(lastLine)") }
            lastLine = record.line
            fields.append(record.fields.map { String(decoding: $0, as: UTF8.self) })
            checker.record(record, file: file)
        }

        func endFile(_ file: Int, lines: Int) {
            ended = lines
            checker.endFile(file, lines: lines)
        }

        func discardFile(_ file: Int) {
            discarded = true
            checker.discardFile(file)
        }
    }

    /// Records (header included) an RFC 4180 reader finds in these bytes, the way docs/RULES.md reads
    /// them: blank lines skipped, a quote opens a field only at its start; nil for an unclosed quote.
    static func referenceRecordCount(_ bytes: [UInt8]) -> Int? {
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), lf = UInt8(0x0A), cr = UInt8(0x0D)
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        let end = bytes.count
        var records = 0
        // A line ends at an LF or a CRLF; a CR alone is data (SPEC: LF or CRLF line ends).
        func endsLine(_ at: Int) -> Bool { bytes[at] == lf || (bytes[at] == cr && at + 1 < end && bytes[at + 1] == lf) }
        func stops(_ at: Int) -> Bool { bytes[at] == comma || endsLine(at) }
        while index < end {
            if endsLine(index) {
                index += bytes[index] == cr ? 2 : 1
                continue
            }
            fields: while true {
                if index < end, bytes[index] == quote {
                    var scan = index + 1
                    while true {
                        guard scan < end else { return nil }
                        if bytes[scan] == quote {
                            if scan + 1 < end, bytes[scan + 1] == quote {
                                scan += 2
                                continue
                            }
                            break
                        }
                        scan += 1
                    }
                    index = scan + 1
                    while index < end, !stops(index) { index += 1 }
                } else {
                    while index < end, !stops(index) { index += 1 }
                }
                if index >= end { break fields }
                if bytes[index] == comma {
                    index += 1
                } else {
                    index += bytes[index] == cr ? 2 : 1
                    break fields
                }
            }
            records += 1
        }
        return records
    }

    static func read(_ bytes: [UInt8], options: RuleOptions) throws -> (CountingSink, ReadFailure?) {
        let path = NSTemporaryDirectory() + "settle-fuzz-\(getpid())-\(UUID().uuidString).csv"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = CountingSink(options: options)
        let failure = CSVExportReader().read(
            name: "fuzz.csv", source: try ByteSource(path: path), sink: sink)
        return (sink, failure)
    }

    /// Every record is one line, or the file is rejected whole and gives none.
    static func accountFor(_ bytes: [UInt8], options: RuleOptions) throws -> [String] {
        let (sink, failure) = try read(bytes, options: options)
        var problems = sink.problems
        let expected = referenceRecordCount(bytes)
        if let failure {
            if !sink.checker.batch.lines.isEmpty { problems.append("a file rejected whole kept lines") }
            // A bad header is found first, before an unclosed quote further down.
            let header: Set<FileRejection> = [.headerInvalid, .headerMissingColumn]
            if expected == nil, failure.code != .csvUnclosedQuote, !header.contains(failure.code) {
                problems.append("unclosed quote reported as \(failure.code.rawValue)")
            }
            if expected != nil, failure.code == .csvUnclosedQuote { problems.append("every quote is closed") }
            return problems
        }
        if sink.ended != sink.records { problems.append("endFile says \(sink.ended ?? -1), \(sink.records) records") }
        // Every string kept (ids, group keys: results.csv's cells) is UTF-8, whatever the bytes
        // read (audit 35 C6: a group key made from an order id kept its invalid bytes).
        let symbols = sink.checker.batch.symbols
        for raw in 1...max(1, symbols.count) where raw <= symbols.count {
            let bytes = symbols.bytes(Symbol(raw: Int32(raw)))
            if !UTF8Check.isValid(bytes) {
                problems.append("symbol \(Array(bytes)) is not UTF-8")
                break
            }
        }
        if sink.checker.batch.lines.count != sink.records {
            problems.append("\(sink.records) records became \(sink.checker.batch.lines.count) lines")
        }
        if let expected {
            if expected - 1 != sink.records {
                problems.append("\(expected - 1) records expected, \(sink.records) read")
            }
        } else {
            problems.append("an unclosed quote was not rejected")
        }
        return problems
    }

    static func mutate(_ bytes: [UInt8], using random: inout SplitMix64) -> [UInt8] {
        var bytes = bytes
        let special: [UInt8] = [0x22, 0x2C, 0x0A, 0x0D, 0x00, 0xFF, 0xC3, 0x20, 0xEF, 0xBB, 0xBF]
        for _ in 0..<random.int(1...6) {
            let position = bytes.isEmpty ? 0 : random.int(0...bytes.count - 1)
            switch random.int(0...4) {
            case 0 where !bytes.isEmpty: bytes[position] = random.pick(special)
            case 1: bytes.insert(random.pick(special), at: min(position, bytes.count))
            case 2 where !bytes.isEmpty: bytes.remove(at: position)
            case 3 where !bytes.isEmpty: bytes[position] = UInt8(truncatingIfNeeded: random.next())
            case 4: bytes.removeLast(min(bytes.count, random.int(0...20)))
            default: break
            }
        }
        return bytes
    }

    /// A line rejected for a column that is not UTF-8 still counts at its amount, which
    /// parses (audit 35 C9); a malformed record (a field too many) does not: its cells need
    /// not be the columns they stand under.
    @Test func aLineNotInUTF8KeepsItsAmount() throws {
        var bytes = Array("line_id,order_id,amount,currency,destination,description\n".utf8)
        bytes += Array("1,10,12.50,usd,acct_a,caf".utf8) + [0xFF] + Array("\n".utf8)
        bytes += Array("2,20,7.00,usd,acct_b,x,extra\n".utf8)
        let (sink, failure) = try Self.read(bytes, options: TestExport.options())
        #expect(failure == nil)
        let lines = sink.checker.batch.lines
        #expect(lines.map(\.reason) == [.encodingInvalid, .malformedRecord])
        #expect(lines.map(\.amount) == [1250, 0])
    }

    @Test func csvReaderAccountsForEveryRecordOfMutatedExports() throws {
        var failures = 0
        try Self.rounds(default: 150) { seed in
            guard failures < 5 else { return }
            var generator = BatchGenerator(seed: seed)
            let generated = generator.generate()
            let text = CaseRunner.csv(generated, rows: generated.rows, crlf: seed % 2 == 0)
            // Unmutated: every field comes back as written.
            let (sink, failure) = try Self.read(Array(text.utf8), options: generated.options)
            var problems = sink.problems
            if failure != nil || sink.records != generated.rows.count {
                problems.append("the generated export read as \(sink.records) records, \(failure?.code.rawValue ?? "")")
            } else {
                for (row, fields) in zip(generated.rows, sink.fields) where !row.malformed {
                    let expected = GeneratedCase.header.map { row[$0] }
                    if fields != expected { problems.append("fields \(fields) read back, \(expected) written") }
                }
            }
            var random = generator.random
            for _ in 0..<4 {
                problems += try Self.accountFor(
                    Self.mutate(Array(text.utf8), using: &random), options: generated.options)
            }
            // Pure noise after a valid header.
            var noise = Array((GeneratedCase.header.joined(separator: ",") + "\n").utf8)
            for _ in 0..<random.int(0...200) {
                noise.append(
                    random.pick([0x22, 0x2C, 0x0A, 0x0D, 0x61, 0x31, UInt8(truncatingIfNeeded: random.next())]))
            }
            problems += try Self.accountFor(noise, options: generated.options)
            if !problems.isEmpty {
                failures += 1
                Issue.record("seed \(seed): \(problems.prefix(5).joined(separator: "; "))")
            }
        }
    }

    // MARK: - Amount parser

    @Test func amountParserNeverAcceptsWhatIsNotAnAmount() {
        let currencies = ["usd", "jpy", "kwd", "isk", "eur", "bhd", "krw", "ugx"].map { Currency($0)! }
        let alphabet = Array("0123456789.0000-+e ,\u{0}".utf8) + [0xFF, 0xC3]
        var failures = 0
        Self.rounds(default: 20_000) { seed in
            guard failures < 5 else { return }
            var random = SplitMix64(seed: seed)
            let currency = random.pick(currencies)
            // A valid amount, written canonically, then perhaps mutated.
            var generator = BatchGenerator(seed: seed)
            let minor = generator.amount(currency, upTo: random.chance(10) ? 999_999_999 : 100_000)
            var text = Array(BatchGenerator.format(minor, currency).utf8)
            let mutated = random.chance(70)
            if mutated {
                for _ in 0..<random.int(1...4) {
                    let position = random.int(0...text.count)
                    if random.chance(50) || text.isEmpty {
                        text.insert(random.pick(alphabet), at: position)
                    } else {
                        text.remove(at: min(position, text.count - 1))
                    }
                }
            }
            let allowZero = random.chance(20)
            let result = text.withUnsafeBytes { MinorUnits.parse($0, currency: currency, allowZero: allowZero) }
            var problems: [String] = []
            let shown = String(decoding: text, as: UTF8.self)
            switch result {
            case .success(let value):
                if value < (allowZero ? 0 : 1) || value > MinorUnits.maximum * 100 {
                    problems.append("'\(shown)' parsed to \(value)")
                }
                if text.contains(where: { !(0x30...0x39).contains($0) && $0 != 0x2E }) {
                    problems.append("'\(shown)' has a byte that is not a digit or '.' yet parsed")
                }
                if text.filter({ $0 == 0x2E }).count > 1 { problems.append("'\(shown)' has two points yet parsed") }
                // What parses, written canonically, parses to the same value.
                let canonical = Array(MinorUnits.format(value, currency: currency).utf8)
                let again = canonical.withUnsafeBytes { MinorUnits.parse($0, currency: currency, allowZero: true) }
                if again != .success(value) { problems.append("'\(shown)' → \(value) → '\(canonical)' → \(again)") }
            case .failure(let error):
                if !mutated { problems.append("canonical '\(shown)' (\(currency.code)) refused: \(error)") }
            }
            if !mutated, result != .success(minor) { problems.append("'\(shown)' is \(minor), parsed \(result)") }
            if !problems.isEmpty {
                failures += 1
                Issue.record("seed \(seed): \(problems.joined(separator: "; "))")
            }
        }
    }
}
