import Foundation
import SettleCore
import SettleLedger
import SettleTestSupport
import Testing

@testable import SettleCLI

/// The planner asks the ledger in batches (one statement a batch, `json_each`); every
/// answer must be what the one-key look-ups give, key by key. Seeded ledgers and keys drawn
/// from the bytes that could break a JSON array or a text compare: quotes, backslashes,
/// control characters, NUL, non-ASCII, and keys that differ only there.
@Suite struct LedgerBatchLookUpTests {
    static let alphabet: [String] = ["a", "b", "1", "-", "\"", "\\", "/", "\t", "\u{1}", "\u{0}", "é", "€", " ", "'"]

    static func key(_ generator: inout SplitMix64) -> String {
        let count = Int.random(in: 1...5, using: &generator)
        return (0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }.joined()
    }

    static func dispatch(
        _ id: String, lines: [String], charge: String, currency: String, amount: Int64, attempt: Int
    ) -> LedgerDispatch {
        LedgerDispatch(
            id: id, kind: "transfer", group: "G", payee: "acct_1", charge: charge, currency: currency,
            amountMinor: amount, method: "POST", path: "/v1/transfers", params: "{}", stripeContext: nil,
            attempt: attempt, idempotencyKey: "settle-\(id)-a\(attempt)",
            lines: lines.map { LedgerLineClaim(lineID: $0, kind: "transfer", amountMinor: amount, content: "c-\($0)") })
    }

