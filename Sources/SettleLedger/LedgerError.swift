/// Why the ledger refused or failed an operation.
public enum LedgerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Another process holds the ledger (or SQLite stayed locked past its busy timeout).
    /// Passing: run again later (exit 75).
    case busy(String)
    /// The file or its lock file cannot be opened or created.
    case cannotOpen(path: String, message: String)
    /// A file of the ledger (its mark) could not be written for lack of room or a failing
    /// disk. Passing: run again once there is room (exit 75).
    case cannotWrite(path: String, message: String)
    /// The file is not a settle ledger of the schema version this build knows.
    case schemaMismatch(found: Int, expected: Int)
    /// A line is already claimed by another instruction that is in flight, unknown or
    /// settled: sending would risk paying it twice.
    case lineClaimed(lineID: String, instructionID: String, status: LedgerStatus)
    /// The instruction is settled, or in flight under another idempotency key.
    case instructionNotSendable(id: String, status: LedgerStatus)
    /// The instruction is not in the ledger.
    case unknownInstruction(String)
    /// Any other SQLite failure (extended result code and SQLite's message).
    case sqlite(code: Int, message: String)
    /// There is no ledger at the path: `apply`/`run` never start from an empty one by
    /// accident (create it with `settle ledger init`, or recover it with `ledger rebuild`).
    case missing(path: String, hadMark: Bool)
    /// The file exists but is not a settle ledger (not SQLite, or no settle schema).
    case notALedger(path: String, message: String)
    /// `PRAGMA integrity_check` failed, or the file is empty.
    case damaged(path: String, message: String)
    /// The ledger holds fewer commits than its mark file records: commits were lost (a
    /// lost WAL, an old backup restored). Sending from it could pay twice.
    case behindMark(path: String, message: String)
    /// `ledger init` on a path that already has a ledger or its mark.
    case alreadyExists(path: String)
    /// The ledger file has more than one name (hard links): settle's lock and mark, and
    /// SQLite's WAL, go by name, so two names would let two processes settle on it at once.
    case linked(path: String, names: Int)

    public var description: String {
        switch self {
        case .busy(let message): return "ledger busy: \(message)"
        case .cannotOpen(let path, let message): return "cannot open ledger \(path): \(message)"
        case .cannotWrite(let path, let message): return "cannot write \(path): \(message)"
        case .schemaMismatch(let found, let expected):
            return "ledger schema version \(found), this settle needs \(expected)"
        case .lineClaimed(let line, let instruction, let status):
            return "line \(line) is already \(status.rawValue) in instruction \(instruction)"
        case .instructionNotSendable(let id, let status):
            return "instruction \(id) is \(status.rawValue) in the ledger and cannot be sent again"
        case .unknownInstruction(let id): return "instruction \(id) is not in the ledger"
        case .sqlite(let code, let message): return "SQLite error \(code): \(message)"
        case .missing(let path, let hadMark):
            return hadMark
                ? "the ledger \(path) is missing, but its mark \(path).mark shows one was there: restore it from a backup or recover it with `settle ledger rebuild --since DATE --ledger \(path)`; never start again from an empty ledger"
                : "there is no ledger at \(path): create one with `settle ledger init --ledger \(path)` (or recover a lost one with `settle ledger rebuild --since DATE`)"
        case .notALedger(let path, let message): return "\(path) is not a settle ledger: \(message)"
        case .damaged(let path, let message):
            return
                "the ledger \(path) is damaged (\(message)): restore it from a backup or recover it with `settle ledger rebuild --since DATE`"
        case .behindMark(let path, let message):
            return
                "the ledger \(path) lost commits (\(message)): it may be a backup, older than what was sent since. Nothing was sent. Bring it up to date from Stripe over it: `settle ledger rebuild --since DATE --ledger \(path) PLAN_FOLDER...` (DATE: a day before the backup was made; the plan folders applied since give back their lines); a backup is never used as it is"
        case .alreadyExists(let path):
            return
                "\(path) already has a ledger (or its mark): settle ledger init never replaces one; use `settle ledger rebuild` to recover a lost ledger"
        case .linked(let path, let names):
            return
                "the ledger \(path) has \(names) names (hard links): settle locks a ledger, and SQLite keeps its WAL, by name, so two processes could settle on it at once through two names; keep one name (remove the other links); nothing was sent"
        }
    }
}
