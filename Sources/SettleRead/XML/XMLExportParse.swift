import CLibXML2
import Glibc
import SettleCore

/// One read of an XML export: libxml2's push parser with the schema validator plugged
/// into its SAX events, and the lines of the orders not delivered yet.
///
/// Why lines wait for `</order>`: a schema error on an `<order>` rejects all its lines,
/// and some arrive late (an unexpected element after its lines), so an order's lines are
/// held until it closes, then delivered together. Memory stays bounded by the largest
/// order (``XMLReadLimits/maxOrderBytes``), never by the file.
///
/// Who an error belongs to: the plug calls our SAX callback first and the validator's
/// right after, synchronously, so a validation error belongs to the element of the last
/// callback (`target`): a start tag, the text inside an element, or an end tag (content
/// model checks happen when an element closes, which is why an `</order>` is final only
/// at the next event or when the chunk is done).
final class XMLExportParse {
    // `@exclusivity(unchecked)` on the state the SAX callbacks touch: one object, one
    // thread, no overlapping access; the dynamic checks cost about a tenth of the read.

    private enum Target { case root, order, line }

    /// One attribute or metadata value, by layout column, at `start` in the arena.
    private struct PendingValue {
        var column: Int
        var start: Int
        var count: Int
    }

    private struct PendingOrder {
        var line: Int
        var arenaStart: Int
        var valuesStart: Int
        var valuesEnd: Int
        var firstLine: Int
        var defect: RecordDefect?
    }

    private struct PendingLine {
        var order: Int
        var line: Int
        var valuesStart: Int
        var valuesEnd: Int
        var defect: RecordDefect?
    }

    private let limits: XMLReadLimits
    private let layout: FileLayout
    private var parser: xmlParserCtxtPtr?
    private var validator: xmlSchemaValidCtxtPtr?
    private var plug: xmlSchemaSAXPlugPtr?

    // Names interned in the parser's dictionary: libxml2 hands element and attribute names
    // out of it, so most comparisons are one pointer comparison.
    private var nameOrderExport: UnsafePointer<xmlChar>?
    private var nameOrder: UnsafePointer<xmlChar>?
    private var nameLine: UnsafePointer<xmlChar>?
    private var nameMetadata: UnsafePointer<xmlChar>?
    private var nameID: UnsafePointer<xmlChar>?
    private var nameKey: UnsafePointer<xmlChar>?
    private var nameValue: UnsafePointer<xmlChar>?
    private var namespaceURI: UnsafePointer<xmlChar>?
    private var columnOfName = NameTable()
    @exclusivity(unchecked) private var metadataKeys: [(key: [UInt8], column: Int)] = []
    @exclusivity(unchecked) private var columnOfMetadataKey: [String: Int] = [:]

    @exclusivity(unchecked) private var depth = 0
    @exclusivity(unchecked) private var orderDepth = 0
    @exclusivity(unchecked) private var lineDepth = 0
    @exclusivity(unchecked) private var strayLine = false
    @exclusivity(unchecked) private var target = Target.root
    @exclusivity(unchecked) private var orderClosing = false
    @exclusivity(unchecked) private var completeOrders = 0
    @exclusivity(unchecked) private var schemaErrors = 0

    private let arena = ByteArena()
    @exclusivity(unchecked) private var values: [PendingValue] = []
    @exclusivity(unchecked) private var orders: [PendingOrder] = []
    @exclusivity(unchecked) private var lines: [PendingLine] = []
    @exclusivity(unchecked) private var views: [UnsafeRawBufferPointer] = []
    private let spoolRecord = ByteArena(capacity: 4096)

    @exclusivity(unchecked) private(set) var rejection: FileRejectionReport?
    @exclusivity(unchecked) private(set) var deliveredLines = 0

