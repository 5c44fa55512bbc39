import SettleCore

/// A sink that keeps a copy of everything the CSV reader hands it, per file.
final class RecordingSink: RecordSink {
    struct Record {
        var file: Int
        var line: Int
        var fields: [String]
        var defect: RecordDefect?
        var spoolOffset: UInt64
        var spoolLength: UInt32
    }

    var layouts: [FileLayout] = []
    var names: [String] = []
    var records: [Record] = []
    var ended: [Int: Int] = [:]
    var discarded: [Int] = []

    func beginFile(name: String, layout: FileLayout) -> Int {
        names.append(name)
        layouts.append(layout)
        return layouts.count - 1
    }

    func record(_ record: RecordView, file: Int) {
        records.append(
            Record(
                file: file, line: record.line,
                fields: record.fields.map { String(decoding: $0, as: UTF8.self) },
                defect: record.defect, spoolOffset: record.spoolOffset, spoolLength: record.spoolLength))
    }

    func endFile(_ file: Int, lines: Int) { ended[file] = lines }

    func discardFile(_ file: Int) {
        discarded.append(file)
        records.removeAll { $0.file == file }
    }
}
