import Glibc
import SettlePlanFolder
import SettleRead
import SettleWrite

/// Original records read back from the plan folder's spool files.
final class SpoolRecords: OriginalRecords {
    private let folder: String
    private var readers: [Int: SpoolReader] = [:]

    init(folder: String) { self.folder = folder }

    func fields(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [[UInt8]] {
        let path = OutputFolder.spoolPath(folder, file: file)
        if readers[file] == nil { readers[file] = SpoolReader(path: path) }
        guard let reader = readers[file] else {
            throw WriteFailure(path: path, message: "the spool cannot be opened: \(String(cString: strerror(errno)))")
        }
        let record = reader.read(offset: offset, length: Int(length))
        guard record.count == Int(length) else {
            throw WriteFailure(
                path: path, message: "the spool holds \(record.count) of the record's \(length) bytes at \(offset)")
        }
        return CSVField.split(record)
    }
}
