extension JSON {
    /// Appends JSON tokens straight to bytes, with commas where they belong: for files with
    /// millions of objects (instructions.jsonl), where building a ``JSON`` value per object
    /// would cost an allocation per member. Strings go through the one escaper,
    /// ``JSON/escape(_:to:)``.
    ///
    /// The bytes live in memory the writer owns (grown by doubling; the writer is not
    /// copyable, so no copy can share them): a token costs one room check and plain stores,
    /// where `Array.append` costs a uniqueness and capacity check per call (about 100
    /// instructions a call, 3 to 4 calls a token).
    public struct Writer: ~Copyable {
        private var base: UnsafeMutablePointer<UInt8>
        private var length = 0
        private var capacity: Int
        private var needsComma = false

        public init(out: [UInt8] = []) {
            capacity = Swift.max(out.count, 1024)
            base = .allocate(capacity: capacity)
            out.withUnsafeBufferPointer { bytes in
                if let start = bytes.baseAddress { base.update(from: start, count: bytes.count) }
            }
            length = out.count
        }

        deinit { base.deallocate() }

        /// The bytes written so far, as an array (a copy).
        public var out: [UInt8] { withBytes { Array($0) } }

        /// The bytes written so far, without copying them.
        public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            try body(UnsafeRawBufferPointer(start: base, count: length))
        }

        /// Forgets the bytes (keeping the storage) to write the next document.
        public mutating func removeAll() {
            length = 0
            needsComma = false
        }

        /// Where the next `needed` bytes go, with room for them.
        @inline(__always)
        private mutating func room(_ needed: Int) -> UnsafeMutablePointer<UInt8> {
            if length + needed > capacity { grow(toFit: length + needed) }
            return base + length
        }

        private mutating func grow(toFit needed: Int) {
            var capacity = self.capacity
            while capacity < needed { capacity *= 2 }
            let fresh = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            fresh.update(from: base, count: length)
            base.deallocate()
            base = fresh
            self.capacity = capacity
        }

        /// The comma if a value came before at this level, at `at`; how many bytes it took.
        @inline(__always)
        private mutating func comma(_ at: UnsafeMutablePointer<UInt8>) -> Int {
            defer { needsComma = true }
            guard needsComma else { return 0 }
            at.pointee = UInt8(ascii: ",")
            return 1
        }

        @inline(__always)
        private static func copy(_ text: StaticString, to at: UnsafeMutablePointer<UInt8>) -> Int {
            at.update(from: text.utf8Start, count: text.utf8CodeUnitCount)
            return text.utf8CodeUnitCount
        }

        /// A comma if a value came before at this level.
        public mutating func separator() {
            let at = room(1)
            length += comma(at)
        }

        @inline(__always)
        private mutating func punctuation(_ byte: UInt8, opening: Bool) {
            let at = room(2)
            var count = opening ? comma(at) : 0
            at[count] = byte
            count += 1
            length += count
            needsComma = !opening
        }

        public mutating func open() { punctuation(UInt8(ascii: "{"), opening: true) }
        public mutating func close() { punctuation(UInt8(ascii: "}"), opening: false) }
        public mutating func openArray() { punctuation(UInt8(ascii: "["), opening: true) }
        public mutating func closeArray() { punctuation(UInt8(ascii: "]"), opening: false) }

        /// The comma if one is due and a literal in quotes, with room for `extra` bytes after
        /// it; returns where they go.
        @inline(__always)
        private mutating func quoted(_ text: StaticString, extra: Int) -> UnsafeMutablePointer<UInt8> {
            let at = room(text.utf8CodeUnitCount + 3 + extra)
            var count = comma(at)
            at[count] = UInt8(ascii: "\"")
            count += 1
            count += Writer.copy(text, to: at + count)
            at[count] = UInt8(ascii: "\"")
            length += count + 1
            return base + length
        }

        /// A key settle names (no escaping needed).
        public mutating func key(_ name: StaticString) {
            quoted(name, extra: 1).pointee = UInt8(ascii: ":")
            length += 1
            needsComma = false
        }

