/// Turns input records into checked ``OrderLine``s: the line rules of docs/RULES.md.
///
/// It is the ``RecordSink`` the readers feed. Every record becomes exactly one line:
/// a bad one is kept, rejected with its reason and its place.
public final class LineChecker: RecordSink {
    /// The checked lines. Reading one waits until the lines given so far are on it (their
    /// ids are interned on the second core, see ``IdentityStage``).
    public var batch: Batch {
        settle()
        return storage
    }
    private let storage = Batch()
    private let identities: IdentityStage
    /// Lines checked on this thread and not yet handed to ``identities``.
    private var chunk: IdentityChunk
    /// Lines given so far (kept, of files not discarded), read without waiting for the stage.
    public private(set) var lineCount = 0
    private let options: RuleOptions
    private let platformCountry: String
    private var fileStarts: [Int] = []

    static let maxIDBytes = 255
    static let lengthChecked = Column.allCases.filter { $0 != .description }
    /// Ids whose form no prefix rule checks.
    static let freeIDs: [Column] = [.lineID, .orderID, .transferGroup, .payoutMethod]
    static let maxDescriptionBytes = 1000
    static let maxMetadataKeyBytes = 40
    static let maxMetadataValueBytes = 500

    public init(options: RuleOptions) {
        self.options = options
        self.platformCountry = options.platformCountry.uppercased()
        self.identities = IdentityStage(batch: storage)
        self.chunk = identities.emptyChunk()
    }

    /// Reserves room for about this many lines, so the line table does not double (and copy)
    /// its way up: untouched pages of a large reservation cost no memory.
    public func reserve(lines: Int) {
        let batch = self.batch
        let lines = max(0, min(lines, 200_000_000))
        batch.lines.reserveCapacity(batch.lines.count + lines)
        HugePages.advise(&batch.lines)
        // About three distinct strings a line (line id, order id, group, charge...).
        batch.symbols.reserve(symbols: batch.symbols.count + 3 * lines)
    }

    /// Lets go of what only reading needs, once every input is read: the first line of each
    /// line_id and the symbol table's hash index (rebuilt should anything intern later).
    /// No record may follow.
    public func finishReading() {
        settle()
        identities.release()
        fileStarts = []
        storage.symbols.dropIndex()
    }

    public func beginFile(name: String, layout: FileLayout) -> Int {
        storage.files.append(Batch.InputFile(name: name, layout: layout))
        fileStarts.append(lineCount)
        return storage.files.count - 1
    }

    /// A slot for a file rejected before its header (empty, not a gzip, a header that does
    /// not parse), so that file indices stay those of the inputs: it has no lines, and a later
    /// file's lines start where they would have.
    public func skipFile(name: String) {
        var placeholder = Batch.InputFile(name: name, layout: FileLayout())
        placeholder.discarded = true
        storage.files.append(placeholder)
        fileStarts.append(lineCount)
    }

    public func endFile(_ file: Int, lines: Int) {
        settle()
        storage.files[file].lines = lines
    }

    public func discardFile(_ file: Int) {
        settle()
        let cut = fileStarts[file]
        identities.forget(from: cut)
        storage.lines.removeSubrange(cut...)
        lineCount = cut
        storage.files[file].discarded = true
        storage.files[file].lines = 0
    }

    /// The line at `index` no longer counts as the first copy of its line_id: a copy read
    /// after it is not a duplicate of it (a line the ledger holds, brought back after an
    /// export whose copy of it conflicts, and is rejected, see HeldInputs).
    public func yieldFirstCopy(ofLine index: Int) {
        settle()
        identities.yieldFirstCopy(ofLine: index)
    }

    /// The line that counts for a line_id (its first copy) among the lines checked so far,
    /// nil when none has it: a look-up, where a pass over the batch would read every line.
    public func firstLine(withID id: Symbol) -> Int? {
        settle()
        return identities.firstLine(of: id)
    }

