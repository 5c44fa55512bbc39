public import Foundation
import SettleApply
public import SettleCore
public import SettleLedger
import SettleWrite

extension PlanFolder {
    /// What ``adoptUnfinished(ledger:records:run:)`` found, by what the ledger now holds.
    public struct Adopted: Sendable, Equatable {
        /// Lines the apply never sent (or that waited already): they wait in the ledger now.
        public var waiting = 0
        /// Lines sent with no known outcome: the next run resolves them at Stripe and reports them.
        public var unresolved = 0
        /// Lines Stripe refused for good (``LedgerInstruction/refusedByStripe``): held until the
        /// next plan reports them `failed` with Stripe's code, in its errors.csv, for a person
        /// to fix and feed back; nothing sends them again by itself.
        public var refused = 0
        /// Lines Stripe made before the process died: the ledger has them settled, no run's
        /// results.csv does until the folder is applied again.
        public var settledUnreported = 0
        /// Lines an earlier run left unknown, of orders the plan decided against, that its apply
        /// found never made and did not send: no longer held, and reported `failed` by no
        /// results.csv until the folder is applied again.
        public var decidedUnreported = 0
        /// Returns the killed run's plan reported (its rows `failed`, in its errors.csv) when its
        /// apply never began: no applied folder reports them until `settle apply` of it does
        /// (audit 64 F1: the run taking it over said nothing of them).
        public var returnsInUnappliedPlan = 0
        /// The same when its apply began and was stopped before its files: the folder counts
        /// them once applied again (audit 69 F4: nothing named them, and a plan applied later
        /// that reported them too left them to it).
        public var returnsInStoppedApply = 0
        /// Lines of a payout the killed run made that came back before anything held them (the
        /// run died before its files, so no hold followed the payout): held `returned`, so the
        /// next run reports them `failed` with Stripe's reason, for a person to fix and feed
        /// back (audit 66 F4: they waited as never sent, and the next run paid them again to the
        /// method that had returned the payout, the return reported nowhere).
        public var cameBack = 0

        public init() {}
        public var total: Int { waiting + unresolved + refused + cameBack }
    }

