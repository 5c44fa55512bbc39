import CDirectIO
import Glibc
import SettleCore
import SettleDigest

/// Why an output file could not be written (exit 73).
public struct WriteFailure: Error, Sendable {
    public let path: String
    public let message: String
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
}

/// A file written to a temporary name, flushed, synced and renamed, so that a crash never
/// leaves a half-written file. Bytes are buffered and hashed (SHA-256) as they go out.
///
/// The temporary file sits beside the file, named `<name>.tmp-<16 random hex digits>`
/// (``isTemporaryName(_:)``), created exclusively (never through a symlink, never an
/// existing file) and private to the user (0600 whatever the umask). Every write, the
/// sync, the close and the rename are checked: a failure is a ``WriteFailure`` and the
/// temporary file is removed.
///
/// Where the file system takes it, the bytes skip the page cache (``DirectWrites``).
public final class OutputFile {
    public let path: String
    private let temporaryPath: String
    private var descriptor: Int32
    private var buffer: [UInt8] = []
    /// Whole blocks on their way out with O_DIRECT; nil when the file is written through
    /// the page cache.
    private var direct: DirectWrites?
    private let hasher = SHA256()
    public private(set) var rows = 0
    private var failed: String? = nil

    /// What follows a file's name in its temporary name: `.tmp-` and 16 hex digits.
    public static let temporaryMarker = ".tmp-"
    static let randomDigits = 16

    public convenience init(path: String) throws(WriteFailure) {
        try self.init(path: path, directBlocks: DirectWrites.capacity)
    }

    /// `directBlocks`: the bytes a direct write takes (tests give a size the kernel refuses).
    init(path: String, directBlocks: Int) throws(WriteFailure) {
        self.path = path
        (descriptor, temporaryPath) = try OutputFile.createTemporary(beside: path)
        buffer.reserveCapacity(1 << 20)
        direct = DirectWrites(descriptor: descriptor, capacity: directBlocks)
    }

