import Glibc

/// A small seeded generator (SplitMix64) so that every generated case can be replayed from
/// its seed. Not for anything but tests.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }

    /// True with the given chance, in percent.
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }

    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &self)] }
}

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
