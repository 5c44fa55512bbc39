import Glibc
import SettleCore
import SettleWrite

/// Reads a file in 1 MiB chunks through one descriptor: what the rewrite after apply streams
/// (results.csv, the line index), so that memory does not follow the plan.
final class ChunkedFile {
    let path: String
    private let descriptor: Int32
    private(set) var buffer: [UInt8] = []
    /// Where unread bytes start in ``buffer``.
    var start = 0
    private(set) var atEnd = false

    init?(path: String) {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
    }

    deinit { close(descriptor) }

    /// Reads the next chunk after the unread bytes; false at the end of the file.
    func more() throws(WriteFailure) -> Bool {
        guard !atEnd else { return false }
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        let chunk = 1 << 20
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: chunk))
        var count = 0
        repeat {
            count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + old, chunk) }
        } while count < 0 && errno == EINTR
        guard count >= 0 else {
            buffer.removeLast(chunk)
            throw WriteFailure(path: path, message: "read: " + String(cString: strerror(errno)))
        }
        buffer.removeLast(chunk - count)
        if count == 0 { atEnd = true }
        return count > 0
    }
}

/// results.csv, one record at a time, split into its fields by the one CSV scanner.
final class ResultsReader {
    private let file: ChunkedFile
    private let scanner = CSVScanner(scratchBytes: 1024)

    init?(path: String) {
        guard let file = ChunkedFile(path: path) else { return nil }
        self.file = file
    }

    /// The next record's fields, or nil after the last.
    func next() throws(WriteFailure) -> [[UInt8]]? {
        while true {
            if file.start < file.buffer.count {
                let atEnd = file.atEnd
                let record = file.buffer.withUnsafeBytes { raw -> (fields: [[UInt8]], end: Int)? in
                    let bytes = raw.baseAddress!
                    switch scanner.scan(bytes, from: file.start, to: raw.count, atEOF: atEnd) {
                    case .complete(let end, _, _): return (scanner.copiedFields(), end)
                    case .incomplete: return nil
                    case .unclosedQuote: return atEnd ? (scanner.openRecord(bytes, to: raw.count), raw.count) : nil
                    }
                }
                if let record {
                    file.start = record.end
                    return record.fields
                }
                // At the end of the file the scanner always gives a record; this is not reached.
                if atEnd { return nil }
            } else if file.atEnd {
                return nil
            }
            _ = try file.more()
        }
    }

    /// Appends a rewritten row: its fields, read back from results.csv, already carry their
    /// formula guard.
    static func append(_ row: [[UInt8]], to file: OutputFile) {
        file.withBuffer { out in
            for (index, value) in row.enumerated() {
                if index > 0 { out.append(0x2C) }
                CSVField.append(value, to: &out, guardFormula: false)
            }
            out.append(0x0A)
        }
        file.endRow()
    }
}

extension LineIndex {
    /// The line index, one entry at a time, in results.csv order.
    final class Reader {
        private let file: ChunkedFile

        init?(path: String) {
            guard let file = ChunkedFile(path: path) else { return nil }
            self.file = file
        }

        func next() throws(WriteFailure) -> Entry? {
            while file.buffer.count - file.start < entryBytes {
                guard try file.more() else { return nil }
            }
            let start = file.start
            file.start += entryBytes
            return file.buffer.withUnsafeBytes { bytes in
                func value(_ at: Int, _ width: Int) -> UInt64 {
                    var result: UInt64 = 0
                    for index in (0..<width).reversed() { result = result << 8 | UInt64(bytes[start + at + index]) }
                    return result
                }
                let charge = Int(value(16, 4))
                return Entry(
                    file: Int(value(0, 4)), offset: value(8, 8), length: UInt32(value(4, 4)),
                    charge: charge == 0 ? nil : charge - 1)
            }
        }
    }
}
