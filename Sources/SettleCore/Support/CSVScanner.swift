import Glibc

/// settle's one RFC 4180 parser: the order exports (through `CSVExportReader`, a record at a
/// time out of a streaming window) and settle's own files read back (`results.csv`, the
/// spooled input records behind `errors.csv` and `deferred.csv`) are split by this scanner.
///
/// Quotes, `""` escapes, quoted commas and newlines. Line ends are LF or CRLF (SPEC), mixed
/// freely; a CR not followed by LF is data, in a field like any other byte (audit 35 C3:
/// taken for a line end, it cut an unquoted field short and made a line of the rest). Inside
/// quotes every byte is data, and each LF counts as one line end in
/// ``Outcome/complete(end:newlines:defect:)``. A field is a view into the scanned bytes;
/// only a field with `""` escapes is copied (into the scanner's scratch buffer). Cells come
/// back as they are written, formula guard included (``unguarded(_:)`` removes it).
///
/// Past ``maxFieldBytes`` or ``maxColumns`` the record is still scanned to its end, its
/// defect named (`field_too_long`, `malformed_record`); so are a quote inside an unquoted
/// field and text after a closing quote (that text is dropped).
public final class CSVScanner {
    /// What ``scan(_:from:to:atEOF:)`` found.
    public enum Outcome {
        /// A record ending at `end` (its line end included), `newlines` line ends in it.
        case complete(end: Int, newlines: Int, defect: RecordDefect?)
        /// The record goes on past the bytes given (and they are not the end of the input).
        case incomplete
        /// A quoted field is never closed before the end of the input.
        case unclosedQuote
    }

    public let maxFieldBytes: Int
    public let maxColumns: Int

    // Per-field bounds of the record scanned last, `bounds[2 i]` and `bounds[2 i + 1]`; a
    // field copied into `scratch` (it had `""`) has its start as `~offset` (negative).
    private var bounds: UnsafeMutablePointer<Int>
    private var capacity = 64
    public private(set) var fieldCount = 0
    // The views ``fieldViews(emptyOver:strip:)`` hands out.
    private var viewBuffer: UnsafeMutablePointer<UnsafeRawBufferPointer>
    private var scratch: UnsafeMutableRawBufferPointer
    private var scratchUsed = 0
    private var base: UnsafeRawPointer? = nil
    /// Where the quoted field scanned last opened (for a record whose quote never closes).
    private var openField = 0

    /// `scratchBytes`: the first size of the buffer for fields with `""` (it grows as needed).
    public init(maxFieldBytes: Int = .max, maxColumns: Int = .max, scratchBytes: Int = 64 * 1024) {
        self.maxFieldBytes = maxFieldBytes
        self.maxColumns = maxColumns
        scratch = .allocate(byteCount: max(scratchBytes, 16), alignment: 16)
        bounds = .allocate(capacity: 2 * capacity)
        viewBuffer = .allocate(capacity: capacity)
    }

    deinit {
        scratch.deallocate()
        bounds.deallocate()
        viewBuffer.deallocate()
    }

    /// The byte length of field `index` of the record scanned last (quotes and escapes removed).
    public func fieldLength(_ index: Int) -> Int {
        let start = bounds[2 * index]
        return bounds[2 * index + 1] - (start < 0 ? ~start : start)
    }

    @inline(__always)
    private func push(_ start: Int, _ end: Int) {
        if fieldCount == capacity { grow() }
        bounds[2 * fieldCount] = start
        bounds[2 * fieldCount + 1] = end
        fieldCount += 1
    }

    private func grow() {
        let grown = UnsafeMutablePointer<Int>.allocate(capacity: 4 * capacity)
        grown.update(from: bounds, count: 2 * fieldCount)
        bounds.deallocate()
        bounds = grown
        viewBuffer.deallocate()
        viewBuffer = .allocate(capacity: 2 * capacity)
        capacity *= 2
    }

    /// Field `index` of the record scanned last: valid until the next scan, and only while
    /// the scanned bytes stay where they were.
    @inline(__always)
    public func field(_ index: Int) -> UnsafeRawBufferPointer {
        let start = bounds[2 * index]
        let end = bounds[2 * index + 1]
        if start < 0 {
            return UnsafeRawBufferPointer(start: UnsafeRawPointer(scratch.baseAddress!) + ~start, count: end - ~start)
        }
        return UnsafeRawBufferPointer(start: base! + start, count: end - start)
    }