    /// Hands the lines checked so far to the identity stage, waits until it has added them
    /// to the batch, and marks the later copies of a line_id.
    private func settle() {
        if chunk.count > 0 { handOn() }
        identities.finish()
        guard !identities.duplicates.isEmpty else { return }
        // A later copy of a line_id stays outside its group, whatever else is wrong with it.
        for (copy, first) in identities.duplicates {
            let line = storage.lines[copy]
            storage.set(
                copy, .rejected, .duplicateLineID,
                "line_id \(storage.text(line.lineID)) already appeared at "
                    + "\(storage.source(of: storage.lines[first])); the first copy counts")
        }
        identities.duplicates.removeAll()
    }

    private func handOn() {
        identities.submit(chunk)
        chunk = identities.emptyChunk()
    }

    deinit { identities.finish() }

    public func record(_ record: RecordView, file: Int) {
        var line = OrderLine()
        line.file = UInt16(file)
        line.sourceLine = UInt32(record.line)
        line.spoolOffset = record.spoolOffset
        line.spoolLength = record.spoolLength
        let layout = storage.files[file].layout
        let fields = Fields(record: record, columnIndex: layout.indexOfColumn)
        let encodingProblem = firstEncodingProblem(record, layout: layout)
        if let failure = check(record, fields: fields, layout: layout, encodingProblem: encodingProblem, into: &line) {
            line.status = .rejected
            line.reason = failure.code
            line.kindInvalid = failure.code == .kindInvalid
            line.message = storage.addMessage(failure.message)
        }
        chunk.add(line, utf8: encodingProblem == nil) { fields[$0] }
        lineCount += 1
        if chunk.count >= IdentityChunk.capacity { handOn() }
    }

    /// Is this line a copy that does not count (a later copy of a line_id, or a conflicting
    /// copy of a held line)? Such lines do not belong to a group.
    public static func staysOutsideGroup(_ line: OrderLine) -> Bool {
        line.outsideGroup || line.reason == .duplicateLineID
    }

    /// Whether what the line says of its charge counts for the charge rules: a line rejected by
    /// a line rule still states its charge's facts (a failed charge it names fails the other
    /// lines on it). A copy that does not count states nothing, nor does a record not read as
    /// its columns (`malformed_record`, `schema_invalid`: a value may sit in another column).
    public static func statesChargeFacts(_ line: OrderLine) -> Bool {
        !staysOutsideGroup(line) && line.reason != .malformedRecord && line.reason != .schemaInvalid
    }

    // MARK: - The per-line rules

    /// A record's fields by column; one local copy of the column map, so no retain per access.
    private struct Fields {
        let record: RecordView
        let columnIndex: [Int]

        @inline(__always) subscript(_ column: Column) -> UnsafeRawBufferPointer {
            record.value(columnIndex[column.rawValue])
        }
    }

