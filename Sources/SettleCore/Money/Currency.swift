/// A currency Stripe supports, with the way its amounts are written in minor units.
///
/// Stored as a small index into a fixed table so that a line record stays compact.
public struct Currency: Hashable, Sendable, Comparable {
    /// Position in ``Currency/table``.
    public let index: UInt16

    /// How amounts of a currency map to the integers the API takes.
    public enum Exponent: Sendable {
        /// Two decimals (USD, EUR, …).
        case two
        /// No minor unit (JPY, KRW, …): the amount is whole units.
        case zero
        /// Three decimals (KWD, BHD, …); the API wants the last digit to be 0.
        case three
        /// Whole units that the API still takes with two decimals (ISK, UGX): units × 100.
        case wholeTimesHundred
    }

    public struct Entry: Sendable {
        public let code: String
        public let exponent: Exponent
    }

    /// Lowercase ISO 4217 code as Stripe writes it (`usd`).
    public var code: String { Currency.table[Int(index)].code }
    public var exponent: Exponent { Currency.table[Int(index)].exponent }

    /// Digits after the decimal point in the canonical decimal (`70.00`, `7000`, `1.250`).
    public var decimalDigits: Int {
        switch exponent {
        case .two: 2
        case .zero, .wholeTimesHundred: 0
        case .three: 3
        }
    }

    public static func < (lhs: Currency, rhs: Currency) -> Bool { lhs.code < rhs.code }

    /// Looks a code up in either case; nil when Stripe does not support it.
    public init?(code bytes: some Collection<UInt8>) {
        guard bytes.count == 3 else { return nil }
        var key: UInt32 = 0
        for byte in bytes {
            let lower = byte | 0x20
            guard lower >= UInt8(ascii: "a"), lower <= UInt8(ascii: "z") else { return nil }
            key = key << 8 | UInt32(lower)
        }
        guard let found = Currency.byKey[key] else { return nil }
        self.index = found
    }

    public init?(_ code: String) { self.init(code: Array(code.utf8)) }

    public static let usd = Currency("usd")!

    private static let zeroDecimal: Set<String> = [
        "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "vnd", "vuv",
        "xaf", "xof", "xpf",
    ]
    private static let threeDecimal: Set<String> = ["bhd", "jod", "kwd", "omr", "tnd"]
    private static let wholeTimesHundred: Set<String> = ["isk", "ugx"]

    /// Stripe's presentment currencies.
    private static let codes = """
        usd aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bhd bif bmd bnd bob brl bsd \
        bwp byn bzd cad cdf chf clp cny cop crc cve czk djf dkk dop dzd egp etb eur fjd fkp gbp \
        gel gip gmd gnf gtq gyd hkd hnl htg huf idr ils inr isk jmd jod jpy kes kgs khr kmf krw \
        kwd kyd kzt lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt mop mur mvr mwk mxn myr mzn nad \
        ngn nio nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sek \
        sgd shp sle sll sos srd std szl thb tjs tnd top try ttd twd tzs uah ugx uyu uzs vnd vuv \
        wst xaf xcd xof xpf yer zar zmw
        """

    public static let table: [Entry] = codes.split(separator: " ").map { code in
        let code = String(code)
        let exponent: Exponent =
            zeroDecimal.contains(code)
            ? .zero
            : threeDecimal.contains(code)
                ? .three
                : wholeTimesHundred.contains(code) ? .wholeTimesHundred : .two
        return Entry(code: code, exponent: exponent)
    }

    private static let byKey: [UInt32: UInt16] = {
        var map: [UInt32: UInt16] = [:]
        for (index, entry) in table.enumerated() {
            let key = entry.code.utf8.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            map[key] = UInt16(index)
        }
        return map
    }()
}
