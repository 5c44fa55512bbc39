import Glibc
public import SettleCore

/// Limits that protect memory; past them the record (or the file) is rejected, never a crash.
public struct ReadLimits: Sendable {
    /// A longer field rejects its line (`field_too_long`); a longer `line_id` or `order_id`
    /// rejects the file (`unreadable`): a line that cannot be traced must not stand alone.
    public var maxFieldBytes = 64 * 1024
    /// A longer record is read as a stream (its fields within limits kept, the rest
    /// dropped) and rejected `field_too_long`, its original text still spooled.
    public var maxRecordBytes = 1 << 20
    /// A record longer than this rejects the file (`unreadable`): the spool could not hand
    /// it back for `errors.csv` without holding it whole in memory.
    public var maxSpooledRecordBytes = 64 << 20
    public var maxColumns = 1024
    public init() {}
}

/// Reads an RFC 4180 order export at the byte level and hands each record to a sink.
///
/// Each record is split by ``CSVScanner``, settle's one CSV parser (quotes, `""` escapes,
/// quoted commas and newlines; LF or CRLF line ends, mixed freely, a CR alone data); this
/// reader adds the streaming window, an optional BOM, blank lines and the limits.
/// `source` line numbers count each LF as one. Fields are views into a
/// reused window; only fields with `""` escapes are copied. A record's place is its
/// `[offset, length]` in the (inflated) input, line end included: the spool is the input's
/// own bytes, tapped by ``ByteSource``.
///
/// A file settle wrote (`errors.csv`, `deferred.csv`: its header ends in `reason_code,
/// reason, source`) has the spreadsheet formula guard removed from its text cells: a cell
/// `'=X` reads as `=X` (a cell `'abc` stays as it is), so the original strings come back.
public final class CSVExportReader {
    private let aliases: [String: String]
    private let limits: ReadLimits

    private var window: UnsafeMutableRawBufferPointer
    private var filled = 0
    /// The one CSV parser (SettleCore): splits each record of the window into fields.
    private let scanner: CSVScanner

    public init(aliases: [String: String] = [:], limits: ReadLimits = ReadLimits()) {
        self.aliases = aliases
        self.limits = limits
        window = .allocate(byteCount: 2 * ByteSource.chunkSize, alignment: 16)
        scanner = CSVScanner(maxFieldBytes: limits.maxFieldBytes, maxColumns: limits.maxColumns)
    }

    deinit { window.deallocate() }

    /// Where the read of one file stands; passed `inout` through the steps of ``read``.
    private struct ReadState {
        let name: String
        /// The sink's index of the file, set once the header is read.
        var fileIndex: Int? = nil
        var layout: FileLayout? = nil
        /// The source line the next record starts on.
        var line = 1
        /// Records handed to the sink.
        var lines = 0
        var atEOF = false
        /// The first byte of the window not parsed yet.
        var position = 0

        init(name: String) { self.name = name }

        /// A whole-file failure at the current line.
        func failure(_ code: FileRejection, _ message: String) -> ReadFailure {
            ReadFailure(code: code, message: message, position: "\(name):\(line)")
        }
    }

    /// Reads the whole source; on a whole-file problem, discards the file from the sink and
    /// returns why.
    ///
    /// The steps: ``readStart`` (empty file, BOM), then in turn ``parseWindow`` (every
    /// complete record in the window) and ``refill`` (the next chunk) until the end of the
    /// source; each record goes through ``acceptHeader`` or ``acceptRecord``, or through
    /// ``acceptLongRecord`` when it does not fit the window.
    public func read(
        name: String, source: ByteSource, sink: some RecordSink,
        progress: ((UInt64) -> Void)? = nil
    ) -> ReadFailure? {
        var state = ReadState(name: name)
        filled = 0
        do {
            if let failure = try readStart(&state, source: source, progress: progress) { return failure }
            while true {
                if let failure = try parseWindow(&state, source: source, sink: sink) {
                    return failure
                }
                if state.atEOF && state.position >= filled { break }
                try refill(&state, source: source, progress: progress)
            }
        } catch {
            if let fileIndex = state.fileIndex { sink.discardFile(fileIndex) }
            return error.located(in: name)
        }
        guard let fileIndex = state.fileIndex else {
            return ReadFailure(
                code: .headerMissingColumn, message: "the file has no header record",
                position: "\(name):1")
        }
        sink.endFile(fileIndex, lines: state.lines)
        return nil
    }

