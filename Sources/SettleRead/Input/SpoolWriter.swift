import Glibc
import SettleCore
import SettleDigest

/// What a spool file of the plan folder holds, told by its name and recorded in the manifest.
public enum SpoolFormat: String, Sendable, CaseIterable {
    /// The gzip input's bytes as read; records sit at positions of the inflated stream.
    case gzip = "csv.gz"
    /// The plain CSV input's bytes as read; records sit at their positions in it.
    case plain = "csv"
    /// One CSV record per line of an XML input (header of the known columns first); records
    /// sit at their positions in this file.
    case csvFromXML = "from-xml.csv"

    /// How the spool of an input in `format`, read from a source, is written.
    public static func of(_ format: InputFormat, gzip: Bool) -> SpoolFormat {
        format == .xml ? .csvFromXML : gzip ? .gzip : .plain
    }

    /// The name's ending (`input-1.csv.gz`).
    public var fileExtension: String { rawValue }

    /// Whether the file is the input's own bytes (written from ``ByteSource``, not by a reader).
    public var isOriginal: Bool { self != .csvFromXML }

    /// The format a spool file name ends in (a name of an older settle, `input-N.csv`, is plain).
    public init?(fileName: String) {
        guard
            let match = SpoolFormat.allCases.filter({ fileName.hasSuffix("." + $0.rawValue) })
                .max(by: { $0.rawValue.count < $1.rawValue.count })
        else { return nil }
        self = match
    }
}

/// Writes one spool file of the plan folder, so that `errors.csv` and `deferred.csv` can later
/// copy a line's strings byte for byte (and `apply` can, without the inputs).
///
/// For a CSV input the bytes come from ``ByteSource`` as it reads them (``ByteSource/spool(into:)``):
/// the file is the input itself, gzip and all. For an XML input the reader appends one CSV
/// record per line (``RecordSpool``).
public final class SpoolWriter: RecordSpool {
    public let path: String
    private var descriptor: Int32
    private var buffer: [UInt8] = []
    private let hasher: SHA256?
    /// Bytes written so far, counting what is still buffered: the next record's offset.
    public private(set) var offset: UInt64 = 0
    /// The first write error: once set nothing more is written, and ``finish()`` reports it.
    public private(set) var failure: String? = nil

    /// Creates the spool file: exclusively (never an existing file, never through a
    /// symlink), private to the user (0600 whatever the umask). `/dev/null` spools into nothing.
    /// `hashing`: keep the SHA-256 of what is written (``sha256()``); a spool of the input's
    /// own bytes has the input's checksum already.
    public init(path: String, hashing: Bool = false) throws(ReadFailure) {
        self.path = path
        hasher = hashing ? SHA256() : nil
        let discard = path == "/dev/null"
        let flags = O_WRONLY | O_CLOEXEC | (discard ? 0 : O_CREAT | O_EXCL | O_NOFOLLOW)
        descriptor = open(path, flags, 0o600)
        guard descriptor >= 0, discard || fchmod(descriptor, 0o600) == 0 else {
            let message = "cannot write \(path): \(String(cString: strerror(errno)))"
            if descriptor >= 0 { close(descriptor) }
            throw ReadFailure(code: .unreadable, message: message)
        }
        buffer.reserveCapacity(SpoolWriter.bufferSize)
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    static let bufferSize = 1 << 20

    @inline(__always)
    public func append(_ bytes: UnsafeRawBufferPointer) {
        offset += UInt64(bytes.count)
        hasher?.update(bytes)
        // A whole chunk (the input's bytes as read) goes straight to the file.
        if buffer.isEmpty, bytes.count >= SpoolWriter.bufferSize / 4 {
            writeAll(bytes)
            return
        }
        buffer.append(contentsOf: bytes)
        if buffer.count >= SpoolWriter.bufferSize { flush() }
    }

    public func appendNewline() {
        buffer.append(0x0A)
        offset += 1
        withUnsafeBytes(of: UInt8(0x0A)) { hasher?.update($0) }
    }

    public func flush() {
        defer { buffer.removeAll(keepingCapacity: true) }
        guard !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { writeAll($0) }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, descriptor >= 0, bytes.count > 0 else { return }
        var done = 0
        while done < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                failure = String(cString: strerror(errno))
                return
            }
            if count == 0 {
                failure = "the write made no progress"
                return
            }
            done += count
        }
    }

    /// SHA-256 of the bytes written (only when made `hashing`); call after ``finish()``.
    public func sha256() -> String? { hasher?.hexDigest() }

    /// Flushes, syncs and closes the spool; returns what went wrong (a write, the sync or
    /// the close), if anything. The spool is the only copy of the inputs' original text
    /// that `apply` has: a spool that was not written whole must stop the run.
    public func finish() -> String? {
        flush()
        guard descriptor >= 0 else { return failure }
        if failure == nil, path != "/dev/null", fsync(descriptor) != 0 {
            failure = "fsync: " + String(cString: strerror(errno))
        }
        if close(descriptor) != 0, failure == nil { failure = "close: " + String(cString: strerror(errno)) }
        descriptor = -1
        return failure
    }
}