    init(schema: XMLSchema, layout: FileLayout, limits: XMLReadLimits) {
        self.limits = limits
        self.layout = layout
        let context = Unmanaged.passUnretained(self).toOpaque()

        var handler = xmlSAXHandler()
        handler.initialized = XML_SAX2_MAGIC
        handler.startElementNs = { context, localName, _, uri, _, _, attributeCount, _, attributes in
            XMLExportParse.with(context) { $0.startElement(localName, uri, Int(attributeCount), attributes) }
        }
        handler.endElementNs = { context, _, _, _ in
            XMLExportParse.with(context) { $0.endElement() }
        }
        handler.characters = { context, _, _ in
            XMLExportParse.with(context) { $0.text() }
        }
        // Same function for both, so libxml2 does not look for "ignorable" blanks.
        handler.ignorableWhitespace = handler.characters
        handler.cdataBlock = handler.characters
        handler.internalSubset = { context, _, _, _ in
            XMLExportParse.of(context).doctype()
        }
        // No entityDecl, getEntity, externalSubset or resolveEntity: nothing declared in a
        // DTD is ever stored, let alone expanded or loaded.

        guard let parser = xmlCreatePushParserCtxt(&handler, context, nil, 0, nil) else {
            rejection = FileRejectionReport(code: .unreadable, message: "libxml2 could not start", line: 0)
            return
        }
        self.parser = parser
        // Never NOENT, DTDLOAD, DTDATTR, DTDVALID or XINCLUDE (STYLE.md, C interop note 6).
        xmlCtxtUseOptions(parser, Int32(XML_PARSE_NONET.rawValue))
        parser.pointee._private = context

        let dictionary = parser.pointee.dict
        func intern(_ name: String) -> UnsafePointer<xmlChar>? {
            name.withCString {
                xmlDictLookup(dictionary, UnsafeRawPointer($0).assumingMemoryBound(to: xmlChar.self), -1)
            }
        }
        nameOrderExport = intern("orderExport")
        nameOrder = intern("order")
        nameLine = intern("line")
        nameMetadata = intern("metadata")
        nameID = intern("id")
        nameKey = intern("key")
        nameValue = intern("value")
        namespaceURI = intern(OrderExportSchema.namespace)
        for column in Column.allCases where column != .lineID && column != .orderID {
            if let name = intern(column.xmlName) { columnOfName.insert(name, column.rawValue) }
        }

        guard let validator = xmlSchemaNewValidCtxt(schema.pointer) else {
            rejection = FileRejectionReport(
                code: .unreadable, message: "libxml2 could not start the validator", line: 0)
            return
        }
        self.validator = validator
        xmlSchemaSetValidStructuredErrors(
            validator,
            { context, error in
                guard let error else { return }
                XMLExportParse.of(context).schemaError(error.pointee)
            }, context)
        plug = settle_xml_plug_schema(validator, parser)
        guard plug != nil else {
            rejection = FileRejectionReport(code: .unreadable, message: "libxml2 could not plug the validator", line: 0)
            return
        }
        settle_xml_set_parser_error_handler(parser) { _, error in
            // The user data here is the plug's; the parser context leads back to us.
            guard let error, let parser = error.pointee.ctxt?.assumingMemoryBound(to: xmlParserCtxt.self),
                let context = parser.pointee._private
            else { return }
            XMLExportParse.of(context).parserError(error.pointee)
        }
    }

    deinit {
        // Unplug first: it restores the context's own SAX block, which xmlFreeParserCtxt frees.
        if let plug { xmlSchemaSAXUnplug(plug) }
        if let parser { xmlFreeParserCtxt(parser) }
        if let validator { xmlSchemaFreeValidCtxt(validator) }
    }

    @inline(__always)
    private static func of(_ context: UnsafeMutableRawPointer?) -> XMLExportParse {
        Unmanaged<XMLExportParse>.fromOpaque(context!).takeUnretainedValue()
    }

