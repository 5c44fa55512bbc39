import CCrypto

/// SHA-256 for instruction ids and file checksums, on OpenSSL's libcrypto (SHA-NI where the
/// CPU has it: hashing a gigabyte of output must not cost seconds).
public final class SHA256: @unchecked Sendable {
    // libcrypto's plain SHA-256 state: a reset is a few stores (EVP's init fetches the
    // algorithm and rebuilds its context each time, which dominated short digests).
    private let context: UnsafeMutablePointer<SHA256_CTX>

    public init() {
        context = .allocate(capacity: 1)
        SHA256_Init(context)
    }

    deinit { context.deallocate() }

    /// Starts over, reusing the context (no allocation per digest).
    public func reset() { SHA256_Init(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        SHA256_Update(context, base, bytes.count)
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    public func update(_ text: String) {
        var text = text
        text.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    /// The 32 bytes of the digest; ends this hashing (call ``reset()`` to start again).
    public func digest() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            SHA256_Final(buffer.baseAddress!, context)
            count = 32
        }
    }

    /// Writes the 32 bytes of the digest at `out`, without allocating; ends this hashing.
    public func finish(into out: UnsafeMutablePointer<UInt8>) { SHA256_Final(out, context) }

    /// The digest so far as 64 lowercase hex digits; hashing may go on afterwards.
    public func hexDigest() -> String {
        var copy = context.pointee
        var digest = [UInt8](repeating: 0, count: 32)
        SHA256_Final(&digest, &copy)
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func hex(_ text: String) -> String {
        let hasher = SHA256()
        hasher.update(text)
        return hasher.hexDigest()
    }
}
