import CSQLite
import Glibc

/// A thin, internal layer over one SQLite connection with a prepared-statement cache.
/// Not thread-safe: the ledger is used from one thread.
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    /// The statements of ``query(_:text:_:row:)``, by the address of their literal SQL: the
    /// planner's look-ups run millions of times, and hashing the SQL text each time cost
    /// more than SQLite's own step (perf, full-size plan with a ledger).
    private var literalStatements: [UnsafeRawPointer: OpaquePointer] = [:]
    let path: String
    /// Every error this connection has given (``error(_:_:)``), and the last: a caller that
    /// reads with `try?` asks afterwards whether every answer since was SQLite's
    /// (``LedgerStore/failure(since:)``).
    private(set) var failures: (count: Int, last: LedgerError?) = (0, nil)

    init(path: String, readOnly: Bool, create: Bool = false) throws(LedgerError) {
        self.path = path
        let flags =
            readOnly
            ? SQLITE_OPEN_READONLY
            : (SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        handle = db
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            handle = nil
            throw .cannotOpen(path: path, message: message)
        }
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { close() }

    func close() {
        for (_, statement) in statements { sqlite3_finalize(statement) }
        statements.removeAll()
        for (_, statement) in literalStatements { sqlite3_finalize(statement) }
        literalStatements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Copies the whole database to a new file with SQLite's online backup API: a
    /// consistent copy even while another connection writes.
    /// A file the copy cannot be written to (a full disk, a size limit, a failing or
    /// read-only file system) is `cannotOpen` of `destination`, not an error of this ledger.
    func backup(to destination: String) throws(LedgerError) {
        var target: OpaquePointer?
        let rc = sqlite3_open_v2(destination, &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        defer { sqlite3_close_v2(target) }
        func unwritable(_ code: Int32) -> LedgerError {
            .cannotOpen(
                path: destination,
                message: (target.map { String(cString: sqlite3_errmsg($0)) } ?? "")
                    + Self.systemError(target, code))
        }
        guard rc == SQLITE_OK, let target else { throw unwritable(rc) }
        guard let backup = sqlite3_backup_init(target, "main", handle, "main") else {
            throw unwritable(sqlite3_extended_errcode(target))
        }
        var step: Int32
        repeat {
            step = sqlite3_backup_step(backup, -1)
            if step == SQLITE_BUSY || step == SQLITE_LOCKED { sqlite3_sleep(50) }
        } while step == SQLITE_OK || step == SQLITE_BUSY || step == SQLITE_LOCKED
        let finished = sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE, finished == SQLITE_OK else {
            let code = finished == SQLITE_OK ? step : finished
            switch code & 0xFF {
            case SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM:
                throw unwritable(sqlite3_extended_errcode(target))
            default:
                throw error(code, String(cString: sqlite3_errmsg(target)))
            }
        }
    }

    /// Runs SQL with no parameters and no rows (schema, pragmas, transaction control).
    func execute(_ sql: String) throws(LedgerError) {
        var failure: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &failure)
        if rc != SQLITE_OK {
            let message = failure.map { String(cString: $0) } ?? "error \(rc)"
            sqlite3_free(failure)
            throw error(rc, message)
        }
    }

    /// Runs a statement for its effect; returns the number of changed rows.
    @discardableResult
    func run(_ sql: String, _ values: [SQLiteValue] = []) throws(LedgerError) -> Int {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        try bind(values, to: statement)
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw error(rc, message) }
        return Int(sqlite3_changes(handle))
    }

    /// Runs a query and hands each row to `row`.
    func query(_ sql: String, _ values: [SQLiteValue] = [], row: (SQLiteRow) throws(LedgerError) -> Void)
        throws(LedgerError)
    {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        try bind(values, to: statement)
        try steps(statement, row: row)
    }

    /// ``query(_:_:row:)`` for a look-up run millions of times: literal SQL (its statement is
    /// found by the literal's address) and one or two text parameters, bound without an array.
    func query(
        _ sql: StaticString, text first: String, _ second: String? = nil, row: (SQLiteRow) throws(LedgerError) -> Void
    ) throws(LedgerError) {
        let statement = try prepared(literal: sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        try bind(first, at: 1, to: statement)
        if let second { try bind(second, at: 2, to: statement) }
        try steps(statement, row: row)
    }

    /// ``query(_:_:row:)`` for a batch of look-ups in one statement: `json` (a JSON array of
    /// keys, read by the statement through `json_each(?1)`) is bound as text without a copy;
    /// it must stay valid until this returns.
    func query(
        _ sql: StaticString, json: UnsafeRawBufferPointer, row: (SQLiteRow) throws(LedgerError) -> Void
    ) throws(LedgerError) {
        let statement = try prepared(literal: sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        guard json.count < Int(Int32.max) else { throw error(SQLITE_TOOBIG, "a batch of keys too large") }
        guard let text = json.baseAddress?.assumingMemoryBound(to: CChar.self) else {
            throw error(SQLITE_MISUSE, "an empty batch of keys")
        }
        // No destructor (SQLITE_STATIC): the bytes outlive the statement's use of them.
        let rc = sqlite3_bind_text(statement, 1, text, Int32(json.count), nil)
        guard rc == SQLITE_OK else { throw error(rc, message) }
        try steps(statement, row: row)
    }

    /// Steps a bound statement to its end, each row to `row` (every query's one loop).
    private func steps(_ statement: OpaquePointer, row: (SQLiteRow) throws(LedgerError) -> Void) throws(LedgerError) {
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw error(rc, message) }
            try row(SQLiteRow(statement: statement))
        }
    }

    private func prepared(literal sql: StaticString) throws(LedgerError) -> OpaquePointer {
        let key = UnsafeRawPointer(sql.utf8Start)
        if let statement = literalStatements[key] { return statement }
        var statement: OpaquePointer?
        let rc = sql.withUTF8Buffer { text in
            text.withMemoryRebound(to: CChar.self) { text in
                sqlite3_prepare_v3(
                    handle, text.baseAddress, Int32(text.count), UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
            }
        }
        guard rc == SQLITE_OK, let statement else { throw error(rc, message) }
        literalStatements[key] = statement
        return statement
    }

    /// Binds every byte of `text` (its length given: an inner NUL does not end it).
    private static func bindText(_ text: String, at index: Int32, to statement: OpaquePointer) -> Int32 {
        var text = text
        return text.withUTF8 { bytes in
            guard let start = bytes.baseAddress else { return sqlite3_bind_text(statement, index, "", 0, nil) }
            return start.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(statement, index, $0, Int32(bytes.count), settle_sqlite_transient())
            }
        }
    }

    private func bind(_ text: String, at index: Int32, to statement: OpaquePointer) throws(LedgerError) {
        let rc = Self.bindText(text, at: index, to: statement)
        guard rc == SQLITE_OK else { throw error(rc, message) }
    }

    /// Runs `body` in one `BEGIN IMMEDIATE … COMMIT` transaction; rolls back if it throws.
    func transaction<T>(_ body: () throws(LedgerError) -> T) throws(LedgerError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private var message: String {
        handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
    }

    private func prepared(_ sql: String) throws(LedgerError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw error(rc, message) }
        statements[sql] = statement
        return statement
    }

    private func bind(_ values: [SQLiteValue], to statement: OpaquePointer) throws(LedgerError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(statement, index)
            case .integer(let number): rc = sqlite3_bind_int64(statement, index, number)
            case .text(let text): rc = Self.bindText(text, at: index, to: statement)
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes { raw in
                    sqlite3_bind_blob(statement, index, raw.baseAddress, Int32(raw.count), settle_sqlite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw error(rc, message) }
        }
    }

    /// The ledger error of a SQLite result code: busy or locked is passing (75); a file
    /// SQLite finds corrupt or not a database is damaged (78: restore or rebuild it, never
    /// "run again later"); anything else is SQLite's own error.
    func error(_ code: Int32, _ message: String) -> LedgerError {
        let primary = code & 0xFF
        let error: LedgerError
        if primary == SQLITE_BUSY || primary == SQLITE_LOCKED {
            error = .busy(message)
        } else if primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB {
            error = .damaged(path: path, message: "SQLite error \(code): \(message)")
        } else {
            error = .sqlite(code: Int(code), message: message + Self.systemError(handle, code))
        }
        failures = (failures.count + 1, error)
        return error
    }

    /// The operating system's word on a failed file operation, in words (" (No space left on
    /// device)"), or "": SQLite says "disk I/O error" for a full disk it finds while growing
    /// its shared-memory file, and an on-call engineer then looks for a failing disk (audit 61
    /// F5).
    static func systemError(_ connection: OpaquePointer?, _ code: Int32) -> String {
        let primary = code & 0xFF
        guard primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN,
            let connection, case let number = sqlite3_system_errno(connection), number > 0
        else { return "" }
        return " (\(String(cString: strerror(number))))"
    }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
    case null
    case integer(Int64)
    case text(String)
    case blob([UInt8])

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    init(_ number: Int64?) { self = number.map { .integer($0) } ?? .null }
}

/// The current row of a query, read by column index.
struct SQLiteRow {
    let statement: OpaquePointer

    func text(_ column: Int32) -> String? {
        guard sqlite3_column_type(statement, column) != SQLITE_NULL,
            let bytes = sqlite3_column_text(statement, column)
        else { return nil }
        // Every byte, an inner NUL included.
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    /// The bytes of a blob (or text) column; empty for NULL.
    func blob(_ column: Int32) -> [UInt8] {
        // The pointer first, then the size (SQLite's documented order).
        guard let bytes = sqlite3_column_blob(statement, column) else { return [] }
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func optionalInteger(_ column: Int32) -> Int64? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
    }
}