    /// Calls `body` on the parse behind a callback's context, without retaining it (the
    /// read keeps it alive for as long as libxml2 can call back).
    @inline(__always)
    private static func with(_ context: UnsafeMutableRawPointer?, _ body: (XMLExportParse) -> Void) {
        Unmanaged<XMLExportParse>.fromOpaque(context!)._withUnsafeGuaranteedRef(body)
    }

    /// The parser's current line (where a byte-source error or the end was met).
    var currentLine: Int { Int(settle_xml_current_line(parser)) }

    /// False when the validator saw the document invalid without telling us where.
    var isValid: Bool {
        guard let validator else { return true }
        return schemaErrors > 0 || xmlSchemaIsValid(validator) != 0
    }

    // MARK: Feeding

    func feed(_ chunk: UnsafeRawBufferPointer) {
        guard rejection == nil, let parser, let base = chunk.baseAddress else { return }
        var offset = 0
        while offset < chunk.count {
            let size = min(chunk.count - offset, 1 << 24)
            xmlParseChunk(parser, (base + offset).assumingMemoryBound(to: CChar.self), Int32(size), 0)
            offset += size
            if checkAfterParse() { return }
        }
    }

    /// The input ended: a document still open is truncated.
    func finish() {
        guard rejection == nil, let parser else { return }
        xmlParseChunk(parser, nil, 0, 1)
        _ = checkAfterParse()
    }

    /// Stops the parser once a rejection is known; returns whether it did. Never stop it
    /// inside an element callback: the validator still reads that element's attributes
    /// from the input buffer that stopping frees.
    private func checkAfterParse() -> Bool {
        guard let parser else { return true }
        if rejection == nil, parser.pointee.wellFormed == 0 {
            // Errors normally arrive through the handler; this is the safety net.
            let message = LibXMLError.message(of: parser.pointee.lastError)
            reject(.xmlMalformed, "not well-formed XML: \(message)", line: currentLine)
        }
        guard rejection != nil else { return false }
        xmlStopParser(parser)
        return true
    }

    // MARK: SAX events

    private func startElement(
        _ name: UnsafePointer<xmlChar>?, _ uri: UnsafePointer<xmlChar>?, _ attributeCount: Int,
        _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    ) {
        settleClosing()
        guard rejection == nil else { return }
        depth += 1
        if depth > limits.maxDepth {
            reject(.xmlMalformed, "elements are nested deeper than \(limits.maxDepth) levels", line: tagLine)
            return
        }
        let ours = same(uri, namespaceURI)
        if depth == 1 {
            target = .root
            if !(ours && same(name, nameOrderExport)) {
                let found = name.map { String(cString: $0) } ?? ""
                let space = uri.map { "namespace \(String(cString: $0))" } ?? "no namespace"
                reject(
                    .xmlNotAnExport,
                    "the root element is <\(found)> in \(space), not <orderExport> in namespace \(OrderExportSchema.namespace)",
                    line: tagLine)
            }
            return
        }
        if lineDepth > 0 {
            target = .line
            if depth == lineDepth + 1, ours, same(name, nameMetadata) {
                addMetadata(attributeCount, attributes)
            }
            return
        }
        if ours, same(name, nameLine) {
            if orderDepth == 0 {
                // A <line> outside any <order> (a schema error): a one-line order of its own,
                // so it is still reported, never dropped.
                openOrder(0, nil)
                strayLine = true
            }
            openLine(attributeCount, attributes)
            target = .line
            return
        }
        if orderDepth == 0, ours, same(name, nameOrder) {
            openOrder(attributeCount, attributes)
            target = .order
            return
        }
        target = orderDepth > 0 ? .order : .root
    }

    private func endElement() {
        settleClosing()
        guard rejection == nil else { return }
        if depth == lineDepth {
            lineDepth = 0
            target = .line
            if strayLine {
                strayLine = false
                orderDepth = 0
                orderClosing = true
            }
        } else if depth == orderDepth {
            orderDepth = 0
            target = .order
            orderClosing = true
        } else {
            target = lineDepth > 0 ? .line : orderDepth > 0 ? .order : .root
        }
        depth -= 1
    }

