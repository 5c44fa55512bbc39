import SettleCore
import SettleTestSupport
import Testing

@testable import SettleWrite

/// settle's own files (results.csv, spooled records) are split by the one CSV parser
/// (`CSVScanner`, which the export reader uses) exactly as the former own-file splitter
/// (`CSVField.records` / `CSVField.split`, kept below as the reference) split them.
@Suite struct CSVOwnFileTests {
    // MARK: the former own-file splitter, verbatim, as the reference

    static func formerRecords(_ bytes: [UInt8]) -> [[UInt8]] {
        var records: [[UInt8]] = []
        var start = 0
        var inQuotes = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x22 {
                inQuotes.toggle()
            } else if byte == 0x0A, !inQuotes {
                var end = index
                if end > start, bytes[end - 1] == 0x0D { end -= 1 }
                records.append(Array(bytes[start..<end]))
                start = index + 1
            }
            index += 1
        }
        if start < bytes.count { records.append(Array(bytes[start...])) }
        return records
    }

    static func formerSplit(_ record: [UInt8]) -> [[UInt8]] {
        var fields: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        var inQuotes = false
        var end = record.count
        // (Changed from the former splitter: a CR is part of a line end only before an LF.)
        if end > 0, record[end - 1] == 0x0A {
            end -= 1
            if end > 0, record[end - 1] == 0x0D { end -= 1 }
        }
        var fieldStarted = false
        while index < end {
            let byte = record[index]
            if inQuotes {
                if byte == 0x22 {
                    if index + 1 < end, record[index + 1] == 0x22 {
                        current.append(0x22)
                        index += 2
                        continue
                    }
                    inQuotes = false
                } else {
                    current.append(byte)
                }
            } else if byte == 0x2C {
                fields.append(current)
                current.removeAll(keepingCapacity: true)
                fieldStarted = false
            } else if byte == 0x22 && !fieldStarted {
                inQuotes = true
                fieldStarted = true
            } else {
                current.append(byte)
                fieldStarted = true
            }
            index += 1
        }
        fields.append(current)
        return fields
    }

    // MARK: rows as settle writes them

    static let cells: [String] = [
        "", "plain", "a,b", "say \"hi\"", "\"", "\"\"", ",", "two\nlines", "crlf\r\nend", "lone\rcr",
        "=SUM(A1)", "+1", "-5", "@cmd", "\tTab", "\rcr first", "'=already", "'quote", "=a,b", "-\"x\"\n",
        "ü€ 😀", "117-1", "12.50", " spaced ", "trailing,", ",leading",
    ]

    /// One row written by settle's writer: every cell guarded or not, as the column says.
    static func row(_ cells: [String], guarded: [Bool]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, cell) in cells.enumerated() {
            if index > 0 { out.append(0x2C) }
            CSVField.append(cell, to: &out, guardFormula: guarded[index])
        }
        out.append(0x0A)
        return out
    }

    static func expected(_ cells: [String], guarded: [Bool]) -> [[UInt8]] {
        zip(cells, guarded).map { $1 ? CSVField.guarded($0) : Array($0.utf8) }
    }

    @Test func everyCellOfARowComesBackAsWritten() {
        for width in 1...4 {
            var generator = SplitMix64(seed: UInt64(width))
            for _ in 0..<400 {
                let cells = (0..<width).map { _ in Self.cells[Int(generator.next() % UInt64(Self.cells.count))] }
                let guarded = (0..<width).map { _ in generator.next() % 2 == 0 }
                let record = Self.row(cells, guarded: guarded)
                let fields = CSVScanner.fields(record)
                #expect(fields == Self.expected(cells, guarded: guarded))
                #expect(fields == Self.formerSplit(record))
                // A spooled record may also end in CRLF, or nothing (a CR alone is data).
                let bare = Array(record.dropLast())
                #expect(CSVScanner.fields(bare + [0x0D, 0x0A]) == fields)
                #expect(CSVScanner.fields(bare) == fields)
                // A well-formed record splits the same when read without losing bytes.
                for ending: [UInt8] in [[0x0A], [0x0D, 0x0A], []] {
                    let lossless = (bare + ending).withUnsafeBytes { CSVScanner.losslessFields(of: $0) }
                    #expect(lossless.map(\.value) == fields)
                }
            }
        }
    }

    /// A malformed record keeps every byte: a stray quote's field as read, an unclosed
    /// quote's rest of the record, each field's start (audit 5 #3).
    @Test func aMalformedRecordLosesNoByte() {
        func split(_ text: String) -> [String] {
            Array(text.utf8).withUnsafeBytes { CSVScanner.losslessFields(of: $0) }.map {
                String(decoding: $0.value, as: UTF8.self)
            }
        }
        #expect(split("S1,\"1.00\"5,usd\n") == ["S1", "\"1.00\"5", "usd"])
        #expect(split("a,\"x\"\"y\"z,b\r\n") == ["a", "\"x\"\"y\"z", "b"])
        #expect(split("a,b\"c,d") == ["a", "b\"c", "d"])
        #expect(split("a,\"open, to the end\n") == ["a", "\"open, to the end"])
        #expect(split("a,\"q,\"\"x\"\"\",") == ["a", "q,\"x\"", ""])
        #expect(split("") == [""])
        let starts = Array("ab,\"c\"d,,e".utf8).withUnsafeBytes { CSVScanner.losslessFields(of: $0) }.map(\.start)
        #expect(starts == [0, 3, 8, 9])
    }

    @Test func aWholeFileSplitsIntoTheSameRecordsAndFields() {
        var generator = SplitMix64(seed: 42)
        var file: [UInt8] = []
        CSVField.header(["line_id", "status", "amount", "reason"], to: &file)
        var rows: [[[UInt8]]] = [
            [Array("line_id".utf8), Array("status".utf8), Array("amount".utf8), Array("reason".utf8)]
        ]
        let guarded = [true, false, false, true]
        for _ in 0..<500 {
            let cells = (0..<4).map { _ in Self.cells[Int(generator.next() % UInt64(Self.cells.count))] }
            file += Self.row(cells, guarded: guarded)
            rows.append(Self.expected(cells, guarded: guarded))
        }
        let records = CSVScanner.records(file)
        #expect(records == rows)
        #expect(records == Self.formerRecords(file).map(Self.formerSplit))
    }

    @Test func edgeCasesMatchTheFormerSplitter() {
        let records: [String] = [
            "", "\n", "a", "a,", ",", ",,\n", "\"\"", "\"\",\"\"\n", "\"a\"\"b\",c\r\n", "\"x,\ny\",z\n",
            "'=1,'+2,'-3,'@4\n", "a,\"b\rc\",d\r", "a,b\rc,d\r\n", "\"\"\"\"\n", "1,2,3,4,5,6,7,8,9,10\n", "a,\"b\"\"c",
            "\"open\nto the end",
        ]
        for text in records {
            let bytes = Array(text.utf8)
            #expect(CSVScanner.fields(bytes) == Self.formerSplit(bytes), "\(text.debugDescription)")
        }
        let file = Array("h1,h2\r\n\"a\nb\",\"c\"\"\"\r\nx,'=y\n".utf8)
        #expect(CSVScanner.records(file) == Self.formerRecords(file).map(Self.formerSplit))
        #expect(
            CSVScanner.records(file) == [
                [[0x68, 0x31], [0x68, 0x32]], [Array("a\nb".utf8), Array("c\"".utf8)], [[0x78], Array("'=y".utf8)],
            ])
    }

    @Test func theExportReaderRemovesTheGuardTheOwnFileReadersKeep() {
        let record = Array("'=SUM(A1),'abc,'+1\n".utf8)
        let fields = CSVScanner.fields(record)
        #expect(fields == [Array("'=SUM(A1)".utf8), Array("'abc".utf8), Array("'+1".utf8)])
        let unguarded = fields.map { field in field.withUnsafeBytes { [UInt8](CSVScanner.unguarded($0)) } }
        #expect(unguarded == [Array("=SUM(A1)".utf8), Array("'abc".utf8), Array("+1".utf8)])
    }

    /// The guard round-trips every cell: written with the guard, split by the one parser and
    /// unguarded, a cell comes back byte for byte, and no written cell starts like a formula.
    /// Cells are drawn from the bytes that matter (`'`, the formula starts, quotes, commas,
    /// line ends), so runs like `''=x` and `'@` come up thousands of times.
    @Test func theGuardGivesBackEveryCellExactly() {
        var generator = SplitMix64(seed: 0x67_7561_7264)
        let alphabet = Array("''''==+-@\t\r\n,\"ab1 ".utf8)
        var guardedLooking = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...6, using: &generator)
            let cell = (0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
            var out: [UInt8] = []
            cell.withUnsafeBytes { CSVField.append($0, to: &out, guardFormula: true) }
            out.append(0x0A)
            let fields = CSVScanner.fields(out)
            #expect(fields.count == 1, "\(cell) written as \(out)")
            guard let written = fields.first else { continue }
            if let first = written.first {
                #expect(!CSVScanner.isFormulaStart(first), "\(cell) written as \(written)")
            }
            let back = written.withUnsafeBytes { [UInt8](CSVScanner.unguarded($0)) }
            #expect(back == cell, "\(cell) written as \(written) reads back as \(back)")
            if cell.first == 0x27, cell.withUnsafeBytes({ CSVScanner.needsGuard($0) }) { guardedLooking += 1 }
        }
        #expect(guardedLooking > 1000, "the generator must draw cells that look guarded already")
    }

    /// Header cells are guarded like any cell (audit 13: an input column `=SUM(A1)` was copied
    /// unguarded into errors.csv), and a file settle wrote gives its names back unguarded.
    @Test func aHeaderNamedLikeAFormulaIsGuardedAndComesBack() throws {
        let names = ["line_id", "order_id", "amount", "currency", "destination", "=SUM(A1)", "'@x"]
        var out: [UInt8] = []
        CSVField.header(names + ["reason_code", "reason", "source"], to: &out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == "line_id,order_id,amount,currency,destination,'=SUM(A1),''@x,reason_code,reason,source\n")
        let written = CSVScanner.fields(out).map { String(decoding: $0, as: UTF8.self) }
        let layout = try FileLayout.csv(header: written, aliases: [:])
        #expect(Array(layout.names.prefix(names.count)) == names)
        // Not a file settle wrote (no reason_code, reason, source at the end): names as they are.
        let export = try FileLayout.csv(header: Array(written.prefix(names.count)), aliases: [:])
        #expect(export.names.last == "''@x")
    }

    @Test func aCellThatLooksGuardedGetsOneMoreApostrophe() {
        func written(_ text: String) -> String {
            var out: [UInt8] = []
            CSVField.append(text, to: &out, guardFormula: true)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(written("'=QD1") == "''=QD1")
        #expect(written("''-x") == "'''-x")
        #expect(written("'abc") == "'abc")
        #expect(written("'") == "'")
        #expect(written("=x") == "'=x")
        let unguarded = ["''=QD1", "'''-x", "'abc", "''", "'=x"].map { text in
            var text = text
            return text.withUTF8 { String(decoding: CSVScanner.unguarded(UnsafeRawBufferPointer($0)), as: UTF8.self) }
        }
        #expect(unguarded == ["'=QD1", "''-x", "'abc", "''", "=x"])
    }
}
