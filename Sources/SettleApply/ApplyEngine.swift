import Foundation
import SettleHTTP
public import SettleLedger

/// Executes a plan against Stripe exactly once.
///
/// A run (1) resolves every instruction the ledger holds as in flight or unknown, from
/// this or an earlier run: inside Stripe's idempotency window it re-sends the stored
/// request with the same key, otherwise (or when that tells nothing) it looks the object
/// up by `metadata[settle_instruction]`; (2) skips what the ledger already settled;
/// (3) checks payout methods and named charges; (4) sends the rest, recording each batch
/// as in flight in the ledger before the requests leave and each outcome as it arrives.
///
/// Use one engine from one thread.
public final class ApplyEngine {
    public let configuration: ApplyConfiguration
    private let ledger: LedgerStore
    private let api: StripeAPI
    private let client: HTTPClient
    private var limiter: RateLimiter
    private var counters = CallCounters()

    // Per-run state.
    private var outcomes: [String: InstructionOutcome] = [:]
    private var resolved: [String: InstructionOutcome] = [:]
    private var ledgerFailure: LedgerError?
    /// Set when Stripe refuses the key itself (HTTP 401): the run stops sending.
    private var keyRefused: String?
    private var stopSending: (() -> Void)?

    private func noteKeyRefused(_ response: HTTPResponse) {
        guard keyRefused == nil else { return }
        let (code, message) = StripeAPI.error(response)
        keyRefused = "Stripe refused the API key (HTTP 401, \(code)): \(message)"
        log(.error, keyRefused!)
    }

    /// Stripe keeps v1 keys at least 24 h and v2 keys 30 days; an hour's margin
    /// keeps settle from re-sending a key Stripe may just have forgotten.
    static let v1Window: TimeInterval = 23 * 3600
    static let v2Window: TimeInterval = 29 * 24 * 3600

    /// - Throws: ``ApplyError/configuration(_:)`` for an API base that is not https (or
    ///   http on loopback) or a read-only ledger; ``ApplyError/transport(_:)`` when libcurl
    ///   cannot start.
    public init(configuration: ApplyConfiguration, ledger: LedgerStore) throws(ApplyError) {
        guard ledger.isWritable else { throw .configuration("the ledger was opened read-only") }
        guard configuration.rate > 0, configuration.concurrency > 0 else {
            throw .configuration("rate and concurrency must be positive")
        }
        self.configuration = configuration
        self.ledger = ledger
        api = try StripeAPI(configuration: configuration)
        do {
            client = try HTTPClient(
                configuration: .init(
                    version: configuration.settleVersion, connectTimeout: configuration.connectTimeout,
                    totalTimeout: configuration.totalTimeout, maxInFlight: configuration.concurrency))
        } catch {
            throw .transport("\(error)")
        }
        limiter = RateLimiter(rate: configuration.rate)
    }

    /// Runs the plan; see the type's documentation for the order of work.
    ///
    /// - Throws: ``ApplyError/configuration(_:)`` before anything is sent when a payout
    ///   has no financial account; ``ApplyError/ledger(_:)`` when the ledger fails (what
    ///   was recorded stays consistent: the next run resolves the rest).
    public func run(_ plan: [PlannedInstruction]) throws(ApplyError) -> ApplyReport {
        let started = ContinuousClock.now
        outcomes = [:]
        resolved = [:]
        ledgerFailure = nil
        keyRefused = nil
        counters = CallCounters()

        let params = try finalParameters(plan)
        try resolveUnresolved()
        var candidates = try classify(plan)
        candidates = preflight(candidates)
        try send(candidates, params: params)

        for instruction in plan where outcomes[instruction.id] == nil {
            outcomes[instruction.id] = .unknown(message: "not sent: the run stopped early")
        }
        if let ledgerFailure { throw .ledger(ledgerFailure) }
        var report = ApplyReport(
            outcomes: outcomes, resolved: resolved, requests: counters.requests, retries: counters.retries,
            rateLimited: counters.rateLimited, serverErrors: counters.serverErrors,
            transportErrors: counters.transportErrors, elapsed: started.duration(to: .now))
        report.keyRefused = keyRefused
        return report
    }

