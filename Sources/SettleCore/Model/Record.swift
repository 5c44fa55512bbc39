/// How the columns of one input file map to what settle understands.
///
/// Built from a CSV header (or grown by the XML reader as metadata keys appear).
public final class FileLayout: @unchecked Sendable {
    /// What an input column is.
    public enum Role: Equatable, Sendable {
        case known(Column)
        case metadata(key: String)
        /// Kept as it was, carried into `errors.csv` and `deferred.csv`.
        case extra
        /// settle's own `reason_code`, `reason`, `source` in a fed-back file: dropped.
        case annotation
    }

    /// Header names as they appear in the input.
    public private(set) var names: [String] = []
    public private(set) var roles: [Role] = []
    /// Input column index of each known column, -1 when absent.
    public private(set) var indexOfColumn = [Int](repeating: -1, count: Column.allCases.count)
    /// The `metadata.<key>` columns: input index and key.
    public private(set) var metadataColumns: [(index: Int, key: String)] = []
    /// Built from a CSV header: each record of the file has as many cells as the header, and
    /// one with more or fewer cannot be taken column by column (`malformed_record`).
    public private(set) var fromHeader = false
    /// In a file settle wrote, its ``schemaRefusedColumn`` (an extra column otherwise).
    public private(set) var schemaRefusedIndex: Int?

    public init() {}

    /// The columns whose cells settle writes as they came, without a formula guard: the
    /// amounts stay numbers.
    public static let unguardedColumns: Set<Column> = [.amount, .chargeAmount, .chargeFee]

    /// Whether a cell of a column gets the formula guard in a file settle writes.
    public static func isGuarded(_ role: Role) -> Bool {
        if case .known(let column) = role { return !unguardedColumns.contains(column) }
        return true
    }

    /// For a file settle wrote (`errors.csv`, `deferred.csv`: its header ends in
    /// `reason_code, reason, source`), per column whether its cells may carry the formula
    /// guard: every one (an amount column's cell has it when it is no number, `'=1+2`); nil
    /// for any other file. Reading such a file removes exactly that guard.
    public var guardedCells: [Bool]? {
        let tail = names.suffix(3).map { $0.trimmingSpaces().lowercased() }
        guard tail == ["reason_code", "reason", "source"] else { return nil }
        return roles.map { _ in true }
    }

    /// settle's own `reason_code, reason, source` at the end of a file settle wrote: 3, else 0.
    /// They are the last cells of each of its rows, whatever the row's count.
    public var reasonCells: Int { roles.reversed().prefix { $0 == .annotation }.count }

    /// Adds a column; returns its index. A known column named twice is a header error.
    @discardableResult
    public func append(name: String, role: Role) -> Int {
        let index = names.count
        names.append(name)
        roles.append(role)
        if case .known(let column) = role, indexOfColumn[column.rawValue] < 0 {
            indexOfColumn[column.rawValue] = index
        }
        if case .metadata(let key) = role { metadataColumns.append((index, key)) }
        return index
    }

    /// The index of a column by its exact name, if present.
    public func index(ofName name: String) -> Int? { names.firstIndex(of: name) }

    public func index(of column: Column) -> Int? {
        let index = indexOfColumn[column.rawValue]
        return index < 0 ? nil : index
    }

    public var count: Int { names.count }