    /// The folder of an apply that never ended (the process was killed: nothing rewrote its
    /// files, so its lines are `planned` or `deferred` as the plan left them): the ledger takes
    /// over what they need, as the rewrite of a finished apply would have given it, so the
    /// daily loop carries them without anyone applying the folder by hand. A line nothing
    /// claimed (never sent, or released unsent) and a line the plan deferred wait (the next run
    /// plans them); a line sent with no known outcome is unresolved (the next run resolves and
    /// reports it); so is a line Stripe refused for good: the next run reports it `failed` with
    /// Stripe's code (``HeldInputs``), and a person decides whether it goes again (found beside
    /// audit 49 F2: it waited, and the next run sent it again by itself). A line the ledger holds as
    /// `returned` keeps that hold: the next run reports the return (audit 49 F2: a payout that
    /// came back was taken for a refusal of the killed run and paid again, the return reported
    /// nowhere). Holding again is harmless, so adopting twice ends the same.
    /// A re-apply of the folder later still works: the ledger's line claims keep every line
    /// once.
    ///
    /// - Parameter run: the run that never ended (the held lines' `since_run`).
    public func adoptUnfinished(ledger: LedgerStore, records: any SpoolRecordSource, run: String)
        throws(SettleError) -> Adopted
    {
        typealias F = ResultsFile.Field
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        func ledgerRead<T>(_ body: () throws(LedgerError) -> T) throws(SettleError) -> T {
            do {
                return try body()
            } catch {
                throw SettleError(.ledgerFailed, "the ledger could not say what became of \(folder)'s lines: \(error)")
            }
        }
        var held = HeldLines(
            layout: correctionLayout, ledger: ledger, records: records, run: run, plannedAt: plannedAt)
        var adopted = Adopted()
        let waits = "; it waits in the ledger for the next run"
        var returned: [String: HeldLine] = [:]
        for hold in try ledgerRead({ () throws(LedgerError) in try ledger.heldLines([.returned]) }) {
            returned[hold.lineID] = hold
        }
        // Returns the killed run's plan reported (its row `failed` with the hold's reason, the
        // hold begun before that plan): its files say so and its summary counts them, so their
        // holding ends, as its rewrite would have ended it. Before, the next run reported the
        // return again (counted twice in the days' payouts_returned), and a fix fed to it from
        // the killed run's errors.csv was taken for the return once more (audit 50 fuzzer, seed
        // 102 without rebuilds).
        var reportedReturns: [String] = []
        // Lines whose holding another run ended after this folder's plan (it settled, reported
        // or rejected them, or `settle cancel` dropped them): not the killed run's to hold
        // again, as its rewrite would not have held them (``PlanFolder/rewrite``'s
        // `endedElsewhere`). Before (audit 51 F3, F7), the take-over held them to wait, and
        // the next run paid a cancelled order, or a line whose payout came back and was
        // reported, with nobody feeding it back.
        var endedElsewhere: [String: HeldLineEnd] = [:]
        if let plannedAt {
            endedElsewhere = try ledgerRead { () throws(LedgerError) in
                try ledger.holdsEnded(since: plannedAt, notBy: run)
            }
        }
        let applyBegan = wasApplied
        // The orders its plan decided against, all of them before any line is held.
        let decided = try rowDecisions()
        try eachRow { (row, entry) throws(SettleError) in
            let status = text(row[F.status.rawValue])
            if status == LineStatus.failed.name, let plannedAt,
                case let lineID = text(row[F.lineID.rawValue]).trimmingFormulaGuard(), let hold = returned[lineID],
                hold.sinceAt < plannedAt,
                hold.reasonCode == text(row[F.reasonCode.rawValue]).trimmingFormulaGuard()
            {
                reportedReturns.append(lineID)
                if applyBegan { adopted.returnsInStoppedApply += 1 } else { adopted.returnsInUnappliedPlan += 1 }
                return
            }
            // A line its plan rejected (its order decided against) that an earlier run left
            // waiting leaves the queue, as the rewrite would have released it (audit 85 F2: the
            // next run paid the order the killed run's plan had rejected, its decision recorded).
            if status == LineStatus.rejected.name {
                try held.add(row, status: .rejected, entry: entry)
                return
            }
            guard
                status == LineStatus.planned.name || status == LineStatus.deferred.name
                    || status == LineStatus.unknown.name
            else { return }
            let lineID = text(row[F.lineID.rawValue]).trimmingFormulaGuard()
            let line = try ledgerRead { () throws(LedgerError) in try ledger.line(lineID) }
            var state: HeldLine.State
            var refused = false
            if endedElsewhere[lineID] != nil, line?.status != .inFlight, line?.status != .unknown { return }
            switch line?.status {
            case .none:
                state = .waiting
            case .inFlight?, .unknown?:
                state = .unresolved
                row[F.instructionID.rawValue] = Array((line?.instructionID ?? "").utf8)
            case .settled?:
                if status != LineStatus.unknown.name { adopted.settledUnreported += 1 }
                return
            case .failed?:
                // Released: never sent (it waits), refused by Stripe for good (the next run reports
                // it, with the rest of its order), or a payout that came back (its hold says so).
                if returned[lineID] != nil { return }
                state = .waiting
                let instruction = try ledgerRead { () throws(LedgerError) in
                    try ledger.instruction(line?.instructionID ?? "")
                }
                if let instruction, instruction.dispatch.kind == LineKind.payout.name,
                    let object = instruction.stripeID, !object.isEmpty, instruction.sentBy.map({ $0 == run }) ?? true
                {
                    // The killed run sent it, Stripe made it (it has an object), and it failed
                    // since: it came back. Not an earlier attempt's payout, whose return an
                    // earlier run reported, when the killed run planned a fix fed back under the
                    // same instruction and never sent it (audit 68 N1: the take-over reported
                    // the old return again and let the fix go unpaid).
                    state = .returned
                    row[F.instructionID.rawValue] = Array(instruction.id.utf8)
                    row[F.reasonCode.rawValue] = Array((instruction.errorCode ?? "payout_returned").utf8)
                    row[F.reason.rawValue] = Array(
                        (instruction.errorMessage ?? "the payout \(object) came back at Stripe").utf8)
                } else if let instruction, instruction.refusedByStripe {
                    refused = true
                    state = .unresolved
                    row[F.instructionID.rawValue] = Array(instruction.id.utf8)
                } else if status == LineStatus.unknown.name,
                    decided[text(row[F.group.rawValue]).trimmingFormulaGuard()] != nil
                {
                    // An earlier run's line brought back unresolved, of an order this plan
                    // decided against: its apply found it never made and sent nothing, and its
                    // rewrite would have reported it `failed` and held it no more. It leaves the
                    // queue (audit 85 F2, an aggregated payout's line: it waited, and the next
                    // run paid the order's payout line with the other order's).
                    try held.add(row, status: .rejected, entry: entry)
                    adopted.decidedUnreported += 1
                    return
                }
            }
            if state == .waiting, status != LineStatus.deferred.name, !refused {
                row[F.reasonCode.rawValue] = Array(ReasonCode.scheduled.code.utf8)
                row[F.reason.rawValue] = Array(("not sent: run \(run) in \(folder) \(Self.neverEnded)" + waits).utf8)
            }
            try held.add(row, status: nil, entry: entry, adopted: state)
            if refused {
                adopted.refused += 1
            } else if state == .returned {
                adopted.cameBack += 1
            } else if state == .unresolved {
                adopted.unresolved += 1
            } else {
                adopted.waiting += 1
            }
        }
        held.write()
        if let failure = held.failure { throw failure }
        // What its rows and its plan's look-ups decided, as its rewrite would have recorded it:
        // the orders it decided against (an older folder applied later moves nothing of them)
        // and the charges found failed (a later offline plan rejects their lines, whatever the
        // export says). Before, a take-over recorded neither: the older folder paid the order
        // the killed run had rejected, and an offline plan paid on the failed charge.
        _ = try ledgerRead { () throws(LedgerError) in
            if let plannedAt { try ledger.recordDecidedOrders(decided, run: run, at: plannedAt) }
            try ledger.recordFailedCharges(Self.failedCharges(manifest: manifest, run: run))
            try ledger.endHolding(reportedReturns, to: .released, run: run, from: [.returned])
        }
        return adopted
    }

