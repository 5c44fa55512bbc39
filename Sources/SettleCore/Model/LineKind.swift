/// What a line asks settle to do with its money.
public enum LineKind: UInt8, Sendable, CaseIterable {
    case transfer, payout, reversal

    public var name: String {
        switch self {
        case .transfer: "transfer"
        case .payout: "payout"
        case .reversal: "reversal"
        }
    }

    public init?(name: UnsafeRawBufferPointer) {
        if ByteCompare.equals(name, "transfer") {
            self = .transfer
        } else if ByteCompare.equals(name, "payout") {
            self = .payout
        } else if ByteCompare.equals(name, "reversal") {
            self = .reversal
        } else {
            return nil
        }
    }
}

/// Where a line ended (docs/RULES.md, Line statuses). Every input line has exactly one.
public enum LineStatus: UInt8, Sendable, CaseIterable, Comparable {
    case planned, settled, alreadySettled, deferred, rejected, failed, unknown, netted

    public var name: String {
        switch self {
        case .planned: "planned"
        case .settled: "settled"
        case .alreadySettled: "already_settled"
        case .deferred: "deferred"
        case .rejected: "rejected"
        case .failed: "failed"
        case .unknown: "unknown"
        case .netted: "netted"
        }
    }

    public init?(name: String) {
        guard let found = LineStatus.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    public static func < (lhs: LineStatus, rhs: LineStatus) -> Bool { lhs.rawValue < rhs.rawValue }
}
