import Foundation
import Glibc

/// The SQLite ledger that makes every line settle at most once, across runs.
///
/// `apply` opens it with ``open(path:)``, which holds an exclusive lock on `<path>.lock`
/// for as long as the store lives; `plan` and `status` read it with
/// ``openReadOnly(path:)``. WAL journal, `synchronous=FULL`: a committed write survives
/// a crash or power loss. Use one store from one thread.
public final class LedgerStore {
    /// The schema this build reads and writes.
    public static let schemaVersion = 1

    /// The ledger file.
    public let path: String
    /// Whether this store may write.
    public let isWritable: Bool
    let db: SQLiteDatabase
    private var lockDescriptor: Int32

    private init(path: String, db: SQLiteDatabase, writable: Bool, lockDescriptor: Int32) {
        self.path = path
        self.db = db
        self.isWritable = writable
        self.lockDescriptor = lockDescriptor
    }

    deinit { close() }

    /// Opens (creating if needed) the ledger for `apply`, holding its process lock.
    ///
    /// - Throws: ``LedgerError/busy(_:)`` when another process holds the lock.
    public static func open(path: String) throws(LedgerError) -> LedgerStore {
        let lockPath = path + ".lock"
        let descriptor = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0, fchmod(descriptor, 0o600) == 0 || errno == EPERM else {
            throw .cannotOpen(path: lockPath, message: String(cString: strerror(errno)))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            Glibc.close(descriptor)
            if reason == EWOULDBLOCK {
                throw .busy("another settle process is using \(path)")
            }
            throw .cannotOpen(path: lockPath, message: String(cString: strerror(reason)))
        }
        // A new ledger is private to the user whatever the umask; SQLite gives its WAL and
        // shared-memory files the database file's mode.
        let created = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if created >= 0 {
            fchmod(created, 0o600)
            Glibc.close(created)
        }
        do {
            let db = try SQLiteDatabase(path: path, readOnly: false)
            let store = LedgerStore(path: path, db: db, writable: true, lockDescriptor: descriptor)
            try store.prepareSchema()
            return store
        } catch {
            Glibc.close(descriptor)
            throw error
        }
    }

    /// Opens an existing ledger to read it, without the lock; nil when there is no file.
    public static func openReadOnly(path: String) throws(LedgerError) -> LedgerStore? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let db = try SQLiteDatabase(path: path, readOnly: true)
        let store = LedgerStore(path: path, db: db, writable: false, lockDescriptor: -1)
        let found = try store.storedSchemaVersion()
        guard found == schemaVersion else {
            throw .schemaMismatch(found: found, expected: schemaVersion)
        }
        return store
    }

    /// Closes the database and gives up the lock.
    public func close() {
        db.close()
        if lockDescriptor >= 0 {
            Glibc.close(lockDescriptor)
            lockDescriptor = -1
        }
    }

    // MARK: - Schema

    private func prepareSchema() throws(LedgerError) {
        try db.execute("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=FULL")
        try db.execute("PRAGMA foreign_keys=ON")
        let found = try storedSchemaVersion()
        if found == Self.schemaVersion { return }
        guard found == 0 else { throw .schemaMismatch(found: found, expected: Self.schemaVersion) }
        try db.transaction { () throws(LedgerError) in
            try db.execute(Self.schema)
            try db.run(
                "INSERT INTO settle_meta(key, value) VALUES ('schema_version', ?)",
                [.text(String(Self.schemaVersion))])
        }
    }

    private func storedSchemaVersion() throws(LedgerError) -> Int {
        var exists = false
        try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settle_meta'") { _ in
            exists = true
        }
        guard exists else { return 0 }
        var version = 0
        try db.query("SELECT value FROM settle_meta WHERE key = 'schema_version'") { row in
            version = Int(row.text(0) ?? "") ?? -1
        }
        return version
    }

    static let schema = """
        CREATE TABLE settle_meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        -- One row per API call settle makes; the unit of exactly-once on Stripe's side.
        CREATE TABLE instructions (
            id              TEXT PRIMARY KEY,
            kind            TEXT NOT NULL CHECK (kind IN ('transfer', 'reversal', 'payout')),
            group_key       TEXT NOT NULL,
            payee           TEXT NOT NULL,
            charge          TEXT NOT NULL,
            currency        TEXT NOT NULL,
            amount_minor    INTEGER NOT NULL CHECK (amount_minor > 0),
            method          TEXT NOT NULL,
            path            TEXT NOT NULL,
            params          TEXT NOT NULL,
            stripe_context  TEXT,
            status          TEXT NOT NULL CHECK (status IN ('in_flight', 'settled', 'failed', 'unknown')),
            attempt         INTEGER NOT NULL CHECK (attempt >= 1),
            idempotency_key TEXT NOT NULL,
            first_sent_at   INTEGER NOT NULL,  -- ms since 1970, first send of this attempt's key
            last_sent_at    INTEGER NOT NULL,
            stripe_id       TEXT,
            error_code      TEXT,
            error_message   TEXT,
            request_id      TEXT
        );
        CREATE INDEX instructions_by_status ON instructions(status);
        CREATE INDEX instructions_by_charge ON instructions(charge, currency) WHERE kind = 'transfer';
        CREATE INDEX instructions_by_group ON instructions(group_key, payee, currency) WHERE kind = 'transfer';
        CREATE INDEX instructions_by_path ON instructions(path) WHERE kind = 'reversal';
        -- Every HTTP call made for an instruction, with Stripe's request id.
        CREATE TABLE attempts (
            seq             INTEGER PRIMARY KEY AUTOINCREMENT,
            instruction_id  TEXT NOT NULL REFERENCES instructions(id),
            attempt         INTEGER NOT NULL,
            idempotency_key TEXT NOT NULL,
            sent_at         INTEGER NOT NULL,
            outcome         TEXT NOT NULL,
            http_status     INTEGER,
            request_id      TEXT
        );
        CREATE INDEX attempts_by_instruction ON attempts(instruction_id);
        -- Every input line ever claimed, with the instruction that holds it.
        CREATE TABLE lines (
            line_id         TEXT PRIMARY KEY,
            content         TEXT NOT NULL,
            instruction_id  TEXT NOT NULL REFERENCES instructions(id),
            kind            TEXT NOT NULL,
            amount_minor    INTEGER NOT NULL,
            status          TEXT NOT NULL CHECK (status IN ('in_flight', 'settled', 'failed', 'unknown')),
            stripe_id       TEXT
        );
        CREATE INDEX lines_by_instruction ON lines(instruction_id);
        """
}

extension Date {
    var ledgerMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
    init(ledgerMilliseconds: Int64) { self.init(timeIntervalSince1970: Double(ledgerMilliseconds) / 1000) }
}
