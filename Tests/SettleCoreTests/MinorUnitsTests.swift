import SettleCore
import SettleDigest
import SettleTestSupport
import Testing

@Suite struct MinorUnitsTests {
    static let valid: [(String, String, Int64)] = [
        ("70.00", "usd", 7000), ("70.5", "usd", 7050), ("70", "usd", 7000), ("70.000", "usd", 7000),
        ("0.01", "usd", 1), ("7000", "jpy", 7000), ("7000.00", "jpy", 7000), ("1.250", "kwd", 1250),
        ("1.25", "kwd", 1250), ("5", "isk", 500), ("5.00", "ugx", 500), ("007.10", "USD", 710),
        ("9999999999.99", "usd", 999_999_999_999),
    ]

    @Test(arguments: valid)
    func parsesExactAmounts(_ text: String, _ code: String, _ minor: Int64) throws {
        let currency = try #require(Currency(code))
        #expect(MinorUnits.parse(text, currency: currency) == .success(minor))
    }

    static let invalid: [(String, String, MinorUnits.ParseError)] = [
        ("-1.00", "usd", .notADecimal), ("+1.00", "usd", .notADecimal), (" 1.00", "usd", .notADecimal),
        ("1.00 ", "usd", .notADecimal), ("1,000.00", "usd", .notADecimal), ("1e3", "usd", .notADecimal),
        ("70.", "usd", .notADecimal), (".5", "usd", .notADecimal), ("", "usd", .notADecimal),
        ("1.2.3", "usd", .notADecimal), ("70.001", "usd", .tooPrecise), ("7000.5", "jpy", .tooPrecise),
        ("1.255", "kwd", .tooPrecise), ("5.5", "isk", .tooPrecise), ("0", "usd", .notPositive),
        ("0.00", "usd", .notPositive), ("10000000000.00", "usd", .tooLarge),
        ("99999999999999999999", "usd", .tooLarge), ("１", "usd", .notADecimal),
    ]

    @Test(arguments: invalid)
    func refusesInexactOrMalformedAmounts(_ text: String, _ code: String, _ error: MinorUnits.ParseError) throws {
        let currency = try #require(Currency(code))
        #expect(MinorUnits.parse(text, currency: currency) == .failure(error))
    }

    /// A decimal read before its currency is known (thousandths) becomes, in any currency,
    /// exactly what reading it in that currency gives, or nothing when that refuses it
    /// (a charge_amount on a line that leaves charge_currency empty, docs/RULES.md).
    @Test func thousandthsBecomeWhatTheCurrencyWouldHaveRead() throws {
        var random = SplitMix64(seed: 0x7_0005)
        let currencies = try ["usd", "jpy", "kwd", "isk", "krw", "bhd"].map { try #require(Currency($0)) }
        let digits = Array("0123456789")
        for _ in 0..<20000 {
            var text = String((0..<random.int(1...14)).map { _ in random.pick(digits) })
            if random.chance(60) { text += "." + String((0..<random.int(1...5)).map { _ in random.pick(digits) }) }
            let allowZero = random.chance(30)
            let thousandths = MinorUnits.parseThousandths(text, allowZero: allowZero)
            for currency in currencies {
                let direct = MinorUnits.parse(text, currency: currency, allowZero: allowZero)
                let later = thousandths.flatMap {
                    MinorUnits.minor(thousandths: $0, currency: currency, allowZero: allowZero)
                }
                #expect((try? direct.get()) == (try? later.get()), "\(text) in \(currency.code)")
            }
            if case .success(let value) = thousandths {
                #expect(
                    MinorUnits.parseThousandths(MinorUnits.formatThousandths(value), allowZero: true) == .success(value)
                )
            }
        }
        #expect(MinorUnits.parseThousandths("55.41") == .success(55410))
        #expect(MinorUnits.parseThousandths("55.4101") == .failure(.tooPrecise))
        #expect(MinorUnits.formatThousandths(55410) == "55.41")
        #expect(MinorUnits.formatThousandths(5_541_000) == "5541")
        #expect(MinorUnits.formatThousandths(5) == "0.005")
    }

    @Test func formatsCanonicalDecimals() throws {
        #expect(MinorUnits.format(7000, currency: .usd) == "70.00")
        #expect(MinorUnits.format(5, currency: .usd) == "0.05")
        #expect(MinorUnits.format(7000, currency: try #require(Currency("jpy"))) == "7000")
        #expect(MinorUnits.format(1250, currency: try #require(Currency("kwd"))) == "1.250")
        #expect(MinorUnits.format(500, currency: try #require(Currency("isk"))) == "5")
    }

    @Test func currenciesAreLookedUpInEitherCase() {
        #expect(Currency("USD") == Currency("usd"))
        #expect(Currency("xyz") == nil)
        #expect(Currency("us") == nil)
        #expect(Currency("jpy")?.exponent == .zero)
    }

    @Test func civilDatesAreStrict() {
        #expect(CivilDate.parse("2026-11-29") != nil)
        #expect(CivilDate.parse("2024-02-29") != nil)
        #expect(CivilDate.parse("2026-02-29") == nil)
        #expect(CivilDate.parse("2026-13-01") == nil)
        #expect(CivilDate.parse("2026-1-01") == nil)
        #expect(CivilDate.format(CivilDate.parse("2026-11-29")!) == "2026-11-29")
    }

    @Test func sha256MatchesKnownVectors() {
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex(String(repeating: "a", count: 1000))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }
}
