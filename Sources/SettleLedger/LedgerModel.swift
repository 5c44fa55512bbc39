public import Foundation

/// Where an instruction stands in the ledger.
public enum LedgerStatus: String, Sendable, Equatable, Hashable, CaseIterable {
    /// Recorded before the request left; outcome not recorded yet (or the process died).
    case inFlight = "in_flight"
    /// The Stripe object exists.
    case settled
    /// Stripe refused it for good, or it was found never to have been made; its lines are
    /// released and may be sent again under a new attempt.
    case failed
    /// Sent, outcome not known; the next run resolves it before sending anything.
    case unknown
}

/// One input line as the ledger knows it.
public struct LedgerLine: Sendable, Equatable {
    public var lineID: String
    /// The planner's digest of the line's settlement content.
    public var content: String
    public var instructionID: String
    public var kind: String
    public var amountMinor: Int64
    /// The status of the instruction that holds the line.
    public var status: LedgerStatus
    public var stripeID: String?

    public init(
        lineID: String, content: String, instructionID: String, kind: String, amountMinor: Int64,
        status: LedgerStatus, stripeID: String?
    ) {
        self.lineID = lineID
        self.content = content
        self.instructionID = instructionID
        self.kind = kind
        self.amountMinor = amountMinor
        self.status = status
        self.stripeID = stripeID
    }
}

/// A line an instruction claims when it is marked in flight.
public struct LedgerLineClaim: Sendable, Equatable {
    public var lineID: String
    public var kind: String
    public var amountMinor: Int64
    public var content: String

    public init(lineID: String, kind: String, amountMinor: Int64, content: String) {
        self.lineID = lineID
        self.kind = kind
        self.amountMinor = amountMinor
        self.content = content
    }
}

/// Everything the ledger keeps about an instruction about to be sent: enough to re-send
/// the very same request, or to look the object up, after a crash.
public struct LedgerDispatch: Sendable, Equatable {
    public var id: String
    public var kind: String
    public var group: String
    public var payee: String
    public var charge: String
    public var currency: String
    public var amountMinor: Int64
    public var method: String
    public var path: String
    /// The request parameters as JSON (v1: the flat form keys; v2: the body).
    public var params: String
    public var stripeContext: String?
    public var attempt: Int
    public var idempotencyKey: String
    public var lines: [LedgerLineClaim]

    public init(
        id: String, kind: String, group: String, payee: String, charge: String, currency: String,
        amountMinor: Int64, method: String, path: String, params: String, stripeContext: String?,
        attempt: Int, idempotencyKey: String, lines: [LedgerLineClaim]
    ) {
        self.id = id
        self.kind = kind
        self.group = group
        self.payee = payee
        self.charge = charge
        self.currency = currency
        self.amountMinor = amountMinor
        self.method = method
        self.path = path
        self.params = params
        self.stripeContext = stripeContext
        self.attempt = attempt
        self.idempotencyKey = idempotencyKey
        self.lines = lines
    }
}

/// An instruction row of the ledger.
public struct LedgerInstruction: Sendable, Equatable {
    public var dispatch: LedgerDispatch
    public var status: LedgerStatus
    /// When this attempt's key was first sent: the start of Stripe's idempotency window.
    public var firstSentAt: Date
    public var lastSentAt: Date
    public var stripeID: String?
    public var errorCode: String?
    public var errorMessage: String?
    public var requestID: String?
    /// The run that recorded it settled (nil: not settled, or by a build before this was kept).
    public var settledBy: String? = nil
    /// The run that sent the last attempt (nil: a ledger before schema 8 sent it).
    public var sentBy: String? = nil

    public var id: String { dispatch.id }
    public var attempt: Int { dispatch.attempt }
    public var idempotencyKey: String { dispatch.idempotencyKey }
}

/// What became of a sent instruction.
public enum LedgerOutcome: Sendable, Equatable {
    /// The object exists.
    case settled(stripeID: String)
    /// Refused for good, or found never made: the lines are released.
    case failed(code: String, message: String)
    /// Not known yet.
    case unknown(message: String)

    /// The error code of an instruction released because its request never left: no
    /// object can exist, so its lines go again under the next attempt.
    public static let notSentCode = "not_sent"
}

/// One HTTP call made for an instruction.
public struct LedgerCall: Sendable, Equatable {
    public var instructionID: String
    public var attempt: Int
    public var idempotencyKey: String
    public var sentAt: Date
    /// `settled`, `failed`, `retry`, `unknown`, … as the engine classified the answer.
    public var outcome: String
    public var httpStatus: Int?
    public var requestID: String?
    /// The `Date` header of Stripe's answer: Stripe's clock, not ours.
    public var stripeDate: String?

    public init(
        instructionID: String, attempt: Int, idempotencyKey: String, sentAt: Date, outcome: String,
        httpStatus: Int?, requestID: String?, stripeDate: String? = nil
    ) {
        self.stripeDate = stripeDate
        self.instructionID = instructionID
        self.attempt = attempt
        self.idempotencyKey = idempotencyKey
        self.sentAt = sentAt
        self.outcome = outcome
        self.httpStatus = httpStatus
        self.requestID = requestID
    }
}

/// The settled transfer recorded for a group and destination, net of settle's reversals.
public struct LedgerTransfer: Sendable, Equatable {
    public var stripeID: String
    public var amountMinor: Int64
    /// Reversals of it that are settled, in flight or unknown.
    public var reversedMinor: Int64
    /// Its funding charge (`source_transaction`), empty when it had none.
    public var charge: String
    /// The currency it moved in (lowercase), which Stripe reverses it in whatever a line says.
    public var currency: String
    /// The connected account it went to, which a reversal takes the money back from.
    public var destination: String

    public init(
        stripeID: String, amountMinor: Int64, reversedMinor: Int64, charge: String = "", currency: String = "",
        destination: String = ""
    ) {
        self.stripeID = stripeID
        self.amountMinor = amountMinor
        self.reversedMinor = reversedMinor
        self.charge = charge
        self.currency = currency
        self.destination = destination
    }
}

/// What `settle status` prints.
public struct LedgerStatusSummary: Sendable, Equatable {
    public var linesSettled: Int
    /// Lines in flight or unknown: resolved by the next apply.
    public var linesPending: Int
    public var linesFailed: Int
    public var instructions: [LedgerStatus: Int]

    public init(linesSettled: Int, linesPending: Int, linesFailed: Int, instructions: [LedgerStatus: Int]) {
        self.linesSettled = linesSettled
        self.linesPending = linesPending
        self.linesFailed = linesFailed
        self.instructions = instructions
    }
}

/// A charge Stripe said failed when a run looked it up, or gave no charge for (``refusal``:
/// why, such as `resource_missing: No such charge`), as that run's facts hold it.
public struct FailedCharge: Sendable, Equatable {
    public var charge: String
    /// The charge's payment intent, when Stripe named one.
    public var paymentIntent: String?
    public var refusal: String?
    /// The run whose look-up said so, when, and Stripe's request id of that look-up.
    public var run: String
    public var checkedAt: String
    public var requestID: String

    public init(
        charge: String, paymentIntent: String? = nil, refusal: String? = nil, run: String, checkedAt: String,
        requestID: String
    ) {
        self.charge = charge
        self.paymentIntent = paymentIntent
        self.refusal = refusal
        self.run = run
        self.checkedAt = checkedAt
        self.requestID = requestID
    }
}