    /// Moves the unparsed tail to the front of the window, then appends the next chunk (or
    /// notes the end of the source).
    private func refill(_ state: inout ReadState, source: ByteSource, progress: ((UInt64) -> Void)?)
        throws(ReadFailure)
    {
        if state.position > 0 {
            let tail = filled - state.position
            if tail > 0 { memmove(window.baseAddress!, window.baseAddress! + state.position, tail) }
            filled = tail
            state.position = 0
        }
        guard !state.atEOF else { return }
        if let chunk = try source.next() {
            ensureWindow(filled + chunk.count)
            (window.baseAddress! + filled).copyMemory(from: chunk.baseAddress!, byteCount: chunk.count)
            filled += chunk.count
            progress?(source.bytesRead)
        } else {
            state.atEOF = true
        }
    }

    /// Reads until the window holds 3 bytes (or the whole source): rejects an empty file and
    /// skips a UTF-8 BOM.
    private func readStart(_ state: inout ReadState, source: ByteSource, progress: ((UInt64) -> Void)?)
        throws(ReadFailure) -> ReadFailure?
    {
        repeat {
            try refill(&state, source: source, progress: progress)
        } while filled < 3 && !state.atEOF
        if filled == 0 && state.atEOF {
            return ReadFailure(code: .emptyFile, message: "the file is empty (0 bytes)", position: "\(state.name):1")
        }
        if filled >= 3, window[0] == 0xEF, window[1] == 0xBB, window[2] == 0xBF { state.position = 3 }
        return nil
    }

    /// Parses every complete record in the window and hands it on; stops at a record that
    /// goes on past the window (after the next ``refill`` it is parsed again from its start).
    @inline(__always)
    private func parseWindow(
        _ state: inout ReadState, source: ByteSource, sink: some RecordSink
    ) throws(ReadFailure) -> ReadFailure? {
        while state.position < filled {
            switch skipBlankLine(&state) {
            case .skipped: continue
            case .needMore: return nil
            case .record: break
            }
            switch scanner.scan(
                UnsafeRawPointer(window.baseAddress!), from: state.position, to: filled, atEOF: state.atEOF)
            {
            case .incomplete:
                guard filled - state.position > limits.maxRecordBytes else { return nil }
                if let failure = try acceptLongRecord(&state, source: source, sink: sink) {
                    return failure
                }
            case .unclosedQuote:
                if let fileIndex = state.fileIndex { sink.discardFile(fileIndex) }
                return state.failure(
                    .csvUnclosedQuote, "a quoted field opened on line \(state.line) is never closed")
            case .complete(let end, let newlines, let defect):
                let raw = UnsafeRawBufferPointer(rebasing: window[state.position..<end])
                if let layout = state.layout, let fileIndex = state.fileIndex {
                    if let failure = acceptRecord(
                        raw, defect: defect, layout: layout, file: fileIndex, state: &state, source: source, sink: sink)
                    {
                        return failure
                    }
                } else if let failure = acceptHeader(raw, defect: defect, state: &state, sink: sink) {
                    return failure
                }
                state.line += newlines
                state.position = end
            }
        }
        return nil
    }

    private enum BlankLine { case record, skipped, needMore }

    /// Blank lines (an LF or a CRLF where a record would start) are skipped; a CR alone is
    /// a record's first byte. A CR last in the window may be the first half of a CRLF: wait
    /// for more unless at the end.
    @inline(__always)
    private func skipBlankLine(_ state: inout ReadState) -> BlankLine {
        let byte = window[state.position]
        if byte == 0x0A {
            state.position += 1
            state.line += 1
            return .skipped
        }
        guard byte == 0x0D else { return .record }
        if state.position + 1 < filled {
            guard window[state.position + 1] == 0x0A else { return .record }
            state.position += 2
        } else if state.atEOF {
            return .record
        } else {
            return .needMore
        }
        state.line += 1
        return .skipped
    }

