public import SettleCore

/// An error that stops a command with a message and an exit status.
public struct CommandFailure: Error, Sendable {
    public let code: ExitCode
    public let message: String
    /// The failure with its place, when it came from a module that says where.
    public let failure: SettleError?

    public init(_ code: ExitCode, _ message: String) {
        self.code = code
        self.message = message
        failure = nil
    }

    /// A failure with a place; its exit status is the one ``SettleError/exitCode`` picks.
    init(_ failure: SettleError) {
        code = failure.exitCode
        message = failure.message
        self.failure = failure
    }

    /// The structured fields of the failure for the `command_failed` event (text or JSON).
    var fields: [Log.Field] {
        var fields = [Log.Field("exit_status", Int(code.rawValue))]
        guard let failure else { return fields }
        fields.append(Log.Field("code", failure.code.rawValue))
        if let location = failure.location {
            fields.append(Log.Field("file", location.file))
            if let line = location.line { fields.append(Log.Field("line", line)) }
            if let offset = location.byteOffset { fields.append(Log.Field("byte_offset", offset)) }
        }
        if let cause = failure.cause { fields.append(Log.Field("cause", cause)) }
        return fields
    }
}

/// Runs a step on the plan folder, its failure turned into the command's.
func onPlanFolder<T>(_ step: () throws(SettleError) -> T) throws(CommandFailure) -> T {
    do {
        return try step()
    } catch {
        throw CommandFailure(error)
    }
}
