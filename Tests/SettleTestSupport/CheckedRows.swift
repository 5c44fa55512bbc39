public import SettleCore

extension LineChecker {
    /// Checks `rows` (column → value, over `header`) as the CSV reader hands a file named
    /// `test.csv` to the checker, its first row on line 2, and ends reading as the pipeline
    /// does (the reading-only tables let go); returns the checked batch.
    public func checkRows(_ rows: [[String: String]], header: [String]) -> Batch {
        let layout = try! FileLayout.csv(header: header, aliases: [:])
        let file = beginFile(name: "test.csv", layout: layout)
        for (position, row) in rows.enumerated() {
            let values = header.map { Array((row[$0] ?? "").utf8) }
            let storage = values.map { bytes -> UnsafeMutableRawBufferPointer in
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
                buffer.copyBytes(from: bytes)
                return buffer
            }
            let views = zip(storage, values).map {
                UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0.0)[0..<$0.1.count])
            }
            views.withUnsafeBufferPointer {
                record(
                    RecordView(fields: $0, line: position + 2, spoolOffset: 0, spoolLength: 0, defect: nil), file: file)
            }
            storage.forEach { $0.deallocate() }
        }
        endFile(file, lines: rows.count)
        finishReading()
        return batch
    }
}
