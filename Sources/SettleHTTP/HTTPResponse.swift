/// A complete HTTP response.
public struct HTTPResponse: Sendable {
    /// The status code of the final response (after any `100 Continue`).
    public var status: Int
    /// Header fields in arrival order; names lowercased, values trimmed.
    public var headers: [(name: String, value: String)]
    /// The response body.
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of a header, by case-insensitive name.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name == wanted }?.value
    }
}

extension HTTPResponse: CustomStringConvertible, CustomReflectable {
    /// The status and the body size; no header values.
    public var description: String { "HTTP \(status) (\(body.count) bytes)" }
    public var customMirror: Mirror {
        Mirror(self, children: ["status": status, "bodyBytes": body.count], displayStyle: .struct)
    }
}
