public import SettleCore

/// Where a reader copies the original strings of every record, so that settle can later
/// write them into `errors.csv` and `deferred.csv` byte for byte.
public protocol RecordSpool: AnyObject {
    /// Bytes written so far: the offset of the next record.
    var offset: UInt64 { get }
    /// Appends bytes; `offset` grows by their count.
    func append(_ bytes: UnsafeRawBufferPointer)
}

/// An error of a byte source that says how its file is rejected (a truncated gzip stream…).
///
/// Errors thrown by `next` that do not adopt it reject the file as `unreadable`.
public protocol FileRejectionError: Error {
    var code: FileRejection { get }
    var message: String { get }
}

/// Why a whole input file was rejected, and where.
public struct FileRejectionReport: FileRejectionError, Sendable, Equatable {
    public let code: FileRejection
    public let message: String
    /// The 1-based physical line where the problem was found (0 when unknown).
    public let line: Int

    public init(code: FileRejection, message: String, line: Int) {
        self.code = code
        self.message = message
        self.line = line
    }
}

/// Limits that protect memory; past them a line or the file is rejected, never a crash.
public struct XMLReadLimits: Sendable {
    /// Deeper element nesting rejects the file (`xml_malformed`). The export needs 4.
    public var maxDepth = 16
    /// A longer attribute value rejects its line (`field_too_long`; on an `<order>`, all
    /// of its lines); a longer `id` rejects the file (`unreadable`): its lines could not be traced.
    public var maxFieldBytes = 64 * 1024
    /// The lines of one `<order>` are held until `</order>` (a schema error late in an
    /// order rejects all its lines); a larger order rejects the file (`xml_malformed`).
    public var maxOrderBytes = 64 << 20
    /// Most columns of a file (20 known ones plus one per metadata key); a line bringing
    /// more metadata keys is rejected (`malformed_record`).
    public var maxColumns = 1024

    public init() {}
}

/// Reads an XML order export (docs/RULES.md, Input) as a stream and hands each `<line>` to a sink.
///
/// The document is parsed by libxml2's push parser fed chunk by chunk, with the XSD
/// validator plugged into the SAX event stream, so that nothing holds the whole document
/// and every schema error arrives right after the event it is about (the pull reader
/// parses ahead of its cursor, which would blur which `<line>` an error belongs to).
///
/// The file's ``FileLayout`` is every ``Column`` in declaration order (so a field index is
/// `Column.rawValue`), then one `metadata.<key>` column per metadata key, appended as keys
/// are first seen. A line's fields are its `<order>`'s attributes overridden by its own
/// (`<order id>` is `order_id`, `<line id>` is `line_id`), plus its `<metadata>`.
///
/// Spool layout: a header record with the 20 known column names, then one RFC 4180
/// record per `<line>` (LF-terminated, quoted when a field holds `,` `"` CR or LF) whose
/// field *i* is the value of layout column *i*, with as many fields as the layout had
/// columns when the line was delivered. The layout only grows at the end, so field *i* of
/// any record is `layout.names[i]`; fields past a record's end are empty.
public struct XMLExportReader: Sendable {
    public let schema: XMLSchema
    public let limits: XMLReadLimits
    /// Run libxml2's validator on every event instead of on the top-level elements the
    /// reader's own checks cannot vouch for (the same results, several times slower; tests
    /// compare the two).
    let validatesEveryElement: Bool

    public init(schema: XMLSchema = .orderExport, limits: XMLReadLimits = XMLReadLimits()) {
        self.init(schema: schema, limits: limits, validatesEveryElement: false)
    }

    init(schema: XMLSchema, limits: XMLReadLimits, validatesEveryElement: Bool) {
        self.schema = schema
        self.limits = limits
        self.validatesEveryElement = validatesEveryElement
    }

    /// Reads one export, calling `sink.beginFile`, `record` for each `<line>`, then
    /// `endFile` (with the number of lines). On a whole-file problem (not well-formed,
    /// truncated, a DOCTYPE, not an export, a byte-source error) it calls
    /// `sink.discardFile` and returns the rejection.
    ///
    /// - Parameters:
    ///   - next: the decompressed bytes of the file, chunk by chunk (a chunk need only stay
    ///     valid until the next call); nil at the end.
    ///   - spool: receives the header and one CSV record per line.
    public func read(
        name: String, next: () throws -> UnsafeRawBufferPointer?, spool: some RecordSpool,
        sink: some RecordSink
    ) -> FileRejectionReport? {
        LibXML.start()
        let layout = FileLayout()
        for column in Column.allCases {
            layout.append(name: column.csvName, role: .known(column))
        }
        let file = sink.beginFile(name: name, layout: layout)
        var parse = XMLExportParse(
            schema: schema, layout: layout, limits: limits,
            validating: validatesEveryElement
                || !(schema === XMLSchema.orderExport))
        parse.writeSpoolHeader(to: spool)

        var rejection: FileRejectionReport?
        while rejection == nil {
            let chunk: UnsafeRawBufferPointer?
            do {
                chunk = try next()
            } catch let error as any FileRejectionError {
                rejection = FileRejectionReport(code: error.code, message: error.message, line: parse.currentLine)
                break
            } catch {
                rejection = FileRejectionReport(
                    code: .unreadable, message: "the input cannot be read: \(error)", line: parse.currentLine)
                break
            }
            if let chunk {
                parse.feed(chunk)
            } else {
                parse.finish()
            }
            if parse.needsValidatingRead {
                // The checks could not follow this document (an encoding conversion…):
                // read what came so far again, validating every element.
                guard let consumed = parse.consumedBytes else {
                    rejection = FileRejectionReport(
                        code: .unreadable, message: "the document could not be validated as it streams",
                        line: parse.currentLine)
                    break
                }
                let again = XMLExportParse(schema: schema, layout: layout, limits: limits, validating: true)
                again.feed(consumed)
                if chunk == nil { again.finish() }
                parse = again
            }
            parse.deliverCompleteOrders(to: sink, file: file, spool: spool)
            rejection = parse.rejection
            if chunk == nil { break }
        }
        if rejection == nil, !parse.isValid {
            // A schema error that reached no element we track: do not let it pass silently.
            rejection = FileRejectionReport(
                code: .xmlNotAnExport, message: "the document does not follow the order export schema",
                line: parse.currentLine)
        }
        if let rejection {
            sink.discardFile(file)
            return rejection
        }
        sink.endFile(file, lines: parse.deliveredLines)
        return nil
    }
}
