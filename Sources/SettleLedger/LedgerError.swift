/// Why the ledger refused or failed an operation.
public enum LedgerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Another process holds the ledger (or SQLite stayed locked past its busy timeout).
    /// Passing: run again later (exit 75).
    case busy(String)
    /// The file or its lock file cannot be opened or created.
    case cannotOpen(path: String, message: String)
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

    public var description: String {
        switch self {
        case .busy(let message): return "ledger busy: \(message)"
        case .cannotOpen(let path, let message): return "cannot open ledger \(path): \(message)"
        case .schemaMismatch(let found, let expected):
            return "ledger schema version \(found), this settle needs \(expected)"
        case .lineClaimed(let line, let instruction, let status):
            return "line \(line) is already \(status.rawValue) in instruction \(instruction)"
        case .instructionNotSendable(let id, let status):
            return "instruction \(id) is \(status.rawValue) in the ledger and cannot be sent again"
        case .unknownInstruction(let id): return "instruction \(id) is not in the ledger"
        case .sqlite(let code, let message): return "SQLite error \(code): \(message)"
        }
    }
}
