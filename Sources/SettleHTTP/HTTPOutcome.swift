/// What became of one request: a response (any status) or a transport failure.
public enum HTTPOutcome: Sendable {
    /// Why no response arrived.
    public enum TransportErrorKind: String, Sendable, Equatable {
        /// The connect or total timeout expired.
        case timeout
        /// The connection could not be made or broke (DNS, refused, reset, TLS).
        case connection
        /// Anything else libcurl reported.
        case other
    }

    case response(HTTPResponse)
    case transportError(kind: TransportErrorKind, message: String)
}
