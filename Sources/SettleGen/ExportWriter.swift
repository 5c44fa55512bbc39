/// Salts of the id hashes, one per kind of id: the same index gives unrelated ids.
enum IDTag {
    static let account: UInt64 = 1
    static let courier: UInt64 = 2
    static let charge: UInt64 = 3
    static let intent: UInt64 = 4
    static let payoutMethod: UInt64 = 5
}

/// Writes orders as export text into an ``OutputBuffer``; the fields both formats share
/// are here, the records in `ExportWriter+CSV.swift` and `ExportWriter+XML.swift`.
struct ExportWriter {
    let out: OutputBuffer
    let seed: UInt64

    @inline(__always) func restaurantAccount(_ i: Int) {
        out.ascii("acct_1"); out.idChars(seed: seed, tag: IDTag.account, index: i, count: 11)
    }
    @inline(__always) func courierAccount(_ i: Int) {
        out.ascii("acct_1"); out.idChars(seed: seed, tag: IDTag.courier, index: i, count: 11)
    }
    @inline(__always) func payoutMethod(_ i: Int) {
        out.ascii("pm_ap_"); out.idChars(seed: seed, tag: IDTag.payoutMethod, index: i, count: 10)
    }
    @inline(__always) func charge(_ order: SyntheticOrder) {
        out.ascii("ch_3"); out.idChars(seed: seed, tag: IDTag.charge, index: order.index, count: 12)
    }
    @inline(__always) func intent(_ order: SyntheticOrder) {
        out.ascii("pi_3"); out.idChars(seed: seed, tag: IDTag.intent, index: order.index, count: 12)
    }
    @inline(__always) func orderID(_ order: SyntheticOrder) { out.int(ExportShape.firstOrderID + order.index) }
    @inline(__always) func group(_ order: SyntheticOrder) {
        out.ascii("ORD"); out.int(ExportShape.firstOrderID + order.index)
    }
    @inline(__always) func status(_ order: SyntheticOrder) {
        switch order.status {
        case .succeeded: out.ascii("succeeded")
        case .pending: out.ascii("pending")
        case .failed: out.ascii("failed")
        }
    }
    @inline(__always) func method(_ order: SyntheticOrder) {
        switch order.method {
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
    @inline(__always) func description(_ order: SyntheticOrder, _ line: SyntheticLine, csv: Bool) {
        let d = line.description
        switch line.role {
        case .restaurant:
            if d < 72 { return }
            if d < 97 { out.ascii("Order "); out.int(ExportShape.firstOrderID + order.index); return }
            if csv {
                out.ascii("\"Order "); out.int(ExportShape.firstOrderID + order.index); out.ascii(", food\"")
            } else {
                out.ascii("Order "); out.int(ExportShape.firstOrderID + order.index); out.ascii(", food")
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
}
