import Glibc
import SettleDigest

/// Why an output file could not be written (exit 73).
public struct WriteFailure: Error, Sendable {
    public let path: String
    public let message: String
}

/// A file written to a temporary name, flushed and renamed, so that a crash never leaves
/// a half-written file. Bytes are buffered and hashed (SHA-256) as they go out.
public final class OutputFile {
    public let path: String
    private let temporaryPath: String
    private var descriptor: Int32
    private var buffer: [UInt8] = []
    private let hasher = SHA256()
    public private(set) var rows = 0
    private var failed: String? = nil

    public init(path: String) throws(WriteFailure) {
        self.path = path
        temporaryPath = path + ".tmp-\(getpid())"
        descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw WriteFailure(path: path, message: String(cString: strerror(errno)))
        }
        buffer.reserveCapacity(1 << 20)
    }

    deinit {
        if descriptor >= 0 {
            close(descriptor)
            unlink(temporaryPath)
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

    private func flush() {
        guard !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { bytes in
            hasher.update(bytes)
            var done = 0
            while done < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    failed = String(cString: strerror(errno))
                    return
                }
                done += count
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, syncs and renames into place; returns the file's SHA-256.
    @discardableResult
    public func commit() throws(WriteFailure) -> String {
        flush()
        if let failed { throw WriteFailure(path: path, message: failed) }
        guard fsync(descriptor) == 0 else { throw WriteFailure(path: path, message: String(cString: strerror(errno))) }
        close(descriptor)
        descriptor = -1
        guard rename(temporaryPath, path) == 0 else {
            throw WriteFailure(path: path, message: String(cString: strerror(errno)))
        }
        return hasher.hexDigest()
    }
}

/// RFC 4180 field encoding, with the spreadsheet formula guard for files finance opens.
public enum CSVField {
    /// Appends a field, quoting it when it holds a comma, a quote, CR or LF.
    /// With `guardFormula`, a text cell starting with `=`, `+`, `-`, `@`, tab or CR gets a leading `'`.
    @inline(__always)
    public static func append(_ value: UnsafeRawBufferPointer, to out: inout [UInt8], guardFormula: Bool) {
        var needsQuotes = false
        for byte in value where byte == 0x2C || byte == 0x22 || byte == 0x0A || byte == 0x0D {
            needsQuotes = true
            break
        }
        let formula = guardFormula && !value.isEmpty && isFormulaStart(value[0])
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

    public static func append(_ value: String, to out: inout [UInt8], guardFormula: Bool) {
        var value = value
        value.withUTF8 { append(UnsafeRawBufferPointer($0), to: &out, guardFormula: guardFormula) }
    }

    public static func append(_ value: [UInt8], to out: inout [UInt8], guardFormula: Bool) {
        value.withUnsafeBytes { append($0, to: &out, guardFormula: guardFormula) }
    }

    @inline(__always)
    static func isFormulaStart(_ byte: UInt8) -> Bool {
        byte == 0x3D || byte == 0x2B || byte == 0x2D || byte == 0x40 || byte == 0x09 || byte == 0x0D
    }

    /// Appends a header row of plain names.
    public static func header(_ names: [String], to out: inout [UInt8]) {
        for (index, name) in names.enumerated() {
            if index > 0 { out.append(0x2C) }
            append(name, to: &out, guardFormula: false)
        }
        out.append(0x0A)
    }

    /// Splits a whole CSV file into raw records (quotes respected), without their line ends.
    public static func records(_ bytes: [UInt8]) -> [[UInt8]] {
        var records: [[UInt8]] = []
        var start = 0
        var inQuotes = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x22 {
                inQuotes.toggle()
            } else if byte == 0x0A, !inQuotes {
                var end = index
                if end > start, bytes[end - 1] == 0x0D { end -= 1 }
                records.append(Array(bytes[start..<end]))
                start = index + 1
            }
            index += 1
        }
        if start < bytes.count { records.append(Array(bytes[start...])) }
        return records
    }

    /// A text cell for a file finance opens, with the formula guard applied.
    public static func guarded(_ value: String) -> [UInt8] {
        var bytes = Array(value.utf8)
        if let first = bytes.first, isFormulaStart(first) { bytes.insert(0x27, at: 0) }
        return bytes
    }

    /// Splits one CSV record (as written by settle or spooled from an input) into fields.
    public static func split(_ record: [UInt8]) -> [[UInt8]] {
        var fields: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        var inQuotes = false
        var end = record.count
        // Drop the record's line end.
        if end > 0, record[end - 1] == 0x0A { end -= 1 }
        if end > 0, record[end - 1] == 0x0D { end -= 1 }
        var fieldStarted = false
        while index < end {
            let byte = record[index]
            if inQuotes {
                if byte == 0x22 {
                    if index + 1 < end, record[index + 1] == 0x22 {
                        current.append(0x22)
                        index += 2
                        continue
                    }
                    inQuotes = false
                } else {
                    current.append(byte)
                }
            } else if byte == 0x2C {
                fields.append(current)
                current.removeAll(keepingCapacity: true)
                fieldStarted = false
            } else if byte == 0x22 && !fieldStarted {
                inQuotes = true
                fieldStarted = true
            } else {
                current.append(byte)
                fieldStarted = true
            }
            index += 1
        }
        fields.append(current)
        return fields
    }
}