    /// The fields of the record scanned last, valid as ``field(_:)`` is. A field longer than
    /// `emptyOver` bytes comes back empty; where `strip[index]` is true, without its formula
    /// guard (``unguarded(_:)``).
    public func fieldViews(emptyOver: Int = .max, strip: [Bool]? = nil) -> UnsafeBufferPointer<UnsafeRawBufferPointer> {
        for index in 0..<fieldCount {
            var view = field(index)
            if view.count > emptyOver {
                view = UnsafeRawBufferPointer(start: view.baseAddress, count: 0)
            } else if let strip, index < strip.count, strip[index] {
                view = CSVScanner.unguarded(view)
            }
            viewBuffer[index] = view
        }
        return UnsafeBufferPointer(start: viewBuffer, count: fieldCount)
    }

    /// A cell without the guard settle's writers put before a cell that starts like a
    /// formula (`'=`, `'+`, `'-`, `'@`, `'` tab, `'` CR), or like a guarded one (`''=`, …):
    /// one `'` less. Any other cell as it is (`'abc` stays `'abc`).
    @inline(__always)
    public static func unguarded(_ view: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard view.count >= 2, view[0] == 0x27, looksLikeFormula(view) else { return view }
        return UnsafeRawBufferPointer(rebasing: view[1...])
    }

    /// Whether a cell needs the formula guard in a file settle writes: it starts like a
    /// formula (`=`, `+`, `-`, `@`, tab, CR), or like a guarded cell (`'` before either).
    /// The guard is one `'` before the cell, so that ``unguarded(_:)`` gives back exactly the
    /// cell: a value `'=X` is written `''=X` and read back as `'=X`, never as `=X`.
    @inline(__always)
    public static func needsGuard(_ view: UnsafeRawBufferPointer) -> Bool {
        guard let first = view.first else { return false }
        if isFormulaStart(first) { return true }
        return first == 0x27 && looksLikeFormula(view)
    }

    /// `'`, any more `'`, then a formula start.
    @inline(__always)
    private static func looksLikeFormula(_ view: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < view.count, view[index] == 0x27 { index += 1 }
        return index > 0 && index < view.count && isFormulaStart(view[index])
    }

    /// `=`, `+`, `-`, `@`, tab or CR: a spreadsheet may run a cell starting with one.
    @inline(__always)
    public static func isFormulaStart(_ byte: UInt8) -> Bool {
        byte == 0x3D || byte == 0x2B || byte == 0x2D || byte == 0x40 || byte == 0x09 || byte == 0x0D
    }

    /// Scans one record of `bytes[start..<end]`; its fields are then ``field(_:)``.
    /// `atEOF`: nothing follows `end` (a record may end there without a line end).
    public func scan(_ bytes: UnsafeRawPointer, from start: Int, to end: Int, atEOF: Bool) -> Outcome {
        fieldCount = 0
        scratchUsed = 0
        base = bytes
        var index = start
        var newlines = 0
        var defect: RecordDefect? = nil
        func flag(_ code: ReasonCode, _ message: String) {
            if defect == nil { defect = RecordDefect(code: code, message: message) }
        }
        while true {
            // One field.
            if index < end, bytes.load(fromByteOffset: index, as: UInt8.self) == 0x22 {
                openField = index
                index += 1
                let contentStart = index
                var escaped = false
                var scratchStart = -1
                while true {
                    guard let found = memchr(bytes + index, 0x22, end - index) else {
                        return atEOF ? .unclosedQuote : .incomplete
                    }
                    let quote = UnsafeRawPointer(found) - bytes
                    newlines += CSVScanner.countLineEnds(bytes + index, quote - index)
                    if quote + 1 == end, !atEOF { return .incomplete }
                    if quote + 1 < end, bytes.load(fromByteOffset: quote + 1, as: UInt8.self) == 0x22 {
                        // "" inside quotes: copy what we have so far into scratch once.
                        if !escaped {
                            escaped = true
                            scratchStart = scratchUsed
                        }
                        appendScratch(bytes + index, quote + 1 - index)
                        index = quote + 2
                        continue
                    }
                    if escaped {
                        appendScratch(bytes + index, quote - index)
                        push(~scratchStart, scratchUsed)
                    } else {
                        push(contentStart, quote)
                    }
                    index = quote + 1
                    break
                }
                // After the closing quote: a separator, a line end, or the end of data.
                if index < end {
                    guard let stop = CSVScanner.fieldStop(bytes, index, end, atEOF: atEOF) else { return .incomplete }
                    if !stop {
                        flag(.malformedRecord, "text after a closing quote")
                        while index < end {
                            guard let stop = CSVScanner.fieldStop(bytes, index, end, atEOF: atEOF) else {
                                return .incomplete
                            }
                            if stop { break }
                            index += 1
                        }
                    }
                }
            } else {
                // Unquoted: up to a comma or a line end (LF or CRLF).
                let fieldStart = index
                while index < end {
                    guard let stop = CSVScanner.fieldStop(bytes, index, end, atEOF: atEOF) else { return .incomplete }
                    if stop { break }
                    if bytes.load(fromByteOffset: index, as: UInt8.self) == 0x22 {
                        flag(.malformedRecord, "a quote inside an unquoted field")
                    }
                    index += 1
                }
                push(fieldStart, index)
            }
            if fieldLength(fieldCount - 1) > maxFieldBytes {
                flag(.fieldTooLong, "a field is longer than \(maxFieldBytes) bytes")
            }
            if fieldCount > maxColumns {
                flag(.malformedRecord, "the record has more than \(maxColumns) fields")
            }
            // Separator or terminator.
            if index >= end {
                if !atEOF { return .incomplete }
                return .complete(end: end, newlines: newlines, defect: defect)
            }
            let byte = bytes.load(fromByteOffset: index, as: UInt8.self)
            if byte == 0x2C {
                index += 1
                continue
            }
            // CRLF (a field stops at a CR only when an LF follows it), or LF.
            return .complete(end: index + (byte == 0x0D ? 2 : 1), newlines: newlines + 1, defect: defect)
        }
    }

