import CZlib
import Dispatch
// settle-gen: writes deterministic synthetic order exports (SPEC §2.1 CSV, §2.2 XML) for
// benchmarks and load tests. See benchmarks/README.md.
//
//   settle-gen --orders N [--format csv|xml] [--gzip] [--level 1-9] [--shuffle] [--seed S] [--out FILE|-]
//
// Same flags and seed → byte-identical output. Every order is generated from its own
// random stream (seed, order index), so any order can be regenerated on its own: that is
// how --shuffle emits lines in a random permutation while holding only one 32-bit
// (order, line) handle per line in memory.
import Glibc

// MARK: - Randomness

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

// MARK: - Output

/// Where bytes go: a file descriptor, raw or gzip.
///
/// gzip is written the way pigz does it, so both cores work: the text is cut into fixed
/// 4 MiB chunks, each chunk is raw-deflated on its own (primed with the 32 KiB of text before
/// it as dictionary, ended with a sync flush, the last one with Z_FINISH), and the pieces are
/// written in order between one gzip header and trailer (CRC-32 combined). One gzip member;
/// the bytes depend only on the text and the level, not on the number of cores.
/// Two staging areas alternate: the generator fills one while the other is compressed and
/// written in the background. All buffers are allocated once and reused.
final class Sink: @unchecked Sendable {  // the background batch and the generator touch disjoint state
    static let chunk = 4 * 1024 * 1024
    static let window = 32 * 1024
    let fd: Int32
    let gzip: Bool
    let slots: Int
    // gzip state
    /// Two areas, each [window of preceding text | slots × chunk of text].
    private var areas: [UnsafeMutablePointer<UInt8>] = []
    private var current = 0
    private var staged = 0  // bytes of text in the current area
    private var batches = 0
    private let queue = DispatchQueue(label: "settle-gen.gzip")
    private let group = DispatchGroup()
    private var streams: UnsafeMutablePointer<z_stream>
    private var outputs: [UnsafeMutablePointer<UInt8>] = []
    private var outputCounts: UnsafeMutablePointer<Int>
    private var crcs: UnsafeMutablePointer<UInt>
    private var outputCapacity = 0
    private var crc: UInt = 0
    private var length: UInt64 = 0
    private(set) var written: UInt64 = 0