/// Reads records back from a spool file by offset and length.
///
/// A plain spool is read where the record sits (`pread`). A gzip spool is inflated as a
/// stream, forward only: records asked for in ascending order cost one pass over the file;
/// a record before the last one read starts the pass again from the beginning (so callers
/// sort what they want first, see `SpoolRecords`).
public final class SpoolReader {
    public let path: String
    public let format: SpoolFormat
    private var descriptor: Int32 = -1
    // gzip: the stream, the current chunk and the stream position of its first byte.
    private var source: ByteSource? = nil
    private var chunk: UnsafeRawBufferPointer? = nil
    private var chunkStart: UInt64 = 0
    private var ended = false
    /// Times the gzip stream was started (1 for reads in ascending order).
    public private(set) var passes = 0

    public init?(path: String, format: SpoolFormat) {
        self.path = path
        self.format = format
        if format == .gzip {
            guard access(path, R_OK) == 0 else { return nil }
        } else {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            if descriptor < 0 { return nil }
        }
    }

    deinit {
        source?.finishReading()
        if descriptor >= 0 { close(descriptor) }
    }

    /// The bytes at `offset..<offset+length`; fewer when the file ends early or a read fails.
    public func read(offset: UInt64, length: Int) throws(ReadFailure) -> [UInt8] {
        format == .gzip ? try inflated(offset: offset, length: length) : plain(offset: offset, length: length)
    }

    private func plain(offset: UInt64, length: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let got = bytes.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress! + done, length - done, off_t(offset) + off_t(done))
            }
            if got < 0, errno == EINTR { continue }
            if got <= 0 { break }
            done += got
        }
        if done < length { bytes.removeLast(length - done) }
        return bytes
    }

    private func inflated(offset: UInt64, length: Int) throws(ReadFailure) -> [UInt8] {
        if source == nil || offset < chunkStart { try restart() }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        var want = offset
        let end = offset + UInt64(length)
        while want < end {
            guard let current = chunk else {
                if ended { break }
                try advance()
                continue
            }
            let chunkEnd = chunkStart + UInt64(current.count)
            if want >= chunkEnd {
                try advance()
                continue
            }
            let from = Int(want - chunkStart)
            let to = Int(min(end, chunkEnd) - chunkStart)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: current[from..<to]))
            want += UInt64(to - from)
        }
        return bytes
    }

    private func restart() throws(ReadFailure) {
        source?.finishReading()
        source = try ByteSource(path: path)
        source!.spool(into: nil)
        chunk = nil
        chunkStart = 0
        ended = false
        passes += 1
        try advance()
    }

    private func advance() throws(ReadFailure) {
        guard let source else { return }
        chunkStart += UInt64(chunk?.count ?? 0)
        chunk = try source.next()
        if chunk == nil { ended = true }
    }
}
