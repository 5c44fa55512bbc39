import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder

/// The lines the ledger holds for later runs (deferred ones waiting; lines of payouts that
/// came back), fed to the pipeline as if they were in the input.
///
/// Each goes into a CSV file of its own original export's columns, at the physical line it
/// first had (blank lines before it, which the reader skips), so `source` names where it
/// first came from. A line the run's inputs list again is not brought back: a newer export
/// replaces it when the money content (payee, amount, currency) is the same, and is
/// `line_conflict` when it is not.
enum HeldInputs {
    struct File {
        var path: String
        var name: String
        /// Line id → the held line, for the lines written to this file.
        var lines: [String: HeldLine]
    }

    static func prepare(
        _ held: [HeldLine], checker: LineChecker, aliases: [String: String], folder: String?, log: Log
    ) throws(CommandFailure) -> [File] {
        let batch = checker.batch
        // Compared by symbol: no string is built per line of the batch.
        var wanted: [Symbol: HeldLine] = [:]
        for line in held where wanted[batch.symbols.intern(line.lineID)] == nil {
            wanted[batch.symbols.intern(line.lineID)] = line
        }
        var present: Set<String> = []
        for index in batch.lines.indices {
            let line = batch.lines[index]
            guard let waiting = wanted[line.lineID] else { continue }
            guard line.status != .rejected || line.reason != .duplicateLineID else { continue }
            let id = waiting.lineID
            let otherCharge = waiting.state == .waiting ? otherCharge(of: line, than: waiting, batch, aliases) : nil
            guard !sameMoney(line, waiting, batch) || otherCharge != nil else {
                // The newer export's copy replaces the held one. A line that waited for its
                // charge waits for Stripe's word, not the copy's: the charge is asked again
                // before it moves (audit 53 H2: a copy saying `succeeded` paid a payout on a
                // debit Stripe had said was pending, then failed).
                present.insert(id)
                if waiting.state == .waiting, waiting.reasonCode == ReasonCode.chargePending.code, !line.charge.isNone {
                    batch.chargesToAsk.insert(line.charge)
                }
                continue
            }
            // Other money content: the held copy still counts (it comes back as always, and
            // keeps its place in the ledger); the export's copy is the one rejected.
            batch.set(index, .rejected, .lineConflict, otherCharge ?? conflictReason(id, waiting))
            batch.lines[index].outsideGroup = true
            checker.yieldFirstCopy(ofLine: index)
        }
        // One file per original export and header, records in their original line order.
        var groups: [String: [HeldLine]] = [:]
        var order: [String] = []
        for line in held where !present.contains(line.lineID) {
            let key = sourceName(line.source) + "\u{0}" + line.header
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(line)
        }
        guard !order.isEmpty else { return [] }
        let directory =
            folder.map { ($0 as NSString).appendingPathComponent(OutputFolder.spoolFolder) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("settle-held-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var files: [File] = []
        for (number, key) in order.enumerated() {
            let lines = groups[key]!.sorted { sourceLine($0.source) < sourceLine($1.source) }
            var bytes = Array(lines[0].header.utf8)
            if bytes.last != 0x0A { bytes.append(0x0A) }
            var physical = 2
            for line in lines {
                let target = sourceLine(line.source)
                if target > physical {
                    bytes.append(contentsOf: repeatElement(0x0A, count: target - physical))
                    physical = target
                }
                bytes.append(contentsOf: line.record)
                physical += line.record.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
            }
            let path = (directory as NSString).appendingPathComponent("held-\(number + 1).csv")
            guard
                FileManager.default.createFile(
                    atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600])
            else {
                throw CommandFailure(.outputUnwritable, "cannot write \(path)")
            }
            files.append(
                File(
                    path: path, name: sourceName(lines[0].source),
                    lines: Dictionary(lines.map { ($0.lineID, $0) }, uniquingKeysWith: { first, _ in first })))
        }
        let waiting = held.filter { $0.state == .waiting && !present.contains($0.lineID) }.count
        let returned = held.filter { $0.state == .returned && !present.contains($0.lineID) }.count
        let unresolved = held.filter { $0.state == .unresolved && !present.contains($0.lineID) }.count
        log(
            .info, event: "held_lines",
            "\(waiting) line(s) waiting in the ledger, \(returned) of payouts that came back and \(unresolved) sent "
                + "with no known outcome are part of this run",
            fields: [.lines(waiting + returned + unresolved)])
        return files
    }

    /// An input's copy of a line `settle cancel` dropped, with its money content (payee,
    /// amount, currency), is the cancelled line fed again, whatever charge it names: rejected
    /// `line_conflict`, and its order with it, as a cancel drops an order whole. A copy with
    /// other money content is a new line (cancel, then feed the new one). Audit 79 F6: the
    /// day's export run again to retry a failed line, or the deferred.csv that listed the line,
    /// brought a cancelled line back without a word, and the next run paid it; audit 81 H1: a
    /// copy naming its charge by one of its two names (or none) was taken for a new line.
    static func rejectCancelled(_ cancelled: [HeldLine], checker: LineChecker) {
        let batch = checker.batch
        for held in cancelled {
            // Later copies of the line_id are `duplicate_line_id` already.
            guard let index = checker.firstLine(withID: batch.symbols.intern(held.lineID)) else { continue }
            let line = batch.lines[index]
            guard line.status != .rejected, sameMoney(line, held, batch) else { continue }
            batch.set(
                index, .rejected, .lineConflict,
                "line_id \(held.lineID) was dropped by settle cancel (\(held.endedRun ?? "cancelled")): a cancelled line "
                    + "is not paid; to pay it, feed it under a new line_id")
        }
    }

    /// The lines not carried (a ledger rebuild stopped holding them; nothing brings them back)
    /// that the inputs do not list again. An input line whose order has such a line not listed
    /// is rejected `group_rejected`, its order with it: the order moves whole, as it would with
    /// its waiting lines brought back (audit 79 F4: one line of such an order, fed as status
    /// listed it, moved without the rest).
    static func rejectPartsOfOrdersNotCarried(
        _ notCarried: [HeldLine], checker: LineChecker, aliases: [String: String]
    ) -> [HeldLine] {
        let batch = checker.batch
        var fed: [(line: HeldLine, index: Int)] = []
        var missing: [HeldLine] = []
        for line in notCarried {
            if let index = checker.firstLine(withID: batch.symbols.intern(line.lineID)) {
                fed.append((line, index))
            } else {
                missing.append(line)
            }
        }
        var missingOfOrder: [String: [String]] = [:]
        for line in missing {
            guard case .key(let key) = HeldGroup(line, aliases: aliases) else { continue }
            missingOfOrder[key, default: []].append(line.lineID)
        }
        guard !missingOfOrder.isEmpty else { return missing }
        func reject(_ index: Int, others: [String]) {
            guard batch.lines[index].status != .rejected else { return }
            batch.set(
                index, .rejected, .groupRejected,
                "\(others.sorted().joined(separator: ", ")) of its order \(others.count == 1 ? "is" : "are") not "
                    + "carried since settle ledger rebuild (settle status lists them): feed the order whole, or settle "
                    + "cancel its lines")
        }
        // A line not carried fed again is of the order its record names, whatever group its
        // copy names (audit 81 M1: a copy naming another transfer_group moved half the order).
        for (line, index) in fed {
            guard case .key(let key) = HeldGroup(line, aliases: aliases), let others = missingOfOrder[key] else {
                continue
            }
            reject(index, others: others)
        }
        var bySymbol: [Symbol: [String]] = [:]
        for (key, others) in missingOfOrder { bySymbol[batch.symbols.intern(key)] = others }
        for index in batch.lines.indices {
            let group = batch.lines[index].group
            guard !group.isNone, let others = bySymbol[group] else { continue }
            reject(index, others: others)
        }
        return missing
    }

    /// Whether an input line has a held line's money content: payee, amount and currency.
    static func sameMoney(_ line: OrderLine, _ held: HeldLine, _ batch: Batch) -> Bool {
        line.amount == held.amountMinor && line.currency.code == held.currency
            && batch.text(batch.payee(of: line)) == held.payee
    }

    /// Why an export's copy of a waiting line draws on another charge than the held copy: the
    /// held copy names a `source_transaction` or `payment_intent` the copy does not name
    /// alike (audit 53 H2: a copy with no charge columns released a line that waited for a
    /// pending debit, and paid it from the balance after the debit failed); nil when it does.
    static func otherCharge(of line: OrderLine, than held: HeldLine, _ batch: Batch, _ aliases: [String: String])
        -> String?
    {
        guard let record = HeldRecord(held, aliases: aliases) else { return nil }
        for (column, symbol) in [(Column.sourceTransaction, line.charge), (.paymentIntent, line.paymentIntent)] {
            let named = record.value(column)
            guard !named.isEmpty, named != batch.text(symbol) else { continue }
            let copy = symbol.isNone ? "names none" : "names \(batch.text(symbol))"
            return "line_id \(held.lineID) waits in the ledger (since \(held.sinceRun)) on \(column.csvName) \(named); "
                + "this copy \(copy): settle cancel it first to replace it"
        }
        return nil
    }

    /// Why an export's copy of a held line with other money content is not used.
    static func conflictReason(_ id: String, _ held: HeldLine) -> String {
        let content = "\(held.payee) \(held.amountMinor) \(held.currency)"
        switch held.state {
        case .unresolved:
            return "line_id \(id) was sent by run \(held.sinceRun) with other money content (\(content)) and its "
                + "outcome is being resolved; this copy is not used"
        case .returned:
            return "line_id \(id) was paid out by run \(held.sinceRun) with other money content (\(content)) and "
                + "the payout came back: it is reported failed in this run; fix and feed back that line"
        default:
            return "line_id \(id) waits in the ledger (since \(held.sinceRun)) with other money content: "
                + "\(content); settle cancel it first to replace it"
        }
    }

    /// Lines of payouts that came back are `failed` in this run, with Stripe's reason, so
    /// they go to its errors.csv to be fixed and fed back: the ledger's copy, or the copy of
    /// an export that lists the line again with the same money content (it replaced the
    /// ledger's; before, it was planned as a new line and paid again, and the return was
    /// reported nowhere: audit 18 F2).
    static func markReturned(_ held: [HeldLine], batch: Batch) {
        var returned: [Symbol: HeldLine] = [:]
        for line in held where line.state == .returned {
            returned[batch.symbols.intern(line.lineID)] = line
        }
        guard !returned.isEmpty else { return }
        for index in batch.lines.indices where batch.lines[index].status != .rejected {
            guard let held = returned[batch.lines[index].lineID] else { continue }
            batch.set(index, .failed, ReasonCode.payout(status: "", detail: held.reasonCode), held.reason)
            batch.returnedPayoutLines.append(Int32(index))
        }
    }

    /// Lines sent by a run that did not learn the outcome, which an apply of another folder
    /// then sent and Stripe refused for good, are `failed` in this run with Stripe's code and
    /// message, in its errors.csv: a person decides whether they go again. Before, the next
    /// run sent them again under a new attempt by itself, and the refusal was in no
    /// results.csv. A refused transfer or reversal stops the rest of its order (Planner).
    static func markRefused(_ held: [HeldLine], batch: Batch, ledger: LedgerStore?) throws(CommandFailure) {
        guard let ledger else { return }
        var refused: [Symbol: (code: String, message: String)] = [:]
        for line in held where line.state == .unresolved {
            do throws(LedgerError) {
                guard let known = try ledger.line(line.lineID), known.status == .failed,
                    let instruction = try ledger.instruction(known.instructionID), instruction.refusedByStripe,
                    let code = instruction.errorCode
                else { continue }
                let by = instruction.sentBy.map { " sent by run \($0)" } ?? ""
                var said = instruction.errorMessage ?? code
                while said.hasSuffix(".") { said.removeLast() }
                refused[batch.symbols.intern(line.lineID)] = (
                    code,
                    "Stripe refused it for good (\(instruction.id)\(by), whose own files never said so): \(said); "
                        + "fix it and feed it back"
                )
            } catch {
                throw CommandFailure(
                    .tryAgain, "the ledger could not tell what became of a line sent earlier: \(error)")
            }
        }
        guard !refused.isEmpty else { return }
        for index in batch.lines.indices where batch.lines[index].status != .rejected {
            guard let refusal = refused[batch.lines[index].lineID] else { continue }
            batch.setRefused(index, code: refusal.code, message: refusal.message)
        }
    }

    /// `name` of a `name:line` source.
    static func sourceName(_ source: String) -> String {
        guard let colon = source.lastIndex(of: ":"), Int(source[source.index(after: colon)...]) != nil else {
            return source
        }
        return String(source[..<colon])
    }

    static func sourceLine(_ source: String) -> Int {
        guard let colon = source.lastIndex(of: ":") else { return 2 }
        return max(2, Int(source[source.index(after: colon)...]) ?? 2)
    }
}
