public import SettleCore
import SettlePlanFolder

/// An error that stops a command with a message and an exit status.
public struct CommandFailure: Error, Sendable {
    public let code: ExitCode
    public let message: String
    public init(_ code: ExitCode, _ message: String) {
        self.code = code
        self.message = message
    }
}

extension CommandFailure {
    /// The exit status of a plan folder's failure: the one place that picks it.
    init(_ error: PlanFolderError) {
        let code: ExitCode =
            switch error.kind {
            case .unreadable: .inputUnreadable
            case .refused: .linesRejected
            case .unwritable: .outputUnwritable
            case .tryAgain: .tryAgain
            case .internalError: .internalError
            }
        self.init(code, error.message)
    }
}

/// Runs a step on the plan folder, its failure turned into the command's.
func onPlanFolder<T>(_ step: () throws(PlanFolderError) -> T) throws(CommandFailure) -> T {
    do {
        return try step()
    } catch {
        throw CommandFailure(error)
    }
}
