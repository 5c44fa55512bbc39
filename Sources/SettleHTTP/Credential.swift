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

    /// The shortest run of the secret's first bytes that is replaced where it stands alone: a
    /// key cut short still holds most of its secret (audit 14: 33 of 34 characters were
    /// written as they were), while Stripe's own masked form (`sk_test_51SE****6789`) shows
    /// fewer and stays readable.
    static let shortestFragment = 16

    /// `bytes` with every occurrence of `secret`, and of a run of its first bytes at least
    /// ``shortestFragment`` long, replaced; JSON `\uXXXX` escapes of letters, digits and `_`
    /// are read as those characters first (audit 14: `\u0073k_test_…` decoded to the key
    /// after the scrub, and reached results.csv and the ledger).
    static func scrub(_ bytes: [UInt8], secret: [UInt8]) -> [UInt8] {
        let bytes = unescapingWordCharacters(bytes)
        let minimum = min(secret.count, shortestFragment)
        guard let first = secret.first, bytes.count >= minimum else { return bytes }
        var out: [UInt8] = []
        var start = 0
        var index = 0
        while index + minimum <= bytes.count {
            guard bytes[index] == first else {
                index += 1
                continue
            }
            var matched = 0
            while matched < secret.count, index + matched < bytes.count, bytes[index + matched] == secret[matched] {
                matched += 1
            }
            guard matched >= minimum else {
                index += 1
                continue
            }
            if out.isEmpty { out.reserveCapacity(bytes.count) }
            out.append(contentsOf: bytes[start..<index])
            out.append(contentsOf: replacement)
            index += matched
            start = index
        }
        guard start > 0 else { return bytes }
        out.append(contentsOf: bytes[start...])
        return out
    }

    /// `\uXXXX` escapes of `[0-9A-Za-z_]` as the characters themselves (the same JSON text);
    /// an escaped backslash stays as it is, so `\\u0073` is not read as an escape.
    static func unescapingWordCharacters(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(0x5C) else { return bytes }
        func hex(_ byte: UInt8) -> UInt32? {
            switch byte {
            case 0x30...0x39: UInt32(byte - 0x30)
            case 0x41...0x46: UInt32(byte - 0x41 + 10)
            case 0x61...0x66: UInt32(byte - 0x61 + 10)
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == 0x5C, index + 1 < bytes.count else {
                out.append(byte)
                index += 1
                continue
            }
            if bytes[index + 1] == 0x75, index + 6 <= bytes.count,
                let a = hex(bytes[index + 2]), let b = hex(bytes[index + 3]), let c = hex(bytes[index + 4]),
                let d = hex(bytes[index + 5])
            {
                let scalar = a << 12 | b << 8 | c << 4 | d
                if (0x30...0x39).contains(scalar) || (0x41...0x5A).contains(scalar) || (0x61...0x7A).contains(scalar)
                    || scalar == 0x5F
                {
                    out.append(UInt8(scalar))
                    index += 6
                    continue
                }
            }
            // Any other escape (an escaped backslash included) is kept whole.
            out.append(byte)
            out.append(bytes[index + 1])
            index += 2
        }
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
