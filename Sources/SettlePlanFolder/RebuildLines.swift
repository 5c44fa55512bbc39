import Foundation
public import SettleApply
import SettleCore
public import SettleLedger
import SettleWrite

extension PlanFolder {
    /// The lines of the `wanted` instructions (`settle ledger rebuild`: Stripe's objects carry
    /// the instruction's id, not its lines), from the plan folders that made them: each
    /// instruction's lines and content digests as its instructions.jsonl lists them (checked
    /// against its id as read). A payout that apply split (``PayoutSplit``: an aggregated
    /// payout sent for only some of its lines) is in no instructions.jsonl: its lines are the
    /// rows of the folder's results.csv that name it, with the claims the planned payout lists
    /// for them. With them, the charge key of each wanted transfer that names no charge (its
    /// payment intent, `charge_key`): the ledger records the transfer under it, so later runs
    /// count it against the charge (audit 38 Q12: a rebuilt ledger did not, and the next run
    /// moved 90.00 on an 80.00 charge).
    public static func instructionLines(of wanted: Set<String>, in folders: [String]) throws(ApplyError)
        -> (lines: [String: [LedgerLineClaim]], chargeKeys: [String: String])
    {
        var found: [String: [LedgerLineClaim]] = [:]
        var chargeKeys: [String: String] = [:]
        func claim(_ line: Instruction.Line) -> LedgerLineClaim {
            LedgerLineClaim(lineID: line.lineID, kind: line.kind, amountMinor: line.amountMinor, content: line.content)
        }
        func stream(_ folder: String) throws(ApplyError) -> InstructionStream {
            let path = (folder as NSString).appendingPathComponent("instructions.jsonl")
            guard let stream = InstructionStream(path: path) else {
                throw .planInvalid(line: 0, message: "\(path) cannot be read")
            }
            return stream
        }
        for folder in folders {
            let instructions = try stream(folder)
            while let instruction = try instructions.next() {
                guard wanted.contains(instruction.id), found[instruction.id] == nil else { continue }
                found[instruction.id] = instruction.lines.map(claim)
                if instruction.kind == .transfer, !instruction.ledgerCharge.isEmpty {
                    chargeKeys[instruction.id] = instruction.ledgerCharge
                }
            }
        }
        // Every folder is read for them, and each payout's lines are the union of what the
        // folders say: a folder whose row names the payout for only some of its lines (one
        // re-applied after another folder's run sent it, its other rows `already_settled`
        // from its own plan) does not speak for the rest (audit 49 F1: the rebuilt ledger held
        // a split payout without one of its lines, and the next apply paid that line again).
        let missing = wanted.subtracting(found.keys)
        var splitLines: [String: [String: LedgerLineClaim]] = [:]
        var splitOrder: [String: [String]] = [:]
        for folder in folders where !missing.isEmpty {
            // Lines whose results.csv row names a payout no instructions.jsonl lists.
            let path = (folder as NSString).appendingPathComponent("results.csv")
            guard let reader = ResultsReader(path: path) else { continue }
            typealias F = ResultsFile.Field
            var owner: [String: String] = [:]
            do throws(WriteFailure) {
                _ = try reader.next()
                while let row = try reader.next() {
                    guard row.count == ResultsFile.header.count else { continue }
                    let instruction = String(decoding: row[F.instructionID.rawValue], as: UTF8.self)
                    guard missing.contains(instruction) else { continue }
                    owner[String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard()] = instruction
                }
            } catch {
                throw .planInvalid(line: 0, message: "\(error.path): \(error.message)")
            }
            guard !owner.isEmpty else { continue }
            let instructions = try stream(folder)
            while let instruction = try instructions.next() {
                guard instruction.kind == .payout else { continue }
                for line in instruction.lines {
                    guard let id = owner[line.lineID], splitLines[id]?[line.lineID] == nil else { continue }
                    splitLines[id, default: [:]][line.lineID] = claim(line)
                    splitOrder[id, default: []].append(line.lineID)
                }
            }
        }
        for (id, order) in splitOrder {
            found[id] = order.compactMap { splitLines[id]?[$0] }
        }
        return (found, chargeKeys)
    }
}
