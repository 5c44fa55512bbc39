/// The credential a request carries (its `Authorization` header) never comes back out of the
/// client: a server or proxy that echoes it in an answer ("Invalid API Key provided: sk_…")
/// gets it replaced before the answer reaches anyone, so no error message, reason column,
/// report or ledger row can hold it, whatever reads the answer.
enum Credential {
    static let replacement = Array("[redacted]".utf8)

    /// The secret of a request: the value of its `Authorization` header after the scheme
    /// (`Bearer …`, `Basic …`), or the whole value; nil when there is none worth hiding.
    static func secret(of request: HTTPRequest) -> [UInt8]? {
        guard let value = request.headers.first(where: { $0.name.lowercased() == "authorization" })?.value else {
            return nil
        }
        let token = value.split(separator: " ", maxSplits: 1).last.map(String.init) ?? value
        // Too short to be a credential: replacing it would garble ordinary text.
        guard token.utf8.count >= 8 else { return nil }
        return Array(token.utf8)
    }

    /// `bytes` with every occurrence of `secret` replaced.
    static func scrub(_ bytes: [UInt8], secret: [UInt8]) -> [UInt8] {
        guard let first = secret.first, bytes.count >= secret.count else { return bytes }
        var out: [UInt8] = []
        var start = 0
        var index = 0
        let last = bytes.count - secret.count
        while index <= last {
            if bytes[index] == first, bytes[index..<index + secret.count].elementsEqual(secret) {
                if out.isEmpty { out.reserveCapacity(bytes.count) }
                out.append(contentsOf: bytes[start..<index])
                out.append(contentsOf: replacement)
                index += secret.count
                start = index
            } else {
                index += 1
            }
        }
        guard start > 0 else { return bytes }
        out.append(contentsOf: bytes[start...])
        return out
    }

    static func scrub(_ text: String, of request: HTTPRequest) -> String {
        guard let secret = secret(of: request) else { return text }
        let bytes = Array(text.utf8)
        let scrubbed = scrub(bytes, secret: secret)
        return scrubbed == bytes ? text : String(decoding: scrubbed, as: UTF8.self)
    }
}

extension HTTPResponse {
    /// This response with the request's credential replaced wherever the server echoed it
    /// (body and header values).
    func withoutCredential(of request: HTTPRequest) -> HTTPResponse {
        guard let secret = Credential.secret(of: request) else { return self }
        var response = self
        response.body = Credential.scrub(body, secret: secret)
        response.headers = headers.map { header in
            let value = Array(header.value.utf8)
            let scrubbed = Credential.scrub(value, secret: secret)
            return scrubbed == value ? header : (header.name, String(decoding: scrubbed, as: UTF8.self))
        }
        return response
    }
}
