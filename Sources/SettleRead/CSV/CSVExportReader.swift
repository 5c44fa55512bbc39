import Glibc
public import SettleCore

/// Limits that protect memory; past them the record (or the file) is rejected, never a crash.
public struct ReadLimits: Sendable {
    public var maxFieldBytes = 64 * 1024
    public var maxRecordBytes = 1 << 20
    public var maxColumns = 1024
    public init() {}
}

/// Reads an RFC 4180 order export at the byte level and hands each record to a sink.
///
/// Quotes, `""` escapes, quoted commas and newlines, LF or CRLF, an optional BOM. Fields
/// are views into a reused window; only fields with `""` escapes are copied. Records are
/// also copied verbatim into the spool.
public final class CSVExportReader {
    private let aliases: [String: String]
    private let limits: ReadLimits

    private var window: UnsafeMutableRawBufferPointer
    private var filled = 0
    private var scratch: UnsafeMutableRawBufferPointer
    private var scratchUsed = 0
    // Per-field bounds of the record being parsed; negative start = offset into scratch.
    private var starts: [Int] = []
    private var ends: [Int] = []
    private var inScratch: [Bool] = []
    private var views: [UnsafeRawBufferPointer] = []

    public init(aliases: [String: String] = [:], limits: ReadLimits = ReadLimits()) {
        self.aliases = aliases
        self.limits = limits
        window = .allocate(byteCount: 2 * ByteSource.chunkSize, alignment: 16)
        scratch = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit {
        window.deallocate()
        scratch.deallocate()
    }

    private enum Parse {
        case complete(end: Int, newlines: Int, defect: RecordDefect?)
        case incomplete
        case unclosedQuote
    }

    /// Reads the whole source; on a whole-file problem, discards the file from the sink and
    /// returns why.
    public func read(
        name: String, source: ByteSource, spool: SpoolWriter, sink: some RecordSink,
        progress: ((UInt64) -> Void)? = nil
    ) -> ReadFailure? {
        var fileIndex: Int? = nil
        var layout: FileLayout? = nil
        var line = 1
        var lines = 0
        var atEOF = false
        var position = 0
        var first = true
        filled = 0
        do {
            while true {
                // Refill: move the unparsed tail to the front, then append the next chunk.
                if position > 0 {
                    let tail = filled - position
                    if tail > 0 { memmove(window.baseAddress!, window.baseAddress! + position, tail) }
                    filled = tail
                    position = 0
                }
                if !atEOF {
                    if let chunk = try source.next() {
                        ensureWindow(filled + chunk.count)
                        (window.baseAddress! + filled).copyMemory(from: chunk.baseAddress!, byteCount: chunk.count)
                        filled += chunk.count
                        progress?(source.bytesRead)
                    } else {
                        atEOF = true
                    }
                }
                if first {
                    if filled < 3 && !atEOF { continue }
                    if filled == 0 && atEOF {
                        return ReadFailure(
                            code: .emptyFile, message: "the file is empty (0 bytes)", position: "\(name):1")
                    }
                    if filled >= 3, window[0] == 0xEF, window[1] == 0xBB, window[2] == 0xBF { position = 3 }
                    first = false
                }
                // Parse every complete record in the window.
                while position < filled {
                    // Blank lines are skipped.
                    if window[position] == 0x0A {
                        position += 1
                        line += 1
                        continue
                    }
                    if window[position] == 0x0D, position + 1 < filled, window[position + 1] == 0x0A {
                        position += 2
                        line += 1
                        continue
                    }
                    if window[position] == 0x0D, position + 1 == filled, !atEOF { break }
                    let result = parseRecord(from: position, atEOF: atEOF)
                    switch result {
                    case .incomplete:
                        if filled - position > limits.maxRecordBytes {
                            // Too long to be a record: skip it as one rejected line.
                            let (skipped, newlines) = try skipRecord(from: position, source: source, atEOF: &atEOF)
                            _ = skipped
                            if let fileIndex, layout != nil {
                                let defect = RecordDefect(
                                    code: .fieldTooLong,
                                    message: "the record is longer than \(limits.maxRecordBytes) bytes")
                                views.removeAll(keepingCapacity: true)
                                views.withUnsafeBufferPointer {
                                    sink.record(
                                        RecordView(
                                            fields: $0, line: line, spoolOffset: spool.offset, spoolLength: 0,
                                            defect: defect), file: fileIndex)
                                }
                                lines += 1
                            } else {
                                return ReadFailure(
                                    code: .headerInvalid,
                                    message: "the header is longer than \(limits.maxRecordBytes) bytes",
                                    position: "\(name):\(line)")
                            }
                            line += newlines
                            position = 0
                            continue
                        }
                        break
                    case .unclosedQuote:
                        if let fileIndex { sink.discardFile(fileIndex) }
                        return ReadFailure(
                            code: .csvUnclosedQuote,
                            message: "a quoted field opened on line \(line) is never closed",
                            position: "\(name):\(line)")
                    case .complete(let end, let newlines, let defect):
                        let raw = UnsafeRawBufferPointer(rebasing: window[position..<end])
                        if layout == nil {
                            let header = headerNames()
                            guard defect == nil, header.count <= limits.maxColumns else {
                                return ReadFailure(
                                    code: .headerInvalid,
                                    message: defect?.message ?? "the header has more than \(limits.maxColumns) columns",
                                    position: "\(name):\(line)")
                            }
                            do {
                                let built = try FileLayout.csv(header: header, aliases: aliases)
                                layout = built
                                fileIndex = sink.beginFile(name: name, layout: built)
                                spool.append(raw)
                                if raw.last != 0x0A { spool.appendNewline() }
                            } catch {
                                return ReadFailure(
                                    code: error.code, message: error.message, position: "\(name):\(line)")
                            }
                        } else if let layout, let fileIndex {
                            var defect = defect
                            if defect == nil, starts.count != layout.count {
                                defect = RecordDefect(
                                    code: .malformedRecord,
                                    message: "the record has \(starts.count) fields, the header \(layout.count)")
                            }
                            buildViews()
                            let offset = spool.offset
                            spool.append(raw)
                            var length = raw.count
                            if raw.last != 0x0A {
                                spool.appendNewline()
                                length += 1
                            }
                            views.withUnsafeBufferPointer {
                                sink.record(
                                    RecordView(
                                        fields: $0, line: line, spoolOffset: offset,
                                        spoolLength: UInt32(length), defect: defect), file: fileIndex)
                            }
                            lines += 1
                        }
                        line += newlines
                        position = end
                        continue
                    }
                    break
                }
                if atEOF && position >= filled { break }
                if atEOF && position < filled {
                    // Only a lone CR can be left; treat it as a line end.
                    break
                }
            }
        } catch {
            if let fileIndex { sink.discardFile(fileIndex) }
            return ReadFailure(code: error.code, message: error.message, position: "\(name): \(error.position)")
        }
        guard let fileIndex else {
            return ReadFailure(
                code: .headerMissingColumn, message: "the file has no header record",
                position: "\(name):1")
        }
        spool.flush()
        sink.endFile(fileIndex, lines: lines)
        return nil
    }

    private func ensureWindow(_ size: Int) {
        guard size > window.count else { return }
        let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, window.count * 2), alignment: 16)
        grown.baseAddress!.copyMemory(from: window.baseAddress!, byteCount: filled)
        window.deallocate()
        window = grown
    }

    private func headerNames() -> [String] {
        buildViews()
        return views.map { String(decoding: $0, as: UTF8.self) }
    }

    private func buildViews() {
        views.removeAll(keepingCapacity: true)
        let base = UnsafeRawPointer(window.baseAddress!)
        let scratchBase = UnsafeRawPointer(scratch.baseAddress!)
        for index in 0..<starts.count {
            let pointer = inScratch[index] ? scratchBase + starts[index] : base + starts[index]
            views.append(UnsafeRawBufferPointer(start: pointer, count: ends[index] - starts[index]))
        }
    }

    /// Parses one record starting at `start`. Fields go into `starts`/`ends`.
    private func parseRecord(from start: Int, atEOF: Bool) -> Parse {
        starts.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
        inScratch.removeAll(keepingCapacity: true)
        scratchUsed = 0
        let bytes = UnsafeRawPointer(window.baseAddress!)
        let end = filled
        var index = start
        var newlines = 0
        var defect: RecordDefect? = nil
        func flag(_ code: ReasonCode, _ message: String) {
            if defect == nil { defect = RecordDefect(code: code, message: message) }
        }
        while true {
            // One field.
            if index < end, bytes.load(fromByteOffset: index, as: UInt8.self) == 0x22 {
                index += 1
                let contentStart = index
                var escaped = false
                var scratchStart = -1
                while true {
                    guard let found = memchr(bytes + index, 0x22, end - index) else {
                        return atEOF ? .unclosedQuote : .incomplete
                    }
                    let quote = UnsafeRawPointer(found) - bytes
                    newlines += countNewlines(bytes + index, quote - index)
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
                        starts.append(scratchStart)
                        ends.append(scratchUsed)
                        inScratch.append(true)
                    } else {
                        starts.append(contentStart)
                        ends.append(quote)
                        inScratch.append(false)
                    }
                    index = quote + 1
                    break
                }
                // After the closing quote: a separator, a line end, or the end of data.
                if index < end {
                    let next = bytes.load(fromByteOffset: index, as: UInt8.self)
                    if next != 0x2C && next != 0x0A && next != 0x0D {
                        flag(.malformedRecord, "text after a closing quote")
                        while index < end {
                            let byte = bytes.load(fromByteOffset: index, as: UInt8.self)
                            if byte == 0x2C || byte == 0x0A { break }
                            index += 1
                        }
                    }
                }
            } else {
                let fieldStart = index
                while index < end {
                    let byte = bytes.load(fromByteOffset: index, as: UInt8.self)
                    if byte == 0x2C || byte == 0x0A { break }
                    if byte == 0x22 { flag(.malformedRecord, "a quote inside an unquoted field") }
                    index += 1
                }
                var fieldEnd = index
                if index < end, bytes.load(fromByteOffset: index, as: UInt8.self) == 0x0A, fieldEnd > fieldStart,
                    bytes.load(fromByteOffset: fieldEnd - 1, as: UInt8.self) == 0x0D
                {
                    fieldEnd -= 1
                } else if index == end, atEOF, fieldEnd > fieldStart,
                    bytes.load(fromByteOffset: fieldEnd - 1, as: UInt8.self) == 0x0D
                {
                    fieldEnd -= 1
                }
                starts.append(fieldStart)
                ends.append(fieldEnd)
                inScratch.append(false)
            }
            if let last = ends.last, let first = starts.last, last - first > limits.maxFieldBytes {
                flag(.fieldTooLong, "a field is longer than \(limits.maxFieldBytes) bytes")
            }
            if starts.count > limits.maxColumns {
                // Keep scanning for the record end but stop recording fields.
                flag(.malformedRecord, "the record has more than \(limits.maxColumns) fields")
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
            if byte == 0x0D {
                // CR after a quoted field: expect LF.
                if index + 1 < end, bytes.load(fromByteOffset: index + 1, as: UInt8.self) == 0x0A {
                    return .complete(end: index + 2, newlines: newlines + 1, defect: defect)
                }
                if index + 1 >= end {
                    return atEOF ? .complete(end: end, newlines: newlines, defect: defect) : .incomplete
                }
                flag(.malformedRecord, "a stray carriage return")
                index += 1
                continue
            }
            // LF
            return .complete(end: index + 1, newlines: newlines + 1, defect: defect)
        }
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

    @inline(__always)
    private func countNewlines(_ pointer: UnsafeRawPointer, _ count: Int) -> Int {
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

    /// Skips an over-long record without keeping it: returns bytes skipped and newlines.
    private func skipRecord(from start: Int, source: ByteSource, atEOF: inout Bool) throws(ReadFailure) -> (Int, Int) {
        var inQuotes = false
        var newlines = 0
        var skipped = 0
        var index = start
        while true {
            while index < filled {
                let byte = window[index]
                index += 1
                skipped += 1
                if byte == 0x22 { inQuotes.toggle() }
                if byte == 0x0A {
                    newlines += 1
                    if !inQuotes {
                        // Keep what follows the record.
                        let tail = filled - index
                        memmove(window.baseAddress!, window.baseAddress! + index, tail)
                        filled = tail
                        return (skipped, newlines)
                    }
                }
            }
            filled = 0
            index = 0
            if atEOF { break }
            if let chunk = try source.next() {
                ensureWindow(chunk.count)
                window.baseAddress!.copyMemory(from: chunk.baseAddress!, byteCount: chunk.count)
                filled = chunk.count
            } else {
                atEOF = true
            }
        }
        if inQuotes {
            throw ReadFailure(
                code: .csvUnclosedQuote, message: "a quoted field is never closed", position: "end of file")
        }
        return (skipped, newlines)
    }
}
