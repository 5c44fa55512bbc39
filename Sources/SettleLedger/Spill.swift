/// A scratch table on disk for what a run must remember of every instruction or line (the
/// engine's outcomes, the rewrite's sums per instruction) without holding it in memory:
/// SQLite's private temporary database (an empty file name), written to the temporary
/// folder, deleted when the spill is closed, read through a page cache of 2 MiB.
///
/// Each entry has a key, two texts and four integers. Nothing in it is durable: the ledger
/// stays the record; a spill only spares the process memory that would grow with the plan.
/// Not thread-safe: use one spill from one thread.
public final class Spill: @unchecked Sendable {
    public struct Entry: Sendable, Equatable {
        public var key: String
        public var first: String
        public var second: String
        public var numbers: [Int64]
    }

    private let db: SQLiteDatabase
    /// Entries held.
    public private(set) var count = 0

    public init() throws(LedgerError) {
        db = try SQLiteDatabase(path: "", readOnly: false, create: true)
        try db.execute("PRAGMA cache_size=-2048")
        try db.execute("PRAGMA journal_mode=OFF")
        try db.execute("PRAGMA synchronous=OFF")
        try db.execute(
            "CREATE TABLE entry (key TEXT PRIMARY KEY, first TEXT NOT NULL, second TEXT NOT NULL, "
                + "n0 INTEGER NOT NULL, n1 INTEGER NOT NULL, n2 INTEGER NOT NULL, n3 INTEGER NOT NULL) WITHOUT ROWID")
        // One transaction for the spill's life: nothing is synced, pages leave the cache
        // for the file only when it is full.
        try db.execute("BEGIN")
    }

    public func close() { db.close() }

    private static func values(_ key: String, _ first: String, _ second: String, _ numbers: [Int64]) -> [SQLiteValue] {
        var values: [SQLiteValue] = [.text(key), .text(first), .text(second)]
        for slot in 0..<4 { values.append(.integer(slot < numbers.count ? numbers[slot] : 0)) }
        return values
    }

    /// Sets the entry of `key` (replacing one there).
    public func put(_ key: String, first: String = "", second: String = "", numbers: [Int64] = [])
        throws(LedgerError)
    {
        let known = try contains(key)
        try db.run(
            "INSERT OR REPLACE INTO entry (key, first, second, n0, n1, n2, n3) VALUES (?, ?, ?, ?, ?, ?, ?)",
            Self.values(key, first, second, numbers))
        if !known { count += 1 }
    }

    /// Adds `numbers` to the entry of `key`, creating it with these texts when there is none
    /// (an existing entry keeps its texts).
    public func add(_ key: String, first: String = "", second: String = "", numbers: [Int64]) throws(LedgerError) {
        let known = try contains(key)
        try db.run(
            "INSERT INTO entry (key, first, second, n0, n1, n2, n3) VALUES (?, ?, ?, ?, ?, ?, ?) "
                + "ON CONFLICT(key) DO UPDATE SET n0 = n0 + excluded.n0, n1 = n1 + excluded.n1, "
                + "n2 = n2 + excluded.n2, n3 = n3 + excluded.n3",
            Self.values(key, first, second, numbers))
        if !known { count += 1 }
    }

    public func get(_ key: String) throws(LedgerError) -> Entry? {
        var found: Entry?
        try db.query("SELECT first, second, n0, n1, n2, n3 FROM entry WHERE key = ?", [.text(key)]) { row in
            found = Entry(
                key: key, first: row.text(0) ?? "", second: row.text(1) ?? "",
                numbers: [row.integer(2), row.integer(3), row.integer(4), row.integer(5)])
        }
        return found
    }

    public func contains(_ key: String) throws(LedgerError) -> Bool {
        var found = false
        try db.query("SELECT 1 FROM entry WHERE key = ?", [.text(key)]) { _ in found = true }
        return found
    }

    /// Every entry, in key order.
    public func forEach(_ body: (Entry) throws(LedgerError) -> Void) throws(LedgerError) {
        try db.query("SELECT key, first, second, n0, n1, n2, n3 FROM entry ORDER BY key") {
            (row) throws(LedgerError) in
            try body(
                Entry(
                    key: row.text(0) ?? "", first: row.text(1) ?? "", second: row.text(2) ?? "",
                    numbers: [row.integer(3), row.integer(4), row.integer(5), row.integer(6)]))
        }
    }
}
