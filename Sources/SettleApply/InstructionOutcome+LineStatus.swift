public import SettleCore

extension InstructionOutcome {
    /// The status every line of an instruction with this outcome gets in `results.csv`.
    /// Never sent is not `unknown`: those lines stay `planned` (exit 75, sent by a later run).
    public var lineResult: LineResult {
        switch self {
        case .settled(let id):
            return LineResult(status: .settled, stripeID: id, reasonCode: "", reason: "")
        case .alreadySettled(let id):
            return LineResult(
                status: .alreadySettled, stripeID: id, reasonCode: "", reason: "settled by an earlier run")
        case .failed(let code, let message):
            return LineResult(status: .failed, stripeID: "", reasonCode: code, reason: message)
        case .unknown(let message):
            return LineResult(status: .unknown, stripeID: "", reasonCode: "", reason: message)
        case .rejected(let code, let message):
            let waits = code == ReasonCode.chargePending.code || code == ReasonCode.scheduled.code
            let status: LineStatus = waits ? .deferred : .rejected
            return LineResult(status: status, stripeID: "", reasonCode: code, reason: message)
        case .notSent(let reason):
            return LineResult(status: .planned, stripeID: "", reasonCode: "", reason: reason)
        }
    }
}
