import Foundation
public import SettleCore
public import SettleLedger
public import SettleWrite

/// `.settle/netted.jsonl`: the lines of the plan that netted to zero (a transfer and its
/// reversal in one run cancel out: no call, so no instruction carries them), one JSON object
/// a line: `line_id, content, kind, amount_minor, currency, group` (`group` since 2026-12-05). Sealed with the plan; its apply
/// records them in the ledger as settled, so a later export of either line is
/// `already_settled` and the money never moves for it.
public enum NettedLines {
    public static let name = ".settle/netted.jsonl"

    public static func write(path: String, plan: SettlementPlan, into set: FileSet? = nil) throws(WriteFailure) -> (
        sha256: String, rows: Int
    ) {
        let file = try OutputFile(path: path)
        let batch = plan.batch
        for line in batch.lines where line.status == .netted {
            let object = JSON.object([
                ("line_id", .string(batch.text(line.lineID))),
                ("content", .string(LineContent.digest(batch, line))),
                ("kind", .string(line.kind.name)),
                ("amount_minor", .int(line.amount)),
                ("currency", .string(line.currency.code)),
                ("group", .string(batch.text(line.group))),
            ])
            file.withBuffer { out in
                object.append(to: &out)
                out.append(0x0A)
            }
            file.endRow()
        }
        let sha = try file.commit(into: set)
        return (sha, file.rows)
    }

    /// The netted lines of a plan folder (none for a folder written before the file existed).
    /// The file is sealed: the folder's checks compared it with the manifest before this reads it.
    public static func read(folder: String) throws(SettleError) -> [LedgerStore.NettedLine] {
        let path = (folder as NSString).appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        var lines: [LedgerStore.NettedLine] = []
        for (number, text) in data.split(separator: 0x0A).enumerated() {
            guard let object = try? JSON.parse(text), let id = object["line_id"]?.stringValue,
                let content = object["content"]?.stringValue,
                let kind = object["kind"]?.stringValue, let amount = object["amount_minor"]?.intValue,
                let currency = object["currency"]?.stringValue
            else {
                throw SettleError(.planInvalid, "\(path):\(number + 1) is not a netted line", at: .init(file: path))
            }
            lines.append(
                LedgerStore.NettedLine(
                    lineID: id, content: content, kind: kind, amountMinor: amount, currency: currency,
                    group: object["group"]?.stringValue ?? ""))
        }
        return lines
    }
}