    /// Whether the bytes still go out with O_DIRECT.
    var writesDirect: Bool { direct?.isOn ?? false }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        // Written but not put in place (an error before its set was journaled): not kept.
        if descriptor >= 0 || (prepared != nil && !published && !journaled) { unlink(temporaryPath) }
    }

    /// The SHA-256 once ``prepare()`` has synced the file under its temporary name.
    private var prepared: String?
    private var published = false
    /// A ``FileSet``'s journal names the temporary file: it stays for the set's renames.
    var journaled = false
    /// The temporary name, for a ``FileSet``'s journal.
    var temporaryName: String { temporaryPath }

    /// Whether `name` is a temporary name settle gives its files: `<base>.tmp-<16 hex digits>`;
    /// returns the base name, or nil.
    public static func baseOfTemporaryName(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        let marker = Array(temporaryMarker.utf8)
        guard bytes.count > marker.count + randomDigits else { return nil }
        let digits = bytes.suffix(randomDigits)
        guard digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        let markerStart = bytes.count - randomDigits - marker.count
        guard Array(bytes[markerStart..<markerStart + marker.count]) == marker, markerStart > 0 else { return nil }
        return String(decoding: bytes[0..<markerStart], as: UTF8.self)
    }

    /// Creates `<path>.tmp-<random>` exclusively, mode 0600.
    static func createTemporary(beside path: String) throws(WriteFailure) -> (Int32, String) {
        var attempts = 0
        while true {
            var generator = SystemRandomNumberGenerator()
            let random = UInt64.random(in: .min ... .max, using: &generator)
            var digits = String(random, radix: 16)
            digits = String(repeating: "0", count: randomDigits - digits.count) + digits
            let candidate = path + temporaryMarker + digits
            let fd = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                // The umask can only take bits away; fchmod makes it exactly 0600.
                guard fchmod(fd, 0o600) == 0 else {
                    let message = String(cString: strerror(errno))
                    close(fd)
                    unlink(candidate)
                    throw WriteFailure(path: path, message: message)
                }
                return (fd, candidate)
            }
            attempts += 1
            if errno == EINTR || (errno == EEXIST && attempts < 8) { continue }
            throw WriteFailure(path: path, message: String(cString: strerror(errno)))
        }
    }

    /// The buffer callers append to; call ``endRow()`` after each row.
    @inline(__always)
    public func append(_ bytes: UnsafeRawBufferPointer) { buffer.append(contentsOf: bytes) }
    @inline(__always)
    public func append(_ byte: UInt8) { buffer.append(byte) }
    public func append(_ text: String) { buffer.append(contentsOf: text.utf8) }
    public func append(bytes: [UInt8]) { buffer.append(contentsOf: bytes) }

    /// Direct access to the buffer for writers that format in place.
    @inline(__always)
    public func withBuffer<R>(_ body: (inout [UInt8]) -> R) -> R { body(&buffer) }

    @inline(__always)
    public func endRow() {
        rows += 1
        if buffer.count >= 1 << 20 { flush() }
    }

    /// Writes the buffer out. After a failed write nothing more is written: ``commit()``
    /// reports the failure.
    private func flush() {
        guard !buffer.isEmpty else { return }
        defer { buffer.removeAll(keepingCapacity: true) }
        guard failed == nil else { return }
        buffer.withUnsafeBytes { bytes in
            hasher.update(bytes)
            if let direct {
                failed = direct.stage(bytes) { whole in writeAll(whole) }
            } else {
                failed = writeAll(bytes)
            }
        }
    }

    /// Writes every byte (retrying short writes and EINTR); returns what went wrong, if anything.
    /// A file system that turns a direct write down (EINVAL) gets the rest through the page
    /// cache: nothing was written by the refused call.
    private func writeAll(_ bytes: UnsafeRawBufferPointer) -> String? {
        var done = 0
        while done < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EINVAL, let direct, direct.isOn, DirectWrites.stop(descriptor) {
                    direct.isOn = false
                    continue
                }
                return String(cString: strerror(errno))
            }
            if count == 0 { return "the write made no progress" }
            done += count
        }
        return nil
    }

    /// Gives the file these permissions instead of 0600 (a file for another reader, such as
    /// node_exporter's metrics textfile).
    func setMode(_ mode: mode_t) {
        if descriptor >= 0, fchmod(descriptor, mode) != 0, failed == nil {
            failed = "chmod: " + String(cString: strerror(errno))
        }
    }

    /// Flushes, syncs and renames into place (and syncs the folder); returns the file's SHA-256.
    @discardableResult
    public func commit() throws(WriteFailure) -> String {
        let sha256 = try prepare()
        try publish()
        return sha256
    }

    /// ``commit()``, or, given a set, ``FileSet/add(_:)``: put in place with the set's other files.
    public func commit(into set: FileSet?) throws(WriteFailure) -> String {
        guard let set else { return try commit() }
        return try set.add(self)
    }

    /// Removes the prepared file's temporary name (a set that will not be published).
    func discard() {
        guard prepared != nil, !published, !journaled else { return }
        unlink(temporaryPath)
        prepared = nil
    }

    /// Renames the prepared file into place and syncs the folder.
    func publish() throws(WriteFailure) {
        guard prepared != nil, !published else { return }
        guard rename(temporaryPath, path) == 0 else {
            let message = "rename: " + String(cString: strerror(errno))
            if !journaled { unlink(temporaryPath) }
            throw WriteFailure(path: path, message: message)
        }
        published = true
        try OutputFile.syncFolder(of: path)
    }

    /// Flushes and syncs the file under its temporary name, and closes it; returns its SHA-256.
    func prepare() throws(WriteFailure) -> String {
        if let prepared { return prepared }
        flush()
        if failed == nil, let direct {
            failed = direct.finish(descriptor) { bytes in writeAll(bytes) }
            self.direct = nil
        }
        func fail(_ message: String) -> WriteFailure {
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
            unlink(temporaryPath)
            return WriteFailure(path: path, message: message)
        }
        if let failed { throw fail(failed) }
        guard fsync(descriptor) == 0 else { throw fail("fsync: " + String(cString: strerror(errno))) }
        let closed = close(descriptor)
        descriptor = -1
        guard closed == 0 else { throw fail("close: " + String(cString: strerror(errno))) }
        let sha256 = hasher.hexDigest()
        prepared = sha256
        // Written: a file waiting for its set's renames holds no buffer.
        buffer = []
        return sha256
    }

    /// Syncs the folder holding `path`, so that a rename into it is durable.
    public static func syncFolder(of path: String) throws(WriteFailure) {
        var folder = path
        if let slash = folder.utf8.lastIndex(of: 0x2F) {
            folder = slash == folder.utf8.startIndex ? "/" : String(folder[..<slash])
        } else {
            folder = "."
        }
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw WriteFailure(path: path, message: "open folder: " + String(cString: strerror(errno)))
        }
        defer { close(fd) }
        // Some file systems cannot sync a folder (EINVAL): nothing to make durable there.
        guard fsync(fd) == 0 || errno == EINVAL else {
            throw WriteFailure(path: path, message: "fsync folder: " + String(cString: strerror(errno)))
        }
    }
}

