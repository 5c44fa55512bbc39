/// What became of one request: a response (any status) or a transport failure.
public enum HTTPOutcome: Sendable {
    /// Why no response arrived.
    public enum TransportErrorKind: String, Sendable, Equatable {
        /// The connect or total timeout expired.
        case timeout
        /// The connection broke after the request may have left (reset, nothing or a
        /// partial answer received).
        case connection
        /// The request never left: the host could not be resolved, the connection was
        /// refused, or TLS could not be set up. Nothing can have reached the server.
        case notSent
        /// Anything else libcurl reported.
        case other

        /// What happened, in words for a reason column or a log line (the one place: audit
        /// 56 found "not sent: notSent error: Couldn't connect…" in results.csv).
        public var said: String {
            switch self {
            case .timeout: "no answer in time"
            case .connection: "the connection broke"
            case .notSent: "could not connect"
            case .other: "transport error"
            }
        }
    }

    case response(HTTPResponse)
    case transportError(kind: TransportErrorKind, message: String)

    /// Whether the server may have received (and acted on) the request.
    public var mayHaveReachedServer: Bool {
        if case .transportError(.notSent, _) = self { return false }
        return true
    }
}