    private func text() {
        settleClosing()
        target = lineDepth > 0 ? .line : orderDepth > 0 ? .order : .root
    }

    private func doctype() {
        reject(
            .xmlDoctypeForbidden,
            "the document has a DOCTYPE; settle reads no DTD and expands no entity, remove it",
            line: tagLine)
        // Safe here (no element in flight): stop before the internal subset is even read.
        if let parser { xmlStopParser(parser) }
    }

    /// An `</order>` seen at the last event is final now: its errors are all in.
    @inline(__always)
    private func settleClosing() {
        if orderClosing {
            orderClosing = false
            completeOrders = orders.count
        }
    }

    // MARK: Errors

    private func parserError(_ error: xmlError) {
        guard error.level.rawValue >= XML_ERR_ERROR.rawValue else { return }
        reject(
            .xmlMalformed, "not well-formed XML: \(LibXMLError.message(of: error))",
            line: error.line > 0 ? Int(error.line) : currentLine)
    }

    private func schemaError(_ error: xmlError) {
        schemaErrors += 1
        guard rejection == nil else { return }
        let message = LibXMLError.message(of: error)
        switch target {
        case .line:
            guard !lines.isEmpty else { return }
            Self.note(
                RecordDefect(code: .schemaInvalid, message: "schema: \(message)"),
                in: &lines[lines.count - 1].defect)
        case .order:
            guard !orders.isEmpty else { return }
            Self.note(
                RecordDefect(code: .schemaInvalid, message: "schema, on the line's <order>: \(message)"),
                in: &orders[orders.count - 1].defect)
        case .root:
            reject(
                .xmlNotAnExport, "the document does not follow the order export schema: \(message)",
                line: currentLine)
        }
    }

    /// Keeps the first defect, except that `field_too_long` (a memory limit) wins over a
    /// schema error (the same long value also breaks the schema's maxLength).
    private static func note(_ defect: RecordDefect, in slot: inout RecordDefect?) {
        if let current = slot {
            if defect.code == .fieldTooLong, current.code != .fieldTooLong { slot = defect }
        } else {
            slot = defect
        }
    }

    private func reject(_ code: FileRejection, _ message: String, line: Int) {
        if rejection == nil {
            rejection = FileRejectionReport(code: code, message: message, line: line)
        }
    }

    private var tagLine: Int { Int(settle_xml_tag_start_line(parser)) }

    // MARK: Building lines

    @inline(__always)
    private func same(_ a: UnsafePointer<xmlChar>?, _ b: UnsafePointer<xmlChar>?) -> Bool {
        if a == b { return true }
        guard let a, let b else { return false }
        return a.pointee == b.pointee
            && strcmp(
                UnsafeRawPointer(a).assumingMemoryBound(to: CChar.self),
                UnsafeRawPointer(b).assumingMemoryBound(to: CChar.self)) == 0
    }

    /// The layout column of an unqualified attribute of `<order>` or `<line>`.
    @inline(__always)
    private func column(ofAttribute name: UnsafePointer<xmlChar>?, id: Column) -> Int? {
        guard let name else { return nil }
        if same(name, nameID) { return id.rawValue }
        if let column = columnOfName.lookup(name) { return column }
        // Not interned (should not happen) or not a column: compare by text.
        let text = String(cString: name)
        return Column.allCases.first { $0.xmlName == text && $0 != .lineID && $0 != .orderID }?.rawValue
    }

    private func openOrder(_ attributeCount: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?) {
        orders.append(
            PendingOrder(
                line: tagLine, arenaStart: arena.count, valuesStart: values.count, valuesEnd: values.count,
                firstLine: lines.count, defect: nil))
        orderDepth = depth
        if let attributes {
            for index in 0..<attributeCount {
                let attribute = attributes + index * 5
                guard attribute[2] == nil, let column = column(ofAttribute: attribute[0], id: .orderID) else {
                    continue  // qualified or unknown: the validator reports it
                }
                addValue(column, attribute[3], attribute[4], of: .order, name: attribute[0])
            }
        }
        orders[orders.count - 1].valuesEnd = values.count
        checkOrderSize()
    }