    /// A PlanRow whose id is `ins_` and the 24 hex digits of (high, low).
    static func row(_ high: UInt64, _ low: UInt32) -> PlanRow {
        var row = PlanRow(kind: .transfer, group: .none, payee: .none, currency: .usd)
        row.digestHigh = high
        row.digestLow = low
        return row
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func batchAnswersAreTheOneKeyAnswers(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settle-batch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("ledger.sqlite").path
        try LedgerStore.create(path: path).close()
        let store = try LedgerStore.open(path: path)
        defer { store.close() }

        // A ledger of instructions in every state, on charges with awkward ids.
        var lineIDs: Set<String> = []
        var charges: [String] = []
        var rows: [PlanRow] = []
        var settledTransfers: [String: Int64] = [:]
        for number in 0..<120 {
            let row = Self.row(UInt64.random(in: 0...UInt64.max, using: &generator), UInt32(number))
            rows.append(row)
            // No key with a NUL in the ledger: the line rules reject them (id_invalid), and
            // SQLite's JSON ends a string there. They are still asked below.
            let lines = (0..<Int.random(in: 1...3, using: &generator)).map { _ in Self.key(&generator) }
                .filter { !$0.contains("\u{0}") && lineIDs.insert($0).inserted }
            guard !lines.isEmpty else { continue }
            let charge = Self.key(&generator).replacingOccurrences(of: "\u{0}", with: "0")
            charges.append(charge)
            let currency = Bool.random(using: &generator) ? "usd" : "eur"
            let amount = Int64.random(in: 1...9_999, using: &generator)
            do {
                try store.markInFlight([
                    Self.dispatch(
                        row.id, lines: lines, charge: charge, currency: currency, amount: amount,
                        attempt: Int.random(in: 1...4, using: &generator))
                ])
            } catch {
                continue
            }
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                try store.recordOutcome(instruction: row.id, .settled(stripeID: "tr_\(number)"))
                settledTransfers["tr_\(number)"] = amount
            case 1: try store.recordOutcome(instruction: row.id, .failed(code: "x", message: "y"))
            case 2: try store.recordOutcome(instruction: row.id, .unknown(message: "timeout"))
            default: break
            }
            if Bool.random(using: &generator) {
                try store.recordCharges([
                    (
                        charge: charge, currency: currency, run: "run_\(number % 7)", gross: 1, fee: Int64(number % 5),
                        status: "succeeded"
                    )
                ])
            }
            if Bool.random(using: &generator) {
                try store.recordChargePayouts(
                    [(charge: charge, currency: currency, amount: Int64(number % 500) + 1)], run: "run_\(number % 5)")
            }
        }
        try store.beginSnapshot()
        let history = LedgerHistory(store: store)

        // Keys the ledger holds, keys it does not, and keys one byte away from either.
        var askLines = Array(lineIDs).sorted()
        for _ in 0..<200 { askLines.append(Self.key(&generator)) }
        askLines += askLines.prefix(60).map { $0 + "\u{0}z" } + askLines.prefix(60).map { "\"" + $0 }
        askLines.shuffle(using: &generator)
        var askCharges = charges + (0..<100).map { _ in Self.key(&generator) }
        askCharges.shuffle(using: &generator)
        var askRows = rows + (0..<50).map { Self.row(UInt64($0), 7) }
        askRows.shuffle(using: &generator)

        var hits = 0
        for start in stride(from: 0, to: askLines.count, by: 97) {
            let keys = askLines[start..<min(start + 97, askLines.count)].map { Array($0.utf8) }
            var got: [Int: HistoricLine] = [:]
            withViews(keys) { views in history.lines(views) { got[$0] = $1 } }
            for (position, key) in keys.enumerated() {
                let expected = try store.line(String(decoding: key, as: UTF8.self))
                #expect(got[position]?.content == expected?.content, "line \(key)")
                #expect(got[position]?.stripeID == expected?.stripeID, "line \(key)")
                #expect((got[position] == nil) == (expected == nil), "line \(key)")
                if expected != nil { hits += 1 }
            }
        }
        #expect(hits >= lineIDs.count / 2, "most keys the ledger holds must be found")

        for start in stride(from: 0, to: askCharges.count, by: 41) {
            let keys = askCharges[start..<min(start + 41, askCharges.count)].map { Array($0.utf8) }
            for currency in [Currency.usd, Currency("eur")!] {
                var transferred: [Int: Int64] = [:]
                var firstRun: [Int: String] = [:]
                var counted: [Int: (currency: String, fee: Int64, gross: Int64)] = [:]
                var before: [Int: Int64] = [:]
                var paidBefore: [Int: Int64] = [:]
                withViews(keys) { views in
                    let pairs = views.map { (charge: $0, currency: currency) }
                    history.transferred(pairs) { transferred[$0] = $1 }
                    history.charges(
                        pairs,
                        firstRun: {
                            firstRun[$0] = $1
                            counted[$0] = $2
                        }, transferredBefore: { before[$0] = $1 },
                        paidOutBefore: { paidBefore[$0] = $1 })
                }
                for (position, key) in keys.enumerated() {
                    let charge = String(decoding: key, as: UTF8.self)
                    #expect(
                        transferred[position, default: 0]
                            == (try store.transferredAmount(charge: charge, currency: currency.code)), "charge \(key)")
                    #expect(firstRun[position] == (try store.chargeFirstRun(charge)), "charge \(key)")
                    let recorded = try store.countedCharge(charge)
                    #expect(counted[position]?.currency == recorded?.currency, "charge \(key)")
                    #expect(counted[position]?.fee == recorded?.fee, "charge \(key)")
                    #expect(counted[position]?.gross == recorded?.gross, "charge \(key)")
                    #expect(
                        before[position, default: 0]
                            == (try store.transferredBefore(charge: charge, currency: currency.code)), "charge \(key)")
                    // A plan's run is new: every run's payouts count.
                    #expect(
                        paidBefore[position, default: 0]
                            == (try store.paidOutBefore(charge: charge, currency: currency.code, excluding: "")),
                        "charge \(key)")
                }
            }
        }

        var sent = 0
        for start in stride(from: 0, to: askRows.count, by: 33) {
            let batch = askRows[start..<min(start + 33, askRows.count)]
            var got: [Int: Int] = [:]
            history.attempts(batch) { got[$0] = $1 }
            for (position, row) in batch.enumerated() {
                let expected = try store.attempts(instruction: row.id)
                #expect(got[position, default: 0] == expected, "instruction \(row.id)")
                if expected > 0 { sent += 1 }
            }
        }
        #expect(sent > 50, "most instructions the ledger holds must be found")

        // Transfers by Stripe id: the settled ones, at their amount (no reversal in this ledger).
        let askTransfers = (0..<120).map { "tr_\($0)" } + ["tr_", "tr_1\u{0}", "\"tr_1"]
        var recorded: [Int: RecordedTransfer] = [:]
        withViews(askTransfers.map { Array($0.utf8) }) { views in history.recordedTransfers(views) { recorded[$0] = $1 }
        }
        for (position, id) in askTransfers.enumerated() {
            // A key with a NUL is no id ("tr_1\0" is not tr_1).
            let expected = settledTransfers[id]
            #expect(recorded[position]?.remaining == expected, "transfer \(id)")
            #expect(recorded[position].map(\.stripeID) == expected.map { _ in id })
        }
        #expect(settledTransfers.count > 10)
        #expect(history.failure == nil)
        try store.endSnapshot()
    }

    /// Byte views of `keys` for the length of `body`.
    func withViews(_ keys: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) -> Void) {
        let storage = keys.map { key -> UnsafeMutableRawBufferPointer in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(key.count, 1), alignment: 1)
            buffer.copyBytes(from: key)
            return buffer
        }
        defer { storage.forEach { $0.deallocate() } }
        body(zip(storage, keys).map { UnsafeRawBufferPointer(start: $0.baseAddress, count: $1.count) })
    }
}
