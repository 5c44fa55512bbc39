import Foundation
import SettleCore
import SettleWrite

/// report.html and the apply estimate for a plan: the call points PlanOutputs.write makes.
enum PlanReport {
    /// Rejected and failed lines of a plan, grouped by reason with their first few `file:line`.
    static func reasonGroups(_ plan: SettlementPlan) -> ReportPage.ReasonGroups {
        let batch = plan.batch
        var groups = ReportPage.ReasonGroups()
        for line in batch.lines where line.status == .rejected || line.status == .failed {
            groups.add(
                status: line.status, code: batch.reasonCode(of: line),
                currency: line.amount > 0 ? line.currency.code : "",
                amountMinor: line.amount, lineID: batch.text(line.lineID), source: batch.source(of: line),
                reason: batch.reasonText(of: line))
        }
        return groups
    }

    /// The facts at the top of the page; `runID` from the manifest when it has one.
    static func facts(
        runID: String?, asOf: Int32, mode: String, exit: ExitCode, inputs: [InputReport]
    ) -> ReportPage.Facts {
        ReportPage.Facts(
            runID: runID, asOf: CivilDate.format(asOf), mode: mode, exitStatus: exit.rawValue,
            writtenAt: Log.timestamp(), settleVersion: Settle.version,
            rejectedFiles: inputs.compactMap { input in
                input.rejection.map {
                    ReportPage.RejectedFile(
                        path: input.path, code: $0.code.rawValue, position: $0.position, message: $0.message)
                }
            })
    }

    /// The facts for the page written after an apply, from the plan's manifest (as-of date, run
    /// id when it has one, files rejected whole).
    static func facts(manifest: JSON, mode: String, exit: ExitCode) -> ReportPage.Facts {
        let rejected: [ReportPage.RejectedFile] =
            manifest["inputs"]?.arrayValue?.compactMap { input in
                guard input["status"]?.stringValue == "rejected" else { return nil }
                return ReportPage.RejectedFile(
                    path: input["path"]?.stringValue ?? "", code: input["reason_code"]?.stringValue ?? "",
                    position: input["position"]?.stringValue ?? "", message: input["reason"]?.stringValue ?? "")
            } ?? []
        return ReportPage.Facts(
            runID: manifest["run_id"]?.stringValue, asOf: manifest["as_of"]?.stringValue ?? "", mode: mode,
            exitStatus: exit.rawValue, writtenAt: Log.timestamp(), settleVersion: Settle.version,
            rejectedFiles: rejected)
    }
}
