extension JSON {
    /// Appends JSON tokens straight to a byte buffer, with commas where they belong: for
    /// files with millions of objects (instructions.jsonl), where building a ``JSON`` value
    /// per object would cost an allocation per member. Strings go through the one escaper,
    /// ``JSON/appendBytes(_:to:)``.
    public struct Writer {
        public var out: [UInt8]
        private var needsComma = false

        public init(out: [UInt8] = []) { self.out = out }

        /// A comma if a value came before at this level.
        public mutating func separator() {
            if needsComma { out.append(UInt8(ascii: ",")) }
            needsComma = true
        }

        public mutating func open() { separator(); out.append(UInt8(ascii: "{")); needsComma = false }
        public mutating func close() { out.append(UInt8(ascii: "}")); needsComma = true }
        public mutating func openArray() { separator(); out.append(UInt8(ascii: "[")); needsComma = false }
        public mutating func closeArray() { out.append(UInt8(ascii: "]")); needsComma = true }

        /// A key settle names (no escaping needed).
        public mutating func key(_ name: StaticString) {
            separator()
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
            needsComma = false
        }

        /// A key from the input (metadata), escaped. (A separate label, so that a literal
        /// key takes the unescaped ``key(_:)`` and not this one.)
        public mutating func key(escaping name: String) {
            separator()
            JSON.appendString(name, to: &out)
            out.append(UInt8(ascii: ":"))
            needsComma = false
        }

        /// A string settle names (no escaping needed).
        public mutating func string(_ value: StaticString) {
            separator()
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
            out.append(UInt8(ascii: "\""))
        }

        public mutating func string(_ value: String) { separator(); JSON.appendString(value, to: &out) }

        /// UTF-8 bytes as a string, escaped.
        public mutating func string(bytes: UnsafeRawBufferPointer) { separator(); JSON.appendBytes(bytes, to: &out) }

        public mutating func null() { separator(); out.append(contentsOf: "null".utf8) }
        public mutating func int(_ value: Int64) { separator(); JSON.appendInteger(value, to: &out) }
    }
}
