/// What the lines of one instruction become after apply, as results.csv writes them.
public struct LineResult: Sendable, Equatable {
    public var status: LineStatus
    public var stripeID: String
    public var reasonCode: String
    public var reason: String

    public init(status: LineStatus, stripeID: String = "", reasonCode: String = "", reason: String = "") {
        self.status = status
        self.stripeID = stripeID
        self.reasonCode = reasonCode
        self.reason = reason
    }
}
