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
        var defect = Defects()
        /// Its attributes the schema does not allow, as `name="value"` (``schemaRefusedColumn``).
        var refused: [UInt8] = []
    }

    private struct PendingLine {
        var order: Int
        var line: Int
        var valuesStart: Int
        var valuesEnd: Int
        var defect = Defects()
        /// Its attributes the schema does not allow, as `name="value"` (``schemaRefusedColumn``).
        var refused: [UInt8] = []
    }

    /// What is wrong with a line or an order: the reader's own findings and the schema's,
    /// each with the document offset where the first one arose, so that the two can be
    /// merged in the order they happened even when the schema's come from a re-validation.
    struct Defects {
        private(set) var own: RecordDefect?
        private(set) var ownAt = Int.max
        private(set) var schema: RecordDefect?
        private(set) var schemaAt = Int.max

        /// The reader's own finding (``XMLExportParse/note(_:in:)`` rule).
        mutating func noteOwn(_ defect: RecordDefect, at offset: Int) {
            if own == nil { ownAt = offset }
            XMLExportParse.note(defect, in: &own)
        }

        /// A schema error: the first one is kept.
        mutating func noteSchema(_ defect: RecordDefect, at offset: Int) {
            guard schema == nil else { return }
            schema = defect
            schemaAt = offset
        }

        /// The schema's findings of a re-validation, offsets already in this document's terms.
        mutating func adoptSchema(_ other: Defects, shift: Int) {
            schema = other.schema
            schemaAt = other.schema == nil ? Int.max : other.schemaAt + shift
        }

        /// What one slot noting every finding as it happened would hold: the first
        /// `field_too_long` if any, else the first finding (the reader's own first at
        /// one offset: its callback runs before the validator's).
        var merged: RecordDefect? {
            if let own, own.code == .fieldTooLong { return own }
            guard let schema else { return own }
            guard let own else { return schema }
            return schemaAt < ownAt ? schema : own
        }
    }

    private let limits: XMLReadLimits
    private let layout: FileLayout
    private let schema: XMLSchema
    /// Whether libxml2's validator runs on every event; if not, the reader checks each
    /// top-level element itself and re-validates only those it cannot vouch for.
    let validating: Bool
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
    @exclusivity(unchecked) private var refusedColumnIndex: Int?

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

    // Checked mode (not `validating`): the document's bytes from the open top-level element
    // (or, before the root, from the start), the root's start tag, and the open unit.
    private let raw = ByteArena()
    @exclusivity(unchecked) private var rawBase = 0
    @exclusivity(unchecked) private var rootTag: [UInt8] = []
    @exclusivity(unchecked) private var rootClose: [UInt8] = []
    @exclusivity(unchecked) private var unitOpen = false
    @exclusivity(unchecked) private var unitStart = 0
    @exclusivity(unchecked) private var unitFirstLine = 0
    @exclusivity(unchecked) private var unitFirstOrder = 0
    @exclusivity(unchecked) private var unitSuspect = false
    @exclusivity(unchecked) private var unitLost = false
    /// A stray `<line>` in the root has ended: libxml2's validator skips the rest of the root's
    /// content (in both modes), so nothing after it is a schema error any more, and each line
    /// after it is rejected `schema_invalid` rather than read unchecked (audit 60 F1: a
    /// misspelled `transferOnn` moved money at once, a `kindd="reversal"` was planned as a
    /// transfer).
    @exclusivity(unchecked) private var rootSkipped = false
    @exclusivity(unchecked) private var rawLost = false
    @exclusivity(unchecked) private var inCDATA = false
    /// The offsets do not map to the input's bytes (an encoding conversion): read again,
    /// validating (``XMLExportReader`` does, with ``consumedBytes``).
    @exclusivity(unchecked) private(set) var needsValidatingRead = false

    init(schema: XMLSchema, layout: FileLayout, limits: XMLReadLimits, validating: Bool) {
        self.limits = limits
        self.layout = layout
        self.schema = schema
        self.validating = validating
        let context = Unmanaged.passUnretained(self).toOpaque()

        var handler = xmlSAXHandler()
        handler.initialized = XML_SAX2_MAGIC
        handler.startElementNs = { context, localName, prefix, uri, _, _, attributeCount, _, attributes in
            XMLExportParse.with(context) { $0.startElement(localName, prefix, uri, Int(attributeCount), attributes) }
        }
        handler.endElementNs = { context, _, _, _ in
            XMLExportParse.with(context) { $0.endElement() }
        }
        handler.characters = { context, text, count in
            XMLExportParse.with(context) { $0.text(text, Int(count)) }
        }
        // Same function for both, so libxml2 does not look for "ignorable" blanks.
        handler.ignorableWhitespace = handler.characters
        handler.cdataBlock = { context, text, count in
            XMLExportParse.with(context) {
                $0.inCDATA = true
                $0.text(text, Int(count))
                $0.inCDATA = false
            }
        }
        // The validator's plug sets one (it does nothing); set one here too so that the
        // parser takes the same path either way. Without a DTD no entity reaches it.
        handler.reference = { context, _ in
            XMLExportParse.with(context) { $0.suspect() }
        }
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

        guard validating else {
            settle_xml_set_parser_error_handler(parser) { _, error in
                guard let error, let parser = error.pointee.ctxt?.assumingMemoryBound(to: xmlParserCtxt.self),
                    let context = parser.pointee._private
                else { return }
                XMLExportParse.of(context).parserError(error.pointee)
            }
            return
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
        guard rejection == nil, !needsValidatingRead, let parser, let base = chunk.baseAddress else { return }
        if !validating { raw.append(base, count: chunk.count) }
        var offset = 0
        while offset < chunk.count {
            let size = min(chunk.count - offset, 1 << 24)
            xmlParseChunk(parser, (base + offset).assumingMemoryBound(to: CChar.self), Int32(size), 0)
            offset += size
            if checkAfterParse() { return }
        }
        if !validating { trimRaw() }
    }

    /// Every byte fed so far, while none was dropped (before the root element).
    var consumedBytes: UnsafeRawBufferPointer? {
        rawBase == 0 && !rawLost && deliveredLines == 0 && lines.isEmpty && layout.count == Column.allCases.count
            ? raw.all : nil
    }

    /// Keeps the bytes of the open unit, and those the parser has not reached yet.
    private func trimRaw() {
        var keep = settle_xml_offset(parser)
        if keep < 0 { return }
        if rootTag.isEmpty {
            // Before the root everything is kept (to read again validating), up to a bound.
            guard raw.count > limits.maxOrderBytes else { return }
            rawLost = true
        } else if unitOpen, !unitLost {
            if keep - unitStart > limits.maxOrderBytes {
                unitLost = true  // memory stays bounded; a suspect unit then cannot be re-validated
            } else {
                keep = min(keep, unitStart)
            }
        }
        let drop = keep - rawBase
        guard drop > 0, drop <= raw.count else { return }
        raw.removeFirst(drop)
        rawBase = keep
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
        if needsValidatingRead {
            xmlStopParser(parser)
            return true
        }
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
        _ name: UnsafePointer<xmlChar>?, _ prefix: UnsafePointer<xmlChar>?, _ uri: UnsafePointer<xmlChar>?,
        _ attributeCount: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    ) {
        settleClosing()
        guard rejection == nil, !needsValidatingRead else { return }
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
            } else if !validating {
                startRoot(name, prefix, attributeCount)
            }
            return
        }
        if lineDepth > 0 {
            target = .line
            if depth == lineDepth + 1, ours, same(name, nameMetadata) {
                addMetadata(attributeCount, attributes)
                if !validating, !unitSuspect, !Self.metadataIsClean(attributeCount, attributes, self) { suspect() }
            } else if ours, same(name, nameLine) {
                // A <line> inside a <line> (a schema error) is a line too: rejected with a row
                // of its own, never dropped (audit 13: it had none). The outer line goes on.
                suspect()
                let (outer, outerIndex) = (lineDepth, lines.count - 1)
                let offset = settle_xml_offset(parser)
                lines[outerIndex].defect.noteOwn(
                    RecordDefect(code: .schemaInvalid, message: "schema: it holds another <line>, not only <metadata>"),
                    at: offset)
                openLine(attributeCount, attributes)
                lineDepth = outer
                lines[lines.count - 1].defect.noteOwn(
                    RecordDefect(code: .schemaInvalid, message: "schema: a <line> inside another <line>"), at: offset)
            } else {
                suspect()
            }
            return
        }
        if ours, same(name, nameLine) {
            if orderDepth == 0 {
                // A <line> outside any <order> (a schema error): a one-line order of its own,
                // so it is still reported, never dropped.
                if !validating { openUnit() }
                suspect()
                openOrder(0, nil)
                strayLine = true
            } else if !validating, depth != orderDepth + 1 {
                suspect()
            }
            openLine(attributeCount, attributes)
            target = .line
            return
        }
        if orderDepth == 0, ours, same(name, nameOrder) {
            if !validating {
                if depth == 2 { openUnit() } else { suspect() }
            }
            openOrder(attributeCount, attributes)
            target = .order
            return
        }
        if orderDepth > 0, depth == orderDepth + 1, Self.looksLikeLine(name, attributeCount, attributes) {
            // A child of <order> that is meant as a line but is not a <line> of the export
            // (misnamed, or of another namespace) breaks the order's content, and its record is
            // a line too: rejected with a row of its own, never dropped (audit 47 S1: an order
            // whose only line was a <Line> left no row, and the run exited 0).
            if !validating { suspect() }
            let offset = settle_xml_offset(parser)
            let found = name.map { String(cString: $0) } ?? ""
            let defect = RecordDefect(
                code: .schemaInvalid,
                message: "schema: <\(found)> in an <order> is not a <line> of namespace \(OrderExportSchema.namespace)")
            orders[orders.count - 1].defect.noteOwn(defect, at: offset)
            openLine(attributeCount, attributes)
            lines[lines.count - 1].defect.noteOwn(defect, at: offset)
            target = .line
            return
        }
        target = orderDepth > 0 ? .order : .root
        if !validating {
            if orderDepth > 0 {
                suspect()
            } else {
                rejectRootContent(element: name, prefix)
            }
        }
    }

    private func endElement() {
        settleClosing()
        guard rejection == nil, !needsValidatingRead else { return }
        if unitOpen, depth == 2 { closeUnit() }
        if depth == lineDepth {
            lineDepth = 0
            target = .line
            if strayLine {
                strayLine = false
                rootSkipped = true
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

    private func text(_ text: UnsafePointer<xmlChar>?, _ count: Int) {
        settleClosing()
        target = lineDepth > 0 ? .line : orderDepth > 0 ? .order : .root
        guard !validating, rejection == nil, !needsValidatingRead else { return }
        // <orderExport>, <order> and <line> have element-only content (blanks allowed, no
        // CDATA section); <metadata> is empty (nothing at all).
        let elementOnly = depth == 1 || depth == lineDepth || (lineDepth == 0 && depth == orderDepth)
        if elementOnly, !inCDATA, Self.isBlank(text, count) { return }
        if depth == 1 {
            rejectRootContent(element: nil, nil)
        } else {
            suspect()
        }
    }

    @inline(__always)
    private static func isBlank(_ text: UnsafePointer<xmlChar>?, _ count: Int) -> Bool {
        guard let text else { return true }
        for index in 0..<count {
            let byte = text[index]
            if byte != 0x20, byte != 0x0A, byte != 0x09, byte != 0x0D { return false }
        }
        return true
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

    // MARK: Checked mode

    // Without the validator on every event, the reader vouches for each top-level element
    // ("unit": an <order>, or a stray <line>) itself, with checks that only pass what the
    // schema accepts: known unqualified attributes no longer in bytes than the schema allows
    // in characters, the required ones, the expected children, blank text only where
    // content is element-only. A unit that fails any check is "suspect": when it closes,
    // its bytes (after the root's start tag, in a document of their own) go through the
    // validating parse, whose schema findings for its lines and order are taken over.
    // Elsewhere at the root level the schema rejects the file; the validating parse of that
    // start tag or text says with which message. An error of the validator depends only on
    // the unit it is in (the root's content model is `order*`, whatever came before), and
    // its offset within the unit is the same in both documents.

    private static let lineRequired: UInt32 =
        1 << UInt32(Column.lineID.rawValue) | 1 << UInt32(Column.amount.rawValue)
        | 1 << UInt32(Column.currency.rawValue)
    private static let orderRequired: UInt32 = 1 << UInt32(Column.orderID.rawValue)
    /// `<order>`: `id` and the OrderFacts group of the schema. (`<line>` takes every column but `order_id`.)
    private static let orderColumns: UInt32 = [
        Column.orderID, .transferGroup, .paymentIntent, .sourceTransaction, .chargeAmount, .chargeCurrency,
        .chargeStatus, .chargeFee, .paymentMethodType, .destinationCountry,
    ].reduce(0) { $0 | 1 << UInt32($1.rawValue) }

    /// Whether a value's bytes fit the schema's maxLength in characters (s:Text 255,
    /// s:LongText 1000 for `description`); bytes ≥ characters, whichever way `&` is counted.
    @inline(__always)
    private static func fits(_ column: Int, _ start: UnsafePointer<xmlChar>?, _ end: UnsafePointer<xmlChar>?) -> Bool {
        guard let start, let end else { return true }
        return end - start <= (column == Column.description.rawValue ? 1000 : 255)
    }

    /// `<metadata>`: exactly `key` (1 to 255 characters) and `value` (to 1000), unqualified.
    private static func metadataIsClean(
        _ attributeCount: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?, _ parse: XMLExportParse
    ) -> Bool {
        guard attributeCount == 2, let attributes else { return false }
        var seen = 0
        for index in 0..<2 {
            let attribute = attributes + index * 5
            guard attribute[1] == nil, attribute[2] == nil, let start = attribute[3], let end = attribute[4] else {
                return false
            }
            if parse.same(attribute[0], parse.nameKey) {
                guard end - start >= 1, end - start <= 255 else { return false }
                seen |= 1
            } else if parse.same(attribute[0], parse.nameValue) {
                guard end - start <= 1000 else { return false }
                seen |= 2
            } else {
                return false
            }
        }
        return seen == 3
    }

    /// Where the start tag just reported ends: the parser reports it standing on its `>`
    /// (or `/>`).
    private func startTagEnd() -> Int {
        let at = settle_xml_offset(parser)
        guard at >= rawBase, at < rawBase + raw.count else { return at }
        let byte = raw.all[at - rawBase]
        if byte == 0x3E { return at + 1 }
        if byte == 0x2F, at + 1 < rawBase + raw.count, raw.all[at + 1 - rawBase] == 0x3E { return at + 2 }
        return at
    }

    /// The open unit cannot be vouched for by the checks.
    @inline(__always)
    private func suspect() { if !rootSkipped { unitSuspect = true } }

    private func openUnit() {
        unitOpen = true
        unitStart = settle_xml_tag_start_offset(parser)
        unitFirstLine = lines.count
        unitFirstOrder = orders.count
        unitSuspect = false
        unitLost = false
    }

    /// The root's start tag, kept to head the documents of re-validations; a root with
    /// attributes is validated at once.
    private func startRoot(
        _ name: UnsafePointer<xmlChar>?, _ prefix: UnsafePointer<xmlChar>?, _ attributeCount: Int
    ) {
        let start = settle_xml_tag_start_offset(parser)
        let end = startTagEnd()
        guard settle_xml_converts(parser) == 0, start >= rawBase, end <= rawBase + raw.count, start < end,
            raw.all[start - rawBase] == 0x3C
        else {
            needsValidatingRead = true
            return
        }
        rootTag = Array(raw.bytes(from: start - rawBase, count: end - start))
        rootClose = Array("</".utf8)
        if let prefix { rootClose += Array(UnsafeBufferPointer(start: prefix, count: strlen(prefix))) + [0x3A] }
        if let name { rootClose += Array(UnsafeBufferPointer(start: name, count: strlen(name))) }
        rootClose.append(0x3E)
        if rootTag.count >= 2, rootTag[rootTag.count - 2] == 0x2F { rootClose = [] }
        if attributeCount > 0 {
            // Validated as it stands: `<orderExport …>` then its end tag.
            rejectBySchema(rootTag + rootClose)
        }
    }

    /// Something other than an `<order>` (or a stray `<line>`) in the root: the schema
    /// rejects the file here; the validating parse of this start tag (or text) says how.
    private func rejectRootContent(element name: UnsafePointer<xmlChar>?, _ prefix: UnsafePointer<xmlChar>?) {
        guard !rootSkipped else { return }
        var document = rootTag
        if let name {
            let start = settle_xml_tag_start_offset(parser)
            let end = startTagEnd()
            guard start >= rawBase, start < end, end <= rawBase + raw.count else {
                needsValidatingRead = true
                return
            }
            let tag = Array(raw.bytes(from: start - rawBase, count: end - start))
            document += tag
            if tag.count < 2 || tag[tag.count - 2] != 0x2F {
                document += Array("</".utf8)
                if let prefix { document += Array(UnsafeBufferPointer(start: prefix, count: strlen(prefix))) + [0x3A] }
                document += Array(UnsafeBufferPointer(start: name, count: strlen(name))) + [0x3E]
            }
        } else {
            // Only that there is text counts (a CDATA section, even blank, is text to the schema).
            document += Array("x".utf8)
        }
        rejectBySchema(document + rootClose)
    }

    private func rejectBySchema(_ document: [UInt8]) {
        let line = currentLine
        let found = Self.revalidate(document, schema: schema, limits: limits)
        if let report = found.rejection, report.code == .xmlNotAnExport {
            reject(report.code, report.message, line: line)
        } else if let report = found.rejection {
            // The part alone cannot be parsed: read the whole file again, validating.
            _ = report
            needsValidatingRead = true
        }
    }

    /// The unit closes (its end tag was just reported): a suspect one is re-validated.
    private func closeUnit() {
        unitOpen = false
        if lines.count == unitFirstLine { suspect() }  // an <order> needs a <line>
        guard unitSuspect else { return }
        unitSuspect = false
        let end = settle_xml_offset(parser)
        guard !unitLost, unitStart >= rawBase, unitStart < end, end <= rawBase + raw.count else {
            needsValidatingRead = true
            return
        }
        let unit = raw.bytes(from: unitStart - rawBase, count: end - unitStart)
        let found = Self.revalidate(rootTag + Array(unit) + rootClose, schema: schema, limits: limits)
        guard found.rejection == nil, found.orders.count == orders.count - unitFirstOrder,
            found.lines.count == lines.count - unitFirstLine
        else {
            needsValidatingRead = true
            return
        }
        let shift = unitStart - rootTag.count
        for (index, defects) in found.orders.enumerated() {
            orders[unitFirstOrder + index].defect.adoptSchema(defects, shift: shift)
        }
        for (index, defects) in found.lines.enumerated() {
            lines[unitFirstLine + index].defect.adoptSchema(defects, shift: shift)
        }
    }

    /// The schema's findings on a small document, parsed validating.
    private static func revalidate(_ document: [UInt8], schema: XMLSchema, limits: XMLReadLimits) -> (
        orders: [Defects], lines: [Defects], rejection: FileRejectionReport?
    ) {
        let layout = FileLayout()
        for column in Column.allCases { layout.append(name: column.csvName, role: .known(column)) }
        var unlimited = limits
        unlimited.maxColumns = Int.max
        let parse = XMLExportParse(schema: schema, layout: layout, limits: unlimited, validating: true)
        document.withUnsafeBytes { parse.feed($0) }
        parse.finish()
        parse.settleClosing()
        var rejection = parse.rejection
        if rejection == nil, !parse.isValid {
            rejection = FileRejectionReport(code: .unreadable, message: "", line: 0)
        }
        return (parse.orders.map(\.defect), parse.lines.map(\.defect), rejection)
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
        let offset = settle_xml_offset(parser)
        switch target {
        case .line:
            guard !lines.isEmpty else { return }
            lines[lines.count - 1].defect.noteSchema(
                RecordDefect(code: .schemaInvalid, message: "schema: \(message)"), at: offset)
        case .order:
            guard !orders.isEmpty else { return }
            orders[orders.count - 1].defect.noteSchema(
                RecordDefect(code: .schemaInvalid, message: "schema, on the line's <order>: \(message)"), at: offset)
        case .root:
            reject(
                .xmlNotAnExport, "the document does not follow the order export schema: \(message)",
                line: currentLine)
        }
    }

    /// Keeps the first defect, except that `field_too_long` (a memory limit) wins over a
    /// schema error (the same long value also breaks the schema's maxLength).
    fileprivate static func note(_ defect: RecordDefect, in slot: inout RecordDefect?) {
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
                firstLine: lines.count))
        orderDepth = depth
        var seen: UInt32 = 0
        if let attributes {
            for index in 0..<attributeCount {
                let attribute = attributes + index * 5
                if attribute[1] != nil { suspect() }
                guard attribute[2] == nil, let column = column(ofAttribute: attribute[0], id: .orderID) else {
                    suspect()
                    Self.describe(attribute, to: &orders[orders.count - 1].refused)
                    continue  // qualified or unknown: the validator reports it
                }
                seen |= 1 << UInt32(column)
                if !validating, !Self.fits(column, attribute[3], attribute[4]) { suspect() }
                addValue(column, attribute[3], attribute[4], of: .order, name: attribute[0])
            }
        }
        if !validating, seen & ~Self.orderColumns != 0 || seen & Self.orderRequired != Self.orderRequired {
            suspect()
        }
        orders[orders.count - 1].valuesEnd = values.count
        checkOrderSize()
    }

    private func openLine(_ attributeCount: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?) {
        lines.append(
            PendingLine(
                order: orders.count - 1, line: tagLine, valuesStart: values.count, valuesEnd: values.count,
            ))
        lineDepth = depth
        if rootSkipped {
            lines[lines.count - 1].defect.noteOwn(
                RecordDefect(
                    code: .schemaInvalid,
                    message:
                        "schema: not checked, so not read: a <line> outside any <order> came before it, and the schema "
                        + "checks nothing of the export after that"),
                at: settle_xml_offset(parser))
        }
        var seen: UInt32 = 0
        if let attributes {
            for index in 0..<attributeCount {
                let attribute = attributes + index * 5
                if attribute[1] != nil { suspect() }
                guard attribute[2] == nil, let column = column(ofAttribute: attribute[0], id: .lineID) else {
                    suspect()
                    Self.describe(attribute, to: &lines[lines.count - 1].refused)
                    continue
                }
                seen |= 1 << UInt32(column)
                if !validating, !Self.fits(column, attribute[3], attribute[4]) { suspect() }
                addValue(column, attribute[3], attribute[4], of: .line, name: attribute[0])
            }
        }
        if !validating, seen & Self.lineRequired != Self.lineRequired { suspect() }
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
                    lines[lines.count - 1].defect.noteOwn(
                        RecordDefect(
                            code: .malformedRecord,
                            message: "the file has more than \(limits.maxColumns) columns (metadata keys)"),
                        at: settle_xml_offset(parser))
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
            lines[lines.count - 1].defect.noteOwn(
                RecordDefect(code: .schemaInvalid, message: "schema: metadata key '\(name)' appears twice in the line"),
                at: settle_xml_offset(parser))
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
                orders[orders.count - 1].defect.noteOwn(defect, at: settle_xml_offset(parser))
            } else {
                lines[lines.count - 1].defect.noteOwn(defect, at: settle_xml_offset(parser))
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
            var defect = line.defect.merged
            if let orderDefect = order.defect.merged { Self.note(orderDefect, in: &defect) }
            // What the schema refused goes into a column of its own, so that the row fed back
            // from errors.csv unchanged is refused again (``schemaRefusedColumn``).
            var refused: [UInt8] = []
            if let defect, defect.code == .schemaInvalid {
                refused = order.refused
                if !line.refused.isEmpty {
                    if !refused.isEmpty { refused.append(0x20) }
                    refused += line.refused
                }
                if refused.isEmpty {
                    refused = Array(defect.message.utf8)
                }
            }
            let offset = spool.offset
            func deliver() {
                encodeSpoolRecord()
                spool.append(spoolRecord.all)
                let length = UInt32(truncatingIfNeeded: spoolRecord.count)
                views.withUnsafeBufferPointer {
                    sink.record(
                        RecordView(
                            fields: $0, line: line.line, spoolOffset: offset, spoolLength: length,
                            defect: defect), file: file)
                }
            }
            if refused.isEmpty {
                deliver()
            } else {
                let column = refusedColumn()
                if views.count <= column {
                    views.append(contentsOf: repeatElement(empty, count: column + 1 - views.count))
                }
                refused.withUnsafeBytes { bytes in
                    views[column] = bytes
                    deliver()
                    views[column] = empty
                }
            }
            index += 1
            deliveredLines += 1
        }
        dropDelivered(lines: index)
    }

    /// Whether an element that is not a <line> of the export is meant as one: named `line` in
    /// any case or namespace, or with an `id` or `amount` attribute (an order's other stray
    /// children, `<summary total="…"/>`, only break the order).
    private static func looksLikeLine(
        _ name: UnsafePointer<xmlChar>?, _ attributeCount: Int,
        _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    ) -> Bool {
        if let name, String(cString: name).lowercased() == "line" { return true }
        guard let attributes else { return false }
        for index in 0..<attributeCount {
            guard let attribute = attributes[index * 5] else { continue }
            let text = String(cString: attribute)
            if text == "id" || text == "amount" { return true }
        }
        return false
    }

    /// The layout's ``schemaRefusedColumn``, added the first time a line needs it.
    private func refusedColumn() -> Int {
        if let refusedColumnIndex { return refusedColumnIndex }
        let column = layout.append(name: schemaRefusedColumn, role: .extra)
        refusedColumnIndex = column
        return column
    }

    /// `name="value"` of an attribute (SAX2: localname, prefix, URI, value start, value end),
    /// after what `out` holds, a space between.
    private static func describe(_ attribute: UnsafeMutablePointer<UnsafePointer<xmlChar>?>, to out: inout [UInt8]) {
        guard let name = attribute[0] else { return }
        if !out.isEmpty { out.append(0x20) }
        if let prefix = attribute[1] {
            out += UnsafeBufferPointer(
                start: prefix, count: strlen(UnsafeRawPointer(prefix).assumingMemoryBound(to: CChar.self)))
            out.append(0x3A)
        }
        out += UnsafeBufferPointer(
            start: name, count: strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self)))
        out += [0x3D, 0x22]
        if let start = attribute[3], let end = attribute[4], end > start {
            out += UnsafeBufferPointer(start: start, count: end - start)
        }
        out.append(0x22)
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
        unitFirstLine -= delivered
        unitFirstOrder -= removedOrders
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
