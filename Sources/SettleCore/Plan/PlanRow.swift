import SettleDigest

/// One ``Instruction`` as the plan's table holds it: symbols of the batch and the id's digest
/// as integers, so millions of them hold no heap string. The instructions writer serialises a
/// row to its `instructions.jsonl` line straight from these fields, and
/// `SettlementPlan.instruction(at:)` materialises the ``Instruction`` value from it.
public struct PlanRow: Sendable {
    public typealias Kind = Instruction.Kind

    // Fields are declared widest first so the row packs into 56 bytes (a plan of the 1 GB
    // export holds 4 M of them): the line range and the attempt are stored in 32 bits.

    /// The deterministic id's 96 bits (see ``InstructionID``), kept as integers so that
    /// millions of instructions hold no heap string.
    public var digestHigh: UInt64 = 0
    public var amount: Int64 = 0
    public var digestLow: UInt32 = 0
    /// The group; ``Symbol/none`` for a payout aggregated across orders.
    public var group: Symbol
    /// Destination (transfer, reversal) or recipient (payout).
    public var payee: Symbol
    public var charge: Symbol = .none
    /// For a reversal: the transfer it reverses.
    public var target: Symbol = .none
    // (For a payout whose charge is looked up first, ``needsChargeLookup``: that charge,
    // ``lookUpCharge``. A payout names no charge of its own: its id hashes none.)
    public var payoutMethod: Symbol = .none
    private var storedLinesStart: Int32 = 0
    private var storedLinesCount: Int32 = 0
    private var storedAttempt: Int32 = 1
    public var currency: Currency
    public var kind: Kind
    /// The charge must be looked up before sending (the export gave no `charge_amount` for it).
    public var needsChargeLookup = false

    /// The charge to look up before sending (``needsChargeLookup``): a transfer's own, or the
    /// one a payout's line names (kept in ``target``); nil when none.
    public var lookUpCharge: Symbol? {
        guard needsChargeLookup else { return nil }
        return kind == .payout ? target : charge
    }

    /// The lines it settles: a range of ``SettlementPlan/instructionLines`` (line indices are
    /// 32-bit everywhere in the plan, so the range is too).
    public var linesStart: Int {
        get { Int(storedLinesStart) }
        set { storedLinesStart = PlanRow.narrow(newValue, "line range start") }
    }
    public var linesCount: Int {
        get { Int(storedLinesCount) }
        set { storedLinesCount = PlanRow.narrow(newValue, "line count") }
    }
    /// The attempt number of the next send (earlier failed attempts + 1).
    public var attempt: Int {
        get { Int(storedAttempt) }
        set { storedAttempt = PlanRow.narrow(newValue, "attempt") }
    }

    /// A value of a 32-bit field; one that does not fit stops the run (never a wrapped number).
    static func narrow(_ value: Int, _ what: StaticString) -> Int32 {
        guard let narrow = Int32(exactly: value) else {
            preconditionFailure("an instruction's \(what) \(value) does not fit in 32 bits")
        }
        return narrow
    }

    public init(kind: Kind, group: Symbol, payee: Symbol, currency: Currency) {
        self.kind = kind
        self.group = group
        self.payee = payee
        self.currency = currency
    }

