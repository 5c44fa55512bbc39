import Glibc

/// Comparisons of input bytes with literals, without building a `String` or an `Array`.
public enum ByteCompare {
    @inline(__always)
    public static func equals(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount
            && (bytes.isEmpty || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
    }

    @inline(__always)
    public static func hasPrefix(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        bytes.count >= literal.utf8CodeUnitCount
            && (literal.utf8CodeUnitCount == 0
                || memcmp(bytes.baseAddress!, literal.utf8Start, literal.utf8CodeUnitCount) == 0)
    }
}
