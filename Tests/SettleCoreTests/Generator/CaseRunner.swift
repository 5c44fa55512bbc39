import Foundation
import SettleCore
import SettleRead

/// Runs a generated case through the real CSV reader, the line checker and the planner.
enum CaseRunner {
    /// The case as CSV text: quoted where needed, LF or CRLF, a malformed row short of a field.
    static func csv(_ generated: GeneratedCase, rows: [GeneratedRow], crlf: Bool) -> String {
        let end = crlf ? "\r\n" : "\n"
        func cell(_ value: String) -> String {
            let needsQuotes = value.contains { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }
            return needsQuotes ? "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : value
        }
        var text = GeneratedCase.header.joined(separator: ",") + end
        for row in rows {
            var cells = GeneratedCase.header.map { cell(row[$0]) }
            if row.malformed { cells.removeLast() }
            text += cells.joined(separator: ",") + end
        }
        return text
    }

    /// Reads CSV text into a checked batch.
    static func batch(_ text: String, options: RuleOptions) throws -> (Batch, ReadFailure?) {
        let path = NSTemporaryDirectory() + "settle-property-\(getpid())-\(UUID().uuidString).csv"
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let checker = LineChecker(options: options)
        let failure = CSVExportReader().read(
            name: "generated.csv", source: try ByteSource(path: path), sink: checker)
        return (checker.batch, failure)
    }

    /// The fake ledger of a case: line contents are digested from a first reading of the batch.
    static func history(_ generated: GeneratedCase, batch: Batch) -> RecordedHistory {
        let history = RecordedHistory()
        history.transferredByCharge = generated.ledgerCharges
        history.transfers = generated.ledgerTransfers
        for line in batch.lines {
            let id = batch.text(line.lineID)
            guard let known = generated.ledgerLines[id], history.lines[id] == nil else { continue }
            let content = known.sameContent ? LineContent.digest(batch, line) : "ffffffffffffffff"
            history.lines[id] = HistoricLine(
                content: content, state: known.state, stripeID: known.state == .settled ? "tr_old_\(id)" : nil)
        }
        return history
    }

    /// Plans the rows in the given order.
    static func plan(_ generated: GeneratedCase, rows: [GeneratedRow], crlf: Bool) throws -> SettlementPlan {
        let text = csv(generated, rows: rows, crlf: crlf)
        let (first, _) = try batch(text, options: generated.options)
        let history = history(generated, batch: first)
        let (batch, failure) = try batch(text, options: generated.options)
        precondition(failure == nil, "generated CSV was rejected whole: \(failure!.code.rawValue) \(failure!.message)")
        return Planner(options: generated.options, history: history, facts: generated.facts).plan(batch)
    }
}
