/// A Stripe secret key. It never shows in `description`, `debugDescription`, `dump` or
/// reflection; the only way out is the `Authorization` header the engine builds.
public struct APIKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let secret: String

    public init(_ secret: String) {
        self.secret = secret.trimmingWhitespace()
    }

    /// Whether it is a live-mode key (`sk_live_…`, `rk_live_…`), which needs `--live`.
    public var isLive: Bool { secret.hasPrefix("sk_live_") || secret.hasPrefix("rk_live_") }

    /// Whether it looks like a Stripe secret or restricted key at all.
    public var isWellFormed: Bool {
        ["sk_test_", "sk_live_", "rk_test_", "rk_live_"].contains { secret.hasPrefix($0) }
            && secret.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    public var description: String { "APIKey(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// The `Authorization` header value. Internal: nothing outside the engine sees it.
    var authorization: String { "Bearer \(secret)" }

    /// Whether `text` contains the secret (for scrubbing anything that might echo it).
    func occurs(in text: String) -> Bool { !secret.isEmpty && text.contains(secret) }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
