/// A failure with a place: a code scripts can match, a message a person understands, where
/// it happened (file, line, byte offset) and what caused it. The exit status is picked here,
/// from the code, and nowhere else; the command line renders it as text or JSON.
public struct SettleError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// The folder is not a plan folder, or a file of it cannot be read.
        case notAPlanFolder = "not_a_plan_folder"
        /// A file of the plan folder changed, or is missing, since settle sealed it.
        case planChanged = "plan_changed"
        /// A file of the plan folder does not hold together (not JSON, an instruction that
        /// does not match its own id, row counts that disagree).
        case planInvalid = "plan_invalid"
        /// The output folder cannot be made, written or locked.
        case folderUnwritable = "folder_unwritable"
        /// The output folder holds files settle did not write, or an applied run's record.
        case folderRefused = "folder_refused"
        /// Another settle process holds the output folder.
        case folderBusy = "folder_busy"
        /// The ledger failed: run again.
        case ledgerFailed = "ledger_failed"
        /// settle broke its own rule (conservation, its own row counts): a bug.
        case internalError = "internal_error"
    }

    /// Where a failure is: a file, and in it a line (1-based) or a byte offset (from 0).
    public struct Location: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var line: Int?
        public var byteOffset: Int?

        public init(file: String, line: Int? = nil, byteOffset: Int? = nil) {
            self.file = file
            self.line = line
            self.byteOffset = byteOffset
        }

        /// `file:line`, `file, byte N` or `file:line, byte N`.
        public var description: String {
            var text = file
            if let line { text += ":\(line)" }
            if let byteOffset { text += ", byte \(byteOffset)" }
            return text
        }
    }

    public var code: Code
    /// The whole sentence a person reads (it already names the file where that helps).
    public var message: String
    public var location: Location?
    /// What caused it, when something below settle did (an OS error, a ledger error).
    public var cause: String?

    public init(_ code: Code, _ message: String, at location: Location? = nil, cause: String? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.cause = cause
    }

    public var description: String { message }

    /// The exit status (README, "Exit status"): the one mapping from a failure to it.
    public var exitCode: ExitCode {
        switch code {
        case .notAPlanFolder: .inputUnreadable
        case .planChanged, .planInvalid: .linesRejected
        case .folderUnwritable, .folderRefused: .outputUnwritable
        case .folderBusy, .ledgerFailed: .tryAgain
        case .internalError: .internalError
        }
    }
}
