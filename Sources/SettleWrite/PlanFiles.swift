public import SettleCore

/// Gives back the original text of input records (from the spool files in the plan folder).
public protocol OriginalRecords {
    /// The fields of the record at `offset..<offset+length` in file `file`'s spool; throws
    /// when the spool cannot give the record whole (a row must never lose its input columns).
    func fields(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [[UInt8]]
    /// The record's bytes as read (a malformed record's row keeps every one of them).
    func bytes(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [UInt8]
}

/// The columns of `errors.csv` and `deferred.csv`: every input column of every file (known
/// columns merged by meaning, others by name), in order of first appearance, then
/// `reason_code, reason, source`.
public struct CorrectionLayout: Sendable {
    public var names: [String] = []
    /// For each file, the output column of each of its input columns (-1: dropped).
    public var mapping: [[Int]] = []

    /// Per column, whether its cells get the formula guard: all but the amounts, which stay
    /// numbers (``FileLayout/isGuarded(_:)``; the CSV reader removes the guard from the same
    /// columns of a file settle wrote).
    public var guarded: [Bool] = []

    /// Per input file that settle wrote (an `errors.csv` fed back), per input column, whether
    /// its spooled cells carry the formula guard (``FileLayout/guardedCells``); nil for any
    /// other file. Its cells are read back without it: the strings the rules saw.
    public var guardedInputs: [[Bool]?] = []

    /// Per input file, whether it is a CSV file (``FileLayout/fromHeader``): each of its
    /// records has as many cells as its header, and one with more or fewer does not line up.
    /// An XML line's spooled record ends at the columns known when it was read (the rest
    /// are empty).
    public var csvInputs: [Bool] = []

    /// A layout read back from a manifest: amount columns are known by their names.
    public init(names: [String], mapping: [[Int]], guardedInputs: [[Bool]?] = [], csvInputs: [Bool] = []) {
        self.names = names
        self.mapping = mapping
        self.guardedInputs = guardedInputs
        self.csvInputs = csvInputs
        guarded = names.map { name in FileLayout.isGuarded(Column(headerName: name).map { .known($0) } ?? .extra) }
    }

    /// The input columns of one row in this layout: the spooled record's fields, each in its
    /// output column, with the guard a file settle wrote put on them removed.
    public func inputValues(of row: CorrectionRow, records: any OriginalRecords) throws(WriteFailure) -> [[UInt8]] {
        try inputCells(of: row, records: records).map(\.bytes)
    }

    /// ``inputValues(of:records:)`` with, per cell, whether it is a field with a stray quote
    /// kept as read (``CorrectionCell/strayQuote``).
    ///
    /// A record whose cells do not line up with its file's columns (more or fewer) comes back
    /// with as many more or fewer cells (``misaligned(_:map:columns:width:)``), and a field with
    /// a stray quote is written as it was read: either way its row is rejected
    /// `malformed_record` again until a person fixes it. In a file settle wrote, settle's
    /// reason cells are the last three of the row, whatever its count.
    public func inputCells(of row: CorrectionRow, records: any OriginalRecords) throws(WriteFailure)
        -> [CorrectionCell]
    {
        guard row.spoolLength > 0 else { return [CorrectionCell](repeating: CorrectionCell(), count: names.count) }
        let map = row.file < mapping.count ? mapping[row.file] : []
        var fields: [CorrectionCell]
        let csv = row.file < csvInputs.count && csvInputs[row.file]
        if row.reasonCode == ReasonCode.malformedRecord.code || row.reasonCode == ReasonCode.fieldTooLong.code
            || (csv && ReasonCode.copyCodes.contains(row.reasonCode))
        {
            // The reader could not take the record as the header says: every byte as read. A
            // later copy of a line_id (or an export's copy that conflicts with a held line) is
            // rejected so whatever else is wrong with it, a stray quote too: read the same way,
            // a well-formed record gives the same cells (audit 49 F1 of the input fuzzer: a
            // copy's `"10.00"5` was written `10.00`, and fed back it was planned).
            let bytes = try records.bytes(file: row.file, offset: row.spoolOffset, length: row.spoolLength)
            fields = bytes.withUnsafeBytes { CSVScanner.losslessFields(of: $0) }.map {
                CorrectionCell(bytes: $0.value, strayQuote: $0.strayQuote)
            }
        } else {
            fields = try records.fields(file: row.file, offset: row.spoolOffset, length: row.spoolLength).map {
                CorrectionCell(bytes: $0)
            }
        }
        // settle's own reason cells (a fed-back file: its columns dropped, -1, are the last).
        let reasonCells = map.reversed().prefix { $0 < 0 }.count
        let columns = map.count - reasonCells
        if fields.count >= reasonCells { fields.removeLast(reasonCells) }
        // A file settle wrote: every cell may carry the guard (an amount one that is no number).
        if row.file < guardedInputs.count, guardedInputs[row.file] != nil {
            for position in fields.indices { fields[position].removeGuard() }
        }
        if csv, fields.count != columns {
            return CorrectionLayout.misaligned(fields, map: map, columns: columns, width: names.count)
        }
        var values = [CorrectionCell](repeating: CorrectionCell(), count: names.count)
        for (position, value) in fields.enumerated() where position < columns && map[position] >= 0 {
            values[map[position]] = value
        }
        return values
    }

    /// The row of a record with more or fewer cells than its file's `columns`: each cell it
    /// has in its output column, then the cells past the columns, as read; a short record
    /// lacks the cells of the columns it lacks. No byte is dropped, and the row has as many
    /// cells more or fewer than the header as the record had: it cannot be taken column by
    /// column (fed back unchanged it is `malformed_record` again), and a person who puts the
    /// missing cells in, or the extra ones where they belong, makes it a normal row.
    static func misaligned(_ fields: [CorrectionCell], map: [Int], columns: Int, width: Int) -> [CorrectionCell] {
        var values = [CorrectionCell](repeating: CorrectionCell(), count: width)
        var lacking = [Bool](repeating: false, count: width)
        for position in 0..<columns where map[position] >= 0 {
            if position < fields.count {
                values[map[position]] = fields[position]
            } else {
                lacking[map[position]] = true
            }
        }
        if fields.count > columns { return values + fields[columns...] }
        return values.indices.filter { !lacking[$0] }.map { values[$0] }
    }

    public init(files: [Batch.InputFile]) {
        var index: [String: Int] = [:]
        for file in files {
            var map: [Int] = []
            // A file's columns go to distinct output columns: an extra column named twice in
            // one file is two columns (the second one's cells must not overwrite the first's).
            var extrasNamed: [String: Int] = [:]
            for (position, role) in file.layout.roles.enumerated() {
                let key: String
                switch role {
                case .known(let column): key = "known:" + column.csvName
                case .metadata(let name): key = "metadata:" + name
                case .extra:
                    let name = file.layout.names[position]
                    let seen = extrasNamed[name, default: 0]
                    extrasNamed[name] = seen + 1
                    key = "extra:" + name + (seen == 0 ? "" : "\u{0}\(seen)")
                case .annotation:
                    map.append(-1)
                    continue
                }
                if let existing = index[key] {
                    map.append(existing)
                } else {
                    index[key] = names.count
                    map.append(names.count)
                    names.append(file.layout.names[position])
                    guarded.append(FileLayout.isGuarded(role))
                }
            }
            mapping.append(map)
            guardedInputs.append(file.layout.guardedCells)
            csvInputs.append(file.layout.fromHeader)
        }
    }

    /// Header row names, with settle's three annotation columns.
    public var header: [String] { names + ["reason_code", "reason", "source"] }
}

/// One input cell of an `errors.csv` or `deferred.csv` row.
public struct CorrectionCell: Equatable {
    public var bytes: [UInt8] = []
    /// A field with a stray quote, kept as read (`"1.00"5`, `say "hi" now`): written as it is,
    /// not quoted, so that fed back unchanged it is the same malformed field (a quoted copy
    /// would read as a clean value, and the line would move with nobody having fixed it).
    public var strayQuote = false

    public init(bytes: [UInt8] = [], strayQuote: Bool = false) {
        self.bytes = bytes
        self.strayQuote = strayQuote
    }

    /// The cell without the formula guard settle's writers put on it (``CSVField/appendCell(_:to:column:)``).
    mutating func removeGuard() {
        if strayQuote, bytes.count >= 3, bytes[0] == 0x22, bytes[1] == 0x27 {
            // `"'=…"x`: the guard sits inside the opening quote.
            let inner = bytes[1...].withUnsafeBytes { CSVScanner.unguarded($0).count }
            if inner == bytes.count - 2 { bytes.remove(at: 1) }
            return
        }
        let kept = bytes.withUnsafeBytes { CSVScanner.unguarded($0).count }
        if kept < bytes.count { bytes.removeFirst(bytes.count - kept) }
    }
}

/// One line for `errors.csv` or `deferred.csv`.
public struct CorrectionRow {
    public var file: Int
    public var spoolOffset: UInt64
    public var spoolLength: UInt32
    public var reasonCode: String
    public var reason: String
    public var source: String

    public init(
        file: Int, spoolOffset: UInt64, spoolLength: UInt32, reasonCode: String, reason: String,
        source: String
    ) {
        self.file = file
        self.spoolOffset = spoolOffset
        self.spoolLength = spoolLength
        self.reasonCode = reasonCode
        self.reason = reason
        self.source = source
    }
}

/// Writes `errors.csv` / `deferred.csv`: input strings byte for byte, so a fixed file can be
/// fed back in, except that a text cell a spreadsheet would run as a formula gets a leading
/// `'` (as in every CSV file settle writes; amount columns stay numbers). The CSV reader
/// removes exactly that guard from a file settle wrote, so feeding it back gives the
/// original strings (and so does a copy a spreadsheet saved without the `'`).
public enum CorrectionFile {
    /// The header of the input columns alone (no reason columns): what a held line is fed
    /// back under.
    public static func inputHeader(_ layout: CorrectionLayout) -> [UInt8] {
        var out: [UInt8] = []
        for (index, name) in layout.names.enumerated() {
            if index > 0 { out.append(0x2C) }
            CSVField.append(Array(name.utf8), to: &out, guardFormula: false)
        }
        out.append(0x0A)
        return out
    }

    /// One row's input columns in the layout, original strings, no formula guard, ending in LF.
    public static func inputRecord(_ row: CorrectionRow, layout: CorrectionLayout, records: any OriginalRecords)
        throws(WriteFailure) -> [UInt8]
    {
        let values = try layout.inputValues(of: row, records: records)
        var out: [UInt8] = []
        for (column, value) in values.enumerated() {
            if column > 0 { out.append(0x2C) }
            CSVField.append(value, to: &out, guardFormula: false)
        }
        out.append(0x0A)
        return out
    }

    public static func write(
        path: String, layout: CorrectionLayout, rows: some Sequence<CorrectionRow>,
        records: any OriginalRecords, keeping existing: [[UInt8]] = [], into set: FileSet? = nil
    ) throws(WriteFailure)
        -> (sha256: String, rows: Int)
    {
        let writer = try Writer(path: path, layout: layout, keeping: existing)
        for row in rows { try writer.add(row, records: records) }
        return try writer.commit(into: set)
    }

    /// One correction file written row by row, so that errors.csv and deferred.csv can be
    /// written side by side in one forward pass over the spools (no record kept in memory).
    public final class Writer {
        private let file: OutputFile
        private let layout: CorrectionLayout

        public init(path: String, layout: CorrectionLayout, keeping existing: [[UInt8]] = []) throws(WriteFailure) {
            file = try OutputFile(path: path)
            self.layout = layout
            file.withBuffer { CSVField.header(layout.header, to: &$0) }
            for raw in existing {
                file.append(bytes: raw)
                file.endRow()
            }
        }

        public func add(_ row: CorrectionRow, records: any OriginalRecords) throws(WriteFailure) {
            let layout = self.layout
            let cells = try layout.inputCells(of: row, records: records)
            file.withBuffer { out in
                for (column, cell) in cells.enumerated() {
                    CSVField.appendCell(
                        cell, to: &out, text: column < layout.guarded.count ? layout.guarded[column] : true)
                    out.append(0x2C)
                }
                CSVField.append(row.reasonCode, to: &out, guardFormula: true)
                out.append(0x2C)
                CSVField.append(row.reason, to: &out, guardFormula: true)
                out.append(0x2C)
                CSVField.append(row.source, to: &out, guardFormula: true)
                out.append(0x0A)
            }
            file.endRow()
        }

        public func commit(into set: FileSet? = nil) throws(WriteFailure) -> (sha256: String, rows: Int) {
            let sha = try file.commit(into: set)
            return (sha, file.rows)
        }
    }
}

/// `results.csv`: one row for every input line.
public enum ResultsFile {
    public static let header = [
        "line_id", "order_id", "group", "kind", "payee", "amount", "amount_minor", "currency", "status",
        "instruction_id", "stripe_id", "reason_code", "reason", "source",
    ]

    /// Column positions, for readers of the file (apply).
    public enum Field: Int {
        case lineID, orderID, group, kind, payee, amount, amountMinor, currency, status, instructionID,
            stripeID, reasonCode, reason, source
    }

    public static func write(path: String, plan: SettlementPlan, into set: FileSet? = nil) throws(WriteFailure) -> (
        sha256: String, rows: Int
    ) {
        let batch = plan.batch
        let file = try OutputFile(path: path)
        file.withBuffer { CSVField.header(header, to: &$0) }
        // A file name that needs quoting or a formula guard takes the slow path.
        let sourceNeedsQuoting = batch.files.map { input in
            var probe: [UInt8] = []
            CSVField.append(input.name, to: &probe, guardFormula: true)
            return probe != Array(input.name.utf8)
        }
        for index in batch.lines.indices {
            plan.prefetchForWriting(line: index)
            let line = batch.lines[index]
            file.withBuffer { out in
                symbol(line.lineID, batch, &out)
                symbol(line.orderID, batch, &out)
                symbol(line.group, batch, &out)
                if !line.kindInvalid { out.append(contentsOf: line.kind.name.utf8) }
                out.append(0x2C)
                symbol(batch.payee(of: line), batch, &out)
                if line.amount > 0 {
                    MinorUnits.append(line.amount, currency: line.currency, to: &out)
                    out.append(0x2C)
                    MinorUnits.appendDecimal(line.amount, to: &out)
                    out.append(0x2C)
                    out.append(contentsOf: line.currency.code.utf8)
                    out.append(0x2C)
                } else {
                    out.append(contentsOf: [0x2C, 0x2C, 0x2C])
                }
                out.append(contentsOf: line.status.name.utf8)
                out.append(0x2C)
                let instruction = plan.instructionOfLine[index]
                if instruction >= 0 { plan.instructions[Int(instruction)].appendID(to: &out) }
                out.append(0x2C)
                if let stripeID = plan.knownStripeIDs[index] {
                    CSVField.append(stripeID, to: &out, guardFormula: true)
                }
                out.append(0x2C)
                if line.reason == .refusedByStripe {
                    // Stripe's own code, as it came over the network: quoted and guarded.
                    CSVField.append(batch.reasonCode(of: line), to: &out, guardFormula: true)
                } else {
                    out.append(contentsOf: line.reason.code.utf8)
                }
                out.append(0x2C)
                if line.status != .planned {
                    CSVField.append(batch.reasonText(of: line), to: &out, guardFormula: true)
                }
                out.append(0x2C)
                if sourceNeedsQuoting[Int(line.file)] {
                    CSVField.append(batch.source(of: line), to: &out, guardFormula: true)
                } else {
                    batch.appendSource(of: line, to: &out)
                }
                out.append(0x0A)
            }
            file.endRow()
        }
        let sha = try file.commit(into: set)
        return (sha, file.rows)
    }

    @inline(__always)
    static func symbol(_ symbol: Symbol, _ batch: Batch, _ out: inout [UInt8]) {
        batch.symbols.withBytes(symbol) { CSVField.append($0, to: &out, guardFormula: true) }
        out.append(0x2C)
    }
}