    private func openLine(_ attributeCount: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?) {
        lines.append(
            PendingLine(
                order: orders.count - 1, line: tagLine, valuesStart: values.count, valuesEnd: values.count,
                defect: nil))
        lineDepth = depth
        if let attributes {
            for index in 0..<attributeCount {
                let attribute = attributes + index * 5
                guard attribute[2] == nil, let column = column(ofAttribute: attribute[0], id: .lineID) else {
                    continue
                }
                addValue(column, attribute[3], attribute[4], of: .line, name: attribute[0])
            }
        }
        lines[lines.count - 1].valuesEnd = values.count
        checkOrderSize()
    }

    private func addMetadata(_ attributeCount: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?) {
        guard let attributes else { return }
        var key: (UnsafePointer<xmlChar>?, UnsafePointer<xmlChar>?) = (nil, nil)
        var value: (UnsafePointer<xmlChar>?, UnsafePointer<xmlChar>?) = (nil, nil)
        for index in 0..<attributeCount {
            let attribute = attributes + index * 5
            guard attribute[2] == nil else { continue }
            if same(attribute[0], nameKey) {
                key = (attribute[3], attribute[4])
            } else if same(attribute[0], nameValue) {
                value = (attribute[3], attribute[4])
            }
        }
        guard let keyStart = key.0, let keyEnd = key.1, keyEnd > keyStart else { return }  // the validator reports it
        let column: Int
        if let known = metadataColumn(keyStart, count: keyEnd - keyStart) {
            column = known
        } else {
            var keyText = String(
                decoding: UnsafeRawBufferPointer(start: keyStart, count: keyEnd - keyStart), as: UTF8.self)
            if keyText.utf8.contains(0x26) { keyText = keyText.replacing("&#38;", with: "&") }
            if let known = columnOfMetadataKey[keyText] {
                column = known
            } else {
                guard layout.count < limits.maxColumns else {
                    Self.note(
                        RecordDefect(
                            code: .malformedRecord,
                            message: "the file has more than \(limits.maxColumns) columns (metadata keys)"),
                        in: &lines[lines.count - 1].defect)
                    return
                }
                column = layout.append(name: metadataColumnPrefix + keyText, role: .metadata(key: keyText))
                columnOfMetadataKey[keyText] = column
            }
            // The first keys (a file usually has a handful) are found by their bytes,
            // without building a String.
            if metadataKeys.count < 32 {
                metadataKeys.append((Array(UnsafeBufferPointer(start: keyStart, count: keyEnd - keyStart)), column))
            }
        }
        let current = lines[lines.count - 1]
        for index in current.valuesStart..<current.valuesEnd where values[index].column == column {
            let name = layout.names[column].dropFirst(metadataColumnPrefix.count)
            Self.note(
                RecordDefect(code: .schemaInvalid, message: "schema: metadata key '\(name)' appears twice in the line"),
                in: &lines[lines.count - 1].defect)
            break
        }
        addValue(column, value.0, value.1, of: .line, name: nameValue)
        lines[lines.count - 1].valuesEnd = values.count
        checkOrderSize()
    }

    /// The column of a metadata key already seen, by its bytes as libxml2 reports them.
    @inline(__always)
    private func metadataColumn(_ key: UnsafePointer<xmlChar>, count: Int) -> Int? {
        for entry in metadataKeys where entry.key.count == count {
            let equal = entry.key.withUnsafeBufferPointer { memcmp($0.baseAddress!, key, count) == 0 }
            if equal { return entry.column }
        }
        return nil
    }

