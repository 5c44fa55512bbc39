import Foundation
import Glibc

/// The SQLite ledger that makes every line settle at most once, across runs.
///
/// `apply` opens it with ``open(path:)``, which holds an exclusive lock on `<path>.lock`
/// for as long as the store lives; `plan` and `status` read it with
/// ``openReadOnly(path:)``. WAL journal, `synchronous=FULL`: a committed write survives
/// a crash or power loss. Use one store from one thread.
public final class LedgerStore {
    /// The schema this build reads and writes (older ledgers are migrated on open).
    public static let schemaVersion = 12
    /// The run a `settle ledger rebuild` ends holdings as (no run of a folder).
    public static let rebuildRun = "ledger_rebuild"

    /// The ledger file.
    public let path: String
    /// Whether this store may write.
    public let isWritable: Bool
    let db: SQLiteDatabase
    private var lockDescriptor: Int32
    /// A reader that found no WAL files: it removes those SQLite made for it, when still
    /// empty, as it closes (``removeEmptyWALFiles()``).
    private var removesWALFilesAtClose = false
    /// Whether the `charges` table exists, once a read-only store has looked.
    var chargesTableKnown: Bool?
    /// The run writing outcomes (apply sets its plan's run id): kept as the `run_id` of each
    /// instruction it records settled.
    public var writingRun: String?
    /// The schema version of the file (a read-only store of an older ledger keeps its own).
    public internal(set) var version = LedgerStore.schemaVersion
    /// Opened for a rebuild behind its mark (a backup put back, a lost WAL): commits it once
    /// held are gone, `settle cancel`s among them (``createForRebuild(path:)``).
    var lostCommits = false

    private init(path: String, db: SQLiteDatabase, writable: Bool, lockDescriptor: Int32) {
        self.path = path
        self.db = db
        self.isWritable = writable
        self.lockDescriptor = lockDescriptor
    }

    deinit { close() }

    /// A mark of the failures so far, for ``failure(since:)``.
    public var failureMark: Int { db.failures.count }

    /// The last failure of this ledger since `mark` (``failureMark``), or nil when every call
    /// since was answered: what a reader that takes a failed read for "none" asks before it
    /// acts on what it read.
    public func failure(since mark: Int) -> LedgerError? {
        db.failures.count > mark ? db.failures.last : nil
    }

    /// `settle ledger init`: creates a new, empty ledger (0600) and its mark, holding the
    /// process lock. Never replaces anything.
    ///
    /// - Throws: ``LedgerError/alreadyExists(path:)`` when the file or its mark exists.
    public static func create(path given: String) throws(LedgerError) -> LedgerStore {
        let path = try oneName(given)
        let descriptor = try lock(path)
        if holdsNothing(path) {
            for name in [path, path + "-wal", path + "-shm", path + "-journal"] { unlink(name) }
        }
        guard !FileManager.default.fileExists(atPath: path), !FileManager.default.fileExists(atPath: markPath(path))
        else {
            Glibc.close(descriptor)
            throw .alreadyExists(path: path)
        }
        do throws(LedgerError) {
            // Private from the first byte, whatever the umask.
            let file = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard file >= 0 else { throw .cannotOpen(path: path, message: String(cString: strerror(errno))) }
            fchmod(file, 0o600)
            Glibc.close(file)
            let db = try SQLiteDatabase(path: path, readOnly: false)
            let store = LedgerStore(path: path, db: db, writable: true, lockDescriptor: descriptor)
            try store.configure()
            try db.transaction { () throws(LedgerError) in
                try db.execute(Self.schema)
                try store.migrate(from: 1)
                try db.run(
                    "INSERT INTO settle_meta(key, value) VALUES ('created_at', ?)",
                    [.text(String(Date().ledgerMilliseconds))])
            }
            try store.writeMark()
            return store
        } catch {
            // Leave nothing half made behind: a later init (or open) must not find it.
            unlink(path)
            unlink(path + "-wal")
            unlink(path + "-shm")
            unlink(markPath(path))
            Glibc.close(descriptor)
            throw error
        }
    }

    /// Opens the ledger for `apply`/`run`, holding its process lock. It must exist, be a
    /// settle ledger, pass `PRAGMA integrity_check`, and hold at least the commits its mark
    /// records: anything else stops the run before anything is sent.
    ///
    /// - Throws: ``LedgerError/busy(_:)`` when another process holds the lock;
    ///   ``LedgerError/missing(path:hadMark:)``, ``LedgerError/notALedger(path:message:)``,
    ///   ``LedgerError/damaged(path:message:)``, ``LedgerError/behindMark(path:message:)``.
    public static func open(path: String) throws(LedgerError) -> LedgerStore {
        try open(path: path, acceptingLostCommits: false)
    }

