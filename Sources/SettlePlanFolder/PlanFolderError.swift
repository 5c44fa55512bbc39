/// Why a plan folder cannot be written, opened or rewritten. The command line turns the
/// kind into an exit status (SettleCLI's `CommandFailure(_:)`), the one place that does.
public struct PlanFolderError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Not a plan folder, or a file apply needs cannot be read (exit 66).
        case unreadable
        /// The folder changed since settle wrote it, or does not hold together: nothing is
        /// sent (exit 65).
        case refused
        /// The folder or one of its files cannot be written (exit 73).
        case unwritable
        /// Another settle process holds the folder, or the ledger failed: run again (exit 75).
        case tryAgain
        /// settle broke its own rule (conservation, row counts): a bug (exit 70).
        case internalError
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
