import Foundation
import SettleCore
import SettleHTTP

/// Builds Stripe requests and reads Stripe answers. The key only ever goes into the
/// `Authorization` header here.
struct StripeAPI {
    let base: String
    let key: APIKey
    let stripeVersion: String
    let previewVersion: String

    init(configuration: ApplyConfiguration) throws(ApplyError) {
        var base = configuration.apiBase
        while base.hasSuffix("/") { base.removeLast() }
        try Self.checkBase(base)
        self.base = base
        key = configuration.apiKey
        stripeVersion = configuration.stripeVersion
        previewVersion = configuration.previewVersion
    }

    /// `https://` anywhere; `http://` only to a loopback host.
    /// No credentials in it either: the key comes from `STRIPE_API_KEY` or `--api-key-file`,
    /// and an API base is written to the manifest and the logs (audit 54 F5: a key given as
    /// `http://sk_test_…@127.0.0.1:…` was accepted and written to manifest.json).
    static func checkBase(_ base: String) throws(ApplyError) {
        let shown = shown(base)
        guard let components = URLComponents(string: base), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased(), !host.isEmpty
        else { throw .configuration("API base \(shown) is not a URL") }
        guard components.user == nil, components.password == nil, !base.contains("@") else {
            throw .configuration(
                "API base \(shown) carries credentials; give the key by STRIPE_API_KEY or --api-key-file")
        }
        switch scheme {
        case "https": return
        case "http":
            let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            if bare == "localhost" || bare == "::1" || isIPv4Loopback(bare) { return }
            throw .configuration("API base \(shown): http:// is allowed only for loopback addresses")
        default:
            throw .configuration("API base \(shown): only https:// (or http:// on loopback) is allowed")
        }
    }

    /// An API base as an error may show it: what stands before an `@` (credentials) hidden.
    static func shown(_ base: String) -> String {
        guard let at = base.lastIndex(of: "@") else { return base }
        let start = base.range(of: "://").map(\.upperBound) ?? base.startIndex
        return start < at ? base[..<start] + "…" + base[at...] : "…" + base[at...]
    }

    private static func isIPv4Loopback(_ host: String) -> Bool {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in UInt8(part) != nil }
    }

    /// A request to `path` (query included); v2 paths get the preview version.
    func request(
        method: String, path: String, body: [UInt8] = [], contentType: String? = nil,
        idempotencyKey: String? = nil, context: String? = nil
    ) -> HTTPRequest {
        var headers: [(name: String, value: String)] = [
            ("Authorization", key.authorization),
            ("Stripe-Version", path.hasPrefix("/v2/") ? previewVersion : stripeVersion),
            ("Accept", "application/json"),
        ]
        if let contentType { headers.append(("Content-Type", contentType)) }
        if let idempotencyKey { headers.append(("Idempotency-Key", idempotencyKey)) }
        if let context, !context.isEmpty { headers.append(("Stripe-Context", context)) }
        return HTTPRequest(method: method, url: base + path, headers: headers, body: body)
    }

    /// The request that creates an instruction's object, from its final parameters.
    func createRequest(method: String, path: String, params: JSON, idempotencyKey: String, context: String?)
        -> HTTPRequest
    {
        if path.hasPrefix("/v2/") {
            // Keys sorted: the bytes the ledger stores for the call.
            var body: [UInt8] = []
            params.append(to: &body, sortingKeys: true)
            return request(
                method: method, path: path, body: body, contentType: "application/json",
                idempotencyKey: idempotencyKey, context: context)
        }
        return request(
            method: method, path: path, body: Array(Self.formEncode(params).utf8),
            contentType: "application/x-www-form-urlencoded", idempotencyKey: idempotencyKey, context: context)
    }

    // MARK: - Encoding

    /// `application/x-www-form-urlencoded` of the plan's flat keys, sorted for stable
    /// bytes; nested objects and arrays become `a[b]` and `a[0]` as Stripe expects.
    static func formEncode(_ params: JSON) -> String {
        var pairs: [(String, String)] = []
        flatten(params, prefix: nil, into: &pairs)
        return pairs.sorted { $0.0 < $1.0 }
            .map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }
            .joined(separator: "&")
    }

    private static func flatten(_ value: JSON, prefix: String?, into pairs: inout [(String, String)]) {
        switch value {
        case .object(let members):
            for (key, member) in members {
                flatten(member, prefix: prefix.map { "\($0)[\(key)]" } ?? key, into: &pairs)
            }
        case .array(let values):
            for (index, member) in values.enumerated() {
                flatten(member, prefix: "\(prefix ?? "")[\(index)]", into: &pairs)
            }
        case .null:
            if let prefix { pairs.append((prefix, "")) }
        case .bool(let flag): if let prefix { pairs.append((prefix, flag ? "true" : "false")) }
        case .int(let number): if let prefix { pairs.append((prefix, String(number))) }
        case .number(let number): if let prefix { pairs.append((prefix, "\(number)")) }
        case .string(let text): if let prefix { pairs.append((prefix, text)) }
        }
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func percentEncode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%"
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0x0F)]))
            }
        }
        return out
    }

    /// A query string from pairs, in the given order.
    static func query(_ pairs: [(String, String)]) -> String {
        pairs.isEmpty ? "" : "?" + pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    // MARK: - Answers

    /// The JSON body, or nil.
    static func json(_ response: HTTPResponse) -> JSON? {
        try? JSON.parse(response.body)
    }

    /// Stripe's error code (`error.code`, else `error.type`) and message.
    static func error(_ response: HTTPResponse) -> (code: String, message: String) {
        if case .error(let error) = StripeAnswer(.response(response)) { return (error.code, error.message) }
        return ("http_\(response.status)", "HTTP \(response.status)")
    }

    /// Describes an answer for logs and messages: status, Stripe's code, request id.
    static func summary(_ outcome: HTTPOutcome) -> String {
        switch outcome {
        case .transportError(let kind, let message): return "\(kind.said): \(message)"
        case .response(let response):
            var text = "HTTP \(response.status)"
            if response.status >= 400 {
                let (code, message) = error(response)
                text += " \(code): \(message)"
            }
            if let id = response.header("request-id") { text += " (\(id))" }
            return text
        }
    }
}
