/// A 256 KiB byte buffer reused for the whole run; handed to the sink when full.
final class OutputBuffer {
    static let capacity = 256 * 1024
    static let slack = 8 * 1024  // one record never exceeds this
    let base: UnsafeMutablePointer<UInt8>
    var count = 0
    let sink: OutputSink
    private(set) var total: UInt64 = 0

    init(sink: OutputSink) {
        self.sink = sink
        base = .allocate(capacity: OutputBuffer.capacity + OutputBuffer.slack)
    }

    /// Call before each record: makes room for one record without further checks.
    @inline(__always) func reserve() {
        if count >= OutputBuffer.capacity { flush() }
    }

    func flush() {
        if count > 0 { sink.consume(base, count, finish: false) }
        total += UInt64(count)
        count = 0
    }

    func finish() {
        total += UInt64(count)
        sink.consume(base, count, finish: true)
        count = 0
    }

    @inline(__always) func byte(_ b: UInt8) {
        base[count] = b
        count += 1
    }

    @inline(__always) func ascii(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        (base + count).update(from: s.utf8Start, count: n)
        count += n
    }

    @inline(__always) func bytes(_ p: UnsafePointer<UInt8>, _ n: Int) {
        (base + count).update(from: p, count: n)
        count += n
    }

    /// Decimal digits of a non-negative integer.
    @inline(__always) func int(_ value: Int) {
        var v = UInt64(value)
        var tmp: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch
        withUnsafeMutableBytes(of: &tmp) { scratch in
            var i = 24
            repeat {
                i -= 1
                scratch[i] = UInt8(truncatingIfNeeded: 48 + v % 10)
                v /= 10
            } while v > 0
            let n = 24 - i
            (base + count).update(from: scratch.baseAddress!.assumingMemoryBound(to: UInt8.self) + i, count: n)
            count += n
        }
    }

    /// Zero-padded fixed width.
    @inline(__always) func int(_ value: Int, width: Int) {
        var v = value
        var i = width
        while i > 0 {
            i -= 1
            base[count + i] = UInt8(truncatingIfNeeded: 48 + v % 10)
            v /= 10
        }
        count += width
    }

    /// An exact decimal in major units from minor units: 7050 with 2 decimals → 70.50.
    @inline(__always) func amount(_ minor: Int, decimals: Int) {
        switch decimals {
        case 0: int(minor)
        case 2:
            int(minor / 100); byte(0x2E); int(minor % 100, width: 2)
        default:
            int(minor / 1000); byte(0x2E); int(minor % 1000, width: 3)
        }
    }

    /// `count` base-62 characters drawn from a hash of (seed, tag, index): stable ids.
    @inline(__always) func idChars(seed: UInt64, tag: UInt64, index: Int, count n: Int) {
        let alphabet: StaticString = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        let a = alphabet.utf8Start
        let h0 = SplitMix64.mix(seed ^ (tag &* 0xD6E8_FEB8_6659_FD93) ^ UInt64(index))
        var h = h0
        var left = 10
        var round: UInt64 = 0
        for _ in 0..<n {
            if left == 0 {
                round += 1
                h = SplitMix64.mix(h0 &+ round &* 0xA076_1D64_78BD_642F)
                left = 10
            }
            base[count] = a[Int(h % 62)]
            h /= 62
            left -= 1
            count += 1
        }
    }
}