/// O_DIRECT writes for an ``OutputFile``: bytes are gathered in an aligned buffer and go out in
/// whole 4 MiB blocks that skip the page cache; the last partial block goes through it.
///
/// Why: a plan writes about four times its input (3.9 GB for a 1 GB export), and on the
/// benchmark machine every page the kernel adds to its cache costs more than the copy
/// (`dd` of 3.9 GB: 11.4 s of system time buffered, 0.6 s direct). Nothing in the plan reads
/// these files again; `fsync` still makes them durable before the rename. A file system
/// without O_DIRECT refuses the flag (or its first direct write, EINVAL) and the file, or
/// the rest of it, is written through the page cache as before.
final class DirectWrites {
    /// Alignment of the buffer, the file offset and the length of every direct write (the
    /// largest logical block size in use; 512-byte devices take it too).
    static let block = 4096
    static let capacity = 4 << 20
    private let staging: UnsafeMutableRawPointer
    private let capacity: Int
    private var staged = 0
    /// False once the file system turned a direct write down: the rest goes through the cache.
    var isOn = true

    /// Turns O_DIRECT on for `descriptor`, or nil when the file system refuses it.
    init?(descriptor: Int32, capacity: Int = DirectWrites.capacity) {
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags | settle_o_direct()) == 0 else { return nil }
        var memory: UnsafeMutableRawPointer? = nil
        guard capacity > 0, posix_memalign(&memory, DirectWrites.block, capacity) == 0, let memory else {
            _ = DirectWrites.stop(descriptor)
            return nil
        }
        staging = memory
        self.capacity = capacity
    }

    deinit { free(staging) }

    /// Turns O_DIRECT off again; whether it is off.
    static func stop(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        return flags >= 0 && fcntl(descriptor, F_SETFL, flags & ~settle_o_direct()) == 0
    }

    /// Gathers `bytes`, handing each full buffer to `write`; returns its failure, if any.
    func stage(_ bytes: UnsafeRawBufferPointer, write: (UnsafeRawBufferPointer) -> String?) -> String? {
        var offset = 0
        while offset < bytes.count {
            let count = min(capacity - staged, bytes.count - offset)
            (staging + staged).copyMemory(from: bytes.baseAddress! + offset, byteCount: count)
            staged += count
            offset += count
            if staged == capacity {
                staged = 0
                if let problem = write(UnsafeRawBufferPointer(start: staging, count: capacity)) {
                    return problem
                }
            }
        }
        return nil
    }

    /// Writes what is gathered: the whole blocks direct, then the rest through the page cache.
    func finish(_ descriptor: Int32, write: (UnsafeRawBufferPointer) -> String?) -> String? {
        let whole = isOn ? staged & ~(DirectWrites.block - 1) : 0
        if whole > 0, let problem = write(UnsafeRawBufferPointer(start: staging, count: whole)) { return problem }
        guard staged > whole else { return nil }
        if isOn {
            guard DirectWrites.stop(descriptor) else { return "fcntl: " + String(cString: strerror(errno)) }
            isOn = false
        }
        return write(UnsafeRawBufferPointer(start: staging + whole, count: staged - whole))
    }
}

