/// The first draw of an order's stream is its line count: 1 (10 %), 2 (45 %), 3 (30 %), 4 (15 %)
/// → 2.5 lines per order on average.
@inline(__always) func orderStream(seed: UInt64, index: Int) -> SplitMix64 {
    SplitMix64(SplitMix64.mix(seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
}

@inline(__always) func lineCount(_ rng: inout SplitMix64) -> Int {
    let r = rng.below(100)
    return r < 10 ? 1 : r < 55 ? 2 : r < 85 ? 3 : 4
}

/// Fills `order` with order `index` of the export for `seed`, from its own random stream.
func makeOrder(seed: UInt64, index: Int, into order: inout SyntheticOrder) {
    var rng = orderStream(seed: seed, index: index)
    order.index = index
    order.lineCount = lineCount(&rng)
    let c = rng.below(1000)
    order.currency = c < 800 ? .usd : c < 900 ? .eur : c < 950 ? .gbp : c < 980 ? .jpy : .kwd
    switch order.currency {
    case .usd: order.charge = rng.within(800...15_000)
    case .eur: order.charge = rng.within(700...14_000)
    case .gbp: order.charge = rng.within(600...12_000)
    case .jpy: order.charge = rng.within(900...20_000)
    case .kwd: order.charge = rng.within(250...4_500) * 10
    }
    switch order.currency {
    case .usd: order.method = rng.chance(100) ? .usBankAccount : .card
    case .eur: order.method = rng.chance(200) ? .sepaDebit : .card
    default: order.method = .card
    }
    if order.method == .card {
        order.status = rng.chance(7) ? .failed : .succeeded
    } else {
        order.status = rng.chance(750) ? .pending : .succeeded
    }
    if order.status == .failed {
        order.fee = -1
    } else if order.method == .card {
        order.fee = order.charge * 29 / 1000 + (order.currency == .jpy ? 0 : order.currency == .kwd ? 100 : 30)
    } else {
        order.fee = min(order.charge * 8 / 1000, 500)
    }
    order.fee = order.fee / order.currency.step * order.currency.step
    order.hasGroup = !rng.chance(300)
    switch order.currency {
    case .usd: order.country = "US"
    case .eur:
        let k = rng.below(4)
        order.country = k == 0 ? "DE" : k == 1 ? "FR" : k == 2 ? "NL" : "IE"
    case .gbp: order.country = "GB"
    default: order.country = ""  // not known: nothing is checked offline
    }
    let step = order.currency.step
    @inline(__always) func share(_ perMille: Int) -> Int { order.charge * perMille / 1000 / step * step }
    let restaurant = rng.below(ExportShape.restaurantPool)
    // Composition by line count: restaurant; + courier payout; + tip or a second transfer; + both.
    let third: LineRole = order.lineCount == 3 && !rng.chance(600) ? .second : .tip
    for k in 0..<order.lineCount {
        var line = SyntheticLine()
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
            line.account = (restaurant + 1 + rng.below(ExportShape.restaurantPool - 1)) % ExportShape.restaurantPool
        case .courier:
            line.amount = rng.within(300...1_500)  // always USD
            line.account = rng.below(ExportShape.courierPool)
        }
        line.explicitKind = !rng.chance(100)
        let t = rng.below(1000)
        line.transferOn = t < 40 ? rng.below(7) : -1  // 2026-11-26 ... 2026-12-02
        line.description = rng.below(100)
        order[k] = line
    }
}