    /// Whether the mark file of a ledger at this path exists: one was there once.
    /// What a `ledger init` (or a rebuild's) stopped before its first commit leaves: a file
    /// with no mark beside it that holds no database (empty, or SQLite without a table, and
    /// no WAL beside it with a frame in it). It holds nothing to lose, so init and rebuild make the ledger there
    /// again; every other command refuses it as before (audit 65 F4: a signal early in a
    /// rebuild left one that every command refused, the rebuild it advised included).
    /// Called with the process lock held.
    static func holdsNothing(_ path: String) -> Bool {
        var info = stat()
        guard !hasMark(path), lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        var wal = stat()
        // A WAL of its 32-byte header alone holds no frame (audit 66 F2: a rebuild stopped there).
        if lstat(path + "-wal", &wal) == 0, wal.st_size > 32 { return false }
        if info.st_size == 0 { return true }
        guard let db = try? SQLiteDatabase(path: path, readOnly: true) else { return false }
        var tables = -1
        try? db.query("SELECT count(*) FROM sqlite_master") { row in tables = Int(row.integer(0)) }
        return tables == 0
    }

    public static func hasMark(_ path: String) -> Bool { FileManager.default.fileExists(atPath: markPath(path)) }

    static func open(path given: String, acceptingLostCommits: Bool) throws(LedgerError) -> LedgerStore {
        let path = try oneName(given)
        guard FileManager.default.fileExists(atPath: path) else {
            throw .missing(path: path, hadMark: hasMark(path))
        }
        // A file that is not a ledger at all is told before the lock file is made beside it.
        try checkFile(path)
        let descriptor = try lock(path)
        do throws(LedgerError) {
            let db = try SQLiteDatabase(path: path, readOnly: false)
            let store = LedgerStore(path: path, db: db, writable: true, lockDescriptor: descriptor)
            try store.configure()
            try store.checkIntegrity()
            let found = try store.storedSchemaVersion()
            guard found > 0 else { throw LedgerError.notALedger(path: path, message: "it has no settle schema") }
            guard found <= Self.schemaVersion else {
                throw LedgerError.schemaMismatch(found: found, expected: Self.schemaVersion)
            }
            // A ledger with an id has had a mark since settle made or first opened it.
            let hadMark = try store.meta("ledger_id") != nil
            if found < Self.schemaVersion {
                try db.transaction { () throws(LedgerError) in try store.migrate(from: found) }
            }
            if acceptingLostCommits {
                store.lostCommits = try store.isBehindMark(hadOne: hadMark)
            } else {
                try store.checkMark(hadOne: hadMark)
            }
            return store
        } catch {
            Glibc.close(descriptor)
            throw error
        }
    }

    /// Opens an existing ledger to read it, without the lock; nil when there is no file.
    ///
    /// - Throws: ``LedgerError/notALedger(path:message:)`` for a file that is not a settle
    ///   ledger, ``LedgerError/damaged(path:message:)`` for an empty one.
    ///
    /// - Parameter sharing: take the process lock shared (a plan: any number of them read at
    ///   once, none while a process settles on the ledger, ``LedgerError/busy(_:)``); the
    ///   lock file is not created when no process ever made it.
    public static func openReadOnly(path given: String, sharing: Bool = false) throws(LedgerError) -> LedgerStore? {
        let path = try oneName(given)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        try checkFile(path)
        let shared = sharing ? try lock(path, shared: true) : -1
        // SQLite's WAL files a reader makes beside the ledger (it cannot remove them): gone
        // again at close when this reader made them (audit 56 L1: `validate`, which writes
        // nothing, left `-wal` and `-shm`; see ``close()``).
        let leavesNoFiles =
            !FileManager.default.fileExists(atPath: path + "-wal")
            && !FileManager.default.fileExists(atPath: path + "-shm")
        let db: SQLiteDatabase
        do throws(LedgerError) {
            db = try SQLiteDatabase(path: path, readOnly: true)
        } catch {
            if shared >= 0 { Glibc.close(shared) }
            throw error
        }
        let store = LedgerStore(path: path, db: db, writable: false, lockDescriptor: shared)
        store.removesWALFilesAtClose = leavesNoFiles
        let found: Int
        do throws(LedgerError) {
            found = try store.storedSchemaVersion()
        } catch {
            // A file SQLite finds corrupt is a damaged ledger (78), not someone else's file;
            // a busy one is busy (75); one SQLite cannot open or read (a read-only or failing
            // file system: it cannot make the WAL's index beside it) is a ledger out of
            // reach, 78, with SQLite's reason (audit 54 F4: all three were called "not a
            // settle ledger", 66).
            switch error {
            case .damaged, .busy: throw error
            case .sqlite(let code, let message):
                throw .cannotOpen(path: path, message: "SQLite error \(code): \(message)")
            default: throw .notALedger(path: path, message: "\(error)")
            }
        }
        guard found > 0 else { throw .notALedger(path: path, message: "it has no settle schema") }
        // An older ledger reads the same (what it lacks, nothing of it is in it).
        guard found <= schemaVersion else {
            throw .schemaMismatch(found: found, expected: schemaVersion)
        }
        store.version = found
        return store
    }