/// RFC 4180 field encoding, with the spreadsheet formula guard for files finance opens.
public enum CSVField {
    /// Appends a field, quoting it when it holds a comma, a quote, CR or LF.
    /// With `guardFormula`, a text cell starting with `=`, `+`, `-`, `@`, tab or CR gets a
    /// leading `'`, and so does one that starts like a guarded cell (``CSVScanner/needsGuard(_:)``).
    @inline(__always)
    public static func append(_ value: UnsafeRawBufferPointer, to out: inout [UInt8], guardFormula: Bool) {
        var needsQuotes = false
        for byte in value where byte == 0x2C || byte == 0x22 || byte == 0x0A || byte == 0x0D {
            needsQuotes = true
            break
        }
        let formula = guardFormula && CSVScanner.needsGuard(value)
        if !needsQuotes {
            if formula { out.append(0x27) }
            out.append(contentsOf: value)
            return
        }
        out.append(0x22)
        if formula { out.append(0x27) }
        for byte in value {
            if byte == 0x22 { out.append(0x22) }
            out.append(byte)
        }
        out.append(0x22)
    }

    /// Appends an input cell of `errors.csv` or `deferred.csv`. A `text` column's cell gets
    /// the formula guard as any text; an amount column's only when it is not a number (amounts
    /// stay numbers, `-5.00` included; `=1+2` is no amount). A field with a stray quote is
    /// written as it was read, not quoted (its guard, when it needs one, inside its opening
    /// quote): fed back, it is the same malformed field. ``CorrectionCell/removeGuard()``
    /// undoes exactly this guard.
    public static func appendCell(_ cell: CorrectionCell, to out: inout [UInt8], text: Bool) {
        cell.bytes.withUnsafeBytes { value in
            let guardFormula = text || !isNumber(value)
            guard cell.strayQuote else {
                append(value, to: &out, guardFormula: guardFormula)
                return
            }
            if guardFormula, value.first == 0x22, CSVScanner.needsGuard(UnsafeRawBufferPointer(rebasing: value[1...])) {
                out.append(0x22)
                out.append(0x27)
                out.append(contentsOf: value[1...])
            } else {
                if guardFormula, CSVScanner.needsGuard(value) { out.append(0x27) }
                out.append(contentsOf: value)
            }
        }
    }

    /// A cell a spreadsheet reads as a number: an optional sign, digits, an optional point.
    static func isNumber(_ value: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        if index < value.count, value[index] == 0x2B || value[index] == 0x2D { index += 1 }
        var digits = 0
        var point = false
        while index < value.count {
            let byte = value[index]
            if byte >= 0x30 && byte <= 0x39 {
                digits += 1
            } else if byte == 0x2E && !point {
                point = true
            } else {
                return false
            }
            index += 1
        }
        return digits > 0
    }

    public static func append(_ value: String, to out: inout [UInt8], guardFormula: Bool) {
        var value = value
        value.withUTF8 { append(UnsafeRawBufferPointer($0), to: &out, guardFormula: guardFormula) }
    }

    public static func append(_ value: [UInt8], to out: inout [UInt8], guardFormula: Bool) {
        value.withUnsafeBytes { append($0, to: &out, guardFormula: guardFormula) }
    }

    /// Appends a header row of plain names.
    public static func header(_ names: [String], to out: inout [UInt8]) {
        for (index, name) in names.enumerated() {
            if index > 0 { out.append(0x2C) }
            // An input column named like a formula is guarded as a cell would be (errors.csv
            // and deferred.csv carry the input's header; the reader removes it again).
            append(name, to: &out, guardFormula: true)
        }
        out.append(0x0A)
    }

    /// A text cell for a file finance opens, with the formula guard applied.
    public static func guarded(_ value: String) -> [UInt8] {
        var bytes = Array(value.utf8)
        if bytes.withUnsafeBytes({ CSVScanner.needsGuard($0) }) { bytes.insert(0x27, at: 0) }
        return bytes
    }
}
