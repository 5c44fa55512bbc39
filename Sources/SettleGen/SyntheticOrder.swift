/// The currencies settle-gen draws charges in, with their minor-unit exponents.
enum ExportCurrency: Int {
    case usd, eur, gbp, jpy, kwd
    var code: StaticString {
        switch self {
        case .usd: "usd"
        case .eur: "eur"
        case .gbp: "gbp"
        case .jpy: "jpy"
        case .kwd: "kwd"
        }
    }
    var decimals: Int {
        switch self {
        case .jpy: 0
        case .kwd: 3
        default: 2
        }
    }
    /// Smallest step in minor units (three-decimal amounts end in 0).
    var step: Int { self == .kwd ? 10 : 1 }
}

/// What a line pays for: the restaurant's share, a tip to the restaurant, the courier's
/// payout, or a second transfer to another restaurant.
enum LineRole: UInt8 { case restaurant, tip, courier, second }

/// One line of an order, as numbers; the writers turn it into text.
struct SyntheticLine {
    var role = LineRole.restaurant
    var amount = 0  // minor units
    var account = 0  // pool index of the destination or recipient
    var explicitKind = true  // false: `kind` left empty (inferred)
    var transferOn = -1  // -1: none; else a day offset from 2026-11-26
    var description = 0  // which description text
}

enum SyntheticChargeStatus: UInt8 { case succeeded, pending, failed }
enum SyntheticPaymentMethod: UInt8 { case card, sepaDebit, usBankAccount }

/// One order and its 1 to 4 lines, reused for every order (no allocation per order).
struct SyntheticOrder {
    var index = 0
    var currency = ExportCurrency.usd
    var charge = 0
    var fee = 0
    var status = SyntheticChargeStatus.succeeded
    var method = SyntheticPaymentMethod.card
    var hasGroup = true
    var country: StaticString = ""  // destination country of the transfers
    var lineCount = 1
    var lines = (SyntheticLine(), SyntheticLine(), SyntheticLine(), SyntheticLine())

    subscript(k: Int) -> SyntheticLine {
        get {
            switch k {
            case 0: lines.0
            case 1: lines.1
            case 2: lines.2
            default: lines.3
            }
        }
        set {
            switch k {
            case 0: lines.0 = newValue
            case 1: lines.1 = newValue
            case 2: lines.2 = newValue
            default: lines.3 = newValue
            }
        }
    }
}

/// Sizes of the account pools and the first order id: they shape how lines aggregate.
enum ExportShape {
    static let restaurantPool = 60_000
    static let courierPool = 150_000
    static let firstOrderID = 10_000_000
}
