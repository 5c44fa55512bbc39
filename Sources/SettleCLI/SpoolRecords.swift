import Glibc
import SettleCore
import SettlePlanFolder
import SettleRead
import SettleWrite

/// Original records read back from the plan folder's spool files.
///
/// A plain spool is read where each record sits. A gzip spool (the input itself) is inflated
/// as a stream: ``prefetch(_:)`` takes every record a file will need, sorted, in one pass,
/// and keeps them (up to ``cacheBudget`` bytes); a record not prefetched is read by a
/// forward-only pass (one pass for records asked in ascending order, which is results.csv
/// order). Never inflated from the start once per record.
final class SpoolRecords: OriginalRecords {
    /// One spool file: its name relative to the plan folder and what it holds.
    struct File: Sendable {
        var name: String
        var format: SpoolFormat
    }

    private let folder: String
    private let files: [Int: File]
    private var readers: [Int: SpoolReader] = [:]
    /// Prefetched records of gzip spools: file → offset → (start, length) in `arena`.
    private var cached: [Int: [UInt64: (start: Int, length: UInt32)]] = [:]
    private var arena: [UInt8] = []
    /// The one CSV parser, its buffers reused from record to record.
    private let scanner = CSVScanner(scratchBytes: 1024)
    /// The most bytes ``prefetch(_:)`` keeps; records past it are read by a forward pass.
    var cacheBudget = 256 << 20

    /// `files`: input index → its spool file (from the plan's input reports or the manifest).
    init(folder: String, files: [Int: File]) {
        self.folder = folder
        self.files = files
    }

    /// The spool files the manifest lists (`spool`: name → {sha256, format}); a name without a
    /// known ending is a plain spool, the input index is the `N` of `input-N.`.
    convenience init(folder: String, manifest: JSON) {
        var files: [Int: File] = [:]
        if case .object(let pairs)? = manifest["spool"] {
            for (name, entry) in pairs {
                guard let number = SpoolRecords.inputNumber(name) else { continue }
                let format =
                    entry["format"]?.stringValue.flatMap(SpoolFormat.init(rawValue:)) ?? SpoolFormat(fileName: name)
                    ?? .plain
                files[number - 1] = File(name: name, format: format)
            }
        }
        self.init(folder: folder, files: files)
    }

    /// `N` of `.settle/input-N.<ending>`.
    static func inputNumber(_ name: String) -> Int? {
        let base = name.split(separator: "/").last.map(String.init) ?? name
        guard base.hasPrefix("input-") else { return nil }
        return Int(base.dropFirst("input-".count).prefix { $0.isNumber })
    }

    private func path(_ file: Int) -> String {
        folder + "/" + (files[file]?.name ?? "")
    }

    private func reader(_ file: Int) throws(WriteFailure) -> SpoolReader {
        if let reader = readers[file] { return reader }
        guard let spool = files[file], let reader = SpoolReader(path: path(file), format: spool.format) else {
            let reason =
                files[file] == nil
                ? "no spool file is recorded for input \(file + 1)" : String(cString: strerror(errno))
            throw WriteFailure(path: path(file), message: "the spool cannot be opened: \(reason)")
        }
        readers[file] = reader
        return reader
    }

    /// Reads, in one pass over each gzip spool, the records at these places, sorted by offset,
    /// and keeps them for ``fields(file:offset:length:)``. Plain spools need no pass.
    func prefetch(_ wanted: some Sequence<(file: Int, offset: UInt64, length: UInt32)>) throws(WriteFailure) {
        var byFile: [Int: [(offset: UInt64, length: UInt32)]] = [:]
        for place in wanted where place.length > 0 && files[place.file]?.format == .gzip {
            byFile[place.file, default: []].append((place.offset, place.length))
        }
        // Exactly the bytes kept (up to the budget), not a doubling array's slack.
        let total = byFile.values.reduce(0) { sum, places in places.reduce(sum) { $0 + Int($1.length) } }
        arena.reserveCapacity(arena.count + min(total, cacheBudget))
        for (file, places) in byFile.sorted(by: { $0.key < $1.key }) {
            let reader = try reader(file)
            var index = cached[file] ?? [:]
            for place in places.sorted(by: { $0.offset < $1.offset }) where index[place.offset] == nil {
                guard arena.count + Int(place.length) <= cacheBudget else { break }
                let record = try read(reader, file: file, offset: place.offset, length: place.length)
                index[place.offset] = (arena.count, place.length)
                arena.append(contentsOf: record)
            }
            cached[file] = index
        }
    }

    func fields(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [[UInt8]] {
        try withRecord(file: file, offset: offset, length: length) { scanner.fields(of: $0) }
    }

    func bytes(file: Int, offset: UInt64, length: UInt32) throws(WriteFailure) -> [UInt8] {
        try withRecord(file: file, offset: offset, length: length) { [UInt8]($0) }
    }

    /// The record's bytes, from the prefetched arena (no copy) or read from the spool.
    private func withRecord<R>(file: Int, offset: UInt64, length: UInt32, _ body: (UnsafeRawBufferPointer) -> R)
        throws(WriteFailure) -> R
    {
        if let slot = cached[file]?[offset], slot.length == length {
            return arena.withUnsafeBytes {
                body(UnsafeRawBufferPointer(rebasing: $0[slot.start..<slot.start + Int(length)]))
            }
        }
        return try read(try reader(file), file: file, offset: offset, length: length).withUnsafeBytes(body)
    }

    private func read(_ reader: SpoolReader, file: Int, offset: UInt64, length: UInt32) throws(WriteFailure)
        -> [UInt8]
    {
        let record: [UInt8]
        do {
            record = try reader.read(offset: offset, length: Int(length))
        } catch {
            throw WriteFailure(path: reader.path, message: "the spool cannot be read: \(error.message)")
        }
        guard record.count == Int(length) else {
            throw WriteFailure(
                path: reader.path,
                message: "the spool holds \(record.count) of the record's \(length) bytes at \(offset)")
        }
        return record
    }

    /// Passes made over gzip spools so far (for tests: prefetch then reads make one a file).
    var passes: Int { readers.values.reduce(0) { $0 + $1.passes } }
}

extension SpoolRecords: SpoolRecordSource {}