    /// Builds the layout of a CSV header, with the config's aliases (canonical name → header).
    ///
    /// Throws `header_invalid` for a duplicate known column or an empty header, and
    /// `header_missing_column` when a required column is absent.
    public static func csv(header: [String], aliases: [String: String]) throws(HeaderProblem)
        -> FileLayout
    {
        let layout = FileLayout()
        layout.fromHeader = true
        var aliasToColumn: [String: Column] = [:]
        for (canonical, alias) in aliases {
            if let column = Column(headerName: canonical) {
                aliasToColumn[Column.normalize(alias)] = column
            }
        }
        var seen = Set<Column>()
        var metadataSeen = Set<String>()
        // settle's own trailing columns (a file it wrote, fed back) are its annotations; a
        // `source` or `reason` column anywhere else is the export's own, kept as an extra.
        let annotated = header.suffix(3).map(Column.normalize) == ["reason_code", "reason", "source"]
        // A file settle wrote guards header cells like any other: the names come back unguarded.
        let header =
            annotated
            ? header.map { name in
                var name = name
                return name.withUTF8 {
                    String(decoding: CSVScanner.unguarded(UnsafeRawBufferPointer($0)), as: UTF8.self)
                }
            } : header
        for (position, name) in header.enumerated() {
            let key = Column.normalize(name)
            let role: Role
            if let column = aliasToColumn[key] ?? Column(headerName: name) {
                guard seen.insert(column).inserted else {
                    throw HeaderProblem(
                        code: .headerInvalid,
                        message: "column \(column.csvName) appears twice in the header")
                }
                role = .known(column)
            } else if key.hasPrefix(metadataColumnPrefix), key.count > metadataColumnPrefix.count {
                let metadataKey = String(name.trimmingSpaces().dropFirst(metadataColumnPrefix.count))
                guard metadataSeen.insert(metadataKey).inserted else {
                    throw HeaderProblem(
                        code: .headerInvalid,
                        message: "column \(name) appears twice in the header")
                }
                role = .metadata(key: metadataKey)
            } else if annotated, position >= header.count - 3, annotationColumns.contains(key) {
                role = .annotation
            } else {
                role = .extra
                if annotated, key == schemaRefusedColumn, layout.schemaRefusedIndex == nil {
                    layout.schemaRefusedIndex = position
                }
            }
            layout.append(name: name, role: role)
        }
        let missing = Column.required.filter { !seen.contains($0) }
        if !missing.isEmpty {
            throw HeaderProblem(
                code: .headerMissingColumn,
                message: "the header has no \(missing.map(\.csvName).joined(separator: ", ")) column")
        }
        return layout
    }
}

/// A header that cannot be used; rejects its file whole.
public struct HeaderProblem: Error, Sendable {
    public let code: FileRejection
    public let message: String
}

/// What the reader found wrong with one record, before the rules look at it.
public struct RecordDefect: Error, Sendable {
    public let code: ReasonCode
    public let message: String
    public init(code: ReasonCode, message: String) {
        self.code = code
        self.message = message
    }
}

/// One input record, borrowed for the duration of a call: the bytes of each input column
/// (in ``FileLayout`` order; a column the record lacks is empty).
public struct RecordView {
    public let fields: UnsafeBufferPointer<UnsafeRawBufferPointer>
    /// Physical line (1-based) where the record starts.
    public let line: Int
    /// Where the record's original text was written in the file's spool.
    public let spoolOffset: UInt64
    public let spoolLength: UInt32
    /// Set when the reader already knows the record is bad (wrong field count, too long…).
    public let defect: RecordDefect?

    public init(
        fields: UnsafeBufferPointer<UnsafeRawBufferPointer>, line: Int,
        spoolOffset: UInt64, spoolLength: UInt32, defect: RecordDefect?
    ) {
        self.fields = fields
        self.line = line
        self.spoolOffset = spoolOffset
        self.spoolLength = spoolLength
        self.defect = defect
    }

    @inline(__always)
    public func value(_ index: Int) -> UnsafeRawBufferPointer {
        index >= 0 && index < fields.count ? fields[index] : UnsafeRawBufferPointer(start: nil, count: 0)
    }
}

/// Receives the records of the inputs, file by file.
public protocol RecordSink: AnyObject {
    /// A new file starts; returns its index for ``record(_:file:)``.
    func beginFile(name: String, layout: FileLayout) -> Int
    func record(_ record: RecordView, file: Int)
    /// The file was read to its end.
    func endFile(_ file: Int, lines: Int)
    /// The file was rejected whole: forget every record it gave.
    func discardFile(_ file: Int)
}