    /// Whether the byte at `index` ends a field: a comma, an LF, or a CR an LF follows (a CR
    /// alone is data). Nil when that cannot be told yet: a CR last in bytes that go on.
    @inline(__always)
    static func fieldStop(_ bytes: UnsafeRawPointer, _ index: Int, _ end: Int, atEOF: Bool) -> Bool? {
        let byte = bytes.load(fromByteOffset: index, as: UInt8.self)
        if byte == 0x2C || byte == 0x0A { return true }
        guard byte == 0x0D else { return false }
        if index + 1 < end { return bytes.load(fromByteOffset: index + 1, as: UInt8.self) == 0x0A }
        return atEOF ? false : nil
    }

    private func appendScratch(_ pointer: UnsafeRawPointer, _ count: Int) {
        if scratchUsed + count > scratch.count {
            let grown = UnsafeMutableRawBufferPointer.allocate(
                byteCount: max(scratch.count * 2, scratchUsed + count),
                alignment: 16)
            grown.baseAddress!.copyMemory(from: scratch.baseAddress!, byteCount: scratchUsed)
            scratch.deallocate()
            scratch = grown
        }
        (scratch.baseAddress! + scratchUsed).copyMemory(from: pointer, byteCount: count)
        scratchUsed += count
    }

    /// Line ends in quoted text: each LF (a CRLF's too) is one; a CR alone is none.
    @inline(__always)
    static func countLineEnds(_ pointer: UnsafeRawPointer, _ count: Int) -> Int {
        var total = 0
        var cursor = pointer
        var remaining = count
        while remaining > 0, let found = memchr(cursor, 0x0A, remaining) {
            total += 1
            let next = UnsafeRawPointer(found) + 1
            remaining -= next - cursor
            cursor = next
        }
        return total
    }
}

// Settle's own files, read back whole: results.csv, and one spooled record at a time.
extension CSVScanner {
    /// Every record of a whole CSV text, each as the bytes of its fields (cells as written,
    /// formula guard included). Blank lines are skipped, as the export reader skips them; a
    /// quoted field left open runs to the end of the text.
    public static func records(_ text: [UInt8]) -> [[[UInt8]]] {
        let scanner = CSVScanner(scratchBytes: 1024)
        var records: [[[UInt8]]] = []
        text.withUnsafeBytes { buffer in
            guard let bytes = buffer.baseAddress else { return }
            let end = buffer.count
            var position = 0
            while position < end {
                // Blank lines: an LF, or a CRLF.
                let byte = buffer[position]
                if byte == 0x0A {
                    position += 1
                    continue
                }
                if byte == 0x0D, position + 1 < end, buffer[position + 1] == 0x0A {
                    position += 2
                    continue
                }
                switch scanner.scan(bytes, from: position, to: end, atEOF: true) {
                case .complete(let recordEnd, _, _):
                    records.append(scanner.copiedFields())
                    position = recordEnd
                case .incomplete, .unclosedQuote:
                    records.append(scanner.openRecord(bytes, to: end))
                    position = end
                }
            }
        }
        return records
    }