    // MARK: - Parameters

    /// The parameters each instruction is sent with: v2 payouts get the configured
    /// financial account when the plan has none.
    private func finalParameters(_ plan: [PlannedInstruction]) throws(ApplyError) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for instruction in plan {
            var params = instruction.params
            if instruction.isV2, case .object(var body) = params, case .object(var from)? = body["from"] {
                if from["financial_account"] == nil || from["financial_account"] == .null {
                    guard let account = configuration.financialAccount, !account.isEmpty else {
                        throw .configuration(
                            "instruction \(instruction.id) pays out from a financial account, but none is configured (--financial-account)"
                        )
                    }
                    from["financial_account"] = .string(account)
                    body["from"] = .object(from)
                    params = .object(body)
                }
            }
            result[instruction.id] = params
        }
        return result
    }

    // MARK: - 1. Resolve what earlier runs left open

    private func resolveUnresolved() throws(ApplyError) {
        let rows = try ledgerDo { () throws(LedgerError) in try ledger.unresolvedInstructions() }
        guard !rows.isEmpty else { return }
        log(.info, "resolving \(rows.count) instruction(s) left in flight or unknown")
        let now = configuration.now()
        let scheduler = makeScheduler()
        var resend: [LedgerInstruction] = []
        for row in rows {
            let window = row.dispatch.path.hasPrefix("/v2/") ? Self.v2Window : Self.v1Window
            if now.timeIntervalSince(row.firstSentAt) < window {
                resend.append(row)
            } else {
                enqueueLookup(row, scheduler: scheduler, insideWindow: false, after: nil)
            }
        }
        if !resend.isEmpty {
            // Only moves last_sent_at: the key and parameters stay those stored.
            try ledgerDo { () throws(LedgerError) in try ledger.markInFlight(resend.map(\.dispatch), at: now) }
        }
        for row in resend {
            let params =
                (try? JSONDecoder().decode(JSONValue.self, from: Data(row.dispatch.params.utf8))) ?? .object([:])
            let request = api.createRequest(
                method: row.dispatch.method, path: row.dispatch.path, params: params,
                idempotencyKey: row.idempotencyKey, context: row.dispatch.stripeContext)
            let call = Call(request: request, label: "\(row.id) re-send \(row.idempotencyKey)") {
                [unowned self, unowned scheduler] outcome, gaveUp in
                let result = self.classifyCreate(outcome, gaveUp: gaveUp)
                switch result {
                case .settled, .failed:
                    self.record(row.dispatch, result, outcome: outcome, label: "resend")
                    self.resolved[row.id] = result
                default:
                    self.recordCall(row.dispatch, outcome: outcome, label: "resend_unknown")
                    self.enqueueLookup(row, scheduler: scheduler, insideWindow: true, after: nil)
                }
            }
            call.onRetry = { [unowned self] outcome in self.recordCall(row.dispatch, outcome: outcome, label: "retry") }
            scheduler.enqueue(call)
        }
        client.run(source: scheduler)
        finish(scheduler)
        for row in rows where resolved[row.id] == nil {
            resolved[row.id] = .unknown(message: "could not be resolved in this run")
        }
    }

    /// Looks the instruction's object up by `metadata[settle_instruction]`, page by page.
    private func enqueueLookup(
        _ row: LedgerInstruction, scheduler: CallScheduler, insideWindow: Bool, after cursor: String?
    ) {
        let dispatch = row.dispatch
        let path: String
        if let cursor, cursor.hasPrefix("/") {
            path = cursor  // a v2 next_page_url
        } else {
            switch dispatch.kind {
            case "transfer":
                var query: [(String, String)] = []
                if !dispatch.group.isEmpty { query.append(("transfer_group", dispatch.group)) }
                if !dispatch.payee.isEmpty { query.append(("destination", dispatch.payee)) }
                query.append(("limit", "100"))
                if let cursor { query.append(("starting_after", cursor)) }
                path = "/v1/transfers" + StripeAPI.query(query)
            case "reversal":
                var query = [("limit", "100")]
                if let cursor { query.append(("starting_after", cursor)) }
                path = dispatch.path + StripeAPI.query(query)
            default:
                let params = try? JSONDecoder().decode(JSONValue.self, from: Data(dispatch.params.utf8))
                let recipient = params?["to"]?["recipient"]?.stringValue ?? dispatch.payee
                path =
                    "/v2/money_management/outbound_payments"
                    + StripeAPI.query([("recipient", recipient), ("limit", "100")])
            }
        }
        let request = api.request(method: "GET", path: path)
        let call = Call(request: request, label: "\(dispatch.id) look-up") {
            [unowned self, unowned scheduler] outcome, gaveUp in
            guard !gaveUp, case .response(let response) = outcome, (200..<300).contains(response.status),
                let list = StripeAPI.json(response)
            else {
                let message = "look-up failed: \(StripeAPI.summary(outcome))"
                self.record(dispatch, .unknown(message: message), outcome: outcome, label: "lookup_failed")
                self.resolved[dispatch.id] = .unknown(message: message)
                return
            }
            var items: [JSONValue] = []
            if case .array(let data)? = list["data"] { items = data }
            if let match = items.first(where: { $0["metadata"]?["settle_instruction"]?.stringValue == dispatch.id }),
                let id = match["id"]?.stringValue
            {
                self.record(dispatch, .settled(stripeID: id), outcome: outcome, label: "lookup_found")
                self.resolved[dispatch.id] = .settled(stripeID: id)
                return
            }
            // Next page: v1 has_more + starting_after; v2 next_page_url (same host only).
            if dispatch.kind == "payout" {
                if let next = list["next_page_url"]?.stringValue, let nextPath = self.api.path(of: next) {
                    self.enqueueLookup(row, scheduler: scheduler, insideWindow: insideWindow, after: nextPath)
                    return
                }
            } else if list["has_more"] == .bool(true), let last = items.last?["id"]?.stringValue {
                self.enqueueLookup(row, scheduler: scheduler, insideWindow: insideWindow, after: last)
                return
            }
            if insideWindow {
                let message = "not found on Stripe yet, and the re-send with the same key gave no answer"
                self.record(dispatch, .unknown(message: message), outcome: outcome, label: "lookup_missing")
                self.resolved[dispatch.id] = .unknown(message: message)
            } else {
                // Past the idempotency window and not on Stripe: it never happened. Release
                // the lines so that this run sends them again under a new attempt.
                let message = "not found on Stripe after the idempotency window: never made; released to be sent again"
                self.record(
                    dispatch, .failed(code: "not_sent", message: message), outcome: outcome, label: "lookup_missing")
                self.resolved[dispatch.id] = .failed(code: "not_sent", message: message)
            }
        }
        scheduler.enqueue(call)
    }

    // MARK: - 2. What the ledger already knows

    private func classify(_ plan: [PlannedInstruction]) throws(ApplyError) -> [PlannedInstruction] {
        var candidates: [PlannedInstruction] = []
        var seen: Set<String> = []
        for instruction in plan {
            guard seen.insert(instruction.id).inserted else {
                outcomes[instruction.id] =
                    outcomes[instruction.id]
                    ?? .rejected(code: "duplicate_instruction", message: "listed twice in the plan")
                continue
            }
            if let row = try ledgerDo({ () throws(LedgerError) in try ledger.instruction(instruction.id) }) {
                switch row.status {
                case .settled:
                    // Resolved by this run (its request had gone out before a crash):
                    // settled now; otherwise an earlier run settled it.
                    if case .settled(let id)? = resolved[instruction.id] {
                        outcomes[instruction.id] = .settled(stripeID: id)
                    } else {
                        outcomes[instruction.id] = .alreadySettled(stripeID: row.stripeID ?? "")
                    }
                    continue
                case .inFlight, .unknown:
                    outcomes[instruction.id] = .unknown(
                        message:
                            "an earlier send (\(row.idempotencyKey)) is not resolved yet: \(row.errorMessage ?? "no answer")"
                    )
                    continue
                case .failed:
                    break
                }
            }
            var conflict: String?
            for line in instruction.lines {
                if let held = try ledgerDo({ () throws(LedgerError) in try ledger.line(line.lineID) }),
                    held.instructionID != instruction.id, held.status != .failed
                {
                    conflict =
                        "line \(line.lineID) is already \(held.status.rawValue) in instruction \(held.instructionID)"
                    break
                }
            }
            if let conflict {
                outcomes[instruction.id] = .rejected(code: "line_conflict", message: conflict)
                continue
            }
            candidates.append(instruction)
        }
        return candidates
    }

    // MARK: - 3. Pre-flight

    private enum Check {
        case usable
        case refused(code: String, message: String)
        case unavailable(String)
    }

    private func preflight(_ candidates: [PlannedInstruction]) -> [PlannedInstruction] {
        var methodChecks: [String: Check] = [:]
        var chargeChecks: [String: Check] = [:]
        let scheduler = makeScheduler()
        for instruction in candidates {
            if let method = instruction.preflight.payoutMethod {
                let recipient = instruction.preflight.recipient ?? instruction.payee
                let key = recipient + "/" + method
                guard methodChecks[key] == nil else { continue }
                methodChecks[key] = .unavailable("not checked")
                let request = api.request(
                    method: "GET", path: "/v2/money_management/payout_methods/\(StripeAPI.percentEncode(method))",
                    context: recipient)
                scheduler.enqueue(
                    Call(request: request, label: "payout method \(method)") { [unowned self] outcome, gaveUp in
                        methodChecks[key] = self.payoutMethodCheck(outcome, gaveUp: gaveUp, method: method)
                    })
            }
            if let charge = instruction.preflight.charge, chargeChecks[charge] == nil {
                chargeChecks[charge] = .unavailable("not checked")
                let request = api.request(method: "GET", path: "/v1/charges/\(StripeAPI.percentEncode(charge))")
                scheduler.enqueue(
                    Call(request: request, label: "charge \(charge)") { outcome, gaveUp in
                        if case .response(let response) = outcome, response.status == 401 {
                            self.noteKeyRefused(response)
                        }
                        chargeChecks[charge] = Self.chargeCheck(outcome, gaveUp: gaveUp, charge: charge)
                    })
            }
        }
        guard !methodChecks.isEmpty || !chargeChecks.isEmpty else { return candidates }
        log(.info, "pre-flight: \(methodChecks.count) payout method(s), \(chargeChecks.count) charge(s)")
        client.run(source: scheduler)
        finish(scheduler)

        return candidates.filter { instruction in
            var checks: [Check] = []
            if let method = instruction.preflight.payoutMethod {
                checks.append(
                    methodChecks[(instruction.preflight.recipient ?? instruction.payee) + "/" + method]
                        ?? .unavailable("not checked"))
            }
            if let charge = instruction.preflight.charge {
                checks.append(chargeChecks[charge] ?? .unavailable("not checked"))
            }
            for check in checks {
                switch check {
                case .usable: continue
                case .refused(let code, let message):
                    outcomes[instruction.id] = .rejected(code: code, message: message)
                    log(.warning, "\(instruction.id) not sent: \(code): \(message)")
                    return false
                case .unavailable(let message):
                    outcomes[instruction.id] = .unknown(
                        message: "not sent: pre-flight check could not complete: \(message)")
                    return false
                }
            }
            return true
        }
    }

    private func payoutMethodCheck(_ outcome: HTTPOutcome, gaveUp: Bool, method: String) -> Check {
        guard !gaveUp, case .response(let response) = outcome else { return .unavailable(StripeAPI.summary(outcome)) }
        if response.status == 401 {
            noteKeyRefused(response)
            return .unavailable(StripeAPI.summary(outcome))
        }
        if response.status >= 500 { return .unavailable(StripeAPI.summary(outcome)) }
        guard (200..<300).contains(response.status), let body = StripeAPI.json(response) else {
            let (code, message) = StripeAPI.error(response)
            return .refused(code: "payout_method_unusable", message: "payout method \(method): \(code): \(message)")
        }
        var problems: [String] = []
        if body["type"]?.stringValue != "apple_pay" { problems.append("not apple_pay") }
        if case .array(let speeds)? = body["available_payout_speeds"], speeds.contains(.string("instant")) {
        } else {
            problems.append("no instant speed")
        }
        if body["usage_status"]?["payments"]?.stringValue != "eligible" {
            problems.append("not eligible for payments (\(body["usage_status"]?["payments"]?.stringValue ?? "none"))")
        }
        if body["archived"] == .bool(true) { problems.append("archived") }
        if let restricted = body["restricted"], restricted != .bool(false), restricted != .null {
            problems.append("restricted")
        }
        if case .array(let currencies)? = body["apple_pay"]?["supported_currencies"],
            currencies.contains(.string("usd"))
        {
        } else {
            problems.append("usd not supported")
        }
        if problems.isEmpty { return .usable }
        return .refused(
            code: "payout_method_unusable", message: "payout method \(method): \(problems.joined(separator: ", "))")
    }

    private static func chargeCheck(_ outcome: HTTPOutcome, gaveUp: Bool, charge: String) -> Check {
        guard !gaveUp, case .response(let response) = outcome else { return .unavailable(StripeAPI.summary(outcome)) }
        if response.status >= 500 || response.status == 401 { return .unavailable(StripeAPI.summary(outcome)) }
        guard (200..<300).contains(response.status), let body = StripeAPI.json(response) else {
            let (code, message) = StripeAPI.error(response)
            return .refused(code: code, message: "charge \(charge): \(message)")
        }
        switch body["status"]?.stringValue {
        case "succeeded": return .usable
        case "pending": return .refused(code: "charge_pending", message: "charge \(charge) is still pending")
        case "failed": return .refused(code: "charge_failed", message: "charge \(charge) failed")
        case let other: return .unavailable("charge \(charge) has status \(other ?? "none")")
        }
    }

    // MARK: - 4. Send

    private func send(_ candidates: [PlannedInstruction], params: [String: JSONValue]) throws(ApplyError) {
        guard !candidates.isEmpty else { return }
        log(.info, "sending \(candidates.count) instruction(s)")
        let scheduler = makeScheduler()
        stopSending = { [unowned scheduler] in scheduler.stopped = true }
        defer { stopSending = nil }
        let batchSize = max(8, min(64, configuration.concurrency))
        var cursor = 0
        var done = 0
        let total = candidates.count
        let progress: () -> Void = { [configuration] in
            done += 1
            configuration.progress(ApplyProgress(phase: "send", done: done, total: total))
        }
        scheduler.refill = { [unowned self, unowned scheduler] in
            var calls: [Call] = []
            while calls.isEmpty, cursor < candidates.count, self.ledgerFailure == nil {
                let batch = candidates[cursor..<min(cursor + batchSize, candidates.count)]
                cursor += batch.count
                var dispatches: [LedgerDispatch] = []
                for instruction in batch {
                    guard let attempts = try? self.ledger.attempts(instruction: instruction.id) else { continue }
                    dispatches.append(
                        self.dispatch(
                            instruction, params: params[instruction.id] ?? instruction.params, attempt: attempts + 1))
                }
                // In flight first, in one transaction; one by one if the batch is refused.
                var marked: [LedgerDispatch] = []
                do {
                    try self.ledger.markInFlight(dispatches, at: self.configuration.now())
                    marked = dispatches
                } catch {
                    for dispatch in dispatches {
                        do throws(LedgerError) {
                            try self.ledger.markInFlight([dispatch], at: self.configuration.now())
                            marked.append(dispatch)
                        } catch {
                            switch error {
                            case .lineClaimed, .instructionNotSendable:
                                self.outcomes[dispatch.id] = .rejected(
                                    code: "line_conflict", message: error.description)
                                progress()
                            default:
                                self.ledgerFailure = error
                                scheduler.stopped = true
                                return []
                            }
                        }
                    }
                }
                for dispatch in marked {
                    calls.append(self.sendCall(dispatch, params: params, progress: progress))
                }
            }
            return calls
        }
        client.run(source: scheduler)
        finish(scheduler)
    }

    private func dispatch(_ instruction: PlannedInstruction, params: JSONValue, attempt: Int) -> LedgerDispatch {
        LedgerDispatch(
            id: instruction.id, kind: instruction.kind.rawValue, group: instruction.group, payee: instruction.payee,
            charge: instruction.charge, currency: instruction.currency, amountMinor: instruction.amountMinor,
            method: instruction.method, path: instruction.path, params: params.serialized,
            stripeContext: instruction.stripeContext, attempt: attempt,
            idempotencyKey: "settle-\(instruction.id)-a\(attempt)",
            lines: instruction.lines.map {
                LedgerLineClaim(lineID: $0.lineID, kind: $0.kind, amountMinor: $0.amountMinor, content: $0.content)
            })
    }

    private func sendCall(_ dispatch: LedgerDispatch, params: [String: JSONValue], progress: @escaping () -> Void)
        -> Call
    {
        let request = api.createRequest(
            method: dispatch.method, path: dispatch.path, params: params[dispatch.id] ?? .object([:]),
            idempotencyKey: dispatch.idempotencyKey, context: dispatch.stripeContext)
        let call = Call(
            request: request, label: "\(dispatch.id) \(dispatch.method) \(dispatch.path) a\(dispatch.attempt)"
        ) {
            [unowned self] outcome, gaveUp in
            let result = self.classifyCreate(outcome, gaveUp: gaveUp)
            self.record(dispatch, result, outcome: outcome, label: "send")
            self.outcomes[dispatch.id] = result
            if case .response(let response) = outcome, response.status == 401 {
                // Nothing was done with a refused key: stop rather than fail every line.
                self.noteKeyRefused(response)
                self.stopSending?()
            }
            progress()
        }
        call.onRetry = { [unowned self] outcome in self.recordCall(dispatch, outcome: outcome, label: "retry") }
        return call
    }

    // MARK: - Outcomes

    /// What a create call's final answer means.
    private func classifyCreate(_ outcome: HTTPOutcome, gaveUp: Bool) -> InstructionOutcome {
        let summary = StripeAPI.summary(outcome)
        if gaveUp { return .unknown(message: "no definite answer after retries: \(summary)") }
        guard case .response(let response) = outcome else { return .unknown(message: summary) }
        switch response.status {
        case 200..<300:
            if let id = StripeAPI.json(response)?["id"]?.stringValue, !id.isEmpty { return .settled(stripeID: id) }
            return .unknown(message: "HTTP \(response.status) without an object id")
        case 400..<500 where response.status != 409 && response.status != 429:
            let (code, message) = StripeAPI.error(response)
            // The key is bound to other parameters: nothing definite about our object.
            if code == "idempotency_error" || code == "idempotency_key_in_use" {
                return .unknown(message: "\(code): \(message)")
            }
            return .failed(code: code, message: message)
        default:
            return .unknown(message: summary)
        }
    }

    /// Commits an outcome (and the call that told it) to the ledger, and logs it.
    private func record(_ dispatch: LedgerDispatch, _ result: InstructionOutcome, outcome: HTTPOutcome, label: String) {
        let ledgerOutcome: LedgerOutcome
        switch result {
        case .settled(let id), .alreadySettled(let id):
            ledgerOutcome = .settled(stripeID: id)
            log(.debug, "\(dispatch.id) settled: \(id) \(requestIDText(outcome))")
        case .failed(let code, let message), .rejected(let code, let message):
            ledgerOutcome = .failed(code: code, message: message)
            log(.warning, "\(dispatch.id) failed: \(code): \(message) \(requestIDText(outcome))")
        case .unknown(let message):
            ledgerOutcome = .unknown(message: message)
            log(.warning, "\(dispatch.id) unknown: \(message)")
        }
        let call = ledgerCall(dispatch, outcome: outcome, label: label)
        do {
            try ledger.recordOutcome(instruction: dispatch.id, ledgerOutcome, requestID: call.requestID, call: call)
        } catch {
            fail(error)
        }
    }

    private func recordCall(_ dispatch: LedgerDispatch, outcome: HTTPOutcome, label: String) {
        do {
            try ledger.recordCall(ledgerCall(dispatch, outcome: outcome, label: label))
        } catch {
            fail(error)
        }
    }

    private func ledgerCall(_ dispatch: LedgerDispatch, outcome: HTTPOutcome, label: String) -> LedgerCall {
        var status: Int?
        var requestID: String?
        if case .response(let response) = outcome {
            status = response.status
            requestID = response.header("request-id")
        }
        return LedgerCall(
            instructionID: dispatch.id, attempt: dispatch.attempt, idempotencyKey: dispatch.idempotencyKey,
            sentAt: configuration.now(), outcome: label, httpStatus: status, requestID: requestID)
    }

    private func requestIDText(_ outcome: HTTPOutcome) -> String {
        if case .response(let response) = outcome, let id = response.header("request-id") { return "(\(id))" }
        return ""
    }

    // MARK: - Helpers

    private func makeScheduler() -> CallScheduler {
        CallScheduler(limiter: limiter, maxTries: configuration.maxTries, retryBase: configuration.retryBase) {
            [unowned self] level, message in self.log(level, message)
        }
    }

    /// Carries the limiter (lowered by 429s) and the counters from one phase to the next.
    private func finish(_ scheduler: CallScheduler) {
        limiter = scheduler.rateLimiter
        counters.requests += scheduler.counters.requests
        counters.retries += scheduler.counters.retries
        counters.rateLimited += scheduler.counters.rateLimited
        counters.serverErrors += scheduler.counters.serverErrors
        counters.transportErrors += scheduler.counters.transportErrors
    }

    private func fail(_ error: LedgerError) {
        if ledgerFailure == nil {
            ledgerFailure = error
            log(.error, "ledger: \(error)")
        }
    }

    private func ledgerDo<T>(_ body: () throws(LedgerError) -> T) throws(ApplyError) -> T {
        do {
            return try body()
        } catch {
            throw .ledger(error)
        }
    }

    /// Logs through the configuration, with the key scrubbed should anything echo it.
    private func log(_ level: ApplyLogLevel, _ message: String) {
        let key = configuration.apiKey
        configuration.logger(level, key.occurs(in: message) ? "[message withheld: it contained the API key]" : message)
    }
}

extension StripeAPI {
    /// The path and query of a `next_page_url` on this API's host; nil for another host,
    /// where the key must never go.
    func path(of url: String) -> String? {
        if url.hasPrefix("/") { return url }
        if url.hasPrefix(base + "/") { return String(url.dropFirst(base.count)) }
        return nil
    }
}