    /// The lines of the payouts Stripe has not posted yet (`payouts`, by instruction id), for
    /// a ledger `settle ledger rebuild` restored: held as followed, with their original
    /// records from this folder, as the apply that sent them held them. The run that learns
    /// such a payout came back then reports its lines failed, in its errors.csv (audit 16: a
    /// rebuilt ledger never followed them, and a payout that failed later was reported
    /// nowhere). Holding a line again is harmless. Returns how many lines were held.
    /// `unlessSettled`: not a line the ledger holds settled (a payout that came back whose line
    /// a later payout paid), nor one whose row's instruction's last payout (`lastPayout`) a
    /// folder reported the return of already (`reported`: line → payouts whose return a row
    /// of it reported, ``linesReportedReturned(_:)``).
    /// `state`: `released` for the lines of a payout Stripe posted, held so that a return
    /// learned later makes them `returned` (``LedgerStore/recordPayoutStatus``).
    public func holdFollowing(
        _ payouts: Set<String>, ledger: LedgerStore, records: any SpoolRecordSource, unlessSettled: Bool = false,
        reported: [String: Set<String>] = [:], lastPayout: [String: String] = [:], state: HeldLine.State = .following
    ) throws(SettleError) -> Int {
        typealias F = ResultsFile.Field
        guard !payouts.isEmpty else { return 0 }
        var held = HeldLines(layout: correctionLayout, ledger: ledger, records: records, run: runID)
        var count = 0
        try eachRow { (row, entry) throws(SettleError) in
            guard payouts.contains(String(decoding: row[F.instructionID.rawValue], as: UTF8.self)),
                row[F.kind.rawValue] == Array(LineKind.payout.name.utf8)
            else { return }
            if unlessSettled {
                let id = String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard()
                let instruction = String(decoding: row[F.instructionID.rawValue], as: UTF8.self)
                if let payout = lastPayout[instruction], reported[id]?.contains(payout) == true { return }
                let known: LedgerLine?
                do {
                    known = try ledger.line(id)
                } catch {
                    throw SettleError(.ledgerFailed, "the ledger could not say what became of line \(id): \(error)")
                }
                if known?.status == .settled { return }
            }
            try held.add(row, status: nil, entry: entry, adopted: state)
            count += 1
        }
        held.write()
        if let failure = held.failure { throw failure }
        return count
    }

    /// The lines of `only` this applied folder left deferred that `ledger` has no record of at
    /// all (no claim, no holding), recorded not carried under this folder's run, with their
    /// records (``LedgerStore/recordNotCarried(_:)``), by `settle ledger rebuild`: `settle
    /// status` lists them, later rebuilds name them, `settle cancel` records a cancel the ledger
    /// lost, and a folder applied again does not hold them waiting again (audit 77 H3, audit 78
    /// F1: it did, and the next run paid them unfed, a cancelled line too). `only`: the lines
    /// this folder is the newest given to report deferred (``LedgerCommand``). Returns how many.
    public func recordNotCarried(
        _ only: Set<String>, ledger: LedgerStore, records: any SpoolRecordSource
    ) throws(SettleError) -> Int {
        try recordDeferred(only, cancelled: false, ledger: ledger, records: records)
    }

    /// The lines of `only` whose row in this applied folder says `settle cancel` dropped them,
    /// recorded cancelled in `ledger` with their records (``LedgerStore/recordCancelled(_:run:)``),
    /// by `settle ledger rebuild`, when it has no record of them or does not carry them: the
    /// cancel the folder records is the ledger's again, so a copy fed again is refused and
    /// `settle status` says cancelled (audit 79 F1, F2: the rebuilt ledger had lost the cancel,
    /// named the line to be fed, and fed it was paid). `only`: the lines whose newest row in
    /// the folders given is this folder's cancel (``LedgerCommand``). Returns how many.
    public func recordCancelled(
        _ only: Set<String>, ledger: LedgerStore, records: any SpoolRecordSource
    ) throws(SettleError) -> Int {
        try recordDeferred(only, cancelled: true, ledger: ledger, records: records)
    }

    /// ``recordNotCarried(_:ledger:records:)`` (`cancelled` false: rows `deferred`, lines the
    /// ledger has no record of) or ``recordCancelled(_:ledger:records:)`` (rows of the cancel;
    /// the ledger keeps its own record of a line it carries).
    private func recordDeferred(
        _ only: Set<String>, cancelled: Bool, ledger: LedgerStore, records: any SpoolRecordSource
    ) throws(SettleError) -> Int {
        typealias F = ResultsFile.Field
        guard bindsLaterRuns, !only.isEmpty else { return 0 }
        var held = HeldLines(layout: correctionLayout, ledger: ledger, records: records, run: runID)
        held.recording = cancelled ? .cancelled(by: lastAppliedRunID ?? runID) : .notCarried
        var count = 0
        try eachRow { (row, entry) throws(SettleError) in
            guard row[F.status.rawValue].elementsEqual(LineStatus.deferred.name.utf8),
                !cancelled || row[F.reason.rawValue].elementsEqual(Self.droppedByCancel.utf8)
            else { return }
            let id = String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard()
            guard only.contains(id) else { return }
            do {
                guard try cancelled || ledger.line(id) == nil && ledger.holdState(of: id) == nil else { return }
            } catch {
                throw SettleError(.ledgerFailed, "the ledger could not say what became of line \(id): \(error)")
            }
            try held.add(row, status: nil, entry: entry, adopted: .waiting)
            count += 1
        }
        held.write()
        if let failure = held.failure { throw failure }
        return count
    }

