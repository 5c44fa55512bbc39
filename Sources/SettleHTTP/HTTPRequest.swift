/// One HTTP request as the client sends it.
///
/// Header values are never shown by `description` or reflection: the `Authorization`
/// header carries the secret key.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The absolute URL, query included.
    public var url: String
    /// Header fields in the order they are sent.
    public var headers: [(name: String, value: String)]
    /// The request body (empty for `GET`).
    public var body: [UInt8]
    /// An opaque number the caller uses to find its own state when the outcome arrives.
    public var tag: Int
    /// Send it on a new connection. libcurl silently re-sends a request whose reused
    /// connection died before any answer; for a POST that may already have reached the
    /// server, that hidden second try would answer for the first (a refusal taken as the first
    /// try's fate). On a new connection libcurl never retries, so every try is ours to see.
    /// On by default for every method but GET.
    public var freshConnection: Bool

    public init(
        method: String, url: String, headers: [(name: String, value: String)] = [],
        body: [UInt8] = [], tag: Int = 0
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.tag = tag
        self.freshConnection = method != "GET"
    }
}

extension HTTPRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Method and URL only; header names without their values.
    public var description: String {
        "\(method) \(url) [headers: \(headers.map(\.name).joined(separator: ", "))]"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["method": method, "url": url, "tag": tag], displayStyle: .struct)
    }
}
