import Foundation
import SettleLedger

/// Opens the test's ledger for writing, creating it first when it is not there (as
/// `settle ledger init` does): `LedgerStore.open` itself never creates one.
func openTestLedger(path: String) throws(LedgerError) -> LedgerStore {
    if !FileManager.default.fileExists(atPath: path) { try LedgerStore.create(path: path).close() }
    return try LedgerStore.open(path: path)
}
