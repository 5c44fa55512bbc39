import SettleRead
import SettleWrite

/// Original records read back from the plan folder's spool files.
final class SpoolRecords: OriginalRecords {
    private let folder: String
    private var readers: [Int: SpoolReader] = [:]

    init(folder: String) { self.folder = folder }

    func fields(file: Int, offset: UInt64, length: UInt32) -> [[UInt8]] {
        if readers[file] == nil {
            readers[file] = SpoolReader(path: OutputFolder.spoolPath(folder, file: file))
        }
        guard let reader = readers[file] else { return [] }
        return CSVField.split(reader.read(offset: offset, length: Int(length)))
    }
}
