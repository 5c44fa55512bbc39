import Foundation
import SettleApply
import SettleCore
import SettleLedger
import SettlePlanFolder
import SettleWrite

extension PlanFolder {
    /// Rewrites the folder's outcome files with what the engine reported, each
    /// instruction's lines mapped by ``InstructionOutcome/lineResult`` (the one mapping), and
    /// records the run for `--metrics-file`.
    func rewrite(
        outcomes: InstructionOutcomes, ledger: LedgerStore, report: ApplyReport, mode: String,
        options: Options, log: Log, startedAt: Date = Date(), unfollowed: Int = 0
    ) throws(CommandFailure) -> ExitCode {
        var run = AppliedRun(
            lineResult: { outcomes[$0]?.lineResult },
            unreached: InstructionOutcome.notSent(reason: "apply did not reach this instruction; run again").lineResult,
            mode: mode, apiBase: options.apiBase, appliedAt: Log.timestamp(), startedAt: startedAt)
        run.financialAccount = options.financialAccount
        run.resolved = Set(report.resolved.keys)
        run.refusedOrders = report.refusedOrders
        run.stoppedBeforeSending = report.stoppedBeforeSending
        run.waitingAfterStop = report.waitingAfterStop
        run.chargeOfInstruction = report.chargeOfInstruction
        run.lookedUpCharges = report.lookedUpCharges.compactMap { fact in
            guard let currency = fact.currency, let amount = fact.amountMinor else { return nil }
            return ChargeRow(
                charge: fact.charge, currency: currency, status: fact.status ?? "", gross: amount,
                fee: fact.feeMinor ?? 0)
        }
        run.checkedCharges = report.lookedUpCharges + report.recheckedCharges
        run.lookedUpFacts = report.lookedUpFacts
        run.refusedCharges = report.refusedCharges
        run.splitInstructions = outcomes.splitInstructions
        run.lineResultOfLine = { line, instruction in
            guard let found = outcomes[line: line, of: instruction] else { return nil }
            guard let outcome = found.outcome else { return nil }
            return (outcome.lineResult, found.instruction)
        }
        run.requests = report.requests
        run.retries = report.retries
        run.rateLimited = report.rateLimited
        run.serverErrors = report.serverErrors
        run.transportErrors = report.transportErrors
        run.notStripeAnswers = report.notStripeAnswers
        run.keyRefused = report.keyRefused
        run.ledgerFailure = report.ledgerFailure
        run.interrupted = report.interrupted
        run.unfollowedPayouts = unfollowed
        let manifest = self.manifest
        let rewritten: Rewritten
        do throws(CommandFailure) {
            rewritten = try onPlanFolder { () throws(SettleError) in
                try rewrite(
                    run, ledger: ledger, records: SpoolRecords(folder: folder, manifest: manifest),
                    reportFacts: { exit in PlanReport.facts(manifest: manifest, mode: mode, exit: exit) })
            }
        } catch {
            // Requests went out: 73 says no money moved (SPEC), and this run moved some. What
            // Stripe answered is in the ledger; the folder keeps its earlier files whole, and
            // the next apply of it (or the next run) rewrites them (audit 33 O4: disk full after
            // 8 transfers, exit 73).
            guard report.requests > 0, error.code == .outputUnwritable else { throw error }
            throw CommandFailure(
                .tryAgain,
                "\(error.message); requests were sent and their outcomes are in the ledger: "
                    + "run `settle apply \(folder)` again once it can be written (nothing is sent twice)")
        }
        if let problem = rewritten.notesProblem {
            log(
                .warning, event: "ledger_notes_not_recorded",
                "the ledger did not note the \(problem)")
        }
        if let problem = rewritten.runRecordProblem {
            log(
                .warning, event: "run_not_recorded",
                "the ledger did not record this run (settle status will not list it): \(problem)")
        }
        options.record.recordLines(counts: rewritten.counts, sums: rewritten.sums)
        return rewritten.exit
    }
}
