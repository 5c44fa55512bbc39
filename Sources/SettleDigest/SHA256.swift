import CCrypto

/// SHA-256 for instruction ids and file checksums, on OpenSSL's libcrypto (SHA-NI where the
/// CPU has it: hashing a gigabyte of output must not cost seconds).
public final class SHA256: @unchecked Sendable {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Starts over, reusing the context (no allocation per digest).
    public func reset() { EVP_DigestInit_ex(context, EVP_sha256(), nil) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    public func update(_ text: String) {
        var text = text
        text.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    /// The 32 bytes of the digest; ends this hashing (call ``reset()`` to start again).
    public func digest() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest
    }

    /// The digest so far as 64 lowercase hex digits; hashing may go on afterwards.
    public func hexDigest() -> String {
        let copy = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(copy) }
        EVP_MD_CTX_copy_ex(copy, context)
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(copy, &digest, &length)
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