    init(fd: Int32, gzipLevel: Int32?) {
        self.fd = fd
        gzip = gzipLevel != nil
        slots = gzipLevel == nil ? 1 : max(2, min(8, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        streams = .allocate(capacity: slots)
        outputCounts = .allocate(capacity: slots)
        crcs = .allocate(capacity: slots)
        guard let level = gzipLevel else { return }
        for _ in 0..<2 { areas.append(.allocate(capacity: Sink.window + slots * Sink.chunk)) }
        for i in 0..<slots {
            (streams + i).initialize(to: z_stream())
            // Raw deflate: the gzip wrapper is written here.
            guard settle_deflate_init_raw(streams + i, level) == Z_OK else { fatal("deflateInit2 failed") }
        }
        outputCapacity = Int(deflateBound(streams, UInt(Sink.chunk))) + 64
        for _ in 0..<slots { outputs.append(.allocate(capacity: outputCapacity)) }
        // gzip header: magic, deflate, no flags, mtime 0 (reproducible), xfl 0, OS unix.
        var header: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]
        header.withUnsafeMutableBufferPointer { writeAll($0.baseAddress!, 10) }
        crc = crc32(0, nil, 0)
    }

    func consume(_ bytes: UnsafeMutablePointer<UInt8>, _ count: Int, finish: Bool) {
        guard gzip else {
            writeAll(bytes, count)
            return
        }
        let capacity = slots * Sink.chunk
        var offset = 0
        while offset < count {
            let n = min(count - offset, capacity - staged)
            (areas[current] + Sink.window + staged).update(from: bytes + offset, count: n)
            staged += n
            offset += n
            if staged == capacity && !(finish && offset == count) { submit(final: false) }
        }
        if finish {
            submit(final: true)
            group.wait()
            var trailer = [UInt8](repeating: 0, count: 8)
            for i in 0..<4 {
                trailer[i] = UInt8(truncatingIfNeeded: crc >> (8 * i))
                trailer[4 + i] = UInt8(truncatingIfNeeded: length >> (8 * UInt64(i)))
            }
            trailer.withUnsafeMutableBufferPointer { writeAll($0.baseAddress!, 8) }
            for i in 0..<slots { deflateEnd(streams + i) }
        }
    }

    /// Hands the current area to the background (after the previous batch is done) and
    /// switches to the other one, primed with this area's last 32 KiB.
    private func submit(final: Bool) {
        group.wait()  // the previous batch owns the other area and the streams until it is done
        let index = current, area = areas[current], count = staged, first = batches == 0
        let next = areas[1 - current]
        let keep = min(Sink.window, count)
        (next + Sink.window - keep).update(from: area + Sink.window + count - keep, count: keep)
        batches += 1
        current = 1 - current
        staged = 0
        queue.async(group: group) { self.compress(area: self.areas[index], count: count, first: first, final: final) }
    }

    /// Compresses one area's chunks in parallel and writes them in order.
    private func compress(area: UnsafeMutablePointer<UInt8>, count staged: Int, first: Bool, final: Bool) {
        let chunks = max(1, (staged + Sink.chunk - 1) / Sink.chunk)
        // Each iteration touches only its own slot (stream, output, count, crc) and reads text.
        struct Shared: @unchecked Sendable {
            let text: UnsafeMutablePointer<UInt8>, streams: UnsafeMutablePointer<z_stream>
            let outputCounts: UnsafeMutablePointer<Int>, crcs: UnsafeMutablePointer<UInt>
            let outputs: [UnsafeMutablePointer<UInt8>], capacity: Int
        }
        let shared = Shared(
            text: area + Sink.window, streams: streams, outputCounts: outputCounts, crcs: crcs,
            outputs: outputs, capacity: outputCapacity)
        DispatchQueue.concurrentPerform(iterations: chunks) { i in
            let start = shared.text + i * Sink.chunk
            let count = max(0, min(Sink.chunk, staged - i * Sink.chunk))
            let s = shared.streams + i
            deflateReset(s)
            if i > 0 || !first {
                // The 32 KiB before this chunk (for chunk 0: the previous area's tail, copied in).
                deflateSetDictionary(s, start - Sink.window, UInt32(Sink.window))
            }
            s.pointee.next_in = start
            s.pointee.avail_in = UInt32(count)
            s.pointee.next_out = shared.outputs[i]
            s.pointee.avail_out = UInt32(shared.capacity)
            let last = final && i == chunks - 1
            let rc = deflate(s, last ? Z_FINISH : Z_SYNC_FLUSH)
            guard rc == (last ? Z_STREAM_END : Z_OK), s.pointee.avail_in == 0 else { fatal("deflate failed (\(rc))") }
            shared.outputCounts[i] = shared.capacity - Int(s.pointee.avail_out)
            shared.crcs[i] = crc32(0, start, UInt32(count))
        }
        for i in 0..<chunks {
            writeAll(outputs[i], outputCounts[i])
            let count = max(0, min(Sink.chunk, staged - i * Sink.chunk))
            crc = crc32_combine(crc, crcs[i], off_t(count))
            length += UInt64(count)
        }
    }

    private func writeAll(_ bytes: UnsafeMutablePointer<UInt8>, _ count: Int) {
        var offset = 0
        while offset < count {
            let n = write(fd, bytes + offset, count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                fatal("write failed: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        written += UInt64(count)
    }
}

/// A 256 KiB byte buffer reused for the whole run; handed to the sink when full.
final class Out {
    static let capacity = 256 * 1024
    static let slack = 8 * 1024  // one record never exceeds this
    let base: UnsafeMutablePointer<UInt8>
    var count = 0
    let sink: Sink
    private(set) var total: UInt64 = 0

    init(sink: Sink) {
        self.sink = sink
        base = .allocate(capacity: Out.capacity + Out.slack)
    }

    /// Call before each record: makes room for one record without further checks.
    @inline(__always) func reserve() {
        if count >= Out.capacity { flush() }
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

func printError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

@inline(never) func fatal(_ message: String) -> Never {
    printError("settle-gen: \(message)\n")
    exit(64)
}

// MARK: - The model of one order

enum Cur: Int {
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

enum Role: UInt8 { case restaurant, tip, courier, second }

struct Line {
    var role = Role.restaurant
    var amount = 0  // minor units
    var account = 0  // pool index of the destination or recipient
    var explicitKind = true  // false: `kind` left empty (inferred)
    var transferOn = -1  // -1: none; else a day offset from 2026-11-26
    var description = 0  // which description text
}

enum Status: UInt8 { case succeeded, pending, failed }
enum Method: UInt8 { case card, sepaDebit, usBankAccount }

struct Order {
    var index = 0
    var cur = Cur.usd
    var charge = 0
    var fee = 0
    var status = Status.succeeded
    var method = Method.card
    var hasGroup = true
    var country: StaticString = ""  // destination country of the transfers
    var lineCount = 1
    var lines = (Line(), Line(), Line(), Line())

    subscript(k: Int) -> Line {
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

let restaurantPool = 60_000
let courierPool = 150_000
let firstOrderID = 10_000_000

/// The first draw of an order's stream is its line count: 1 (10 %), 2 (45 %), 3 (30 %), 4 (15 %)
/// → 2.5 lines per order on average.
@inline(__always) func orderStream(seed: UInt64, index: Int) -> SplitMix64 {
    SplitMix64(SplitMix64.mix(seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
}

@inline(__always) func lineCount(_ rng: inout SplitMix64) -> Int {
    let r = rng.below(100)
    return r < 10 ? 1 : r < 55 ? 2 : r < 85 ? 3 : 4
}

func makeOrder(seed: UInt64, index: Int, into o: inout Order) {
    var rng = orderStream(seed: seed, index: index)
    o.index = index
    o.lineCount = lineCount(&rng)
    let c = rng.below(1000)
    o.cur = c < 800 ? .usd : c < 900 ? .eur : c < 950 ? .gbp : c < 980 ? .jpy : .kwd
    switch o.cur {
    case .usd: o.charge = rng.within(800...15_000)
    case .eur: o.charge = rng.within(700...14_000)
    case .gbp: o.charge = rng.within(600...12_000)
    case .jpy: o.charge = rng.within(900...20_000)
    case .kwd: o.charge = rng.within(250...4_500) * 10
    }
    switch o.cur {
    case .usd: o.method = rng.chance(100) ? .usBankAccount : .card
    case .eur: o.method = rng.chance(200) ? .sepaDebit : .card
    default: o.method = .card
    }
    if o.method == .card {
        o.status = rng.chance(7) ? .failed : .succeeded
    } else {
        o.status = rng.chance(750) ? .pending : .succeeded
    }
    if o.status == .failed {
        o.fee = -1
    } else if o.method == .card {
        o.fee = o.charge * 29 / 1000 + (o.cur == .jpy ? 0 : o.cur == .kwd ? 100 : 30)
    } else {
        o.fee = min(o.charge * 8 / 1000, 500)
    }
    o.fee = o.fee / o.cur.step * o.cur.step
    o.hasGroup = !rng.chance(300)
    switch o.cur {
    case .usd: o.country = "US"
    case .eur:
        let k = rng.below(4)
        o.country = k == 0 ? "DE" : k == 1 ? "FR" : k == 2 ? "NL" : "IE"
    case .gbp: o.country = "GB"
    default: o.country = ""  // not known: nothing is checked offline
    }
    let step = o.cur.step
    @inline(__always) func share(_ perMille: Int) -> Int { o.charge * perMille / 1000 / step * step }
    let restaurant = rng.below(restaurantPool)
    // Composition by line count: restaurant; + courier payout; + tip or a second transfer; + both.
    let third: Role = o.lineCount == 3 && !rng.chance(600) ? .second : .tip
    for k in 0..<o.lineCount {
        var line = Line()
        line.role = k == 0 ? .restaurant : k == 1 ? .courier : k == 2 ? third : .second
        switch line.role {
        case .restaurant:
            line.amount = max(step, share(rng.within(700...850)))
            line.account = restaurant
        case .tip:
            line.amount = max(step, share(rng.within(30...100)))
            line.account = restaurant  // same destination and charge: aggregates with line 1
        case .second:
            line.amount = max(step, share(rng.within(20...50)))
            line.account = (restaurant + 1 + rng.below(restaurantPool - 1)) % restaurantPool
        case .courier:
            line.amount = rng.within(300...1_500)  // always USD
            line.account = rng.below(courierPool)
        }
        line.explicitKind = !rng.chance(100)
        let t = rng.below(1000)
        line.transferOn = t < 40 ? rng.below(7) : -1  // 2026-11-26 ... 2026-12-02
        line.description = rng.below(100)
        o[k] = line
    }
}

// MARK: - Writing

let tagAccount: UInt64 = 1, tagCourier: UInt64 = 2, tagCharge: UInt64 = 3, tagIntent: UInt64 = 4, tagMethod: UInt64 = 5

struct Writer {
    let out: Out
    let seed: UInt64

    @inline(__always) func restaurantAccount(_ i: Int) {
        out.ascii("acct_1"); out.idChars(seed: seed, tag: tagAccount, index: i, count: 11)
    }
    @inline(__always) func courierAccount(_ i: Int) {
        out.ascii("acct_1"); out.idChars(seed: seed, tag: tagCourier, index: i, count: 11)
    }
    @inline(__always) func payoutMethod(_ i: Int) {
        out.ascii("pm_ap_"); out.idChars(seed: seed, tag: tagMethod, index: i, count: 10)
    }
    @inline(__always) func charge(_ o: Order) {
        out.ascii("ch_3"); out.idChars(seed: seed, tag: tagCharge, index: o.index, count: 12)
    }
    @inline(__always) func intent(_ o: Order) {
        out.ascii("pi_3"); out.idChars(seed: seed, tag: tagIntent, index: o.index, count: 12)
    }
    @inline(__always) func orderID(_ o: Order) { out.int(firstOrderID + o.index) }
    @inline(__always) func group(_ o: Order) { out.ascii("ORD"); out.int(firstOrderID + o.index) }
    @inline(__always) func status(_ o: Order) {
        switch o.status {
        case .succeeded: out.ascii("succeeded")
        case .pending: out.ascii("pending")
        case .failed: out.ascii("failed")
        }
    }
    @inline(__always) func method(_ o: Order) {
        switch o.method {
        case .card: out.ascii("card")
        case .sepaDebit: out.ascii("sepa_debit")
        case .usBankAccount: out.ascii("us_bank_account")
        }
    }
    @inline(__always) func date(_ offset: Int) {
        // 2026-11-26 + offset (0...6)
        let day = 26 + offset
        if day <= 30 {
            out.ascii("2026-11-"); out.int(day, width: 2)
        } else {
            out.ascii("2026-12-"); out.int(day - 30, width: 2)
        }
    }
    /// The description: plain most of the time; a few hold a comma or a quote (CSV quoting,
    /// XML escaping).
    @inline(__always) func description(_ o: Order, _ l: Line, csv: Bool) {
        let d = l.description
        switch l.role {
        case .restaurant:
            if d < 72 { return }
            if d < 97 { out.ascii("Order "); out.int(firstOrderID + o.index); return }
            if csv {
                out.ascii("\"Order "); out.int(firstOrderID + o.index); out.ascii(", food\"")
            } else {
                out.ascii("Order "); out.int(firstOrderID + o.index); out.ascii(", food")
            }
        case .tip:
            if d < 98 {
                out.ascii("Tip")
            } else if csv {
                out.ascii("\"Tip \"\"thank you\"\"\"")
            } else {
                out.ascii("Tip &quot;thank you&quot;")
            }
        case .courier:
            if d < 70 { return }
            if d < 98 {
                out.ascii("Delivery")
            } else if csv {
                out.ascii("\"Delivery, late night\"")
            } else {
                out.ascii("Delivery, late night")
            }
        case .second:
            out.ascii("Packaging & bags")  // no comma: plain in CSV
        }
    }

    static let header: StaticString =
        "line_id,order_id,kind,amount,currency,transfer_group,destination,source_transaction,payment_intent,charge_amount,charge_currency,charge_status,charge_fee,payment_method_type,destination_country,recipient,payout_method,transfer,transfer_on,description\n"

    func csvLine(_ o: Order, _ k: Int) {
        let l = o[k]
        out.reserve()
        let comma: UInt8 = 0x2C
        orderID(o); out.byte(0x2D); out.int(k + 1); out.byte(comma)  // line_id
        orderID(o); out.byte(comma)  // order_id
        let payout = l.role == .courier
        if l.explicitKind { if payout { out.ascii("payout") } else { out.ascii("transfer") } }
        out.byte(comma)
        let cur: Cur = payout ? .usd : o.cur
        out.amount(l.amount, decimals: cur.decimals); out.byte(comma)  // amount
        out.ascii(cur.code); out.byte(comma)  // currency
        if o.hasGroup { group(o) }; out.byte(comma)  // transfer_group
        if !payout { restaurantAccount(l.account) }
        out.byte(comma)  // destination
        charge(o); out.byte(comma)  // source_transaction
        intent(o); out.byte(comma)  // payment_intent
        out.amount(o.charge, decimals: o.cur.decimals); out.byte(comma)  // charge_amount
        out.ascii(o.cur.code); out.byte(comma)  // charge_currency
        status(o); out.byte(comma)  // charge_status
        if o.fee >= 0 { out.amount(o.fee, decimals: o.cur.decimals) }; out.byte(comma)
        method(o); out.byte(comma)  // payment_method_type
        if payout { out.ascii("US") } else { out.ascii(o.country) }; out.byte(comma)
        if payout { courierAccount(l.account) }; out.byte(comma)  // recipient
        if payout { payoutMethod(l.account) }; out.byte(comma)  // payout_method
        out.byte(comma)  // transfer
        if l.transferOn >= 0 { date(l.transferOn) }; out.byte(comma)  // transfer_on
        description(o, l, csv: true)
        out.byte(0x0A)
    }

    func xmlOrder(_ o: Order) {
        out.reserve()
        out.ascii("  <order id=\""); orderID(o); out.byte(0x22)
        if o.hasGroup { out.ascii(" transferGroup=\""); group(o); out.byte(0x22) }
        out.ascii(" paymentIntent=\""); intent(o)
        out.ascii("\" sourceTransaction=\""); charge(o)
        out.ascii("\" chargeAmount=\""); out.amount(o.charge, decimals: o.cur.decimals)
        out.ascii("\" chargeCurrency=\""); out.ascii(o.cur.code)
        out.ascii("\" chargeStatus=\""); status(o)
        if o.fee >= 0 { out.ascii("\" chargeFee=\""); out.amount(o.fee, decimals: o.cur.decimals) }
        out.ascii("\" paymentMethodType=\""); method(o)
        out.ascii("\">\n")
        for k in 0..<o.lineCount {
            let l = o[k]
            let payout = l.role == .courier
            out.ascii("    <line id=\""); orderID(o); out.byte(0x2D); out.int(k + 1); out.byte(0x22)
            if l.explicitKind { if payout { out.ascii(" kind=\"payout\"") } else { out.ascii(" kind=\"transfer\"") } }
            if payout {
                out.ascii(" recipient=\""); courierAccount(l.account)
                out.ascii("\" payoutMethod=\""); payoutMethod(l.account); out.byte(0x22)
            } else {
                out.ascii(" destination=\""); restaurantAccount(l.account); out.byte(0x22)
            }
            let cur: Cur = payout ? .usd : o.cur
            out.ascii(" amount=\""); out.amount(l.amount, decimals: cur.decimals)
            out.ascii("\" currency=\""); out.ascii(cur.code); out.byte(0x22)
            if payout {
                out.ascii(" destinationCountry=\"US\"")
            } else if o.country.utf8CodeUnitCount > 0 {
                out.ascii(" destinationCountry=\""); out.ascii(o.country); out.byte(0x22)
            }
            if l.transferOn >= 0 { out.ascii(" transferOn=\""); date(l.transferOn); out.byte(0x22) }
            let before = out.count
            out.ascii(" description=\"")
            let start = out.count
            description(o, l, csv: false)
            if out.count == start { out.count = before } else { out.byte(0x22) }
            // `&` must be escaped in XML: the only text that has one is the second transfer's.
            if l.role == .second { out.count = before; out.ascii(" description=\"Packaging &amp; bags\"") }
            out.ascii("/>\n")
        }
        out.ascii("  </order>\n")
    }
}

// MARK: - Command line

struct Options {
    var orders = -1
    var xml = false
    var gzip = false
    var level: Int32 = 6
    var shuffle = false
    var seed: UInt64 = 1
    var out = "-"
}

func usage() -> Never {
    printError(
        """
        usage: settle-gen --orders N [--format csv|xml] [--gzip] [--level 1-9] [--shuffle] [--seed S] [--out FILE|-]
          --orders N     number of orders (1-4 lines each, 2.5 on average); 2700000 ≈ 6.75 M lines ≈ 1 GB CSV
          --format       csv (SPEC §2.1, default) or xml (SPEC §2.2)
          --gzip         compress with zlib's deflate (gzip wrapper), level 6 unless --level
          --shuffle      CSV: emit lines in a random permutation so groups are not contiguous;
                         XML: permute the orders
          --seed S       random seed (default 1); same flags and seed give byte-identical output
          --out FILE|-   output file (default standard output)

        """)
    exit(64)
}

func parseOptions() -> Options {
    var o = Options()
    var args = CommandLine.arguments.dropFirst()
    func value(_ name: String) -> String {
        guard let v = args.popFirst() else { fatal("\(name) needs a value") }
        return v
    }
    while let a = args.popFirst() {
        switch a {
        case "--orders":
            guard let n = Int(value(a).replacingUnderscores()), n >= 0, n < 1 << 29 else {
                fatal("--orders: 0 ..< 536870912")
            }
            o.orders = n
        case "--format":
            switch value(a) {
            case "csv": o.xml = false
            case "xml": o.xml = true
            default: fatal("--format: csv or xml")
            }
        case "--gzip": o.gzip = true
        case "--level":
            guard let l = Int32(value(a)), (1...9).contains(l) else { fatal("--level: 1 ... 9") }
            o.level = l
        case "--shuffle": o.shuffle = true
        case "--seed":
            guard let s = UInt64(value(a)) else { fatal("--seed: a non-negative integer") }
            o.seed = s
        case "--out": o.out = value(a)
        case "-h", "--help": usage()
        default: fatal("unknown argument \(a) (see --help)")
        }
    }
    if o.orders < 0 { usage() }
    return o
}

extension String {
    func replacingUnderscores() -> String { String(filter { $0 != "_" }) }
}

func run() {
    let options = parseOptions()
    let fd: Int32
    let tmpPath = options.out + ".tmp"
    if options.out == "-" {
        fd = 1
    } else {
        fd = open(tmpPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fatal("cannot write \(tmpPath): \(String(cString: strerror(errno)))") }
    }
    let sink = Sink(fd: fd, gzipLevel: options.gzip ? options.level : nil)
    let out = Out(sink: sink)
    let writer = Writer(out: out, seed: options.seed)
    var order = Order()
    let n = options.orders
    var lines = 0

    // The order of emission: identity, or a Fisher–Yates permutation drawn from the seed.
    // CSV shuffles line handles (order << 2 | line); XML shuffles orders.
    var handles: [UInt32] = []
    if options.shuffle {
        if options.xml {
            handles = (0..<n).map { UInt32($0) }
        } else {
            handles.reserveCapacity(n * 5 / 2 + 16)
            for i in 0..<n {
                var rng = orderStream(seed: options.seed, index: i)
                let count = lineCount(&rng)
                for k in 0..<count { handles.append(UInt32(i) << 2 | UInt32(k)) }
            }
        }
        var rng = SplitMix64(SplitMix64.mix(options.seed ^ 0x5348_5546_464C_4521))
        handles.withUnsafeMutableBufferPointer { h in
            var i = h.count - 1
            while i > 0 {
                let j = Int(rng.next() % UInt64(i + 1))
                h.swapAt(i, j)
                i -= 1
            }
        }
    }

    if options.xml {
        out.ascii("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<orderExport xmlns=\"urn:settle:order-export:1\">\n")
        for i in 0..<n {
            makeOrder(seed: options.seed, index: options.shuffle ? Int(handles[i]) : i, into: &order)
            writer.xmlOrder(order)
            lines += order.lineCount
        }
        out.reserve()
        out.ascii("</orderExport>\n")
    } else {
        out.ascii(Writer.header)
        if options.shuffle {
            var current = -1
            for h in handles {
                let i = Int(h >> 2)
                if i != current {
                    makeOrder(seed: options.seed, index: i, into: &order)
                    current = i
                }
                writer.csvLine(order, Int(h & 3))
            }
            lines = handles.count
        } else {
            for i in 0..<n {
                makeOrder(seed: options.seed, index: i, into: &order)
                for k in 0..<order.lineCount { writer.csvLine(order, k) }
                lines += order.lineCount
            }
        }
    }
    out.finish()
    if options.out != "-" {
        guard fsync(fd) == 0 || errno == EINVAL, close(fd) == 0 else { fatal("cannot write \(options.out)") }
        guard rename(tmpPath, options.out) == 0 else { fatal("cannot rename to \(options.out)") }
    }
    printError(
        "settle-gen: \(n) orders, \(lines) lines, \(out.total) bytes\(options.gzip ? " → \(sink.written) bytes gzip level \(options.level)" : "")\n"
    )
}

run()