    /// Removes the `-wal` and `-shm` SQLite made for this reader, when the WAL is empty and
    /// no process that writes the ledger is there: under the shared process lock (held by a
    /// plan or validate, else tried without waiting; a writer holds it exclusive from before
    /// it opens the ledger to after it closes it). A WAL with content, or a writer at work,
    /// leaves both as they are.
    private func removeEmptyWALFiles() {
        var probe: (descriptor: Int32, free: Bool)? = nil
        if lockDescriptor < 0 {
            probe = Self.probeLock(path)
            guard let probe, probe.free else {
                if let probe { Glibc.close(probe.descriptor) }
                return
            }
        }
        var wal = stat()
        if stat(path + "-wal", &wal) == 0, wal.st_size == 0 {
            unlink(path + "-wal")
            unlink(path + "-shm")
        }
        if let probe { Glibc.close(probe.descriptor) }
    }

    /// The ledger's lock file opened to read, and whether a shared lock on it was taken
    /// without waiting (`free`: no process holds it exclusive); nil when there is no lock
    /// file. The caller closes the descriptor (which lets a shared lock go).
    private static func probeLock(_ path: String) -> (descriptor: Int32, free: Bool)? {
        let descriptor = Glibc.open(path + ".lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        return (descriptor, flock(descriptor, LOCK_SH | LOCK_NB) == 0)
    }

    // MARK: - Who holds the ledger

    /// The process that holds a ledger's exclusive lock, as it wrote itself into the lock
    /// file: its pid, and the run it records, if any.
    public struct Holder: Sendable, Equatable {
        public var pid: Int32?
        public var run: String?
    }

    /// Writes who holds the lock into the lock file (the pid, and the run once it is
    /// recorded): `settle status` tells a run still going from one killed by it (audit 54
    /// F10: both were "not ended"). Only the holder of the exclusive lock writes it; what it
    /// says counts only while that lock is held. Best effort: the lock is what protects.
    func announce(run: String?) {
        guard isWritable, lockDescriptor >= 0 else { return }
        Self.announce(lockDescriptor, run: run)
    }

    private static func announce(_ descriptor: Int32, run: String?) {
        var text = "pid \(getpid())"
        if let run { text += " run \(run)" }
        text += "\n"
        _ = ftruncate(descriptor, 0)
        _ = text.withCString { pwrite(descriptor, $0, strlen($0), 0) }
    }

    /// The process holding the ledger's exclusive lock now (`run`, `apply`, `cancel`, a
    /// `ledger` command), nil when none does. Reads without waiting and without stopping
    /// anyone: a shared lock taken and let go at once (plans hold it shared, and a process
    /// that takes it exclusive tries again for a second).
    public static func holder(of given: String) -> Holder? {
        let path = (try? oneName(given)) ?? given
        guard let (descriptor, free) = probeLock(path) else { return nil }
        defer { Glibc.close(descriptor) }
        guard !free else { return nil }
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = pread(descriptor, &bytes, bytes.count, 0)
        let words = String(decoding: bytes.prefix(max(count, 0)), as: UTF8.self).split(whereSeparator: \.isWhitespace)
        var holder = Holder()
        for index in stride(from: 0, to: words.count - 1, by: 2) {
            switch words[index] {
            case "pid": holder.pid = Int32(words[index + 1])
            case "run": holder.run = String(words[index + 1])
            default: break
            }
        }
        return holder
    }

    /// Closes the database and gives up the lock.
    public func close() {
        db.close()
        if removesWALFilesAtClose {
            removesWALFilesAtClose = false
            removeEmptyWALFiles()
        }
        if lockDescriptor >= 0 {
            Glibc.close(lockDescriptor)
            lockDescriptor = -1
        }
    }

    /// Copies the ledger, consistently, while it may be in use (SQLite's online backup),
    /// to a new file (0600). Refuses to overwrite an existing file.
    ///
    /// The copy is written under a name of its own beside the destination and given its name
    /// only once whole: a copy cut short (a full disk, a file size limit, a kill) never stands
    /// at the destination, where it passed for a backup and kept the next backup of that name
    /// out (audit 61 F3: an empty file, 0644, and "exists" until someone removed it).
    public func backup(to destination: String) throws(LedgerError) {
        guard !FileManager.default.fileExists(atPath: destination) else { throw .alreadyExists(path: destination) }
        let partial = destination + ".partial-\(getpid())"
        func unwritable(_ reason: Int32) -> LedgerError {
            .cannotOpen(path: destination, message: String(cString: strerror(reason)))
        }
        func removePartial() {
            unlink(partial)
            unlink(partial + "-journal")
        }
        let made = Glibc.open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard made >= 0 else { throw unwritable(errno) }
        Glibc.close(made)
        do {
            try db.backup(to: partial)
        } catch {
            removePartial()
            if case .cannotOpen(_, let message) = error { throw .cannotOpen(path: destination, message: message) }
            throw error
        }
        // A link never replaces a file another process made there meanwhile; a file system
        // without hard links gets a rename.
        if link(partial, destination) == 0 {
            unlink(partial)
        } else {
            let reason = errno
            guard reason != EEXIST else {
                removePartial()
                throw .alreadyExists(path: destination)
            }
            guard rename(partial, destination) == 0 else {
                let renameReason = errno
                removePartial()
                throw unwritable(renameReason)
            }
        }
        let folder = Glibc.open(
            URL(fileURLWithPath: destination).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            fsync(folder)
            Glibc.close(folder)
        }
    }

    // MARK: - Checks

    /// The process lock on `<ledger>.lock`: exclusive for a process that settles (the file is
    /// made when missing); `shared` for a reader that must not read while one settles (SPEC: a
    /// second process on the ledger is refused, 75), -1 when no process ever made the file.
    private static func lock(_ path: String, shared: Bool = false) throws(LedgerError) -> Int32 {
        let lockPath = path + ".lock"
        let descriptor =
            shared
            ? Glibc.open(lockPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            : Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            if shared, errno == ENOENT { return -1 }
            throw .cannotOpen(path: lockPath, message: String(cString: strerror(errno)))
        }
        // A few short tries: a child being spawned in this very moment (fork before exec)
        // can hold a copy of a lock this process just gave up.
        var locked = false
        var reason: Int32 = 0
        for attempt in 0..<20 {
            if flock(descriptor, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 {
                locked = true
                break
            }
            reason = errno
            guard reason == EWOULDBLOCK, attempt < 19 else { break }
            usleep(50_000)
        }
        guard locked else {
            Glibc.close(descriptor)
            if reason == EWOULDBLOCK {
                throw .busy("another settle process is using \(path)")
            }
            throw .cannotOpen(path: lockPath, message: String(cString: strerror(reason)))
        }
        if !shared { announce(descriptor, run: nil) }
        return descriptor
    }

    /// The name a ledger is used under, the same whichever name a process was given: its
    /// lock, its mark and SQLite's WAL sit beside it by name, so two names for one file
    /// would let two processes settle on it at once (audit 16: a hard link paid every rider
    /// twice). A symlink is followed to its file (a symlinked folder needs nothing: the
    /// files beside it are the same); a file with more than one name (hard links) is refused.
    static func oneName(_ path: String) throws(LedgerError) -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else { return path }
        var name = path
        if info.st_mode & S_IFMT == S_IFLNK, let real = realpath(path, nil) {
            name = String(cString: real)
            free(real)
            guard stat(name, &info) == 0 else { return name }
        }
        if info.st_mode & S_IFMT == S_IFREG, info.st_nlink > 1 {
            throw .linked(path: path, names: Int(info.st_nlink))
        }
        return name
    }

    /// An empty file is a damaged ledger (SQLite would take it as a new database); a file
    /// without SQLite's header is not a ledger.
    private static func checkFile(_ path: String) throws(LedgerError) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw .cannotOpen(path: path, message: String(cString: strerror(errno)))
        }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 16)) ?? Data()
        if head.isEmpty { throw .damaged(path: path, message: "the file is empty") }
        guard head == Data("SQLite format 3\u{0}".utf8) else {
            throw .notALedger(path: path, message: "not an SQLite database")
        }
    }

    private func configure() throws(LedgerError) {
        try db.execute("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=FULL")
        try db.execute("PRAGMA foreign_keys=ON")
    }

    private func checkIntegrity() throws(LedgerError) {
        var results: [String] = []
        do {
            try db.query("PRAGMA integrity_check") { row in results.append(row.text(0) ?? "") }
        } catch {
            throw .damaged(path: path, message: "\(error)")
        }
        guard results == ["ok"] else {
            throw .damaged(path: path, message: "integrity_check: " + results.prefix(3).joined(separator: "; "))
        }
    }

    // MARK: - Mark

    /// `<ledger>.mark`: the ledger's id and how many marked commits it holds (requests in
    /// flight, runs' ends, cancels, rebuilds), written after each of them. A ledger behind its
    /// mark lost commits.
    static func markPath(_ path: String) -> String { path + ".mark" }

    func meta(_ key: String) throws(LedgerError) -> String? {
        try firstText("SELECT value FROM settle_meta WHERE key = ?", [.text(key)])
    }

    /// The first column of the last row `sql` finds, or nil when it finds none.
    func firstText(_ sql: String, _ values: [SQLiteValue]) throws(LedgerError) -> String? {
        var value: String?
        try db.query(sql, values) { row in value = row.text(0) }
        return value
    }

    /// A transaction that counts in the mark: the commit sequence is bumped inside it, and
    /// the mark is written after the commit (a crash between leaves the mark behind the
    /// ledger, which is never refused; a ledger behind its mark lost commits).
    @discardableResult
    func markedTransaction<T>(_ body: () throws(LedgerError) -> T) throws(LedgerError) -> T {
        let result = try db.transaction { () throws(LedgerError) -> T in
            let result = try body()
            try bumpSequence()
            return result
        }
        try writeMark()
        return result
    }

    /// The commit sequence, bumped inside each marked transaction (``markedTransaction(_:)``).
    private func bumpSequence() throws(LedgerError) {
        try db.run(
            """
            INSERT INTO settle_meta(key, value) VALUES ('commit_seq', '1')
            ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1
            """)
    }

    func writeMark() throws(LedgerError) {
        let text = "\(try meta("ledger_id") ?? "") \(try meta("commit_seq") ?? "0")\n"
        let final = Self.markPath(path)
        let temporary = final + ".tmp"
        let descriptor = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.markFailure(temporary, errno) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        // A short write sets no errno: it is the disk filling up.
        var reason = written == bytes.count ? 0 : (written < 0 ? errno : ENOSPC)
        if reason == 0, fsync(descriptor) != 0 { reason = errno }
        Glibc.close(descriptor)
        if reason == 0, rename(temporary, final) != 0 { reason = errno }
        guard reason == 0 else {
            unlink(temporary)
            throw Self.markFailure(final, reason)
        }
    }

    /// A mark that cannot be written for lack of room (or a failing disk) is a passing failure
    /// (75, as SQLite's own "disk is full"); one the system refuses (permissions, a read-only
    /// file system) is the ledger's place being wrong (78). Audit 62 F3: a full disk while a
    /// rebuild wrote its mark was a configuration error.
    static func markFailure(_ path: String, _ reason: Int32) -> LedgerError {
        let message = String(cString: strerror(reason))
        switch reason {
        case ENOSPC, EDQUOT, EFBIG, EIO: return .cannotWrite(path: path, message: message)
        default: return .cannotOpen(path: path, message: message)
        }
    }

    /// Whether ``checkMark(hadOne:)`` refuses this ledger as one that lost commits.
    ///
    /// - Parameter hadOne: the ledger had an id before this open: settle wrote its mark when
    ///   it made it (or first opened it, a ledger from before marks).
    private func isBehindMark(hadOne: Bool) throws(LedgerError) -> Bool {
        if !hadOne, !Self.hasMark(path) { return false }
        return try markProblem() != nil
    }

    private func checkMark(hadOne: Bool) throws(LedgerError) {
        // A ledger from before marks: start its mark.
        if !hadOne, !Self.hasMark(path) {
            try writeMark()
            return
        }
        if let problem = try markProblem() { throw .behindMark(path: path, message: problem) }
    }

    /// Why this ledger is behind its mark (it lost commits: a backup put back, a lost WAL), as
    /// `run`, `plan` and `apply` refuse it; nil when it is not, or has never had a mark. Reads
    /// only: `settle status` says it (audit 77 H1: status exited 0 on a backup put back).
    public func markProblem() throws(LedgerError) -> String? {
        guard let data = FileManager.default.contents(atPath: Self.markPath(path)) else {
            // One that had a mark and lost it cannot be told from an older copy (a backup
            // restored without it): refused (audit 16: such a backup was used, and paid again
            // what it did not know of). `ledger rebuild` over it makes it whole from Stripe,
            // and writes its mark. A ledger with an id has had a mark since settle made or
            // first opened it.
            guard try meta("ledger_id") != nil else { return nil }
            return "its mark \(Self.markPath(path)) is missing: settle wrote one when it made this ledger, and only a "
                + "copy made without it (a backup restored, the file moved alone) lacks it"
        }
        let parts = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace).map(String.init)
        let id = try meta("ledger_id") ?? ""
        let sequence = Int(try meta("commit_seq") ?? "0") ?? 0
        guard parts.count == 2, let marked = Int(parts[1]) else { return "its mark file is unreadable" }
        guard parts[0] == id else { return "it is not the ledger its mark was written for" }
        guard sequence >= marked else { return "it holds \(sequence) marked commits, its mark says \(marked)" }
        return nil
    }

    // MARK: - Schema

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

    /// Brings a schema from `version` to the current one, in the caller's transaction.
    private func migrate(from version: Int) throws(LedgerError) {
        if version < 2 { try db.execute(Self.schemaVersion2) }
        if version < 3 { try db.execute(Self.schemaVersion3) }
        if version < 4 { try db.execute(Self.schemaVersion4) }
        if version < 5 { try db.execute(Self.schemaVersion5) }
        if version < 6 { try db.execute(Self.schemaVersion6) }
        if version < 7 { try db.execute(Self.schemaVersion7) }
        if version < 8 {
            // Made by the ALTER alone: a ledger put back to an older number keeps the column.
            var has = false
            try db.query("SELECT 1 FROM pragma_table_info('instructions') WHERE name = 'sent_run'") { _ in has = true }
            if !has { try db.execute(Self.schemaVersion8) }
        }
        if version < 9 { try db.execute(Self.schemaVersion9) }
        if version < 10 { try db.execute(Self.schemaVersion10) }
        if version < 11 { try db.execute(Self.schemaVersion11) }
        if version < 12 { try db.execute(Self.schemaVersion12) }
        try db.run(
            """
            INSERT INTO settle_meta(key, value) VALUES ('schema_version', ?)
            ON CONFLICT(key) DO UPDATE SET value = excluded.value
            """, [.text(String(Self.schemaVersion))])
        if try meta("ledger_id") == nil {
            try db.run(
                "INSERT INTO settle_meta(key, value) VALUES ('ledger_id', ?)", [.text(UUID().uuidString.lowercased())])
        }
    }

    /// Version 3: a held line may be `unresolved` (sent by a run that did not learn its
    /// outcome; the next run brings it back and reports it). SQLite cannot change a CHECK:
    /// the table is made again, every row kept. Transfers are indexed by Stripe id (a
    /// reversal line naming one).
    static let schemaVersion3 = """
        \(heldLinesTable("held_lines_v3"))
        INSERT INTO held_lines_v3 (\(heldLinesColumns)) SELECT \(heldLinesColumns) FROM held_lines;
        DROP TABLE held_lines;
        ALTER TABLE held_lines_v3 RENAME TO held_lines;
        CREATE INDEX held_lines_by_state ON held_lines(state);
        CREATE INDEX IF NOT EXISTS instructions_by_stripe_id ON instructions(stripe_id) WHERE kind = 'transfer';
        """

    /// Version 4: lines that netted to zero (a transfer and its reversal in one run: no call,
    /// so no instruction holds them), recorded by the apply of their plan, so a later export
    /// of either line is `already_settled` and never moves the money again; and each run's
    /// payouts per charge (charges.csv's retained so far).
    static let schemaVersion4 = """
        CREATE TABLE IF NOT EXISTS netted_lines (
            line_id      TEXT PRIMARY KEY,
            content      TEXT NOT NULL,
            kind         TEXT NOT NULL,
            amount_minor INTEGER NOT NULL,
            currency     TEXT NOT NULL,
            run_id       TEXT NOT NULL,
            recorded_at  INTEGER NOT NULL
        );
        -- What each run paid out for the orders of each charge (its settled payout lines),
        -- so a later run's charges.csv retains what is left after earlier payouts too.
        CREATE TABLE IF NOT EXISTS charge_payouts (
            charge         TEXT NOT NULL,
            currency       TEXT NOT NULL,
            run_id         TEXT NOT NULL,
            paid_out_minor INTEGER NOT NULL,
            PRIMARY KEY (charge, currency, run_id)
        );
        """

    /// Version 5: each payout's share of each charge, by its Stripe object, and whether that
    /// payout came back (failed, returned or canceled after it was accepted). A payout that
    /// came back no longer counts in a later run's retained so far; a payout paid again is
    /// another object, counted once.
    static let schemaVersion5 = """
        CREATE TABLE IF NOT EXISTS payout_charges (
            instruction_id TEXT NOT NULL,
            stripe_id      TEXT NOT NULL,
            run_id         TEXT NOT NULL,
            charge         TEXT NOT NULL,
            currency       TEXT NOT NULL,
            amount_minor   INTEGER NOT NULL,
            came_back      INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (stripe_id, charge, currency)
        );
        CREATE INDEX IF NOT EXISTS payout_charges_came_back ON payout_charges(charge, currency) WHERE came_back = 1;
        """

    /// Version 6: the Stripe objects of an instruction's earlier attempts (a payout that came
    /// back, paid again under the next attempt keeps its instruction id, so Stripe's list holds
    /// both under one `metadata[settle_instruction]`). A look-up takes any other object with
    /// that id for the attempt it resolves, whatever its status: never proves it absent.
    static let schemaVersion6 = """
        CREATE TABLE IF NOT EXISTS earlier_objects (
            instruction_id TEXT NOT NULL,
            stripe_id      TEXT NOT NULL,
            attempt        INTEGER NOT NULL,
            PRIMARY KEY (instruction_id, stripe_id)
        );
        """

    /// Version 7: instructions an earlier run left `unknown` that an apply of another plan
    /// found made, which no folder has reported yet. The next folder whose rows carry their
    /// lines (its own `unknown` row, a later run's `already_settled` row) reports them
    /// `settled`, so that the object is counted in one day's sums (audit 24 N8: counted in none).
    /// Held lines by when their holding ended: every apply asks which ended since its plan
    /// (``linesTakenUp(since:notBy:)``). The orders each applied run decided against
    /// (``ordersDecided(since:notBy:)``).
    static let schemaVersion7 = """
        CREATE TABLE IF NOT EXISTS unreported_outcomes (
            instruction_id TEXT PRIMARY KEY,
            resolved_by    TEXT,
            resolved_at    INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS held_lines_by_end ON held_lines(ended_at) WHERE ended_at IS NOT NULL;
        -- Orders an applied run decided against (a line of them rejected by a rule or refused by
        -- Stripe in its files): an older folder applied after that moves nothing of them.
        CREATE TABLE IF NOT EXISTS decided_orders (
            group_key  TEXT NOT NULL,
            run_id     TEXT NOT NULL,
            line_id    TEXT NOT NULL,
            reason     TEXT NOT NULL,
            decided_at INTEGER NOT NULL,
            PRIMARY KEY (group_key, run_id)
        );
        CREATE INDEX IF NOT EXISTS decided_orders_by_time ON decided_orders(decided_at);
        """

    /// Version 8: the run that sent an instruction's last attempt. A later run that plans the
    /// same lines with the same content makes the same instruction, and sends it under the next
    /// attempt; what Stripe answered that attempt is that run's decision, not a refusal an older
    /// folder's re-apply may retry as its own (audit 29 R1: a re-apply sent a new payout for a
    /// line a later run's attempt had seen refused, and no folder reported it).
    static let schemaVersion8 = """
        ALTER TABLE instructions ADD COLUMN sent_run TEXT;
        """

    /// Version 9: the charges Stripe said failed (or gave no charge for) when a run looked them
    /// up, as the applied run's facts hold them. A failed charge never succeeds later: a later
    /// plan rejects every line naming it (or its payment intent) `charge_failed`, whatever its
    /// export says (audit 38 Q5: a payout row of such a charge, fed back from errors.csv with
    /// the export's `succeeded`, was paid).
    static let schemaVersion9 = """
        CREATE TABLE IF NOT EXISTS failed_charges (
            charge         TEXT PRIMARY KEY,
            payment_intent TEXT,
            refusal        TEXT,
            run_id         TEXT NOT NULL,
            checked_at     TEXT NOT NULL,
            request_id     TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS failed_charges_by_intent ON failed_charges(payment_intent)
            WHERE payment_intent IS NOT NULL;
        """

    /// Version 10: the payment intent an applied run's lines named with each charge id. A
    /// charge some lines name by its intent alone and others by its id is one charge: a later
    /// plan whose lines name only the intent draws on the charge the ledger links it to, and
    /// counts what moved under either name (audit 53 H4: 80.00 by intent and 50.00 by id moved
    /// on one 100.00 charge, on two days).
    static let schemaVersion10 = """
        CREATE TABLE IF NOT EXISTS charge_intents (
            charge  TEXT NOT NULL,
            intent  TEXT NOT NULL,
            run_id  TEXT NOT NULL,
            PRIMARY KEY (charge, intent)
        );
        CREATE INDEX IF NOT EXISTS charge_intents_by_intent ON charge_intents(intent);
        """

    /// Version 11: which run's files reported a payout made, per line, as the ledger held the
    /// line when the payout came back (``LedgerStore/recordPayoutStatus(instruction:status:reason:)``):
    /// that run counted it in its `paid_out`, so no other folder does, whatever holds the line
    /// later (a fix fed back, the line paid again: audit 69 F9); and which run reported a
    /// payout's return, per line and the return's text (the hold `returned` it ended): that run
    /// counted it in its `payouts_returned` (audit 69 F6).
    static let schemaVersion11 = """
        CREATE TABLE IF NOT EXISTS payout_reports (
            stripe_id  TEXT NOT NULL,
            line_id    TEXT NOT NULL,
            run_id     TEXT NOT NULL,
            PRIMARY KEY (stripe_id, line_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS return_reports (
            line_id    TEXT NOT NULL,
            reason     TEXT NOT NULL,
            run_id     TEXT NOT NULL,
            PRIMARY KEY (line_id, reason)
        ) WITHOUT ROWID;
        """

    /// Version 12: every money content (payee, amount, currency) a line had when `settle cancel`
    /// dropped it, with the cancel's run: a line cancelled, fed again with other content and
    /// cancelled again keeps both (its `held_lines` row keeps only the last), so a copy of
    /// either is refused (audit 82 F1: the first content, fed again, was paid). Filled from the
    /// cancels `held_lines` records.
    static let schemaVersion12 = """
        CREATE TABLE IF NOT EXISTS cancelled_contents (
            line_id      TEXT NOT NULL,
            payee        TEXT NOT NULL,
            amount_minor INTEGER NOT NULL,
            currency     TEXT NOT NULL,
            run_id       TEXT NOT NULL,
            PRIMARY KEY (line_id, payee, amount_minor, currency)
        ) WITHOUT ROWID;
        INSERT OR IGNORE INTO cancelled_contents (line_id, payee, amount_minor, currency, run_id)
            SELECT line_id, payee, amount_minor, currency, COALESCE(ended_run, '') FROM held_lines
            WHERE state = 'cancelled';
        """

    /// The `held_lines` table, its states those of ``HeldLine/State`` (a ledger made new has
    /// them all from version 2 on; an older one gets them through version 3).
    static func heldLinesTable(_ name: String) -> String {
        let states = HeldLine.State.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return """
            CREATE TABLE \(name) (
                line_id      TEXT PRIMARY KEY,
                state        TEXT NOT NULL CHECK (state IN (\(states))),
                payee        TEXT NOT NULL,
                amount_minor INTEGER NOT NULL,
                currency     TEXT NOT NULL,
                reason_code  TEXT NOT NULL,
                reason       TEXT NOT NULL,
                source       TEXT NOT NULL,
                header       TEXT NOT NULL,
                record       BLOB NOT NULL,
                instruction_id TEXT,
                since_run    TEXT NOT NULL,
                since_at     INTEGER NOT NULL,
                ended_run    TEXT,
                ended_at     INTEGER
            );
            """
    }

    static let heldLinesColumns = """
        line_id, state, payee, amount_minor, currency, reason_code, reason, source, header, record, \
        instruction_id, since_run, since_at, ended_run, ended_at
        """

    /// Version 2: Stripe's time of each answer, the runs, the lines that wait, the charges
    /// counted, and the payouts followed to their end.
    static let schemaVersion2 = """
        ALTER TABLE attempts ADD COLUMN stripe_date TEXT;
        ALTER TABLE instructions ADD COLUMN run_id TEXT;
        ALTER TABLE instructions ADD COLUMN payout_status TEXT;
        -- One row per plan/apply/run, with what it ended with.
        CREATE TABLE runs (
            id          TEXT PRIMARY KEY,
            command     TEXT NOT NULL,
            as_of       TEXT NOT NULL,
            folder      TEXT,
            started_at  INTEGER NOT NULL,
            ended_at    INTEGER,
            exit_status INTEGER,
            counts      TEXT,
            continues   TEXT
        );
        -- Lines the ledger holds for later runs, with their original record: deferred ones
        -- (waiting: every later run brings them back as if in its input), lines of payouts
        -- Stripe has not posted yet (following), and those whose payout came back (returned:
        -- the run that learns it reports them failed, in its errors.csv).
        \(heldLinesTable("held_lines"))
        CREATE INDEX held_lines_by_state ON held_lines(state);
        -- Each charge counted once, in the run that first allocated from it.
        CREATE TABLE charges (
            charge      TEXT PRIMARY KEY,
            currency    TEXT NOT NULL,
            first_run   TEXT NOT NULL,
            gross_minor INTEGER NOT NULL,
            fee_minor   INTEGER NOT NULL,
            status      TEXT NOT NULL
        );
        """

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
