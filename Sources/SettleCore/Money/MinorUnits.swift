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
        switch scaled(bytes, decimals: currency.decimalDigits) {
        case .failure(let error): .failure(error)
        case .success(let value): minor(scaledValue: value, currency: currency, allowZero: allowZero)
        }
    }

    /// Thousandths of a major unit: the finest minor unit any currency has.
    public static let thousandthsDecimals = 3

    /// Parses a decimal whose currency is not known yet (a `charge_amount` on a line that
    /// leaves `charge_currency` empty) into thousandths of a major unit, so that it compares
    /// as a number and becomes minor units once its currency is known
    /// (``minor(thousandths:currency:allowZero:)``). Refused here is what no currency takes:
    /// not a decimal, a non-zero digit past the third decimal, more than 12 digits before the
    /// point, and 0 unless `allowZero`.
    public static func parseThousandths(_ bytes: UnsafeRawBufferPointer, allowZero: Bool = false)
        -> Result<Int64, ParseError>
    {
        switch scaled(bytes, decimals: thousandthsDecimals) {
        case .failure(let error): return .failure(error)
        case .success(let value):
            if value == 0, !allowZero { return .failure(.notPositive) }
            // 12 digits in minor units of a zero-decimal currency is the largest there is.
            guard value <= maximum * 1000 else { return .failure(.tooLarge) }
            return .success(value)
        }
    }

    public static func parseThousandths(_ text: String, allowZero: Bool = false) -> Result<Int64, ParseError> {
        var text = text
        return text.withUTF8 { parseThousandths(UnsafeRawBufferPointer($0), allowZero: allowZero) }
    }

    /// Thousandths of a major unit as minor units of `currency`, when they are an amount in it
    /// (the same rules as ``parse(_:currency:allowZero:)``: `thousandths` of a decimal text
    /// converts exactly when that text parses in the currency, to the same value).
    public static func minor(thousandths: Int64, currency: Currency, allowZero: Bool = false)
        -> Result<Int64, ParseError>
    {
        var divisor: Int64 = 1
        for _ in currency.decimalDigits..<thousandthsDecimals { divisor *= 10 }
        guard thousandths % divisor == 0 else { return .failure(.tooPrecise) }
        return minor(scaledValue: thousandths / divisor, currency: currency, allowZero: allowZero)
    }

    /// Thousandths of a major unit as the shortest decimal (`55.415`, `55.41`, `5541`).
    public static func formatThousandths(_ thousandths: Int64) -> String {
        var text = String(thousandths / 1000)
        var fraction = thousandths % 1000
        guard fraction != 0 else { return text }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let written = String(fraction)
        text += "." + String(repeating: "0", count: digits - written.count) + written
        return text
    }

    /// Digits with at most one `.` into an integer of `decimals` decimal places; a non-zero
    /// digit past them is `tooPrecise`.
    private static func scaled(_ bytes: UnsafeRawBufferPointer, decimals scale: Int) -> Result<Int64, ParseError> {
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
        return .success(value)
    }

    /// A value in the currency's decimal places as its minor units, with the currency's rules.
    private static func minor(scaledValue: Int64, currency: Currency, allowZero: Bool) -> Result<Int64, ParseError> {
        var value = scaledValue
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
