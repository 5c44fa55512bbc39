import Foundation
import SettleCore

/// The ledger as the planner sees it. Until the ledger module lands this reads nothing.
enum LedgerHistory {
    static func openForPlanning(path: String) throws(CommandFailure) -> (any SettlementHistory)? {
        nil
    }

    static func printStatus(path: String) throws(CommandFailure) -> ExitCode {
        throw CommandFailure(.internalError, "status: the ledger module is not built in yet")
    }
}

/// Executes a plan folder. Until the apply engine lands, apply refuses to run.
struct Applier {
    let options: Options
    let log: Log

    func credentials() throws(CommandFailure) -> String {
        throw CommandFailure(.internalError, "apply: the Stripe client is not built in yet")
    }

    func apply(folder: String) throws(CommandFailure) -> ExitCode {
        throw CommandFailure(.internalError, "apply: the Stripe client is not built in yet")
    }
}
