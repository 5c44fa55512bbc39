import Glibc
import SettleCore

/// Appends the original text of every record to a file in the output folder, so that
/// `errors.csv` and `deferred.csv` can later copy a line's strings byte for byte
/// (and `apply` can, without the inputs).
public final class SpoolWriter: RecordSpool {
    public let path: String
    private var descriptor: Int32
    private var buffer: [UInt8] = []
    /// Bytes written so far, counting what is still buffered: the next record's offset.
    public private(set) var offset: UInt64 = 0
    /// The first write error: once set nothing more is written, and ``finish()`` reports it.
    public private(set) var failure: String? = nil

    /// Creates the spool file: exclusively (never an existing file, never through a
    /// symlink), private to the user (0600 whatever the umask). `/dev/null` spools into nothing.
    public init(path: String) throws(ReadFailure) {
        self.path = path
        let discard = path == "/dev/null"
        let flags = O_WRONLY | O_CLOEXEC | (discard ? 0 : O_CREAT | O_EXCL | O_NOFOLLOW)
        descriptor = open(path, flags, 0o600)
        guard descriptor >= 0, discard || fchmod(descriptor, 0o600) == 0 else {
            let message = "cannot write \(path): \(String(cString: strerror(errno)))"
            if descriptor >= 0 { close(descriptor) }
            throw ReadFailure(code: .unreadable, message: message)
        }
        buffer.reserveCapacity(1 << 20)
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    @inline(__always)
    public func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        offset += UInt64(bytes.count)
        if buffer.count >= 1 << 20 { flush() }
    }

    public func appendNewline() {
        buffer.append(0x0A)
        offset += 1
    }

    public func flush() {
        defer { buffer.removeAll(keepingCapacity: true) }
        guard failure == nil, descriptor >= 0, !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { bytes in
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
    }

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
public final class SpoolReader {
    private let descriptor: Int32

    public init?(path: String) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 { return nil }
    }

    deinit { close(descriptor) }

    /// The bytes at `offset..<offset+length`; fewer when the file ends early or a read fails.
    public func read(offset: UInt64, length: Int) -> [UInt8] {
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
}