    /// The line rules of docs/RULES.md in order; the first that fails is the line's defect. Identity is
    /// read before any rule, so that even a bad line shows its id and group in results.csv.
    /// Each step below reads some columns into `line` or checks them; a new rule goes in the
    /// step for its columns, or in a new step in this list.
    private func check(
        _ record: RecordView, fields: Fields, layout: FileLayout, encodingProblem: String?,
        into line: inout OrderLine
    ) -> RecordDefect? {
        let kind = readKind(fields, into: &line)
        // Rejected before its amount is read, a line still counts at its amount when that parses
        // (results.csv and its currency's sums; audit 13: kind_invalid lost it; audit 35 C9:
        // schema_invalid and encoding_invalid did). Not a malformed record: with the wrong
        // number of fields, its cells need not be the columns they stand under.
        func rejectedBeforeAmount(_ defect: RecordDefect) -> RecordDefect {
            _ = readAmount(fields, into: &line)
            return defect
        }
        if let defect = record.defect {
            return defect.code == .malformedRecord ? defect : rejectedBeforeAmount(defect)
        }
        if let refused = layout.schemaRefusedIndex, !record.value(refused).allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
            return rejectedBeforeAmount(
                RecordDefect(
                    code: .schemaInvalid,
                    message: "the XML schema refused part of this line when it was read (\(schemaRefusedColumn): "
                        + "\(text(record.value(refused)))): put it right in the line's columns and empty that cell"))
        }
        // A line rejected by any rule after this still states what it says of its charge (the
        // charge rules read it, docs/RULES.md, Group rules); its defect keeps its place below.
        let chargeDefect = readCharge(fields, into: &line)
        if let encodingProblem {
            return rejectedBeforeAmount(RecordDefect(code: .encodingInvalid, message: encodingProblem))
        }
        if let defect = checkLengths(fields) { return rejectedBeforeAmount(defect) }
        if let defect = checkRequired(fields) { return rejectedBeforeAmount(defect) }
        guard let kind else {
            return rejectedBeforeAmount(
                RecordDefect(
                    code: .kindInvalid, message: "kind '\(text(fields[.kind]))' is not transfer, payout or reversal"))
        }
        if let defect = readAmount(fields, into: &line) { return defect }
        if let defect = checkParties(fields, kind: kind) { return defect }
        if let defect = checkIDPrefixes(fields) { return defect }
        if let defect = readCountryAndDate(fields, into: &line) { return defect }
        if let chargeDefect { return chargeDefect }
        if let defect = readExtras(record, layout: layout, description: fields[.description], into: &line) {
            return defect
        }
        if let defect = checkPayout(kind: kind, line) { return defect }
        if let defect = checkCrossBorder(kind: kind, line) { return defect }
        return nil
    }

    /// The first column that is not valid UTF-8, named; reported after the record's own defect.
    @inline(__always)
    private func firstEncodingProblem(_ record: RecordView, layout: FileLayout) -> String? {
        for (index, value) in record.fields.enumerated() where !UTF8Check.isValid(value) {
            return "column \(index < layout.names.count ? layout.names[index] : String(index + 1)) is not valid UTF-8"
        }
        return nil
    }

    /// The kind into `line`; returns it, nil when `kind` is not one. An empty `kind` is a
    /// payout when the line has a payout method, else a transfer. (The ids, group and payee
    /// are interned by the ``IdentityStage``.)
    @inline(__always)
    private func readKind(_ fields: Fields, into line: inout OrderLine) -> LineKind? {
        let kindField = fields[.kind]
        let payoutMethod = fields[.payoutMethod]
        let kind: LineKind?
        if kindField.isEmpty {
            kind = payoutMethod.isEmpty ? .transfer : .payout
        } else {
            kind = LineKind(name: kindField)
        }
        line.kind = kind ?? .transfer
        return kind
    }

    @inline(__always)
    private func checkLengths(_ fields: Fields) -> RecordDefect? {
        for column in LineChecker.lengthChecked {
            let value = fields[column]
            if value.count > LineChecker.maxIDBytes {
                return RecordDefect(
                    code: .fieldTooLong,
                    message: "\(column.csvName) is \(value.count) bytes; at most \(LineChecker.maxIDBytes)")
            }
        }
        if fields[.description].count > LineChecker.maxDescriptionBytes {
            return RecordDefect(
                code: .fieldTooLong,
                message: "description is longer than \(LineChecker.maxDescriptionBytes) bytes")
        }
        return nil
    }

    @inline(__always)
    private func checkRequired(_ fields: Fields) -> RecordDefect? {
        for column in Column.required where fields[column].isEmpty {
            return RecordDefect(code: .fieldMissing, message: "\(column.csvName) is empty")
        }
        return nil
    }

    /// Currency and amount into `line`.
    @inline(__always)
    private func readAmount(_ fields: Fields, into line: inout OrderLine) -> RecordDefect? {
        guard let currency = Currency(code: fields[.currency]) else {
            return RecordDefect(
                code: .currencyUnsupported,
                message: "currency '\(text(fields[.currency]))' is not one Stripe supports")
        }
        line.currency = currency
        switch MinorUnits.parse(fields[.amount], currency: currency) {
        case .success(let minor): line.amount = minor
        case .failure(let problem):
            return RecordDefect(code: .amountInvalid, message: amountMessage(problem, fields[.amount], currency))
        }
        return nil
    }

    /// Who is paid: the columns each kind needs.
    @inline(__always)
    private func checkParties(_ fields: Fields, kind: LineKind) -> RecordDefect? {
        switch kind {
        case .transfer:
            if fields[.destination].isEmpty {
                return RecordDefect(code: .fieldMissing, message: "a transfer needs a destination")
            }
        case .payout:
            if fields[.recipient].isEmpty {
                return RecordDefect(code: .fieldMissing, message: "a payout needs a recipient")
            }
            if fields[.payoutMethod].isEmpty {
                return RecordDefect(code: .payoutMethodMissing, message: "a payout line needs a payout_method")
            }
        case .reversal:
            if fields[.destination].isEmpty, fields[.transfer].isEmpty {
                return RecordDefect(code: .fieldMissing, message: "a reversal needs a destination or a transfer")
            }
        }
        return nil
    }

    /// Ids carry their prefixes.
    @inline(__always)
    private func checkIDPrefixes(_ fields: Fields) -> RecordDefect? {
        func prefixProblem(_ column: Column, _ first: StaticString, _ second: StaticString? = nil) -> RecordDefect? {
            let value = fields[column]
            if value.isEmpty || IDFormat.matches(value, prefix: first)
                || second.map({ IDFormat.matches(value, prefix: $0) }) == true
            {
                return nil
            }
            let expected = second.map { "\(first) or \($0)" } ?? "\(first)"
            return RecordDefect(
                code: .idInvalid, message: "\(column.csvName) '\(text(value))' is not a \(expected)… id")
        }
        return prefixProblem(.destination, "acct_") ?? prefixProblem(.recipient, "acct_")
            ?? prefixProblem(.sourceTransaction, "ch_", "py_") ?? prefixProblem(.paymentIntent, "pi_")
            ?? prefixProblem(.transfer, "tr_") ?? controlProblem(fields)
    }

    /// The ids without a prefix hold no control character: a NUL would end the id in the
    /// ledger's C strings (two lines, one id), a line end would split it in a log line.
    @inline(__always)
    private func controlProblem(_ fields: Fields) -> RecordDefect? {
        for column in LineChecker.freeIDs {
            let value = fields[column]
            guard let byte = value.first(where: { $0 < 0x20 || $0 == 0x7f }) else { continue }
            return RecordDefect(
                code: .idInvalid,
                message:
                    "\(column.csvName) holds a control character (byte 0x\(String(byte, radix: 16, uppercase: true)))")
        }
        return nil
    }

    /// Destination country (two letters, kept upper-case in 16 bits) and transfer date into `line`.
    @inline(__always)
    private func readCountryAndDate(_ fields: Fields, into line: inout OrderLine) -> RecordDefect? {
        let country = fields[.destinationCountry]
        if !country.isEmpty {
            guard country.count == 2, country.allSatisfy({ ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7a }) else {
                return RecordDefect(
                    code: .idInvalid,
                    message: "destination_country '\(text(country))' is not a 2-letter ISO country code")
            }
            line.destinationCountry = UInt16(country[0] & 0xdf) << 8 | UInt16(country[1] & 0xdf)
        }
        let transferOn = fields[.transferOn]
        if !transferOn.isEmpty {
            guard let day = CivilDate.parse(transferOn) else {
                return RecordDefect(
                    code: .dateInvalid, message: "transfer_on '\(text(transferOn))' is not a date YYYY-MM-DD")
            }
            line.transferOn = day
        }
        return nil
    }

    /// The charge columns into `line`, each that is valid (the first defect is returned): the
    /// facts a line states of its charge count even when one of them is wrong. `charge_amount`
    /// and `charge_fee` are read as numbers (thousandths, compared as numbers); with
    /// `charge_currency` they must be amounts in it; without, they are checked in the charge's
    /// currency once the planner knows it (it may be another line's, docs/RULES.md, Group
    /// rules); with an unsupported `charge_currency` they are not read (their unit is unknown).
    @inline(__always)
    private func readCharge(_ fields: Fields, into line: inout OrderLine) -> RecordDefect? {
        var defect: RecordDefect? = nil
        let chargeCurrencyField = fields[.chargeCurrency]
        var amountsReadable = true
        if !chargeCurrencyField.isEmpty {
            if let chargeCurrency = Currency(code: chargeCurrencyField) {
                line.chargeCurrency = chargeCurrency
                line.chargeCurrencyGiven = true
            } else {
                amountsReadable = false
                defect = RecordDefect(
                    code: .chargeInvalid,
                    message: "charge_currency '\(text(chargeCurrencyField))' is not a supported currency")
            }
        }
        func readDecimal(_ column: Column, allowZero: Bool) -> Int64 {
            let field = fields[column]
            guard !field.isEmpty, amountsReadable else { return -1 }
            guard case .success(let thousandths) = MinorUnits.parseThousandths(field, allowZero: allowZero) else {
                if defect == nil {
                    defect = RecordDefect(
                        code: .chargeInvalid,
                        message: "\(column.csvName) '\(text(field))' is not an amount in any currency")
                }
                return -1
            }
            // The same rules as the line's own amount, in the currency the line says the charge
            // is in; a number that is not an amount in it is still a number another line's
            // may disagree with.
            if line.chargeCurrencyGiven, defect == nil,
                case .failure = MinorUnits.minor(
                    thousandths: thousandths, currency: line.chargeCurrency, allowZero: allowZero)
            {
                defect = RecordDefect(
                    code: .chargeInvalid,
                    message:
                        "\(column.csvName) '\(text(field))' is not an amount in \(line.chargeCurrency.code.uppercased())"
                )
            }
            return thousandths
        }
        line.chargeAmount = readDecimal(.chargeAmount, allowZero: false)
        line.chargeFee = readDecimal(.chargeFee, allowZero: true)
        let status = fields[.chargeStatus]
        if !status.isEmpty {
            if ByteCompare.equals(status, "succeeded") {
                line.chargeStatus = .succeeded
            } else if ByteCompare.equals(status, "pending") {
                line.chargeStatus = .pending
            } else if ByteCompare.equals(status, "failed") {
                line.chargeStatus = .failed
            } else if defect == nil {
                defect = RecordDefect(
                    code: .chargeInvalid,
                    message: "charge_status '\(text(status))' is not succeeded, pending or failed")
            }
        }
        return defect
    }

    /// Description and metadata, kept aside in the batch (most lines have neither).
    @inline(__always)
    private func readExtras(
        _ record: RecordView, layout: FileLayout, description: UnsafeRawBufferPointer, into line: inout OrderLine
    ) -> RecordDefect? {
        guard !layout.metadataColumns.isEmpty || !description.isEmpty,
            let extras = extras(record, layout: layout, description: description)
        else { return nil }
        switch extras {
        case .success(let value):
            line.extras = Int32(storage.extras.count)
            storage.extras.append(value)
            return nil
        case .failure(let defect):
            return defect
        }
    }

    /// Payouts: USD to US recipients.
    @inline(__always)
    private func checkPayout(kind: LineKind, _ line: OrderLine) -> RecordDefect? {
        guard kind == .payout else { return nil }
        if line.currency != .usd {
            return RecordDefect(
                code: .payoutCurrencyUnsupported,
                message: "Apple Pay payouts are in USD only, not \(line.currency.code.uppercased())")
        }
        if line.destinationCountry != 0, CrossBorder.code(line.destinationCountry) != "US" {
            return RecordDefect(
                code: .payoutCountryUnsupported,
                message: "Apple Pay payouts go to US recipients only, not \(CrossBorder.code(line.destinationCountry))")
        }
        return nil
    }

    /// Cross-border transfers: only where Stripe allows them from the platform's country.
    @inline(__always)
    private func checkCrossBorder(kind: LineKind, _ line: OrderLine) -> RecordDefect? {
        guard kind == .transfer, line.destinationCountry != 0 else { return nil }
        let destination = CrossBorder.code(line.destinationCountry)
        if !CrossBorder.allowed(platform: platformCountry, destination: destination) {
            return RecordDefect(
                code: .crossBorderUnsupported,
                message: "a transfer from a \(platformCountry) platform to an account in \(destination) is not allowed")
        }
        return nil
    }

    private func extras(_ record: RecordView, layout: FileLayout, description: UnsafeRawBufferPointer)
        -> Result<LineExtras, RecordDefect>?
    {
        var extras = LineExtras()
        if !description.isEmpty { extras.description = text(description) }
        for (index, key) in layout.metadataColumns {
            let value = record.value(index)
            if value.isEmpty { continue }
            if key.utf8.count > LineChecker.maxMetadataKeyBytes || value.count > LineChecker.maxMetadataValueBytes {
                return .failure(
                    RecordDefect(
                        code: .fieldTooLong,
                        message: "metadata.\(key): keys are at most 40 bytes and values at most 500"))
            }
            extras.metadata.append((key: key, value: text(value)))
        }
        if extras.description == nil, extras.metadata.isEmpty { return nil }
        return .success(extras)
    }

    private func text(_ bytes: UnsafeRawBufferPointer) -> String { String(decoding: bytes, as: UTF8.self) }

    private func amountMessage(_ problem: MinorUnits.ParseError, _ value: UnsafeRawBufferPointer, _ currency: Currency)
        -> String
    {
        let shown = "'\(text(value))'"
        switch problem {
        case .notADecimal:
            return
                "amount \(shown) is not a plain decimal (digits and one '.', no sign, spaces, separators or exponent)"
        case .tooPrecise:
            return currency.exponent == .three
                ? "amount \(shown) is not exact in \(currency.code.uppercased()) (three decimals ending in 0)"
                : "amount \(shown) has more decimals than \(currency.code.uppercased()) allows"
        case .notPositive: return "amount \(shown) is not greater than zero"
        case .tooLarge: return "amount \(shown) has more than 12 digits in minor units"
        }
    }
}

/// Fast UTF-8 validation with an ASCII fast path.
public enum UTF8Check {
    @inline(__always)
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        isASCII(bytes) || validateSlow(bytes)
    }

    /// Whether no byte has its high bit set, read eight bytes at a time (ids are ASCII).
    @inline(__always)
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var seen: UInt64 = 0
        var offset = 0
        while offset + 8 <= count {
            seen |= base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < count {
            seen |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self))
            offset += 1
        }
        return seen & 0x8080_8080_8080_8080 == 0
    }

    static func validateSlow(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}

/// Stripe ids: a known prefix, then letters, digits or underscores.
public enum IDFormat {
    /// A known prefix, then at least one letter, digit or underscore.
    @inline(__always)
    public static func matches(_ value: UnsafeRawBufferPointer, prefix: StaticString) -> Bool {
        guard value.count > prefix.utf8CodeUnitCount, ByteCompare.hasPrefix(value, prefix) else { return false }
        for byte in value[prefix.utf8CodeUnitCount...] {
            let lower = byte | 0x20
            guard (lower >= 0x61 && lower <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5f else {
                return false
            }
        }
        return true
    }
}