    /// The lines this folder reports `unknown` (or still `planned`: its apply was killed before
    /// its files) under one of `made` (instructions Stripe holds an object of, found by
    /// `settle ledger rebuild`), held as unresolved with their records,
    /// as the apply that left them unknown held them: the next run brings them back and reports
    /// them settled, so one day's sums count the object (audit 38 Q1: after a rebuild no run
    /// did). Not a line of `reported` (a folder reports it settled already). Returns the
    /// instructions of the lines held.
    public func holdUnresolved(
        _ made: Set<String>, ledger: LedgerStore, records: any SpoolRecordSource, reported: Set<String>
    ) throws(SettleError) -> Set<String> {
        typealias F = ResultsFile.Field
        guard wasApplied, !made.isEmpty else { return [] }
        var held = HeldLines(layout: correctionLayout, ledger: ledger, records: records, run: runID)
        var instructions: Set<String> = []
        try eachRow { (row, entry) throws(SettleError) in
            // The status's bytes first: most rows are not unknown, and make no string. A row
            // still `planned` is one of a run killed before its files, whose instruction Stripe
            // holds: as unknown (audit 55 R4: such lines were reported by no run after the
            // rebuild, and no day counted their objects).
            guard
                row[F.status.rawValue].elementsEqual(LineStatus.unknown.name.utf8)
                    || row[F.status.rawValue].elementsEqual(LineStatus.planned.name.utf8)
            else { return }
            let instruction = String(decoding: row[F.instructionID.rawValue], as: UTF8.self)
            guard made.contains(instruction),
                !reported.contains(String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard())
            else { return }
            try held.add(row, status: nil, entry: entry, adopted: .unresolved)
            instructions.insert(instruction)
        }
        held.write()
        if let failure = held.failure { throw failure }
        return instructions
    }

    /// The charges Stripe said failed (or gave no charge for) that this folder knows of, when
    /// it binds later runs (``bindsLaterRuns``): its plan's look-ups (the manifest's `facts`)
    /// and what its applies learned (the manifest's `apply.failed_charges`: their own look-ups, transfers Stripe refused
    /// `charge_failed`). What its applies recorded in the ledger, which `settle ledger rebuild`
    /// restores.
    public var failedCharges: [FailedCharge] {
        guard bindsLaterRuns else { return [] }
        let run = lastAppliedRunID ?? runID
        return Self.failedCharges(manifest: manifest, run: run) + Self.learnedAtApply(manifest: manifest, run: run)
    }

    /// The charges this plan's own look-ups found failed (its manifest's facts), applied or not.
    public var lookedUpFailed: [FailedCharge] { Self.failedCharges(manifest: manifest, run: runID) }

    /// What this applied folder's last apply left the ledger knowing of failed charges, as its
    /// rewrite recorded it: the charges failed (its plan's look-ups, what its applies learned,
    /// less what the apply found put right) and those its look-ups found succeeded or pending
    /// (forgotten). `ledger rebuild` plays the folders oldest first.
    public var chargeVerdicts: (failed: [FailedCharge], putRight: Set<String>) {
        guard bindsLaterRuns else { return ([], []) }
        var putRight: Set<String> = []
        if case .array(let charges)? = manifest["apply"]?["charges_put_right"] {
            putRight = Set(charges.compactMap(\.stringValue))
        }
        let failed = failedCharges.filter { !putRight.contains($0.charge) }
        return (failed, putRight.union(lookedUpNotFailed).subtracting(failed.map(\.charge)))
    }

    /// The charges this plan's own look-ups found succeeded or pending: what the ledger
    /// remembered failed of them no longer holds.
    public var lookedUpNotFailed: Set<String> {
        guard case .array(let charges)? = manifest["facts"]?["charges"] else { return [] }
        return Set(
            charges.compactMap { charge in
                ["usable", "pending"].contains(charge["verdict"]?.stringValue ?? "")
                    ? charge["charge"]?.stringValue : nil
            })
    }

    /// The failed charges among a manifest's facts (`facts.charges`, written from
    /// ``ChargeFact``s), as recorded by `run`.
    static func failedCharges(manifest: JSON, run: String) -> [FailedCharge] {
        guard case .array(let charges)? = manifest["facts"]?["charges"] else { return [] }
        return charges.compactMap { charge in
            guard let id = charge["charge"]?.stringValue, charge["verdict"]?.stringValue == "refused" else {
                return nil
            }
            var fact = ChargeFact(charge: id, verdict: .refused(charge["reason"]?.stringValue ?? ""))
            fact.status = charge["status"]?.stringValue
            fact.paymentIntent = charge["payment_intent"]?.stringValue
            fact.requestID = charge["request_id"]?.stringValue
            fact.checkedAt = charge["checked_at"]?.stringValue
            return FailedCharge(fact, run: run)
        }
    }

