import Dispatch
import Glibc
import Synchronization

/// The second half of reading a line, on the second core: its ids interned and its line_id
/// checked against the batch's earlier lines.
///
/// The reader's thread parses a record and applies every line rule (none of them needs a
/// symbol); it copies the record's id columns into an ``IdentityChunk`` and hands full
/// chunks on. This stage interns them in the order they came (so every symbol gets the same
/// number it would get on one thread), appends the lines to the batch and remembers which
/// are later copies of a line_id. Interning is the largest share of reading (a random read
/// in a table of hundreds of megabytes per id), so the two halves take about as long.
///
/// Ownership while reading: this stage alone touches the batch's `lines` and `symbols`; the
/// reader's thread alone its `files`, `extras` and `messages`. ``LineChecker`` waits for the
/// stage (``finish()``) before anything else reads the lines.
final class IdentityStage: @unchecked Sendable {
    private let batch: Batch
    private let queue = DispatchQueue(label: "settle.identities")
    /// Chunks handed on and not yet interned, at most ``inFlight``: the reader waits when
    /// the stage falls behind, so memory stays bounded.
    private let room = DispatchSemaphore(value: IdentityStage.inFlight)
    static let inFlight = 4
    /// Chunks interned and emptied, for the reader to fill again: a new chunk's pages would
    /// each be faulted in and zeroed (about 1 MB a chunk, 1,650 chunks at full size).
    private let spares = Mutex<[IdentityChunk]>([])

    /// For each line_id symbol, 1 + the index of its first line (0: not seen).
    private(set) var firstLine: [Int32] = []
    /// Later copies of a line_id: (the copy's index, its first line's index), in line order.
    /// Read (and emptied) by the reader's thread once the stage is idle.
    var duplicates: [(copy: Int, first: Int)] = []
    private var recent = Recent()
    private var keyScratch: [UInt8] = []

    init(batch: Batch) { self.batch = batch }

    /// Interns the chunk's lines after the ones handed on before; returns at once unless
    /// ``inFlight`` chunks are still waiting.
    func submit(_ chunk: IdentityChunk) {
        room.wait()
        queue.async { [self] in
            intern(chunk)
            chunk.removeAll()
            spares.withLock { $0.append(chunk) }
            room.signal()
        }
    }

    /// An empty chunk to fill: one the stage is done with, else a new one.
    func emptyChunk() -> IdentityChunk {
        spares.withLock { $0.popLast() } ?? IdentityChunk()
    }

    /// Waits until every chunk handed on is interned; after it, the stage's state and the
    /// batch's lines may be read on the calling thread.
    func finish() { queue.sync {} }

    /// Forgets the first lines at or after `cut` (a file rejected whole). Only once idle.
    func forget(from cut: Int) {
        for index in cut..<batch.lines.count {
            let id = Int(batch.lines[index].lineID.raw)
            if id > 0, id < firstLine.count, Int(firstLine[id]) - 1 >= cut { firstLine[id] = 0 }
        }
        duplicates.removeAll { $0.copy >= cut }
    }

    /// The index of the first copy of a line_id read so far, nil when none. Only once idle.
    func firstLine(of id: Symbol) -> Int? {
        let raw = Int(id.raw)
        guard raw > 0, raw < firstLine.count, firstLine[raw] != 0 else { return nil }
        return Int(firstLine[raw]) - 1
    }

    /// Whoever comes after the line at `index` with its line_id is the first copy. Only once idle.
    func yieldFirstCopy(ofLine index: Int) {
        let id = Int(batch.lines[index].lineID.raw)
        if id > 0, id < firstLine.count, Int(firstLine[id]) - 1 == index { firstLine[id] = 0 }
    }

    /// Lets go of what only reading needs. Only once idle.
    func release() {
        firstLine = []
        keyScratch = []
        recent = Recent()
        duplicates = []
    }

    private func intern(_ chunk: IdentityChunk) {
        chunk.bytes.withUnsafeBytes { bytes in
            chunk.ends.withUnsafeBufferPointer { ends in
                for position in chunk.lines.indices {
                    var line = chunk.lines[position]
                    let fields = IdentityChunk.Fields(
                        bytes: bytes, ends: ends, first: position * IdentityChunk.Field.count)
                    internIdentity(fields, utf8: chunk.utf8[position], into: &line)
                    add(line)
                }
            }
        }
    }

