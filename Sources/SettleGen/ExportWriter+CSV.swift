/// docs/RULES.md, Input: one CSV record per line.
extension ExportWriter {
    static let header: StaticString =
        "line_id,order_id,kind,amount,currency,transfer_group,destination,source_transaction,payment_intent,charge_amount,charge_currency,charge_status,charge_fee,payment_method_type,destination_country,recipient,payout_method,transfer,transfer_on,description\n"

    func csvLine(_ order: SyntheticOrder, lineIndex: Int) {
        let line = order[lineIndex]
        out.reserve()
        let comma: UInt8 = 0x2C
        orderID(order); out.byte(0x2D); out.int(lineIndex + 1); out.byte(comma)  // line_id
        orderID(order); out.byte(comma)  // order_id
        let payout = line.role == .courier
        if line.explicitKind { if payout { out.ascii("payout") } else { out.ascii("transfer") } }
        out.byte(comma)
        let currency: ExportCurrency = payout ? .usd : order.currency
        out.amount(line.amount, decimals: currency.decimals); out.byte(comma)  // amount
        out.ascii(currency.code); out.byte(comma)  // currency
        if order.hasGroup { group(order) }; out.byte(comma)  // transfer_group
        if !payout { restaurantAccount(line.account) }
        out.byte(comma)  // destination
        charge(order); out.byte(comma)  // source_transaction
        intent(order); out.byte(comma)  // payment_intent
        out.amount(order.charge, decimals: order.currency.decimals); out.byte(comma)  // charge_amount
        out.ascii(order.currency.code); out.byte(comma)  // charge_currency
        status(order); out.byte(comma)  // charge_status
        if order.fee >= 0 { out.amount(order.fee, decimals: order.currency.decimals) }; out.byte(comma)
        method(order); out.byte(comma)  // payment_method_type
        if payout { out.ascii("US") } else { out.ascii(order.country) }; out.byte(comma)
        if payout { courierAccount(line.account) }; out.byte(comma)  // recipient
        if payout { payoutMethod(line.account) }; out.byte(comma)  // payout_method
        out.byte(comma)  // transfer
        if line.transferOn >= 0 { date(line.transferOn) }; out.byte(comma)  // transfer_on
        description(order, line, csv: true)
        out.byte(0x0A)
    }
}