    /// The failed charges a manifest's applies learned (`apply.failed_charges`).
    static func learnedAtApply(manifest: JSON, run: String) -> [FailedCharge] {
        guard case .array(let charges)? = manifest["apply"]?["failed_charges"] else { return [] }
        return charges.compactMap { charge in
            guard let id = charge["charge"]?.stringValue else { return nil }
            return FailedCharge(
                charge: id, paymentIntent: charge["payment_intent"]?.stringValue,
                refusal: charge["refusal"]?.stringValue, run: charge["run"]?.stringValue ?? run,
                checkedAt: charge["checked_at"]?.stringValue ?? "", requestID: charge["request_id"]?.stringValue ?? "")
        }
    }

    /// `apply.failed_charges` of the manifest: what the applies learned.
    static func json(_ charges: [FailedCharge]) -> JSON {
        func text(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }
        return .array(
            charges.map { charge in
                .object([
                    ("charge", .string(charge.charge)), ("payment_intent", text(charge.paymentIntent)),
                    ("refusal", text(charge.refusal)), ("run", .string(charge.run)),
                    ("checked_at", .string(charge.checkedAt)), ("request_id", .string(charge.requestID)),
                ])
            })
    }

    /// The orders of this plan with a line on a charge Stripe said failed (`failed`, by charge
    /// id or payment intent, as charges.csv keys its rows), each with why: an apply stops them
    /// whole, and resolves without sending again what an earlier run left open of them.
    public func ordersOnFailedCharges(_ failed: [FailedCharge]) throws(SettleError) -> [String: (
        charge: String, key: String, why: String
    )] {
        guard !failed.isEmpty else { return [:] }
        var byKey: [String: (FailedCharge, intent: Bool)] = [:]
        for charge in failed {
            byKey[charge.charge] = (charge, false)
            if let intent = charge.paymentIntent, byKey[intent] == nil { byKey[intent] = (charge, true) }
        }
        let charges = try plannedCharges()
        var why: [Int: (charge: String, key: String, why: String)] = [:]
        for (slot, row) in charges.enumerated() {
            guard let (charge, intent) = byKey[row.charge] else { continue }
            let name = intent ? "the charge of payment intent \(row.charge)" : "charge \(row.charge)"
            why[slot] = (
                charge.charge, row.charge,
                StripeFacts.failure(of: charge.fact, name: name, id: intent ? nil : charge.charge)
            )
        }
        guard !why.isEmpty else { return [:] }
        var orders: [String: (charge: String, key: String, why: String)] = [:]
        try eachRow { (row, entry) throws(SettleError) in
            // A reversal brings money back: a failed charge never stops it (audit 43 N1).
            guard let slot = entry.charge, let reason = why[slot],
                !row[ResultsFile.Field.kind.rawValue].elementsEqual(LineKind.reversal.name.utf8)
            else { return }
            let group = String(decoding: row[ResultsFile.Field.group.rawValue], as: UTF8.self).trimmingFormulaGuard()
            if !group.isEmpty, orders[group] == nil { orders[group] = reason }
        }
        return orders
    }

    /// A transfer line of the plan that waits (`deferred`: a later `transfer_on`, a pending
    /// charge): what a late apply counts as allocated on its charge beside what it sends.
    public struct WaitingTransfer: Sendable, Equatable {
        public var line: String
        public var order: String
        public var amount: Int64
        public var currency: String
    }

    /// The plan's waiting transfer lines (as results.csv now says), by the key of the charge
    /// each draws on (charges.csv's, which the ledger records a transfer's charge under).
    public func waitingTransfers() throws(SettleError) -> [String: [WaitingTransfer]] {
        typealias F = ResultsFile.Field
        let charges = try plannedCharges()
        var found: [String: [WaitingTransfer]] = [:]
        try eachRow { (row, entry) throws(SettleError) in
            guard let slot = entry.charge, slot < charges.count,
                row[F.status.rawValue].elementsEqual(LineStatus.deferred.name.utf8),
                row[F.kind.rawValue].elementsEqual(Instruction.Kind.transfer.name.utf8),
                let amount = Int64(String(decoding: row[F.amountMinor.rawValue], as: UTF8.self))
            else { return }
            func cell(_ field: F) -> String {
                String(decoding: row[field.rawValue], as: UTF8.self).trimmingFormulaGuard()
            }
            found[charges[slot].charge, default: []].append(
                WaitingTransfer(line: cell(.lineID), order: cell(.group), amount: amount, currency: cell(.currency)))
        }
        return found
    }

    /// The orders this applied folder's results.csv decided against, each with the deciding
    /// line and why: what its apply recorded in the ledger's decided orders, which `settle
    /// ledger rebuild` restores (audit 38 Q8: a rebuilt ledger forgot them, and the re-apply of
    /// an older folder its warning advised paid a payout of an order a newer folder had
    /// rejected `charge_failed`). None for a folder that binds no later run (``bindsLaterRuns``).
    public func decidedOrders() throws(SettleError) -> [String: (line: String, reason: String)] {
        guard bindsLaterRuns else { return [:] }
        return try rowDecisions()
    }

    /// The orders results.csv's rows decide against (``noteDecision(of:in:)``), whether or not
    /// the folder binds later runs.
    func rowDecisions() throws(SettleError) -> [String: (line: String, reason: String)] {
        var decided: [String: (line: String, reason: String)] = [:]
        try eachRow { (row, _) throws(SettleError) in Self.noteDecision(of: row, in: &decided) }
        return decided
    }