    /// Appends a line; a later copy of a line_id is noted (the first copy counts).
    private func add(_ line: OrderLine) {
        let index = batch.lines.count
        let id = Int(line.lineID.raw)
        if id > 0 {
            if id >= firstLine.count {
                HugePages.append(0, count: max(id + 1 - firstLine.count, firstLine.count), to: &firstLine)
            }
            if firstLine[id] != 0 {
                duplicates.append((index, Int(firstLine[id]) - 1))
            } else {
                firstLine[id] = Int32(index + 1)
            }
        }
        let grows = batch.lines.count == batch.lines.capacity
        batch.lines.append(line)
        // Storage the table grew into gets the huge-page advice too.
        if grows { HugePages.advise(&batch.lines) }
    }

    /// Ids, group and payee into `line` (its kind is already set).
    @inline(__always)
    private func internIdentity(_ fields: IdentityChunk.Fields, utf8: Bool, into line: inout OrderLine) {
        // The ids most likely new or far apart in the table: their slots load together.
        let symbols = batch.symbols
        symbols.prefetch(fields[.lineID])
        symbols.prefetch(fields[.destination])
        symbols.prefetch(fields[.recipient])
        prefetch(fields[.orderID], unless: recent.orderID)
        prefetch(fields[.sourceTransaction], unless: recent.charge)
        prefetch(fields[.paymentIntent], unless: recent.paymentIntent)
        line.lineID = intern(fields[.lineID], utf8: utf8)
        line.orderID = intern(fields[.orderID], utf8: utf8, recent: &recent.orderID)
        line.group = groupKey(
            transferGroup: fields[.transferGroup], paymentIntent: fields[.paymentIntent],
            orderID: fields[.orderID], utf8: utf8)
        line.payee = intern(line.kind == .payout ? fields[.recipient] : fields[.destination], utf8: utf8)
        line.payoutMethod = intern(fields[.payoutMethod], utf8: utf8)
        line.charge = intern(fields[.sourceTransaction], utf8: utf8, recent: &recent.charge)
        line.transfer = intern(fields[.transfer], utf8: utf8)
        line.paymentMethodType = intern(fields[.paymentMethodType], utf8: utf8)
        line.paymentIntent = intern(fields[.paymentIntent], utf8: utf8, recent: &recent.paymentIntent)
    }

    private func groupKey(
        transferGroup: UnsafeRawBufferPointer, paymentIntent: UnsafeRawBufferPointer,
        orderID: UnsafeRawBufferPointer, utf8: Bool
    ) -> Symbol {
        if !transferGroup.isEmpty { return intern(transferGroup, utf8: utf8, recent: &recent.group) }
        if !paymentIntent.isEmpty { return prefixed("group_", paymentIntent, utf8: utf8) }
        if !orderID.isEmpty { return prefixed("order:", orderID, utf8: utf8) }
        return .none
    }