    /// The fields of one record (its line end, if any, ignored): cells as written.
    public static func fields(_ record: some Collection<UInt8>) -> [[UInt8]] {
        let scanner = CSVScanner(scratchBytes: 256)
        let bytes = Array(record)
        return bytes.withUnsafeBytes { scanner.fields(of: $0) }
    }

    /// The fields of one record (its line end, if any, ignored): cells as written. Reuses
    /// this scanner's buffers (for many records in turn).
    public func fields(of record: UnsafeRawBufferPointer) -> [[UInt8]] {
        // An empty record is one empty field.
        let base = record.baseAddress ?? UnsafeRawPointer(scratch.baseAddress!)
        switch scan(base, from: 0, to: record.count, atEOF: true) {
        case .complete: return copiedFields()
        case .incomplete, .unclosedQuote: return openRecord(base, to: record.count)
        }
    }

    /// The fields of a record that is malformed (text after a closing quote, a quote in an
    /// unquoted field, an unclosed quote), without losing a byte: a well-formed quoted field
    /// is unescaped as usual, any other field is its bytes as read, quotes included. With
    /// each field, where its bytes start in the record, and whether it is a field with a stray
    /// quote kept as read (`"1.00"5`, `b"c`: written back as they are, they read back the same
    /// way, quote and all). The record's line end is not a field.
    public static func losslessFields(of record: UnsafeRawBufferPointer) -> [(
        value: [UInt8], start: Int, strayQuote: Bool
    )] {
        let end = contentEnd(of: record)
        var fields: [(value: [UInt8], start: Int, strayQuote: Bool)] = []
        var index = 0
        while true {
            let start = index
            var value: [UInt8] = []
            // Where a quoted field's closing quote ends, nil for an unquoted or unclosed one.
            var closed: Int? = nil
            if index < end, record[index] == 0x22 {
                var probe = index + 1
                while probe < end {
                    if record[probe] == 0x22 {
                        if probe + 1 < end, record[probe + 1] == 0x22 {
                            value.append(0x22)
                            probe += 2
                            continue
                        }
                        closed = probe + 1
                        break
                    }
                    value.append(record[probe])
                    probe += 1
                }
                if closed == nil { index = end }  // never closed: the rest is this field
            }
            var strayQuote = false
            if let after = closed, after == end || record[after] == 0x2C {
                index = after
            } else {
                // As read, up to the next comma: a field with a stray quote keeps it.
                var stop = closed ?? index
                while stop < end, record[stop] != 0x2C { stop += 1 }
                value = [UInt8](record[start..<stop])
                index = stop
                // Not an unclosed quote's rest (written as it is, it would swallow what follows).
                strayQuote = value.contains(0x22) && (closed != nil || record[start] != 0x22)
            }
            fields.append((value, start, strayQuote))
            guard index < end else { break }
            index += 1  // the comma
        }
        return fields
    }

    /// Where a record's text ends: before its LF or CRLF, if it has one.
    public static func contentEnd(of record: UnsafeRawBufferPointer) -> Int {
        var end = record.count
        guard end > 0, record[end - 1] == 0x0A else { return end }
        end -= 1
        if end > 0, record[end - 1] == 0x0D { end -= 1 }
        return end
    }

    /// The fields of the record scanned last, copied out (cells as written).
    public func copiedFields() -> [[UInt8]] {
        (0..<fieldCount).map { [UInt8](field($0)) }
    }

    /// A record whose last quoted field is never closed (``Outcome/unclosedQuote``): the
    /// fields before it, then the rest of the text as its last field (its `""` unescaped).
    public func openRecord(_ bytes: UnsafeRawPointer, to end: Int) -> [[UInt8]] {
        var fields = copiedFields()
        var last: [UInt8] = []
        var index = openField + 1
        while index < end {
            let byte = bytes.load(fromByteOffset: index, as: UInt8.self)
            last.append(byte)
            index +=
                byte == 0x22 && index + 1 < end && bytes.load(fromByteOffset: index + 1, as: UInt8.self) == 0x22 ? 2 : 1
        }
        fields.append(last)
        return fields
    }
}