    /// Adds the order a results row decides against (``decidesItsOrder(status:reasonCode:group:kind:)``)
    /// to `decided`, by its group: the deciding line and why.
    static func noteDecision(of row: [[UInt8]], in decided: inout [String: (line: String, reason: String)]) {
        typealias F = ResultsFile.Field
        func cell(_ field: F) -> String {
            String(decoding: row[field.rawValue], as: UTF8.self).trimmingFormulaGuard()
        }
        // Only rejected and failed rows decide: their status's bytes first, no string made.
        let statusBytes = row[F.status.rawValue]
        guard
            statusBytes.elementsEqual(LineStatus.rejected.name.utf8)
                || statusBytes.elementsEqual(LineStatus.failed.name.utf8),
            let status = LineStatus(name: cell(.status)),
            decidesItsOrder(status: status, reasonCode: cell(.reasonCode), group: cell(.group), kind: cell(.kind))
        else { return }
        decided[cell(.group)] = (cell(.lineID), "\(cell(.reasonCode)): \(cell(.reason))")
    }

    /// What this folder's results.csv says became of a line, for `settle ledger rebuild`.
    public enum LineFate: Sendable, Equatable {
        /// Left to wait (`deferred`), or sent with its outcome not known (`unknown`), or planned
        /// by an apply that never rewrote the folder (killed, or its ledger failed: the row still
        /// says `planned`, sent or not), which is `unknown` too: `settle apply` of the folder
        /// settles it (audit 84 F4: taken for decided, such a line was named by no rebuild).
        case deferred, unknown
        /// `deferred` with the reason that `settle cancel` dropped it: an apply after the cancel
        /// (``appliedAt``) wrote it (audit 78 F4: such a line was named to be fed again, and
        /// fed whole the folder's deferred.csv paid it).
        case cancelled
        /// Anything else: rejected, failed, settled, netted, ….
        case decided
    }

    /// What this folder's results.csv says became of each line `keep` takes (given its id and
    /// fate), leaving out the rows of copies that do not count (`duplicate_line_id`,
    /// `line_conflict`): the row of the copy that counts says.
    public func lineFates(where keep: (String, LineFate) -> Bool) throws(SettleError) -> [String: LineFate] {
        typealias F = ResultsFile.Field
        var found: [String: LineFate] = [:]
        try eachRow { (row, _) throws(SettleError) in
            guard !ReasonCode.copyCodes.contains(String(decoding: row[F.reasonCode.rawValue], as: UTF8.self)) else {
                return
            }
            let fate: LineFate
            if row[F.status.rawValue].elementsEqual(LineStatus.unknown.name.utf8)
                || row[F.status.rawValue].elementsEqual(LineStatus.planned.name.utf8)
            {
                fate = .unknown
            } else if row[F.status.rawValue].elementsEqual(LineStatus.deferred.name.utf8) {
                fate = row[F.reason.rawValue].elementsEqual(Self.droppedByCancel.utf8) ? .cancelled : .deferred
            } else {
                fate = .decided
            }
            let id = String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard()
            if keep(id, fate) { found[id] = fate }
        }
        return found
    }

    /// The lines this folder's results.csv reports with this status.
    public func lines(withStatus status: LineStatus) throws(SettleError) -> Set<String> {
        typealias F = ResultsFile.Field
        var found: Set<String> = []
        try eachRow { (row, _) throws(SettleError) in
            guard String(decoding: row[F.status.rawValue], as: UTF8.self) == status.name else { return }
            found.insert(String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard())
        }
        return found
    }

    /// The lines this folder's results.csv reports `settled` by one of these payouts (Stripe
    /// ids), each with its payout: this folder counted the payout in its `paid_out`.
    public func linesReportedPaid(_ payouts: Set<String>) throws(SettleError) -> [(payout: String, line: String)] {
        typealias F = ResultsFile.Field
        guard !payouts.isEmpty else { return [] }
        var found: [(String, String)] = []
        try eachRow { (row, _) throws(SettleError) in
            guard String(decoding: row[F.status.rawValue], as: UTF8.self) == LineStatus.settled.name,
                String(decoding: row[F.kind.rawValue], as: UTF8.self) == LineKind.payout.name
            else { return }
            let payout = String(decoding: row[F.stripeID.rawValue], as: UTF8.self).trimmingFormulaGuard()
            guard payouts.contains(payout) else { return }
            found.append((payout, String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard()))
        }
        return found
    }