    /// The deterministic id: `ins_` + 24 hex digits.
    public var id: String {
        var bytes: [UInt8] = []
        appendID(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the id to a byte buffer (the writers' hot path).
    @inline(__always)
    public func appendID(to out: inout [UInt8]) {
        // Formatted in place, then one append (not one per byte).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: PlanRow.idCount) { text in
            out.append(contentsOf: UnsafeBufferPointer(rebasing: text[..<writeID(to: text.baseAddress!)]))
        }
    }

    /// The bytes of the id: `ins_` and 24 hex digits.
    public static let idCount = 28

    /// Writes the id at `at` (room for ``idCount`` bytes); returns how many bytes it wrote.
    @inline(__always)
    public func writeID(to at: UnsafeMutablePointer<UInt8>) -> Int {
        at[0] = UInt8(ascii: "i")
        at[1] = UInt8(ascii: "n")
        at[2] = UInt8(ascii: "s")
        at[3] = UInt8(ascii: "_")
        for digit in 0..<16 { at[4 + digit] = PlanRow.hexDigit(digestHigh >> UInt64(60 - 4 * digit)) }
        for digit in 0..<8 { at[20 + digit] = PlanRow.hexDigit(UInt64(digestLow) >> UInt64(28 - 4 * digit)) }
        return PlanRow.idCount
    }

    /// The most bytes of an idempotency key: `settle-`, the id, `-a` and a 32-bit attempt.
    public static let idempotencyKeyCapacity = 7 + idCount + 2 + 11

    /// Writes ``idempotencyKey`` at `at` (room for ``idempotencyKeyCapacity`` bytes) without
    /// making a string; returns how many bytes it wrote.
    @inline(__always)
    public func writeIdempotencyKey(to at: UnsafeMutablePointer<UInt8>) -> Int {
        var count = IdempotencyKey.writePrefix(to: at)
        count += writeID(to: at + count)
        count += IdempotencyKey.writeAttempt(attempt, to: at + count)
        return count
    }

    @inline(__always)
    static func hexDigit(_ value: UInt64) -> UInt8 {
        let nibble = UInt8(value & 0xf)
        return nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// `settle-<id>-a<attempt>`: the root is the instruction id, so a retry of the same attempt
    /// can never create a second object, and a deliberate re-send after a refusal gets a new key.
    public var idempotencyKey: String { IdempotencyKey.make(instruction: id, attempt: attempt) }
}

/// The deterministic id of an instruction.
public enum InstructionID {
    /// The id from an instruction's facts as text, as `apply` re-derives it from
    /// `instructions.jsonl` (so an edited amount, payee or line list cannot be sent under an
    /// old id). The same bytes as ``make(_:lines:batch:hasher:scratch:)`` hashes.
    public static func make(
        kind: String, group: String, payee: String, chargeOrTarget: String, currency: String, amountMinor: Int64,
        lineIDs: [String]
    ) -> String {
        var scratch: [UInt8] = []
        for field in [kind, group, payee, chargeOrTarget, currency] {
            scratch.append(contentsOf: field.utf8)
            scratch.append(0x0A)
        }
        MinorUnits.appendDecimal(amountMinor, to: &scratch)
        scratch.append(0x0A)
        for id in lineIDs.map({ Array($0.utf8) }).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            scratch.append(contentsOf: id)
            scratch.append(0x0A)
        }
        let hasher = SHA256()
        scratch.withUnsafeBytes { hasher.update($0) }
        let digest = hasher.digest()
        var instruction = PlanRow(kind: .transfer, group: .none, payee: .none, currency: Currency.usd)
        for index in 0..<8 { instruction.digestHigh = instruction.digestHigh << 8 | UInt64(digest[index]) }
        for index in 8..<12 { instruction.digestLow = instruction.digestLow << 8 | UInt32(digest[index]) }
        return instruction.id
    }

    /// `ins_` + 24 hex digits of SHA-256 over kind, group, payee, charge (the target transfer
    /// for a reversal), currency, amount and the sorted line ids, one per line.
    static func make(
        _ instruction: PlanRow, lines: ArraySlice<Int32>, batch: Batch, hasher: SHA256,
        scratch: inout [UInt8], ids: inout [Symbol]
    ) -> (UInt64, UInt32) {
        scratch.removeAll(keepingCapacity: true)
        let newline: UInt8 = 0x0A
        scratch.append(contentsOf: instruction.kind.name.utf8)
        scratch.append(newline)
        batch.symbols.withBytes(instruction.group) { scratch.append(contentsOf: $0) }
        scratch.append(newline)
        batch.symbols.withBytes(instruction.payee) { scratch.append(contentsOf: $0) }
        scratch.append(newline)
        if instruction.kind == .reversal {
            batch.symbols.withBytes(instruction.target) { scratch.append(contentsOf: $0) }
        } else {
            batch.symbols.withBytes(instruction.charge) { scratch.append(contentsOf: $0) }
        }
        scratch.append(newline)
        scratch.append(contentsOf: instruction.currency.code.utf8)
        scratch.append(newline)
        MinorUnits.appendDecimal(instruction.amount, to: &scratch)
        scratch.append(newline)
        ids.removeAll(keepingCapacity: true)
        for line in lines { ids.append(batch.lines[Int(line)].lineID) }
        if ids.count > 1 {
            ids.sort { left, right in
                batch.symbols.withBytes(left) { a in
                    batch.symbols.withBytes(right) { b in a.lexicographicallyPrecedes(b) }
                }
            }
        }
        for id in ids {
            batch.symbols.withBytes(id) { scratch.append(contentsOf: $0) }
            scratch.append(newline)
        }
        hasher.reset()
        scratch.withUnsafeBytes { hasher.update($0) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest in
            hasher.finish(into: digest.baseAddress!)
            var high: UInt64 = 0
            for index in 0..<8 { high = high << 8 | UInt64(digest[index]) }
            var low: UInt32 = 0
            for index in 8..<12 { low = low << 8 | UInt32(digest[index]) }
            return (high, low)
        }
    }
}

/// A 64-bit FNV-1a digest of what a line settles, so the ledger can tell the same line
/// (already settled) from a line reusing an id with other content (a conflict).
public enum LineContent {
    /// The digest as 16 hex digits.
    public static func digest(_ batch: Batch, _ line: OrderLine) -> String {
        String(unsafeUninitializedCapacity: hexCount) { buffer in writeHex(hash(batch, line), to: buffer.baseAddress!) }
    }

    /// The bytes of ``digest(_:_:)``.
    public static let hexCount = 16

    /// Writes ``digest(_:_:)`` at `at` (room for ``hexCount`` bytes) without making a
    /// string; returns how many bytes it wrote.
    @inline(__always)
    public static func writeDigest(_ batch: Batch, _ line: OrderLine, to at: UnsafeMutablePointer<UInt8>) -> Int {
        writeHex(hash(batch, line), to: at)
    }

    @inline(__always)
    static func writeHex(_ hash: UInt64, to at: UnsafeMutablePointer<UInt8>) -> Int {
        for index in 0..<hexCount { at[index] = PlanRow.hexDigit(hash >> UInt64(60 - 4 * index)) }
        return hexCount
    }

    static func hash(_ batch: Batch, _ line: OrderLine) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        @inline(__always) func byte(_ value: UInt8) { hash = (hash ^ UInt64(value)) &* 0x100_0000_01b3 }
        @inline(__always) func end() { byte(0x1f) }
        @inline(__always) func symbol(_ symbol: Symbol) {
            batch.symbols.withBytes(symbol) { for value in $0 { byte(value) } }
            end()
        }
        for value in line.kind.name.utf8 { byte(value) }
        end()
        symbol(line.orderID)
        symbol(line.group)
        symbol(line.payee)
        symbol(line.payoutMethod)
        symbol(line.charge)
        symbol(line.transfer)
        for value in line.currency.code.utf8 { byte(value) }
        end()
        // The amount's decimal digits, most significant first.
        var amount = line.amount
        var divisor: Int64 = 1
        while divisor <= amount / 10 { divisor *= 10 }
        repeat {
            byte(UInt8(ascii: "0") + UInt8(amount / divisor))
            amount %= divisor
            divisor /= 10
        } while divisor > 0
        end()
        return hash
    }
}