    /// The first record: the header. It sets the file's layout and begins the file in the sink.
    private func acceptHeader(
        _ raw: UnsafeRawBufferPointer, defect: RecordDefect?, state: inout ReadState, sink: some RecordSink
    ) -> ReadFailure? {
        let header = headerNames()
        // A CR no LF follows, in the header: a file with CR line ends, read as one long line.
        let content = CSVScanner.contentEnd(of: raw)
        if let cr = raw[..<content].firstIndex(of: 0x0D), cr + 1 >= content || raw[cr + 1] != 0x0A {
            return state.failure(
                .headerInvalid,
                "the header holds a CR that no LF follows: settle reads LF or CRLF line ends (a file with CR "
                    + "line ends must be converted first)")
        }
        guard defect == nil, header.count <= limits.maxColumns else {
            return state.failure(
                .headerInvalid, defect?.message ?? "the header has more than \(limits.maxColumns) columns")
        }
        do {
            let built = try FileLayout.csv(header: header, aliases: aliases)
            state.layout = built
            stripGuard = built.guardedCells
            reasonCells = built.reasonCells
            state.fileIndex = sink.beginFile(name: state.name, layout: built)
            return nil
        } catch {
            return state.failure(error.code, error.message)
        }
    }

    /// A data record in the window: its defect (field count, a field over the limit) named,
    /// its place in the input noted, its fields handed to the sink.
    @inline(__always)
    private func acceptRecord(
        _ raw: UnsafeRawBufferPointer, defect: RecordDefect?, layout: FileLayout, file fileIndex: Int,
        state: inout ReadState, source: ByteSource, sink: some RecordSink
    ) -> ReadFailure? {
        var defect = defect
        let fieldCount = scanner.fieldCount
        let cells = recordCells(fieldCount, layout: layout)
        if defect == nil, fieldCount != layout.count {
            defect = RecordDefect(
                code: .malformedRecord,
                message: "the record has \(cells) fields, the header \(layout.count - reasonCells)")
        }
        if defect?.code == .fieldTooLong {
            let tooLong = (0..<fieldCount).map { scanner.fieldLength($0) > limits.maxFieldBytes }
            if let failure = untraceable(tooLong, layout: layout, name: state.name, line: state.line) {
                sink.discardFile(fileIndex)
                return failure
            }
            if let column = tooLong.firstIndex(of: true) {
                defect = RecordDefect(
                    code: .fieldTooLong,
                    message: "column \(columnName(column, layout)) is longer than \(limits.maxFieldBytes) bytes")
            }
        }
        // A field over the field limit is handed on empty (the spool keeps it), and in a file
        // settle wrote the formula guard is removed.
        let fields = UnsafeBufferPointer(
            rebasing: scanner.fieldViews(emptyOver: limits.maxFieldBytes, strip: stripGuard)[0..<cells])
        let offset = streamOffset(state.position, source)
        let length = raw.count
        sink.record(
            RecordView(
                fields: fields, line: state.line, spoolOffset: offset, spoolLength: UInt32(length), defect: defect),
            file: fileIndex)
        state.lines += 1
        return nil
    }

    /// A record longer than ``ReadLimits/maxRecordBytes``: read as a stream by
    /// ``readLongRecord``, handed on with its over-long fields empty and rejected
    /// `field_too_long`. Leaves what follows it at the start of the window.
    private func acceptLongRecord(
        _ state: inout ReadState, source: ByteSource, sink: some RecordSink
    ) throws(ReadFailure) -> ReadFailure? {
        guard let fileIndex = state.fileIndex, let layout = state.layout else {
            return state.failure(.headerInvalid, "the header is longer than \(limits.maxRecordBytes) bytes")
        }
        let offset = streamOffset(state.position, source)
        guard let long = try readLongRecord(from: state.position, source: source, atEOF: &state.atEOF)
        else {
            sink.discardFile(fileIndex)
            return state.failure(
                .unreadable,
                "the record on line \(state.line) is longer than \(limits.maxSpooledRecordBytes >> 20) MiB")
        }
        if let failure = untraceable(long.tooLong, layout: layout, name: state.name, line: state.line) {
            sink.discardFile(fileIndex)
            return failure
        }
        let length = long.length
        let column = long.tooLong.firstIndex(of: true).map { columnName($0, layout) }
        let defect = RecordDefect(
            code: .fieldTooLong,
            message: column.map { "column \($0) is longer than \(limits.maxFieldBytes) bytes" }
                ?? "the record is longer than \(limits.maxRecordBytes) bytes")
        let empty = [UInt8]()
        let kept = zip(long.fields, long.tooLong).map { $1 ? empty : $0 }.prefix(
            recordCells(long.fields.count, layout: layout))
        withViews(of: Array(kept), stripping: layout.guardedCells) { fields in
            sink.record(
                RecordView(
                    fields: fields, line: state.line, spoolOffset: offset, spoolLength: UInt32(length),
                    defect: defect), file: fileIndex)
        }
        state.lines += 1
        state.line += long.newlines
        state.position = 0
        return nil
    }