    /// The group key `prefix` + `value`; invalid UTF-8 in `value` reads as U+FFFD, as the
    /// id itself does (``intern(_:utf8:)``), so results.csv stays UTF-8 (audit 35 C6).
    private func prefixed(_ prefix: StaticString, _ value: UnsafeRawBufferPointer, utf8: Bool) -> Symbol {
        keyScratch.removeAll(keepingCapacity: true)
        keyScratch.append(contentsOf: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
        if utf8 || UTF8Check.isValid(value) {
            keyScratch.append(contentsOf: value)
        } else {
            keyScratch.append(contentsOf: String(decoding: value, as: UTF8.self).utf8)
        }
        return keyScratch.withUnsafeBytes { key in
            if recent.group.isNone || !equal(batch.symbols.bytes(recent.group), key) {
                recent.group = batch.symbols.intern(key)
            }
            return recent.group
        }
    }

    /// The symbols the previous lines got for the columns an order's lines share: an export
    /// written order by order repeats them line after line, and comparing with the last one
    /// costs less than a look-up in a table of millions. Symbols are the same either way (the
    /// table maps equal bytes to one symbol), so only the look-up is saved.
    private struct Recent {
        var orderID = Symbol.none
        var group = Symbol.none
        var charge = Symbol.none
        var paymentIntent = Symbol.none
    }

    @inline(__always)
    private func prefetch(_ bytes: UnsafeRawBufferPointer, unless recent: Symbol) {
        if recent.isNone || !equal(batch.symbols.bytes(recent), bytes) { batch.symbols.prefetch(bytes) }
    }

    @inline(__always)
    private func intern(_ bytes: UnsafeRawBufferPointer, utf8: Bool, recent: inout Symbol) -> Symbol {
        if !recent.isNone, equal(batch.symbols.bytes(recent), bytes) { return recent }
        recent = intern(bytes, utf8: utf8)
        return recent
    }

    @inline(__always)
    private func equal(_ known: UnsafeRawBufferPointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        known.count == bytes.count
            && (bytes.isEmpty || memcmp(known.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
    }

    /// `utf8`: every field of the line is valid UTF-8 (then its ids need no second look).
    @inline(__always)
    private func intern(_ bytes: UnsafeRawBufferPointer, utf8: Bool) -> Symbol {
        if utf8 || UTF8Check.isValid(bytes) { return batch.symbols.intern(bytes) }
        // Keep invalid text readable in results.csv (U+FFFD); the line is rejected anyway.
        return batch.symbols.intern(String(decoding: bytes, as: UTF8.self))
    }
}

/// Lines checked on the reader's thread, with the bytes of their id columns, on their way to
/// the ``IdentityStage``. A class, handed over whole: the reader fills it, the stage interns
/// and empties it, and the reader fills it again; one thread at a time owns it.
final class IdentityChunk: @unchecked Sendable {
    /// The id columns a line's symbols come from.
    enum Field: Int, CaseIterable {
        case lineID, orderID, transferGroup, paymentIntent, destination, recipient, payoutMethod,
            sourceTransaction, transfer, paymentMethodType

        static let count = allCases.count

        var column: Column {
            switch self {
            case .lineID: .lineID
            case .orderID: .orderID
            case .transferGroup: .transferGroup
            case .paymentIntent: .paymentIntent
            case .destination: .destination
            case .recipient: .recipient
            case .payoutMethod: .payoutMethod
            case .sourceTransaction: .sourceTransaction
            case .transfer: .transfer
            case .paymentMethodType: .paymentMethodType
            }
        }
    }

    /// Lines a chunk holds before it is handed on.
    static let capacity = 4096

    var lines: [OrderLine] = []
    /// Whether each line's fields are all valid UTF-8.
    var utf8: [Bool] = []
    /// The id columns' bytes, line after line, field after field.
    var bytes: [UInt8] = []
    /// The end of each field in `bytes` (``Field/count`` a line); a field starts where the one
    /// before it ends.
    var ends: [UInt32] = []

    init() {
        lines.reserveCapacity(IdentityChunk.capacity)
        utf8.reserveCapacity(IdentityChunk.capacity)
        ends.reserveCapacity(IdentityChunk.capacity * Field.count)
        bytes.reserveCapacity(IdentityChunk.capacity * 128)
    }

    var count: Int { lines.count }

    func removeAll() {
        lines.removeAll(keepingCapacity: true)
        utf8.removeAll(keepingCapacity: true)
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
    }

    /// Adds a line and the bytes of its id columns (`value(column)`).
    @inline(__always)
    func add(_ line: OrderLine, utf8 valid: Bool, value: (Column) -> UnsafeRawBufferPointer) {
        for field in Field.allCases {
            bytes.append(contentsOf: value(field.column))
            ends.append(UInt32(truncatingIfNeeded: bytes.count))
        }
        lines.append(line)
        utf8.append(valid)
    }

    /// One line's id columns in a chunk's bytes.
    struct Fields {
        let bytes: UnsafeRawBufferPointer
        let ends: UnsafeBufferPointer<UInt32>
        let first: Int

        @inline(__always) subscript(_ field: Field) -> UnsafeRawBufferPointer {
            let slot = first + field.rawValue
            let start = slot == 0 ? 0 : Int(ends[slot - 1])
            return UnsafeRawBufferPointer(rebasing: bytes[start..<Int(ends[slot])])
        }
    }
}
