/// The columns of the order export that settle understands (docs/RULES.md, Input).
///
/// Any other column is kept as it was and carried into `errors.csv` and `deferred.csv`.
public enum Column: Int, CaseIterable, Sendable {
    case lineID, orderID, kind, amount, currency, transferGroup, destination
    case sourceTransaction, paymentIntent, chargeAmount, chargeCurrency, chargeStatus
    case chargeFee, paymentMethodType, destinationCountry, recipient, payoutMethod
    case transfer, transferOn, description

    /// The CSV header name.
    public var csvName: String {
        switch self {
        case .lineID: "line_id"
        case .orderID: "order_id"
        case .kind: "kind"
        case .amount: "amount"
        case .currency: "currency"
        case .transferGroup: "transfer_group"
        case .destination: "destination"
        case .sourceTransaction: "source_transaction"
        case .paymentIntent: "payment_intent"
        case .chargeAmount: "charge_amount"
        case .chargeCurrency: "charge_currency"
        case .chargeStatus: "charge_status"
        case .chargeFee: "charge_fee"
        case .paymentMethodType: "payment_method_type"
        case .destinationCountry: "destination_country"
        case .recipient: "recipient"
        case .payoutMethod: "payout_method"
        case .transfer: "transfer"
        case .transferOn: "transfer_on"
        case .description: "description"
        }
    }

    /// The XML attribute name: the CSV name in lowerCamelCase (`<order id>`/`<line id>` aside).
    public var xmlName: String {
        if self == .lineID || self == .orderID { return "id" }
        var result = ""
        var upper = false
        for character in csvName {
            if character == "_" {
                upper = true
            } else {
                result.append(upper ? Character(character.uppercased()) : character)
                upper = false
            }
        }
        return result
    }

    /// Columns every line must have.
    public static let required: [Column] = [.lineID, .orderID, .amount, .currency]

    /// Finds a column by a header name, ignoring case and surrounding spaces.
    public init?(headerName: String) {
        let key = Column.normalize(headerName)
        guard let column = Column.byName[key] else { return nil }
        self = column
    }

    static func normalize(_ name: String) -> String {
        name.trimmingSpaces().lowercased()
    }

    private static let byName: [String: Column] = Dictionary(
        uniqueKeysWithValues: allCases.map { ($0.csvName, $0) })
}

/// The prefix of metadata columns (`metadata.shift`).
public let metadataColumnPrefix = "metadata."

/// The column of `errors.csv` that holds what the XML schema refused of a line (an attribute
/// it does not allow, with its value, else the schema's words): a CSV row has no place for
/// it, and without it the row fed back unchanged would be a valid line (audit 46 F2: a
/// misspelled `transferOnn` moved the line's money before its date). In a file settle wrote,
/// a non-empty cell rejects the line `schema_invalid` again; a person puts the value where it
/// belongs and empties the cell.
public let schemaRefusedColumn = "schema_refused"

/// Columns settle adds to `errors.csv` and `deferred.csv`; when such a file is fed back,
/// these are settle's own annotations and are replaced, not carried twice.
public let annotationColumns: Set<String> = ["reason_code", "reason", "source"]

extension String {
    /// Drops leading and trailing spaces and tabs (header matching only; values are never trimmed).
    public func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