    /// The lines this folder's results.csv reports `failed` because one of these payouts (Stripe
    /// ids) came back, each with the payouts its rows name: the reason names the payout
    /// (``LedgerStore/recordPayoutStatus``).
    public func linesReportedReturned(_ payouts: Set<String>) throws(SettleError) -> [String: Set<String>] {
        typealias F = ResultsFile.Field
        guard !payouts.isEmpty else { return [:] }
        var found: [String: Set<String>] = [:]
        try eachRow { (row, _) throws(SettleError) in
            guard String(decoding: row[F.status.rawValue], as: UTF8.self) == LineStatus.failed.name else { return }
            let reason = String(decoding: row[F.reason.rawValue], as: UTF8.self)
            let named = reason.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).map(String.init)
            let returned = named.filter(payouts.contains)
            guard !returned.isEmpty else { return }
            let line = String(decoding: row[F.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard()
            found[line, default: []].formUnion(returned)
        }
        return found
    }

    /// Whether the folder's files are the rewrite of this apply run's (its last apply
    /// attempt): the run got as far as putting them in place, or among their renames (which
    /// locking the folder finished), and was stopped before the ledger recorded its end.
    public func holdsRewrite(ofRun run: String) -> Bool { lastAppliedRunID == run }

    /// An earlier apply of this folder that never ended in the ledger, ended now: with the
    /// manifest's exit status and counts when the folder holds its rewrite, none for one
    /// killed before its rewrite.
    public func ended(_ run: LedgerRun, at now: Date = Date()) -> LedgerRun {
        var ended = run
        ended.endedAt = now
        if holdsRewrite(ofRun: run.id), let status = manifest["exit_status"]?.intValue {
            ended.exitStatus = Int(status)
            if case .object = manifest["counts"] { ended.counts = manifest["counts"]?.encoded() }
        }
        return ended
    }

    /// What the rewrite of an apply does once its files are in place, for one stopped right
    /// there (``holdsRewrite(ofRun:)``): the outcomes its results.csv reports that the ledger
    /// still lists as reported by no folder (another folder's apply learnt them) are marked
    /// reported, so no later folder counts them again. The rewrite chose them by the same rule:
    /// a `settled` row under such an instruction. Returns how many.
    public func markReportedOutcomes(ledger: LedgerStore) throws(SettleError) -> Int {
        typealias F = ResultsFile.Field
        func ledgerCall<T>(_ body: () throws(LedgerError) -> T) throws(SettleError) -> T {
            do {
                return try body()
            } catch {
                throw SettleError(.ledgerFailed, "the ledger could not mark what \(folder) reported: \(error)")
            }
        }
        let unreported = try ledgerCall { () throws(LedgerError) in try ledger.unreportedOutcomes() }
        guard !unreported.isEmpty else { return 0 }
        var reported: Set<String> = []
        try eachRow { (row, _) throws(SettleError) in
            guard String(decoding: row[F.status.rawValue], as: UTF8.self) == LineStatus.settled.name else { return }
            let instruction = String(decoding: row[F.instructionID.rawValue], as: UTF8.self)
            if unreported.contains(instruction) { reported.insert(instruction) }
        }
        try ledgerCall { () throws(LedgerError) in try ledger.markReported(reported) }
        return reported.count
    }

    /// The lines of an applied folder that netted to zero and were recorded so by its apply
    /// (`.settle/netted.jsonl`, those results.csv still says `netted`: an order its apply
    /// stopped recorded none): what `settle ledger rebuild` restores of them, since no Stripe
    /// object says they settled (audit 32 N5: a rebuilt ledger forgot them, and the transfer
    /// line fed again alone paid an order its refund had cancelled). None for a folder never
    /// applied.
    public func nettedByItsApply() throws(SettleError) -> [LedgerStore.NettedLine] {
        guard wasApplied else { return [] }
        let lines = try NettedLines.read(folder: folder)
        guard !lines.isEmpty else { return [] }
        var netted: Set<String> = []
        try eachRow { (row, _) throws(SettleError) in
            guard String(decoding: row[ResultsFile.Field.status.rawValue], as: UTF8.self) == LineStatus.netted.name
            else { return }
            netted.insert(
                String(decoding: row[ResultsFile.Field.lineID.rawValue], as: UTF8.self).trimmingFormulaGuard())
        }
        return lines.filter { netted.contains($0.lineID) }
    }

    /// The payment intent the plan's lines named with each charge (`charge` NUL `currency`):
    /// ``ChargesFile/intentsName``, none for a folder written before it.
    public func chargeIntents() -> [String: String] {
        guard let bytes = FileManager.default.contents(atPath: path(ChargesFile.intentsName)) else { return [:] }
        var intents: [String: String] = [:]
        for fields in CSVScanner.records([UInt8](bytes)).dropFirst() where fields.count == 3 {
            func text(_ field: [UInt8]) -> String {
                field.withUnsafeBytes { String(decoding: CSVScanner.unguarded($0), as: UTF8.self) }
            }
            intents[text(fields[0]) + "\u{0}" + text(fields[1])] = text(fields[2])
        }
        return intents
    }

    /// The charges an applied folder's `.settle/charges-counted.csv` says a run counted (charges.csv's
    /// `counted_in` column in a folder written before it), as the
    /// ledger recorded them: what `settle ledger rebuild` restores, so that no later run counts
    /// a charge's gross and fee again (audit 32 N6: the rebuilt ledger knew the transfers on a
    /// charge, not that a run had counted it, and the next run counted it a second time).
    /// With them, what this folder's run paid out for each charge's orders (charges.csv
    /// `paid_out`), so that later runs' retained so far counts it (audit 33 O2: it was
    /// forgotten, and retained was off by the payouts).
    public func countedCharges() throws(SettleError) -> (
        counted: [(charge: String, currency: String, run: String, gross: Int64, fee: Int64, status: String)],
        paidOut: [(charge: String, currency: String, amount: Int64)]
    ) {
        guard wasApplied, let bytes = FileManager.default.contents(atPath: path("charges.csv")) else { return ([], []) }
        var rows = try PlanFolder.plannedCharges([UInt8](bytes), withPaidOut: true)
        // The counting run is in the sealed sidecar (charges.csv's twelfth column before it).
        if let sidecar = FileManager.default.contents(atPath: path(ChargesFile.countedName)) {
            var countedIn: [String: String] = [:]
            for fields in CSVScanner.records([UInt8](sidecar)).dropFirst() where fields.count == 3 {
                let run = String(decoding: fields[2], as: UTF8.self)
                if !run.isEmpty {
                    countedIn[
                        String(decoding: fields[0], as: UTF8.self) + "\u{0}"
                            + String(decoding: fields[1], as: UTF8.self)] = run
                }
            }
            for slot in rows.indices {
                rows[slot].firstRun = countedIn[rows[slot].charge + "\u{0}" + rows[slot].currency]
            }
        }
        return (
            rows.compactMap { row in
                guard let run = row.firstRun else { return nil }
                return (row.charge, row.currency, run, row.gross, row.fee, row.status)
            },
            rows.filter { $0.paidOut > 0 }.map { ($0.charge, $0.currency, $0.paidOut) }
        )
    }

    /// Of these instructions (with their line ids and when they were sent), those a line of
    /// which has its row in results.csv in an order with a `rejected` line there, or in an
    /// order a run decided against after the instruction was sent (`decided`: each order's
    /// latest decision in the ledger), with why (``ApplyEngine/stoppedInstructions``).
    public func stoppedInstructions(
        _ open: [String: (lines: [String], sentAt: Date)], decided: [String: (at: Date, reason: String)] = [:],
        onFailedCharges: [String: (charge: String, key: String, why: String)] = [:]
    ) throws(SettleError) -> [String: (why: String, orders: Set<String>)] {
        guard !open.isEmpty else { return [:] }
        let linesOf = open.mapValues(\.lines)
        typealias F = ResultsFile.Field
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self).trimmingFormulaGuard() }
        var instructionOfLine: [String: String] = [:]
        for (instruction, lines) in linesOf { for line in lines { instructionOfLine[line] = instruction } }
        var rejected: [String: String] = [:]
        var ordersOf: [String: Set<String>] = [:]
        try eachRow { (row, _) throws(SettleError) in
            let group = text(row[F.group.rawValue])
            if let instruction = instructionOfLine[text(row[F.lineID.rawValue])] {
                ordersOf[instruction, default: []].insert(group)
            }
            // A later copy of a line id stays outside its group (SPEC): it never stops the order
            // (audit 58 F1: a re-apply stopped the rest of an order for it, which then moved in
            // part).
            if text(row[F.status.rawValue]) == LineStatus.rejected.name, rejected[group] == nil,
                text(row[F.reasonCode.rawValue]) != ReasonCode.duplicateLineID.code
            {
                rejected[group] =
                    "order \(group): line \(text(row[F.lineID.rawValue])) is rejected "
                    + "\(text(row[F.reasonCode.rawValue])) (\(text(row[F.reason.rawValue])))"
            }
        }
        return ordersOf.compactMap { instruction, orders -> (String, (why: String, orders: Set<String>))? in
            let sentAt = open[instruction]?.sentAt ?? .distantFuture
            let stopped = orders.sorted().compactMap { order -> (String, String)? in
                if let reason = rejected[order] { return (order, reason) }
                if let reason = onFailedCharges[order] { return (order, "order \(order): \(reason.why)") }
                guard let decision = decided[order], decision.at > sentAt else { return nil }
                return (order, "order \(order): \(decision.reason)")
            }
            guard let first = stopped.first else { return nil }
            return (instruction, (first.1, Set(stopped.map(\.0))))
        }.reduce(into: [:]) { $0[$1.0] = $1.1 }
    }

    /// Each whole row of results.csv (after its header) with its line index entry, in order.
    private func eachRow(_ body: (inout [[UInt8]], LineIndex.Entry) throws(SettleError) -> Void)
        throws(SettleError)
    {
        guard let reader = ResultsReader(path: path("results.csv")),
            let index = LineIndex.Reader(path: path(LineIndex.name))
        else {
            throw SettleError(.notAPlanFolder, "\(folder) lacks results.csv or its line index")
        }
        _ = try Self.reading { () throws(WriteFailure) in try reader.next() }  // the header
        while var row = try Self.reading({ () throws(WriteFailure) in try reader.next() }) {
            guard let entry = try Self.reading({ () throws(WriteFailure) in try index.next() }) else {
                throw SettleError(.internalError, "\(folder): results.csv has more rows than its line index")
            }
            guard row.count == ResultsFile.header.count else { continue }
            try body(&row, entry)
        }
    }
}

extension FailedCharge {
    /// The charge as the planner takes an earlier run's look-up of it (``StripeFacts/Charge/lookedUpBy``).
    public var fact: StripeFacts.Charge {
        StripeFacts.Charge(
            status: .failed, amount: -1, currency: .usd, requestID: requestID, checkedAt: checkedAt, refusal: refusal,
            lookedUpBy: run)
    }
}