        /// A key from the input (metadata), escaped. (A separate label, so that a literal
        /// key takes the unescaped ``key(_:)`` and not this one.)
        public mutating func key(escaping name: String) {
            var name = name
            name.withUTF8 { key("", escaping: UnsafeRawBufferPointer($0), "") }
        }

        /// A key of the input's bytes between two parts settle names (`metadata[` … `]`):
        /// the same bytes as ``key(escaping:)`` of the three joined, as the parts need no
        /// escaping.
        public mutating func key(_ prefix: StaticString, escaping name: UnsafeRawBufferPointer, _ suffix: StaticString)
        {
            quoted(prefix, name, suffix)
            let at = room(1)
            at.pointee = UInt8(ascii: ":")
            length += 1
            needsComma = false
        }

        /// A string settle names (no escaping needed).
        public mutating func string(_ value: StaticString) { _ = quoted(value, extra: 0) }

        public mutating func string(_ value: String) {
            var value = value
            value.withUTF8 { string(bytes: UnsafeRawBufferPointer($0)) }
        }

        /// UTF-8 bytes as a string, escaped.
        public mutating func string(bytes: UnsafeRawBufferPointer) { quoted("", bytes, "") }

        /// The input's bytes between two parts settle names, as one string (a reversal's
        /// path `/v1/transfers/<id>/reversals`): the same bytes as ``string(bytes:)`` of the
        /// three joined, as the parts need no escaping.
        public mutating func string(
            _ prefix: StaticString, escaping value: UnsafeRawBufferPointer, _ suffix: StaticString
        ) {
            quoted(prefix, value, suffix)
        }

        @inline(__always)
        private mutating func quoted(_ prefix: StaticString, _ value: UnsafeRawBufferPointer, _ suffix: StaticString) {
            let at = room(prefix.utf8CodeUnitCount + JSON.escapedCapacity(value.count) + suffix.utf8CodeUnitCount + 3)
            var count = comma(at)
            at[count] = UInt8(ascii: "\"")
            count += 1
            count += Writer.copy(prefix, to: at + count)
            count += JSON.escape(value, to: at + count)
            count += Writer.copy(suffix, to: at + count)
            at[count] = UInt8(ascii: "\"")
            length += count + 1
        }

        /// A string of at most `maxCount` bytes that settle makes and that need no escaping
        /// (an id, a hex digest): `fill` writes them at the pointer and returns how many.
        public mutating func string(maxCount: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Int) {
            let at = room(maxCount + 3)
            var count = comma(at)
            at[count] = UInt8(ascii: "\"")
            count += 1
            let written = fill(at + count)
            precondition(written >= 0 && written <= maxCount, "a JSON string outgrew the room it asked for")
            count += written
            at[count] = UInt8(ascii: "\"")
            length += count + 1
        }

        /// An integer as a string (`"9346"`, Stripe's form-encoded amount).
        public mutating func string(integer value: Int64) {
            string(maxCount: JSON.integerCapacity) { JSON.writeInteger(value, to: $0) }
        }

        /// A newline after a document (a JSON Lines row); what follows starts a new one.
        public mutating func newline() {
            let at = room(1)
            at.pointee = 0x0A
            length += 1
            needsComma = false
        }

        public mutating func null() {
            let at = room(5)
            let count = comma(at)
            length += count + Writer.copy("null", to: at + count)
        }

        public mutating func int(_ value: Int64) {
            let at = room(JSON.integerCapacity + 1)
            let count = comma(at)
            length += count + JSON.writeInteger(value, to: at + count)
        }
    }

    /// The most bytes an integer takes in decimal (`-9223372036854775808`).
    static let integerCapacity = 20

    /// Writes an integer in decimal at `at` (room for ``integerCapacity`` bytes); returns
    /// how many bytes it wrote. The same digits as ``appendInteger(_:to:)``.
    @inline(__always)
    static func writeInteger(_ value: Int64, to at: UnsafeMutablePointer<UInt8>) -> Int {
        var magnitude = value.magnitude
        var digits = 0
        var probe = magnitude
        repeat {
            digits += 1
            probe /= 10
        } while probe > 0
        let sign = value < 0 ? 1 : 0
        if sign == 1 { at.pointee = UInt8(ascii: "-") }
        var position = sign + digits
        repeat {
            position -= 1
            at[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        return sign + digits
    }
}