    private func addValue(
        _ column: Int, _ start: UnsafePointer<xmlChar>?, _ end: UnsafePointer<xmlChar>?, of owner: Target,
        name: UnsafePointer<xmlChar>?
    ) {
        let count = start.flatMap { start in end.map { $0 - start } } ?? 0
        if count > limits.maxFieldBytes {
            let attribute = name.map { String(cString: $0) } ?? "?"
            if column == Column.lineID.rawValue || column == Column.orderID.rawValue {
                // Its lines could not be traced (nor their order kept whole): reject the file.
                let element = owner == .order ? "<order>" : "<line>"
                reject(
                    .unreadable,
                    "the id of the \(element) on line \(tagLine) is longer than \(limits.maxFieldBytes) bytes: its lines cannot be traced, so no line of the file is read",
                    line: tagLine)
                return
            }
            let defect = RecordDefect(
                code: .fieldTooLong, message: "attribute \(attribute) is longer than \(limits.maxFieldBytes) bytes")
            if owner == .order {
                Self.note(defect, in: &orders[orders.count - 1].defect)
            } else {
                Self.note(defect, in: &lines[lines.count - 1].defect)
            }
        }
        let valueStart = arena.count
        if count > 0, let start {
            if memchr(start, 0x26, count) == nil {
                arena.append(start, count: count)
            } else {
                appendUnescapingAmpersands(start, count: count)
            }
        }
        values.append(PendingValue(column: column, start: valueStart, count: arena.count - valueStart))
    }

    /// Without entity substitution (`XML_PARSE_NOENT`, which settle never sets) libxml2
    /// hands `&amp;` and `&#38;` in an attribute value over as the five bytes `&#38;`, for
    /// a tree builder to re-parse. A literal `&` cannot occur in a value, so every `&` that
    /// reaches us starts exactly that sequence: turn each back into `&`.
    private func appendUnescapingAmpersands(_ start: UnsafePointer<xmlChar>, count: Int) {
        var index = 0
        while index < count {
            let byte = start[index]
            arena.append(byte: byte)
            if byte == 0x26, index + 4 < count, start[index + 1] == 0x23, start[index + 2] == 0x33,
                start[index + 3] == 0x38, start[index + 4] == 0x3B
            {
                index += 5
            } else {
                index += 1
            }
        }
    }

    private func checkOrderSize() {
        guard let order = orders.last else { return }
        let held =
            (arena.count - order.arenaStart)
            + (lines.count - order.firstLine) * MemoryLayout<PendingLine>.stride
            + (values.count - order.valuesStart) * MemoryLayout<PendingValue>.stride
        if held > limits.maxOrderBytes {
            reject(
                .xmlMalformed,
                "the <order> starting on line \(order.line) holds more than \(limits.maxOrderBytes >> 20) MiB of lines; split it",
                line: order.line)
        }
    }

    // MARK: Delivering

    /// Delivers the lines of every closed order to the sink (and the spool), then drops them.
    func deliverCompleteOrders(to sink: some RecordSink, file: Int, spool: some RecordSpool) {
        settleClosing()
        guard rejection == nil, completeOrders > 0 else { return }
        let columnCount = layout.count
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        if views.count != columnCount { views = Array(repeating: empty, count: columnCount) }
        var index = 0
        while index < lines.count, lines[index].order < completeOrders {
            let line = lines[index]
            let order = orders[line.order]
            for column in 0..<columnCount { views[column] = empty }
            for index in order.valuesStart..<order.valuesEnd {
                let value = values[index]
                views[value.column] = arena.bytes(from: value.start, count: value.count)
            }
            for index in line.valuesStart..<line.valuesEnd {
                let value = values[index]
                views[value.column] = arena.bytes(from: value.start, count: value.count)
            }
            var defect = line.defect
            if let orderDefect = order.defect { Self.note(orderDefect, in: &defect) }

            let offset = spool.offset
            encodeSpoolRecord()
            spool.append(spoolRecord.all)
            let length = UInt32(truncatingIfNeeded: spoolRecord.count)
            views.withUnsafeBufferPointer {
                sink.record(
                    RecordView(
                        fields: $0, line: line.line, spoolOffset: offset, spoolLength: length,
                        defect: defect), file: file)
            }
            index += 1
            deliveredLines += 1
        }
        dropDelivered(lines: index)
    }