    /// How many of a record's `count` cells are the record's own: in a file settle wrote, a
    /// row with another count than the header still ends in settle's reason cells (its
    /// errors.csv row keeps a record's cells as read, more or fewer than the header's).
    @inline(__always)
    private func recordCells(_ count: Int, layout: FileLayout) -> Int {
        count == layout.count || count < reasonCells ? count : count - reasonCells
    }

    /// The position in the (inflated) input of `window[position]`: the window always ends
    /// with the last byte the source handed out.
    @inline(__always)
    private func streamOffset(_ position: Int, _ source: ByteSource) -> UInt64 {
        source.bytesProduced - UInt64(filled - position)
    }

    private func ensureWindow(_ size: Int) {
        guard size > window.count else { return }
        let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, window.count * 2), alignment: 16)
        grown.baseAddress!.copyMemory(from: window.baseAddress!, byteCount: filled)
        window.deallocate()
        window = grown
    }

    private func headerNames() -> [String] {
        scanner.fieldViews().map { String(decoding: $0, as: UTF8.self) }
    }

    /// Per input column of a file settle wrote, whether its cells carry the formula guard
    /// (every column but the amounts, whose bytes are kept); nil for any other file.
    private var stripGuard: [Bool]? = nil
    /// ``FileLayout/reasonCells`` of the file being read.
    private var reasonCells = 0

    /// Views of fields held in arrays (a record read as a stream), guard removed as for any record.
    private func withViews(
        of fields: [[UInt8]], stripping strip: [Bool]?, _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Void
    ) {
        let copies = fields
        let total = copies.reduce(0) { $0 + $1.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 16)
        defer { storage.deallocate() }
        var list: [UnsafeRawBufferPointer] = []
        var at = 0
        for index in copies.indices {
            let count = copies[index].count
            copies[index].withUnsafeBytes {
                (storage.baseAddress! + at).copyMemory(
                    from: $0.baseAddress ?? UnsafeRawPointer(storage.baseAddress!), byteCount: count)
            }
            var view = UnsafeRawBufferPointer(start: storage.baseAddress! + at, count: count)
            if let strip, index < strip.count, strip[index] { view = CSVScanner.unguarded(view) }
            list.append(view)
            at += count
        }
        list.withUnsafeBufferPointer(body)
    }

    /// A record whose `line_id` or `order_id` is over the field limit cannot be traced:
    /// its file is rejected whole (`unreadable`), so no part of its order moves alone.
    private func untraceable(_ tooLong: [Bool], layout: FileLayout, name: String, line: Int) -> ReadFailure? {
        for column in [Column.lineID, .orderID] {
            if let index = layout.index(of: column), index < tooLong.count, tooLong[index] {
                return ReadFailure(
                    code: .unreadable,
                    message:
                        "the \(column.csvName) of the record on line \(line) is longer than \(limits.maxFieldBytes) bytes: the line cannot be traced, so no line of the file is read",
                    position: "\(name):\(line)")
            }
        }
        return nil
    }

    private func columnName(_ index: Int, _ layout: FileLayout) -> String {
        index < layout.names.count ? layout.names[index] : String(index + 1)
    }

    /// A record over ``ReadLimits/maxRecordBytes``, read as a stream from `start`.
    struct LongRecord {
        /// The fields, each cut at the field limit (and all of them at the record limit).
        var fields: [[UInt8]] = [[]]
        /// Which fields were over a limit (their bytes are not all in `fields`).
        var tooLong: [Bool] = [false]
        var newlines = 0
        /// Bytes of the record, line end included.
        var length = 0
    }

    /// Reads an over-long record to its end without holding it (the spool has its bytes):
    /// its fields are kept up to the limits (so its ids can still be read). What
    /// follows the record is left at the start of the window. Nil when the record is over
    /// ``ReadLimits/maxSpooledRecordBytes``.
    private func readLongRecord(from start: Int, source: ByteSource, atEOF: inout Bool)
        throws(ReadFailure) -> LongRecord?
    {
        enum State { case fieldStart, unquoted, quoted, quoteInQuoted, afterCR }
        var record = LongRecord()
        var state = State.fieldStart
        var kept = 0
        func keep(_ byte: UInt8) {
            let field = record.fields.count - 1
            if record.fields[field].count < limits.maxFieldBytes, kept < limits.maxRecordBytes,
                record.fields.count <= limits.maxColumns
            {
                record.fields[field].append(byte)
                kept += 1
            } else {
                record.tooLong[field] = true
            }
        }
        func nextField() {
            record.fields.append([])
            record.tooLong.append(false)
        }
        // Scans `buffer[from...]`; returns where the record ended in it, or nil when it goes on.
        func scan(_ buffer: UnsafeRawBufferPointer, from: Int) -> Int? {
            var index = from
            while index < buffer.count {
                let byte = buffer[index]
                if state == .afterCR {
                    // A CRLF ends the record; a CR alone was data of the field.
                    if byte == 0x0A {
                        record.newlines += 1
                        return index + 1
                    }
                    keep(0x0D)
                    state = .unquoted
                }
                if state == .fieldStart {
                    if byte == 0x22 {
                        state = .quoted
                        index += 1
                        continue
                    }
                    state = .unquoted
                }
                switch state {
                case .unquoted, .quoteInQuoted:
                    if state == .quoteInQuoted, byte == 0x22 {
                        keep(0x22)
                        state = .quoted
                    } else if byte == 0x2C {
                        nextField()
                        state = .fieldStart
                    } else if byte == 0x0A {
                        record.newlines += 1
                        return index + 1
                    } else if byte == 0x0D {
                        state = .afterCR
                    } else {
                        state = .unquoted
                        keep(byte)
                    }
                case .quoted:
                    if byte == 0x22 {
                        state = .quoteInQuoted
                    } else {
                        if byte == 0x0A { record.newlines += 1 }
                        keep(byte)
                    }
                case .fieldStart, .afterCR:
                    break
                }
                index += 1
            }
            return nil
        }
        // Counts `buffer[from..<to]` in the record; false past the spooled-record limit.
        func spoolBytes(_ buffer: UnsafeRawBufferPointer, _ from: Int, _ to: Int) -> Bool {
            guard to > from else { return true }
            record.length += to - from
            return record.length <= limits.maxSpooledRecordBytes
        }
        let windowBytes = UnsafeRawBufferPointer(rebasing: window[0..<filled])
        if let end = scan(windowBytes, from: start) {
            guard spoolBytes(windowBytes, start, end) else { return nil }
            let tail = filled - end
            if tail > 0 { memmove(window.baseAddress!, window.baseAddress! + end, tail) }
            filled = tail
            return record
        }
        guard spoolBytes(windowBytes, start, filled) else { return nil }
        filled = 0
        while !atEOF {
            guard let chunk = try source.next() else {
                atEOF = true
                break
            }
            if let end = scan(chunk, from: 0) {
                guard spoolBytes(chunk, 0, end) else { return nil }
                let tail = chunk.count - end
                ensureWindow(tail)
                if tail > 0 { window.baseAddress!.copyMemory(from: chunk.baseAddress! + end, byteCount: tail) }
                filled = tail
                return record
            }
            guard spoolBytes(chunk, 0, chunk.count) else { return nil }
        }
        if state == .quoted {
            throw ReadFailure(
                code: .csvUnclosedQuote, message: "a quoted field is never closed", position: "end of file")
        }
        // A CR last in the file, no LF after it: data of the last field.
        if state == .afterCR { keep(0x0D) }
        return record
    }
}
