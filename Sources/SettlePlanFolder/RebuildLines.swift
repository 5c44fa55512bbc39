import Foundation
public import SettleApply
public import SettleCore
public import SettleLedger
import SettleWrite

extension PlanFolder {
    /// The charges an apply of this plan may have learned failed at Stripe, for a folder whose
    /// apply never ended (``applyNeverEnded``): what it learned was in the ledger only, in no
    /// file of the folder. Those it looks up before sending (an offline plan's,
    /// ``Instruction/Preflight``), and those of its transfers `refused` says Stripe may have
    /// refused `charge_failed` (`settle ledger rebuild`: those it holds no object of; a run
    /// taking the folder over: those its ledger holds refused so).
    public func chargesItsApplyMeets(refused: (Instruction) throws(ApplyError) -> Bool) throws(ApplyError)
        -> Set<String>
    {
        let path = path("instructions.jsonl")
        guard let instructions = InstructionStream(path: path) else {
            throw .planInvalid(line: 0, message: "\(path) cannot be read")
        }
        var charges: Set<String> = []
        while let instruction = try instructions.next() {
            if let charge = instruction.preflight.charge { charges.insert(charge) }
            if instruction.kind == .transfer, !instruction.charge.isEmpty, try refused(instruction) {
                charges.insert(instruction.charge)
            }
        }
        return charges
    }

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
    ///
    /// `payoutAmounts`: what Stripe made of each wanted payout, in minor units. A split payout
    /// no results.csv names (the apply that sent it was killed before it wrote a row, audit 50
    /// N4: the rebuild refused the ledger for good) is found from the aggregated payout it was
    /// split from: its id is that of a plan of only its lines (``PayoutSplit/derived(from:lines:)``),
    /// so the folders' aggregated payouts less some of their lines, of that amount, are tried
    /// (``splitCandidates(of:amounts:wanted:)``).
    public static func instructionLines(
        of wanted: Set<String>, in folders: [String], payoutAmounts: [String: Int64] = [:]
    ) throws(ApplyError) -> (lines: [String: [LedgerLineClaim]], chargeKeys: [String: String]) {
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
        let unnamed = wanted.subtracting(found.keys)
        let amounts = Set(unnamed.compactMap { payoutAmounts[$0] })
        for folder in folders where !amounts.isEmpty && !unnamed.subtracting(found.keys).isEmpty {
            let instructions = try stream(folder)
            while let instruction = try instructions.next() {
                guard instruction.kind == .payout, instruction.lines.count > 1 else { continue }
                for (id, lines) in splitCandidates(of: instruction, amounts: amounts, wanted: unnamed)
                where found[id] == nil {
                    found[id] = lines.map(claim)
                }
            }
        }
        return (found, chargeKeys)
    }

    /// The payouts an apply could split from `payout` (its lines less some of them, in their
    /// order) that are `wanted`, of one of `amounts`, by id. Up to three lines left out (a
    /// split leaves out the lines of the orders stopped at apply, most often one line each),
    /// every subset when the payout has 16 lines or fewer; at most 2 M sets of lines left out
    /// are visited a payout (a very large aggregate is searched only that far).
    static func splitCandidates(
        of payout: Instruction, amounts: Set<Int64>, wanted: Set<String>
    ) -> [(id: String, lines: [Instruction.Line])] {
        let lines = payout.lines
        let total = lines.reduce(Int64(0)) { $0 + $1.amountMinor }
        guard let smallest = amounts.min(), smallest > 0, smallest < total else { return [] }
        let most = lines.count <= 16 ? lines.count - 1 : (lines.count <= 120 ? 3 : 2)
        var budget = 2_000_000
        var dropped: [Int] = []
        var result: [(id: String, lines: [Instruction.Line])] = []
        // Lines left out from `start` on, their sum `out` kept at most `total - smallest`.
        func leaveOut(from start: Int, out: Int64) {
            guard budget > 0 else { return }
            budget -= 1
            if !dropped.isEmpty, amounts.contains(total - out) {
                let kept = lines.indices.filter { !dropped.contains($0) }.map { lines[$0] }
                let split = PayoutSplit.derived(from: payout, lines: kept)
                if wanted.contains(split.id) { result.append((split.id, kept)) }
            }
            guard dropped.count < most else { return }
            for index in start..<lines.count where out + lines[index].amountMinor <= total - smallest {
                dropped.append(index)
                leaveOut(from: index + 1, out: out + lines[index].amountMinor)
                dropped.removeLast()
            }
        }
        leaveOut(from: 0, out: 0)
        return result
    }
}
