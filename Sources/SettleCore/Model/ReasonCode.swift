/// The fixed reason codes of docs/RULES.md, so that scripts can rely on them.
///
/// Stripe's own error codes at apply time are not in this list: they travel as strings.
public enum ReasonCode: UInt8, Sendable, CaseIterable {
    case none
    // line
    case amountInvalid, currencyUnsupported, idInvalid, kindInvalid, dateInvalid
    case fieldMissing, fieldTooLong, encodingInvalid, malformedRecord, schemaInvalid
    case duplicateLineID, lineConflict, crossBorderUnsupported, payoutCurrencyUnsupported
    case payoutCountryUnsupported, payoutMethodMissing, chargeInvalid
    // group
    case groupRejected, chargeMismatch, currencyMismatch, overAllocated, chargeFailed
    case reversalExceedsTransfer, reversalTargetUnknown
    // deferred
    case chargePending, scheduled
    // apply
    case payoutMethodUnusable
    /// Stripe refused the line's instruction for good and no run's files said so (an apply of
    /// another folder sent it again, or the run that sent it was killed before it wrote them):
    /// its code is Stripe's own, kept with the line (``Batch/reasonCode(of:)``).
    case refusedByStripe
    // a payout Stripe accepted, then failed, returned or canceled (its status_details code)
    case payoutMethodDeclined, payoutMethodExpired, payoutMethodUnsupported, payoutMethodAmountLimitExceeded
    case payoutMethodClosed, payoutFailed, payoutReturned, payoutCanceled

    /// The codes of a copy of a line that does not count (a later copy of its line_id, an
    /// export's copy that conflicts with the line the ledger holds): the line has a row of its
    /// own, which speaks for it; such a copy is rejected so whatever else is wrong with it.
    public static let copyCodes: Set<String> = [ReasonCode.duplicateLineID.code, ReasonCode.lineConflict.code]

    /// The code of a payout's `status_details` (Stripe's own; unknown ones by the status).
    public static func payout(status: String, detail: String) -> ReasonCode {
        if let known = allCases.first(where: {
            $0.code == detail && $0.rawValue >= ReasonCode.payoutMethodDeclined.rawValue
        }) {
            return known
        }
        switch status {
        case "returned": return .payoutReturned
        case "canceled": return .payoutCanceled
        default: return .payoutFailed
        }
    }

    public var code: String {
        switch self {
        case .none: ""
        case .amountInvalid: "amount_invalid"
        case .currencyUnsupported: "currency_unsupported"
        case .idInvalid: "id_invalid"
        case .kindInvalid: "kind_invalid"
        case .dateInvalid: "date_invalid"
        case .fieldMissing: "field_missing"
        case .fieldTooLong: "field_too_long"
        case .encodingInvalid: "encoding_invalid"
        case .malformedRecord: "malformed_record"
        case .schemaInvalid: "schema_invalid"
        case .duplicateLineID: "duplicate_line_id"
        case .lineConflict: "line_conflict"
        case .crossBorderUnsupported: "cross_border_unsupported"
        case .payoutCurrencyUnsupported: "payout_currency_unsupported"
        case .payoutCountryUnsupported: "payout_country_unsupported"
        case .payoutMethodMissing: "payout_method_missing"
        case .chargeInvalid: "charge_invalid"
        case .groupRejected: "group_rejected"
        case .chargeMismatch: "charge_mismatch"
        case .currencyMismatch: "currency_mismatch"
        case .overAllocated: "over_allocated"
        case .chargeFailed: "charge_failed"
        case .reversalExceedsTransfer: "reversal_exceeds_transfer"
        case .reversalTargetUnknown: "reversal_target_unknown"
        case .chargePending: "charge_pending"
        case .scheduled: "scheduled"
        case .payoutMethodUnusable: "payout_method_unusable"
        case .refusedByStripe: ""
        case .payoutMethodDeclined: "payout_method_declined"
        case .payoutMethodExpired: "payout_method_expired"
        case .payoutMethodUnsupported: "payout_method_unsupported"
        case .payoutMethodAmountLimitExceeded: "payout_method_amount_limit_exceeded"
        case .payoutMethodClosed: "payout_method_closed"
        case .payoutFailed: "payout_failed"
        case .payoutReturned: "payout_returned"
        case .payoutCanceled: "payout_canceled"
        }
    }
}

/// Why a whole input file was rejected (docs/RULES.md, Reason codes: file codes in the manifest).
public enum FileRejection: String, Sendable, Error {
    case emptyFile = "empty_file"
    case unreadable
    case gzipTruncated = "gzip_truncated"
    case gzipCorrupt = "gzip_corrupt"
    case csvUnclosedQuote = "csv_unclosed_quote"
    case headerMissingColumn = "header_missing_column"
    case headerInvalid = "header_invalid"
    case xmlMalformed = "xml_malformed"
    case xmlDoctypeForbidden = "xml_doctype_forbidden"
    case xmlNotAnExport = "xml_not_an_export"
}
