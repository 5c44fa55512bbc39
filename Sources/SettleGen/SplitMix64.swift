/// SplitMix64: tiny, fast, and good enough for synthetic data.
struct SplitMix64 {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    @inline(__always) mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return SplitMix64.mix(state)
    }
    @inline(__always) static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in 0..<bound (bias negligible for the small bounds used here).
    @inline(__always) mutating func below(_ bound: Int) -> Int {
        Int((next() >> 11) % UInt64(bound))
    }
    /// Uniform in range.
    @inline(__always) mutating func within(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + below(range.upperBound - range.lowerBound + 1)
    }
    /// true with probability per-mille / 1000.
    @inline(__always) mutating func chance(_ perMille: Int) -> Bool { below(1000) < perMille }
}
