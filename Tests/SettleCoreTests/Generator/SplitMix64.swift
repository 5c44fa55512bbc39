import Glibc

/// Case counts and seeds from the environment, so `make fuzz` can run many more cases than CI.
enum PropertyBudget {
    /// `SETTLE_PROPERTY_CASES`, else the default.
    static func cases(default count: Int) -> Int {
        guard let text = getenvString("SETTLE_PROPERTY_CASES"), let value = Int(text), value > 0 else { return count }
        return value
    }

    /// `SETTLE_PROPERTY_SEED` replays one run; the default seed is fixed.
    static func seed(default value: UInt64) -> UInt64 {
        guard let text = getenvString("SETTLE_PROPERTY_SEED"), let seed = UInt64(text) else { return value }
        return seed
    }

    /// `SETTLE_FUZZ_SECONDS`: run the byte fuzzers this long instead of a fixed count.
    static var fuzzSeconds: Int? {
        guard let text = getenvString("SETTLE_FUZZ_SECONDS"), let value = Int(text), value > 0 else { return nil }
        return value
    }

    private static func getenvString(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}
