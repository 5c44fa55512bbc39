import Glibc
import SettleCore

/// Appends the original text of every record to a file in the output folder, so that
/// `errors.csv` and `deferred.csv` can later copy a line's strings byte for byte
/// (and `apply` can, without the inputs).
public final class SpoolWriter: RecordSpool {
    public let path: String
    private let descriptor: Int32
    private var buffer: [UInt8] = []
    /// Bytes written so far, counting what is still buffered: the next record's offset.
    public private(set) var offset: UInt64 = 0

    public init(path: String) throws(ReadFailure) {
        self.path = path
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw ReadFailure(code: .unreadable, message: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        buffer.reserveCapacity(1 << 20)
    }

    deinit { close(descriptor) }

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
        buffer.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    break
                }
                done += count
            }
        }
        buffer.removeAll(keepingCapacity: true)
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

    /// The bytes at `offset..<offset+length`.
    public func read(offset: UInt64, length: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: length)
        let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, length, off_t(offset)) }
        if got < length { bytes.removeLast(length - max(0, got)) }
        return bytes
    }
}
