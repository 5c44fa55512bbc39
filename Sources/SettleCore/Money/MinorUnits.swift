/// Exact conversion between decimal strings in major units and the integer minor units
/// the Stripe API takes. No floating point is involved anywhere.
public enum MinorUnits {
    /// The largest amount accepted: 12 digits in minor units.
    public static let maximum: Int64 = 999_999_999_999

    /// Why a decimal string is not an amount.
    public enum ParseError: Error, Equatable, Sendable {
        case notADecimal
        case tooPrecise
        case notPositive
        case tooLarge
    }

    /// Parses `70.00`, `70.5`, `7000`, `1.250` into minor units of `currency`.
    ///
    /// Accepts digits with at most one `.` that has digits on both sides. Extra trailing
    /// zeros are fine; a non-zero digit beyond the minor unit is not. Three-decimal amounts
    /// must end in 0 in minor units. ISK and UGX take whole units and are sent × 100.
    /// With `allowZero`, 0 is accepted (charge fees can be zero).
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, currency: Currency, allowZero: Bool = false
    ) -> Result<Int64, ParseError> {
        let count = bytes.count
        guard count > 0 else { return .failure(.notADecimal) }
        var value: Int64 = 0
        var index = 0
        var integerDigits = 0
        // Integer part; leading zeros do not count towards the size limit.
        while index < count {
            let byte = bytes[index]
            if byte == UInt8(ascii: ".") { break }
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return .failure(.notADecimal) }
            if value != 0 || digit != 0 { integerDigits += 1 }
            guard integerDigits <= 13 else { return .failure(.tooLarge) }
            value = value * 10 + Int64(digit)
            index += 1
        }
        guard index > 0 else { return .failure(.notADecimal) }
        let scale: Int
        switch currency.exponent {
        case .two: scale = 2
        case .zero, .wholeTimesHundred: scale = 0
        case .three: scale = 3
        }
        var fractionDigits = 0
        if index < count {
            index += 1  // the '.'
            guard index < count else { return .failure(.notADecimal) }
            var tooPrecise = false
            while index < count {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return .failure(.notADecimal) }
                if fractionDigits < scale {
                    value = value * 10 + Int64(digit)
                    fractionDigits += 1
                } else if digit != 0 {
                    tooPrecise = true
                }
                index += 1
            }
            if tooPrecise { return .failure(.tooPrecise) }
        }
        while fractionDigits < scale {
            value *= 10
            fractionDigits += 1
        }
        if currency.exponent == .wholeTimesHundred { value *= 100 }
        if currency.exponent == .three, value % 10 != 0 { return .failure(.tooPrecise) }
        if value == 0, !allowZero { return .failure(.notPositive) }
        guard value <= maximum else { return .failure(.tooLarge) }
        return .success(value)
    }

    public static func parse(_ text: String, currency: Currency, allowZero: Bool = false)
        -> Result<Int64, ParseError>
    {
        var text = text
        return text.withUTF8 { parse(UnsafeRawBufferPointer($0), currency: currency, allowZero: allowZero) }
    }

    /// The canonical decimal of an amount: `70.00`, `7000`, `1.250`; ISK and UGX in whole units.
    public static func format(_ minor: Int64, currency: Currency) -> String {
        var bytes: [UInt8] = []
        append(minor, currency: currency, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the canonical decimal to a byte buffer (the writers' hot path).
    public static func append(_ minor: Int64, currency: Currency, to out: inout [UInt8]) {
        var value = minor
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            value = -value
        }
        let digits = currency.decimalDigits
        if currency.exponent == .wholeTimesHundred { value /= 100 }
        var divisor: Int64 = 1
        for _ in 0..<digits { divisor *= 10 }
        appendDecimal(value / divisor, to: &out)
        if digits > 0 {
            out.append(UInt8(ascii: "."))
            var fraction = value % divisor
            // The fraction's digits, leading zeros kept (no array allocated per amount).
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: digits) { scratch in
                var position = digits - 1
                while position >= 0 {
                    scratch[position] = UInt8(ascii: "0") + UInt8(fraction % 10)
                    fraction /= 10
                    position -= 1
                }
                out.append(contentsOf: UnsafeBufferPointer(scratch))
            }
        }
    }

    /// Appends a non-negative integer in decimal.
    @inlinable
    public static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var value = value
        var negative = false
        if value < 0 {
            negative = true
            value = -value
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { scratch in
            var position = 20
            while value > 0 {
                position -= 1
                scratch[position] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            if negative { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[position..<20]))
        }
    }
}