    /// Forgets the delivered orders and lines; the open order (if any) moves to the front.
    private func dropDelivered(lines delivered: Int) {
        let removedOrders = completeOrders
        completeOrders = 0
        let open = removedOrders < orders.count ? orders[removedOrders] : nil
        let arenaShift = open?.arenaStart ?? arena.count
        let valueShift = open?.valuesStart ?? values.count
        arena.removeFirst(arenaShift)
        values.removeFirst(valueShift)
        for index in values.indices { values[index].start -= arenaShift }
        orders.removeFirst(removedOrders)
        for index in orders.indices {
            orders[index].arenaStart -= arenaShift
            orders[index].valuesStart -= valueShift
            orders[index].valuesEnd -= valueShift
            orders[index].firstLine -= delivered
        }
        lines.removeFirst(delivered)
        for index in lines.indices {
            lines[index].order -= removedOrders
            lines[index].valuesStart -= valueShift
            lines[index].valuesEnd -= valueShift
        }
    }

    // MARK: Spool

    func writeSpoolHeader(to spool: some RecordSpool) {
        spoolRecord.removeAll()
        for index in 0..<layout.count {
            if index > 0 { spoolRecord.append(byte: 0x2C) }
            var name = layout.names[index]
            name.withUTF8 { Self.appendField(UnsafeRawBufferPointer($0), to: spoolRecord) }
        }
        spoolRecord.append(byte: 0x0A)
        spool.append(spoolRecord.all)
    }

    private func encodeSpoolRecord() {
        spoolRecord.removeAll()
        for index in views.indices {
            if index > 0 { spoolRecord.append(byte: 0x2C) }
            Self.appendField(views[index], to: spoolRecord)
        }
        spoolRecord.append(byte: 0x0A)
    }

    /// RFC 4180: a field holding `,` `"` CR or LF is quoted, its quotes doubled.
    @inline(__always)
    private static func appendField(_ field: UnsafeRawBufferPointer, to out: ByteArena) {
        guard let base = field.baseAddress, field.count > 0 else { return }
        var needsQuotes = false
        for byte in field where byte == 0x2C || byte == 0x22 || byte == 0x0D || byte == 0x0A {
            needsQuotes = true
            break
        }
        guard needsQuotes else {
            out.append(base, count: field.count)
            return
        }
        out.append(byte: 0x22)
        for byte in field {
            if byte == 0x22 { out.append(byte: 0x22) }
            out.append(byte: byte)
        }
        out.append(byte: 0x22)
    }
}

/// Interned name pointer → column: a small open-addressing table (names compare by
/// address, so hashing the address is enough).
struct NameTable {
    private static let size = 64
    private var keys = [UInt](repeating: 0, count: NameTable.size)
    private var columns = [Int](repeating: -1, count: NameTable.size)

    @inline(__always)
    private static func slot(_ key: UInt) -> Int { Int(truncatingIfNeeded: (key >> 4) ^ (key >> 10)) & (size - 1) }

    mutating func insert(_ name: UnsafePointer<xmlChar>, _ column: Int) {
        let key = UInt(bitPattern: name)
        var slot = Self.slot(key)
        while keys[slot] != 0, keys[slot] != key { slot = (slot + 1) & (Self.size - 1) }
        keys[slot] = key
        columns[slot] = column
    }

    @inline(__always)
    func lookup(_ name: UnsafePointer<xmlChar>) -> Int? {
        let key = UInt(bitPattern: name)
        var slot = Self.slot(key)
        while true {
            let found = keys[slot]
            if found == key { return columns[slot] }
            if found == 0 { return nil }
            slot = (slot + 1) & (Self.size - 1)
        }
    }
}
