import Foundation
import SettleTestSupport
import Testing

/// `settle run` and `settle apply` end to end: the real binary, real HTTP on loopback to the
/// sandbox, a real SQLite ledger. Money is counted at the sandbox.
@Suite struct ApplyCommandTests {
    /// An export of `orders` orders: a transfer to a restaurant and a courier payout each.
    static func export(orders: Int, in folder: URL, extra: String = "") throws -> URL {
        var text =
            "line_id,order_id,kind,amount,currency,transfer_group,destination,source_transaction,charge_amount,charge_currency,charge_status,recipient,payout_method\n"
        for order in 1...orders {
            text +=
                "T\(order),\(order),transfer,\(10 + order).\(order % 100 < 10 ? "0" : "")\(order % 100),usd,ORDER\(order),acct_r\(order % 5),ch_e\(order),100.00,usd,succeeded,,\n"
            text += "P\(order),\(order),payout,2.50,usd,ORDER\(order),,,,,,acct_c\(order % 3),pm_ap_c\(order % 3)\n"
        }
        text += extra
        let url = folder.appendingPathComponent("orders.csv")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    static let fixtures = """
        {"auto_charges": true, "balances": {"usd": 100000000},
         "financial_accounts": [{"id": "fa_e2e", "balance": {"usd": 100000000}}],
         "payout_methods": [
           {"id": "pm_ap_c0", "recipient": "acct_c0"}, {"id": "pm_ap_c1", "recipient": "acct_c1"},
           {"id": "pm_ap_c2", "recipient": "acct_c2"},
           {"id": "pm_ap_arch", "recipient": "acct_c9", "archived": true}]}
        """

    struct Setup {
        let sandbox: Sandbox
        let folder: URL
        var ledger: String { folder.appendingPathComponent("ledger.sqlite").path }

        /// The ledger lost with everything beside it (its WAL, its mark), as a lost disk loses it.
        func loseLedger() {
            for suffix in ["", "-wal", "-shm", ".mark"] { try? FileManager.default.removeItem(atPath: ledger + suffix) }
        }

        init(flags: [String] = []) throws {
            sandbox = try Sandbox(flags: flags)
            try sandbox.seed(ApplyCommandTests.fixtures)
            folder = SettleProcess.temporaryFolder()
            let created = try SettleProcess.run([
                "ledger", "init", "--ledger", folder.appendingPathComponent("ledger.sqlite").path,
            ])
            #expect(created.status == 0, "ledger init: \(created.stderr)")
        }

        func arguments(_ command: String, _ inputs: [String], out: String, extra: [String] = []) -> [String] {
            [command] + inputs + [
                "--out", folder.appendingPathComponent(out).path, "--ledger", ledger,
                "--api-base", sandbox.base, "--financial-account", "fa_e2e",
                "--as-of", "2026-11-29", "--progress", "off",
            ] + extra
        }

        func run(_ inputs: [URL], out: String, extra: [String] = []) throws -> SettleProcess.Outcome {
            try SettleProcess.run(
                arguments("run", inputs.map(\.path), out: out, extra: extra),
                environment: ["STRIPE_API_KEY": testKey])
        }

        func results(_ out: String) -> [[String]] { SettleProcess.results(folder.appendingPathComponent(out)) }

        /// `settle apply` of the plan folder `out` against the sandbox, on this setup's ledger;
        /// killed at `crashAt` (`SETTLE_CRASH_AT`) when given.
        func apply(_ out: String, extra: [String] = [], crashAt: String? = nil) throws -> SettleProcess.Outcome {
            var environment = ["STRIPE_API_KEY": testKey]
            if let crashAt { environment["SETTLE_CRASH_AT"] = crashAt }
            return try SettleProcess.run(
                [
                    "apply", folder.appendingPathComponent(out).path, "--ledger", ledger, "--api-base", sandbox.base,
                    "--financial-account", "fa_e2e", "--progress", "off",
                ] + extra, environment: environment)
        }

        /// `settle plan` (offline) of `text`, written to `name`.csv, into the folder `name`, as of `asOf`.
        func plan(_ name: String, _ text: String, asOf: String) throws -> SettleProcess.Outcome {
            let input = folder.appendingPathComponent("\(name).csv")
            try text.write(to: input, atomically: true, encoding: .utf8)
            var arguments = arguments("plan", [input.path], out: name)
            arguments[arguments.firstIndex(of: "--as-of")! + 1] = asOf
            return try SettleProcess.run(arguments)
        }
    }

    /// Every line paid once: one effect per instruction, and the money at the sandbox equals
    /// the lines' amounts, per kind.
    static func expectPaidExactlyOnce(_ sandbox: Sandbox, transfers: Int64, payouts: Int64) throws {
        let effects = try sandbox.effects()
        let ids = effects.compactMap { ($0["metadata"] as? [String: Any])?["settle_instruction"] as? String }
        #expect(ids.count == effects.count)
        #expect(Set(ids).count == ids.count, "an instruction was executed twice")
        func total(_ type: String) -> Int64 {
            effects.filter { $0["type"] as? String == type }.reduce(0) { $0 + Int64(($1["amount"] as? Int) ?? 0) }
        }
        #expect(total("transfer") == transfers)
        #expect(total("outbound_payment") == payouts)
    }

    static func transferTotal(_ orders: Int) -> Int64 {
        (1...orders).reduce(0) { $0 + Int64(1000 + $1 * 100 + $1 % 100) }
    }

    @Test func cleanRunSettlesEveryLineOnceAndASecondRunMovesNoMoney() throws {
        let setup = try Setup()
        let input = try Self.export(orders: 20, in: setup.folder)
        let first = try setup.run([input], out: "first")
        #expect(first.status == 0, "\(first.stderr)")
        let rows = setup.results("first")
        #expect(rows.count == 40)
        #expect(rows.allSatisfy { $0[8] == "settled" && !$0[10].isEmpty })
        #expect(rows.filter { $0[3] == "transfer" }.allSatisfy { $0[10].hasPrefix("tr_") })
        #expect(rows.filter { $0[3] == "payout" }.allSatisfy { $0[10].hasPrefix("obp_") })
        try Self.expectPaidExactlyOnce(setup.sandbox, transfers: Self.transferTotal(20), payouts: 20 * 250)
        // 20 transfers and 3 aggregated payouts (one per courier).
        #expect(try setup.sandbox.effects().count == 23)

        let second = try setup.run([input], out: "second")
        #expect(second.status == 0)
        #expect(setup.results("second").allSatisfy { $0[8] == "already_settled" })
        #expect(try setup.sandbox.effects().count == 23)
        let status = try SettleProcess.run(["status", "--ledger", setup.ledger])
        #expect(status.status == 0)
        #expect(status.stdout.contains("lines settled: 40"))
        #expect(status.stdout.contains("instructions settled: 23"))
        let manifest = SettleProcess.read(setup.folder.appendingPathComponent("first/manifest.json"))
        #expect(manifest.contains("\"mode\": \"run\""))
        #expect(manifest.contains("\"settled\": 40"))
    }

    /// The financial account a plan's payouts name is the one they are paid from: an apply
    /// configured with another one is refused before anything is sent (78), not passed over.
    @Test func applyRefusesAnotherFinancialAccountThanThePlans() throws {
        let setup = try Setup()
        let input = try Self.export(orders: 2, in: setup.folder)
        let plan = try SettleProcess.run(setup.arguments("plan", [input.path], out: "plan"))
        #expect(plan.status == 0, "\(plan.stderr)")
        let other = try SettleProcess.run(
            [
                "apply", setup.folder.appendingPathComponent("plan").path, "--ledger", setup.ledger,
                "--api-base", setup.sandbox.base, "--financial-account", "fa_other", "--progress", "off",
            ], environment: ["STRIPE_API_KEY": testKey])
        #expect(other.status == 78, "\(other.stderr)")
        #expect(other.stderr.contains("financial account fa_e2e, but fa_other is configured"), "\(other.stderr)")
        #expect(try setup.sandbox.requestCount() == 0)
        let same = try setup.apply("plan")
        #expect(same.status == 0, "\(same.stderr)")
        try Self.expectPaidExactlyOnce(setup.sandbox, transfers: Self.transferTotal(2), payouts: 2 * 250)
    }

    @Test func faultsNeverPayTwice() throws {
        let setup = try Setup(flags: [
            "--fail-5xx", "0.08", "--fail-429", "0.08", "--drop-after-commit", "0.08",
            "--latency-ms", "5", "--seed", "11",
        ])
        let input = try Self.export(orders: 30, in: setup.folder)
        var status: Int32 = -1
        var rounds = 0
        // A run ends 0, or 75 when an outcome stays unknown; cron runs it again.
        repeat {
            rounds += 1
            status = try setup.run([input], out: "run\(rounds)", extra: ["--payouts", "per-line", "--rate", "200"])
                .status
        } while status == 75 && rounds < 4
        #expect(status == 0)
        let final = setup.results("run\(rounds)")
        #expect(final.allSatisfy { $0[8] == "settled" || $0[8] == "already_settled" })
        try Self.expectPaidExactlyOnce(setup.sandbox, transfers: Self.transferTotal(30), payouts: 30 * 250)
        let stats = try setup.sandbox.control("GET", "/_sandbox/stats") as? [String: Any]
        let faults = stats?["faults"] as? [String: Int] ?? [:]
        #expect(faults.values.reduce(0, +) > 0, "the sandbox injected no fault: the test proves nothing")
    }

    /// Cron under faults: four days, each its own export, on one ledger, with 5xx, 429s and
    /// answers lost after commit; then empty days until a run ends 0. Every line is paid
    /// once, and the days join up: each line is `settled` in exactly one day's results.csv
    /// (whichever day learned it), and the days' summaries add up to what Stripe made.
    @Test func faultyDaysOfOwnExportsJoinUp() throws {
        let setup = try Setup(flags: [
            "--fail-5xx", "0.1", "--fail-429", "0.05", "--drop-after-commit", "0.15", "--latency-ms", "5",
            "--seed", "23",
        ])
        var expectedTransfers: Int64 = 0
        var folders: [String] = []
        var status: Int32 = -1
        for day in 1...4 {
            var text = "line_id,order_id,kind,amount,currency,transfer_group,destination,recipient,payout_method\n"
            for order in 1...8 {
                let amount = 1000 + day * 100 + order
                expectedTransfers += Int64(amount)
                text +=
                    "T\(day)-\(order),\(day)\(order),transfer,\(amount / 100).\(String(format: "%02d", amount % 100)),usd,"
                    + "O\(day)-\(order),acct_r\(order % 5),,\n"
                text +=
                    "P\(day)-\(order),\(day)\(order),payout,2.50,usd,O\(day)-\(order),,acct_c\(order % 3),pm_ap_c\(order % 3)\n"
            }
            let input = setup.folder.appendingPathComponent("day\(day).csv")
            try text.write(to: input, atomically: true, encoding: .utf8)
            folders.append("day\(day)")
            // Day 2: every transfer answered 500 (retried, then unknown): later days learn them.
            if day == 2 {
                _ = try setup.sandbox.control(
                    "POST", "/_sandbox/faults",
                    json:
                        #"{"rules": [{"method": "POST", "path_prefix": "/v1/transfers", "action": "status", "status": 500}]}"#
                )
            }
            status = try setup.run([input], out: "day\(day)", extra: ["--payouts", "per-line", "--rate", "200"]).status
            #expect([0, 75].contains(status))
            if day == 2 { _ = try setup.sandbox.control("POST", "/_sandbox/faults", json: #"{"rules": []}"#) }
        }
        let empty = setup.folder.appendingPathComponent("empty.csv")
        try "line_id,order_id,amount,currency,destination\n".write(to: empty, atomically: true, encoding: .utf8)
        var quiet = 0
        while status != 0 || quiet == 0, quiet < 5 {
            quiet += 1
            folders.append("quiet\(quiet)")
            status = try setup.run([empty], out: "quiet\(quiet)", extra: ["--payouts", "per-line", "--rate", "200"])
                .status
        }
        #expect(status == 0)
        try ApplyCommandTests.expectPaidExactlyOnce(setup.sandbox, transfers: expectedTransfers, payouts: 4 * 8 * 250)
        // Each line settled in exactly one day's results; no line lost.
        var settledIn: [String: [String]] = [:]
        var movedTransfers: Int64 = 0
        for folder in folders {
            for row in setup.results(folder) where row[8] == "settled" { settledIn[row[0], default: []].append(folder) }
            let summary = SettleProcess.read(setup.folder.appendingPathComponent("\(folder)/summary.csv"))
            for line in summary.split(separator: "\n") {
                let cells = line.split(separator: ",", omittingEmptySubsequences: false)
                if cells.count == 7, cells[2] == "usd", cells[3] == "transferred" {
                    movedTransfers += Int64(cells[6]) ?? 0
                }
            }
        }
        #expect(settledIn.count == 4 * 8 * 2, "\(settledIn.count) lines settled")
        #expect(settledIn.values.allSatisfy { $0.count == 1 }, "\(settledIn.filter { $0.value.count != 1 })")
        #expect(movedTransfers == expectedTransfers, "the days' summaries moved \(movedTransfers)")
        // Some line's outcome was learned by a later day than its own: the path under test.
        let learnedLater = settledIn.filter { line, days in
            !days[0].hasPrefix("day\(line.dropFirst().prefix { $0 != "-" })")
        }
        #expect(!learnedLater.isEmpty, "no outcome was left unknown: the test proves nothing")
        let stats = try setup.sandbox.control("GET", "/_sandbox/stats") as? [String: Any]
        let faults = stats?["faults"] as? [String: Int] ?? [:]
        #expect(faults.values.reduce(0, +) > 0, "the sandbox injected no fault: the test proves nothing")
    }

    @Test func killedAtTenPointsAndRunAgainPaysEachLineOnce() throws {
        let setup = try Setup(flags: ["--latency-ms", "40"])
        let input = try Self.export(orders: 30, in: setup.folder)
        // A folder per run, as cron names them by date: a folder whose run was applied is its
        // record and is never planned into again.
        func arguments(_ out: String) -> [String] {
            setup.arguments("run", [input.path], out: out, extra: ["--rate", "60", "--concurrency", "4"])
        }
        for point in 0..<10 {
            // Each kill lands while its run applies: after its first new object at Stripe (or
            // once it has ended), then a little later each time; not at a fixed time, which on
            // a loaded machine could fall before any apply began.
            let before = try setup.sandbox.effects().count
            let process = try SettleProcess.start(arguments("kill\(point)"), environment: ["STRIPE_API_KEY": testKey])
            var waited = 0
            while process.isRunning, try setup.sandbox.effects().count == before, waited < 1500 {
                usleep(10_000)
                waited += 1
            }
            usleep(UInt32(point * 40_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let effectsAfterKills = try setup.sandbox.effects().count
        var out = "final"
        var final = try SettleProcess.run(arguments(out), environment: ["STRIPE_API_KEY": testKey])
        if final.status == 75 {
            out = "final-again"
            final = try SettleProcess.run(arguments(out), environment: ["STRIPE_API_KEY": testKey])
        }
        #expect(final.status == 0, "\(final.stderr)")
        #expect(effectsAfterKills > 0, "no kill landed during apply: the test proves nothing")
        #expect(setup.results(out).allSatisfy { $0[8] == "settled" || $0[8] == "already_settled" })
        try Self.expectPaidExactlyOnce(setup.sandbox, transfers: Self.transferTotal(30), payouts: 30 * 250)
    }

    /// `settle status` tells a run still sending from one killed (audit 54 F10: both were
    /// "not ended", and an on-call engineer could not tell whether to wait or to run again).
    /// The process that holds the ledger writes its pid and run into the lock file; status
    /// believes it only while that lock is held.
    @Test func statusTellsARunStillGoingFromOneKilled() throws {
        let setup = try Setup(flags: ["--latency-ms", "300"])
        let input = try Self.export(orders: 30, in: setup.folder)
        let process = try SettleProcess.start(
            setup.arguments("run", [input.path], out: "going", extra: ["--rate", "5", "--concurrency", "1"]),
            environment: ["STRIPE_API_KEY": testKey])
        var waited = 0
        while process.isRunning, try setup.sandbox.effects().isEmpty, waited < 3000 {
            usleep(10_000)
            waited += 1
        }
        #expect(process.isRunning, "the run ended before status could see it going")
        func runs() throws -> [[String: Any]] {
            let outcome = try SettleProcess.run(["status", "--ledger", setup.ledger, "--json"])
            return try StatusCommandTests.object(outcome.stdout)["runs"] as? [[String: Any]] ?? []
        }
        let going = try runs()
        #expect(going.count == 1)
        #expect(going.first?["ended_at"] is NSNull)
        #expect(going.first?["running"] as? Bool == true)
        let text = try SettleProcess.run(["status", "--ledger", setup.ledger]).stdout
        #expect(text.contains("not ended: running now (pid \(process.processIdentifier))"), "\(text)")

        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let killed = try runs()
        #expect(killed.first?["running"] as? Bool == false)
        #expect(killed.first?["id"] as? String == going.first?["id"] as? String)
        let after = try SettleProcess.run(["status", "--ledger", setup.ledger]).stdout
        #expect(after.contains("not ended: no process runs it (killed or cut off)"), "\(after)")
        #expect(!after.contains("running now"))
    }

    @Test func fixedErrorsFileSettlesOnlyTheFixedLines() throws {
        let setup = try Setup()
        let bad =
            "B1,900,transfer,12.3.4,usd,ORDER900,acct_r1,ch_e900,100.00,usd,succeeded,,\nB2,900,payout,1.00,usd,ORDER900,,,,,,acct_c1,pm_ap_c1\n"
        let input = try Self.export(orders: 5, in: setup.folder, extra: bad)
        let first = try setup.run([input], out: "first")
        #expect(first.status == 65)
        let before = try setup.sandbox.effects().count
        let errorsURL = setup.folder.appendingPathComponent("first/errors.csv")
        let fixed = SettleProcess.read(errorsURL).replacingOccurrences(of: ",12.3.4,", with: ",12.34,")
        let fixedURL = setup.folder.appendingPathComponent("fixed.csv")
        try fixed.write(to: fixedURL, atomically: true, encoding: .utf8)
        let second = try setup.run([fixedURL], out: "second")
        #expect(second.status == 0, "\(second.stderr)")
        let rows = setup.results("second")
        #expect(rows.map { $0[0] }.sorted() == ["B1", "B2"])
        #expect(rows.allSatisfy { $0[8] == "settled" })
        let effects = try setup.sandbox.effects()
        #expect(effects.count == before + 2)
        #expect(effects.suffix(2).compactMap { $0["amount"] as? Int }.sorted() == [100, 1234])
    }

    @Test func archivedPayoutMethodIsRefusedBeforeMoneyMoves() throws {
        let setup = try Setup()
        let line = "A1,700,payout,5.00,usd,ORDER700,,,,,,acct_c9,pm_ap_arch\n"
        let input = try Self.export(orders: 2, in: setup.folder, extra: line)
        let outcome = try setup.run([input], out: "out")
        #expect(outcome.status == 65)
        let row = try #require(setup.results("out").first { $0[0] == "A1" })
        #expect(row[8] == "rejected")
        #expect(row[11] == "payout_method_unusable")
        #expect(try setup.sandbox.effects().allSatisfy { $0["recipient"] as? String != "acct_c9" })
        let errors = SettleProcess.read(setup.folder.appendingPathComponent("out/errors.csv"))
        #expect(errors.contains("A1,700,payout,5.00,usd,ORDER700,,,,,,acct_c9,pm_ap_arch,payout_method_unusable,"))
    }

    @Test func applyRefusesAChangedPlanAndASecondProcess() throws {
        let setup = try Setup(flags: ["--latency-ms", "400"])
        let input = try Self.export(orders: 3, in: setup.folder)
        let plan = try SettleProcess.run(setup.arguments("plan", [input.path], out: "plan"))
        #expect(plan.status == 0)
        let planFolder = setup.folder.appendingPathComponent("plan")
        // A changed instructions.jsonl is refused with nothing sent.
        let instructions = planFolder.appendingPathComponent("instructions.jsonl")
        let original = SettleProcess.read(instructions)
        try original.replacingOccurrences(of: "\"amount\":\"1101\"", with: "\"amount\":\"9101\"")
            .write(to: instructions, atomically: true, encoding: .utf8)
        let tampered = try SettleProcess.run(
            ["apply", planFolder.path, "--ledger", setup.ledger, "--api-base", setup.sandbox.base],
            environment: ["STRIPE_API_KEY": testKey])
        #expect(tampered.status == 65)
        #expect(tampered.stderr.contains("instructions.jsonl changed since settle wrote it"))
        #expect(try setup.sandbox.requestCount() == 0)
        try original.write(to: instructions, atomically: true, encoding: .utf8)
        // A second process on the same ledger is refused while the first applies.
        let first = try SettleProcess.start(
            [
                "apply", planFolder.path, "--ledger", setup.ledger, "--api-base", setup.sandbox.base,
                "--concurrency", "1", "--progress", "off",
            ],
            environment: ["STRIPE_API_KEY": testKey])
        usleep(500_000)
        let second = try SettleProcess.run(
            ["apply", planFolder.path, "--ledger", setup.ledger, "--api-base", setup.sandbox.base],
            environment: ["STRIPE_API_KEY": testKey])
        first.waitUntilExit()
        #expect(second.status == 75)
        #expect(second.stderr.contains("in use by another settle process"))
        #expect(first.terminationStatus == 0)
    }

    /// The ledger is configuration, checked before any input is opened: a missing one is 78
    /// also when the input is missing too; with the ledger there, the missing input is 66
    /// (audit 29 spec F2: 66 came first).
    @Test func aMissingLedgerIsRefusedBeforeAMissingInput() throws {
        let setup = try Setup()
        let missing = setup.folder.appendingPathComponent("nope.csv").path
        var arguments = setup.arguments("run", [missing], out: "a")
        arguments[arguments.firstIndex(of: "--ledger")! + 1] = setup.folder.appendingPathComponent("none.sqlite").path
        let both = try SettleProcess.run(arguments, environment: ["STRIPE_API_KEY": testKey])
        #expect(both.status == 78, "\(both.stderr)")
        #expect(both.stderr.contains("there is no ledger at"), "\(both.stderr)")
        let input = try SettleProcess.run(
            setup.arguments("run", [missing], out: "b"), environment: ["STRIPE_API_KEY": testKey])
        #expect(input.status == 66, "\(input.stderr)")
        // `apply` of a folder that is not there: its input cannot be read, 66, and nothing is
        // made (audit 35 C14: 73, "cannot create …/.settle").
        let folder = setup.folder.appendingPathComponent("typo")
        let apply = try SettleProcess.run(
            ["apply", folder.path, "--ledger", setup.ledger, "--api-base", setup.sandbox.base],
            environment: ["STRIPE_API_KEY": testKey])
        #expect(apply.status == 66, "\(apply.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        // With no ledger either, the configuration is told first, 78, as for `run` (audit 38 D9).
        let neither = try SettleProcess.run(
            ["apply", folder.path, "--ledger", setup.folder.appendingPathComponent("none.sqlite").path],
            environment: ["STRIPE_API_KEY": testKey])
        #expect(neither.status == 78, "\(neither.stderr)")
        #expect(neither.stderr.contains("there is no ledger at"), "\(neither.stderr)")
    }

    /// An unusable `--out` (a file, a folder holding files settle did not write) is 73 before
    /// `run` asks Stripe anything: on a new ledger whose first question to Stripe gets no
    /// answer too (audit 32 N3: that probe came first and said 75).
    /// (`parent`: `--out` to be made under a file, audit 33 O10.)
    @Test(arguments: ["file", "foreign", "parent"])
    func anUnusableOutIsRefusedBeforeStripeIsAsked(kind: String) throws {
        let setup = try Setup()
        let input = try Self.export(orders: 1, in: setup.folder)
        let out = setup.folder.appendingPathComponent("out")
        if kind == "foreign" {
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            try "x".write(to: out.appendingPathComponent("x.txt"), atomically: true, encoding: .utf8)
        } else {
            try "x".write(to: out, atomically: true, encoding: .utf8)
        }
        var arguments = setup.arguments("run", [input.path], out: kind == "parent" ? "out/day1" : "out")
        // Nothing listens on port 9 of loopback: no answer at all.
        arguments[arguments.firstIndex(of: "--api-base")! + 1] = "http://127.0.0.1:9"
        let refused = try SettleProcess.run(arguments, environment: ["STRIPE_API_KEY": testKey])
        #expect(refused.status == 73, "\(refused.stderr)")
        #expect(refused.stderr.contains("--out"), "\(refused.stderr)")
    }

    /// A relative `--out` of one character is a folder like any other: `run` makes it and
    /// settles into it, and `plan` too. Before, `run` trapped on it, exit 70 (audit 35 C2:
    /// Foundation's `deletingLastPathComponent` traps on a one-character path).
    @Test(arguments: ["a", "b/", "./c"]) func aShortRelativeOutIsAFolderLikeAnyOther(out: String) throws {
        let setup = try Setup()
        let input = try Self.export(orders: 1, in: setup.folder)
        var arguments = setup.arguments("run", [input.path], out: "unused")
        arguments[arguments.firstIndex(of: "--out")! + 1] = out
        let ran = try SettleProcess.run(arguments, environment: ["STRIPE_API_KEY": testKey], in: setup.folder)
        #expect(ran.status == 0, "\(ran.stderr)")
        let rows = SettleProcess.results(setup.folder.appendingPathComponent(out))
        #expect(!rows.isEmpty && rows.allSatisfy { $0[8] == "settled" }, "\(rows)")
    }

    /// A reader of standard error that went away (`settle run … 2>&1 | head`) does not stop
    /// the run: its log lines are lost, its money moves, and it exits with its own status.
    /// Before, the first log line killed it with SIGPIPE (exit 141; audit 35 C8).
    @Test func aClosedStandardErrorDoesNotStopTheRun() throws {
        let setup = try Setup()
        let input = try Self.export(orders: 3, in: setup.folder)
        let process = SettleProcess.prepare(
            setup.arguments("run", [input.path], out: "a", extra: ["-v"]), environment: ["STRIPE_API_KEY": testKey],
            in: setup.folder)
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = pipe
        try pipe.fileHandleForReading.close()
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        let rows = setup.results("a")
        #expect(rows.count == 6 && rows.allSatisfy { $0[8] == "settled" }, "\(rows)")
    }

    /// A ledger settles in one Stripe mode: after a test-mode run, a live-mode key (with
    /// `--live`) is refused on it, 78, nothing read or sent, for `run` and for `apply`; the
    /// test key goes on. Before, the live run took the test run's lines for `already_settled`
    /// (audit 35 C18).
    @Test func aLedgerSettlesInOneStripeMode() throws {
        let setup = try Setup()
        let input = try Self.export(orders: 2, in: setup.folder)
        let first = try setup.run([input], out: "a")
        #expect(first.status == 0, "\(first.stderr)")
        let effects = try setup.sandbox.effects().count
        let live = ["STRIPE_API_KEY": "sk_live_e2e_not_a_real_key"]
        let run = try SettleProcess.run(
            setup.arguments("run", [input.path], out: "b", extra: ["--live"]), environment: live)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains("settles in Stripe's test mode"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: setup.folder.appendingPathComponent("b").path))
        let plan = try SettleProcess.run(setup.arguments("plan", [input.path], out: "c"))
        #expect(plan.status == 0, "\(plan.stderr)")
        let apply = try SettleProcess.run(
            [
                "apply", setup.folder.appendingPathComponent("c").path, "--ledger", setup.ledger, "--api-base",
                setup.sandbox.base, "--financial-account", "fa_e2e", "--live",
            ], environment: live)
        #expect(apply.status == 78, "\(apply.stderr)")
        #expect(try setup.sandbox.effects().count == effects)
        let again = try setup.apply("c")
        #expect(again.status == 0, "\(again.stderr)")
    }

    @Test func keysAreCheckedAndNeverWritten() throws {
        let setup = try Setup(flags: ["--fail-5xx", "0.2", "--seed", "3"])
        let input = try Self.export(orders: 4, in: setup.folder)
        let noKey = try SettleProcess.run(setup.arguments("run", [input.path], out: "a"))
        #expect(noKey.status == 78)
        let live = try SettleProcess.run(
            setup.arguments("run", [input.path], out: "b"),
            environment: ["STRIPE_API_KEY": "sk_live_51SECRETliveKEY"])
        #expect(live.status == 78)
        #expect(live.stderr.contains("--live"))
        #expect(!live.stderr.contains("SECRETlive"))
        let keyFile = setup.folder.appendingPathComponent("key")
        try testKey.write(to: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile.path, 0o644)
        let open = try SettleProcess.run(
            setup.arguments("run", [input.path], out: "c", extra: ["--api-key-file", keyFile.path]))
        #expect(open.status == 78)
        #expect(open.stderr.contains("chmod 600"))
        chmod(keyFile.path, 0o600)
        let insecure = try SettleProcess.run(
            setup.arguments(
                "run", [input.path], out: "d",
                extra: ["--api-key-file", keyFile.path, "--api-base", "http://example.com"]))
        #expect(insecure.status == 78)
        let good = try SettleProcess.run(
            setup.arguments(
                "run", [input.path], out: "e", extra: ["--api-key-file", keyFile.path, "-v", "--log-format", "json"]))
        #expect(good.status == 0 || good.status == 75)
        #expect(!good.stderr.contains(testKey) && !good.stdout.contains(testKey))
        // Not in any file settle wrote: outputs, spool, ledger and its WAL.
        let enumerator = FileManager.default.enumerator(atPath: setup.folder.path)
        while let name = enumerator?.nextObject() as? String {
            let path = setup.folder.appendingPathComponent(name)
            guard name != "key", let data = FileManager.default.contents(atPath: path.path) else { continue }
            #expect(data.range(of: Data(testKey.utf8)) == nil, "the key is in \(name)")
        }
    }

    /// Stripe out of reach (nothing listens there): after a few look-ups in a row get no
    /// answer, the rest are not tried; the run exits 75 with one short line saying so, nothing
    /// sent. Before, every look-up was tried five times (hours at full size, the ledger
    /// locked), and the error listed each of them (audit 54 F8).
    @Test func anUnreachableStripeStopsTheLookUpsAt75() throws {
        let setup = try Setup()
        // A first day with Stripe there (order 1): the ledger is no longer new, so no probe of
        // the account's history comes before the look-ups.
        #expect(try setup.run([try Self.export(orders: 1, in: setup.folder)], out: "first").status == 0)
        let made = try setup.sandbox.effects().count
        // Twelve payouts to twelve payout methods: twelve look-ups before the plan.
        let input = setup.folder.appendingPathComponent("payouts.csv")
        try
            ("line_id,order_id,kind,amount,currency,recipient,payout_method\n"
            + (1...12).map { "Q\($0),q\($0),payout,2.00,usd,acct_q\($0),pm_ap_q\($0)\n" }.joined())
            .write(to: input, atomically: true, encoding: .utf8)
        var arguments = setup.arguments("run", [input.path], out: "down")
        arguments[arguments.firstIndex(of: "--api-base")! + 1] = "http://127.0.0.1:9"
        let down = try SettleProcess.run(arguments, environment: ["STRIPE_API_KEY": testKey])
        #expect(down.status == 75, "\(down.stderr)")
        #expect(
            down.stderr.contains("Stripe could not be reached: 5 look-ups in a row got no answer"), "\(down.stderr)")
        #expect(!down.stderr.contains("could not be looked up"), "\(down.stderr)")
        #expect(try setup.sandbox.effects().count == made)
    }

    /// A transfer that could not be sent (nothing listens at the API base) waits in the ledger,
    /// and its reason says so in words: before, it read "not sent: notSent error: Couldn't
    /// connect…" (audit 56).
    @Test func aTransferStripeCouldNotBeReachedForSaysSoInWords() throws {
        let setup = try Setup()
        #expect(try setup.run([try Self.export(orders: 1, in: setup.folder)], out: "first").status == 0)
        let input = setup.folder.appendingPathComponent("transfer.csv")
        try
            ("line_id,order_id,kind,amount,currency,destination,source_transaction,charge_amount,charge_currency,charge_status\n"
            + "U1,u1,transfer,5.00,usd,acct_u1,ch_u1,10.00,usd,succeeded\n")
            .write(to: input, atomically: true, encoding: .utf8)
        var arguments = setup.arguments("run", [input.path], out: "down")
        arguments[arguments.firstIndex(of: "--api-base")! + 1] = "http://127.0.0.1:9"
        let down = try SettleProcess.run(arguments, environment: ["STRIPE_API_KEY": testKey])
        #expect(down.status == 75, "\(down.stderr)")
        let row = try #require(setup.results("down").first)
        #expect(row[8] == "deferred" && row[11] == "scheduled", "\(row)")
        #expect(row[12].hasPrefix("not sent: could not connect: "), "\(row[12])")
        #expect(!row[12].contains("notSent"), "\(row[12])")
    }

    /// An API base that carries credentials (the key as its user) is refused (78) before
    /// anything is sent or written, and the refusal does not repeat the key. Before, the run
    /// paid and manifest.json held the key in `api_base` (audit 54 F5).
    @Test func anAPIBaseWithCredentialsIsRefused() throws {
        let setup = try Setup()
        let input = try Self.export(orders: 1, in: setup.folder)
        let withKey = setup.sandbox.base.replacingOccurrences(of: "http://", with: "http://\(testKey):@")
        var arguments = setup.arguments("run", [input.path], out: "userinfo")
        arguments[arguments.firstIndex(of: "--api-base")! + 1] = withKey
        let refused = try SettleProcess.run(arguments, environment: ["STRIPE_API_KEY": testKey])
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.contains("carries credentials"), "\(refused.stderr)")
        #expect(!refused.stderr.contains(testKey) && !refused.stdout.contains(testKey))
        #expect(!FileManager.default.fileExists(atPath: setup.folder.appendingPathComponent("userinfo").path))
        #expect(try setup.sandbox.effects().isEmpty)
    }

    /// A proxy the environment names (`http_proxy`, `ALL_PROXY`, here one where nothing
    /// listens) is not used for the plain-http loopback API base: the key would cross the
    /// network in the clear. The run pays as without it. Before, every request went to the
    /// proxy (audit 54 F7).
    @Test func plainHTTPNeverGoesThroughAProxy() throws {
        let setup = try Setup()
        let input = try Self.export(orders: 2, in: setup.folder)
        let run = try SettleProcess.run(
            setup.arguments("run", [input.path], out: "proxied"),
            environment: [
                "STRIPE_API_KEY": testKey, "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
                "ALL_PROXY": "http://127.0.0.1:9", "all_proxy": "http://127.0.0.1:9",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        let rows = setup.results("proxied")
        #expect(rows.count == 4 && rows.allSatisfy { $0[8] == "settled" }, "\(rows)")
    }

    /// Stripe (or a proxy) echoes the key in an error message: the failed line's reason says
    /// what Stripe said with the key replaced, and no file settle wrote holds it: results.csv,
    /// errors.csv, report.html, the ledger. Before (audit 9 #4) only the log withheld it.
    @Test func aKeyEchoedInAnErrorIsInNoFile() throws {
        let setup = try Setup()
        let input = try ApplyCommandTests.export(orders: 1, in: setup.folder)
        _ = try setup.sandbox.control(
            "POST", "/_sandbox/faults",
            json: """
                {"rules": [{"method": "POST", "path_prefix": "/v1/transfers", "on": "any", "action": "status",
                  "status": 400, "code": "parameter_invalid",
                  "message": "Invalid API Key provided: \(testKey) (Authorization: Bearer \(testKey))"}]}
                """)
        let run = try setup.run([input], out: "echo", extra: ["-v"])
        #expect(run.status == 65, "\(run.stderr)")
        let row = setup.results("echo").first { $0[0] == "T1" }
        #expect(row.map { [$0[8], $0[11]] } == ["failed", "parameter_invalid"], "\(String(describing: row))")
        #expect(row?[12].contains("Invalid API Key provided: [redacted]") == true, "\(String(describing: row))")
        #expect(!run.stderr.contains(testKey) && !run.stdout.contains(testKey))
        let enumerator = FileManager.default.enumerator(atPath: setup.folder.path)
        var scanned = 0
        while let name = enumerator?.nextObject() as? String {
            guard let data = FileManager.default.contents(atPath: setup.folder.appendingPathComponent(name).path)
            else { continue }
            scanned += 1
            #expect(data.range(of: Data(testKey.utf8)) == nil, "the key is in \(name)")
        }
        #expect(scanned >= 8)
    }

    @Test func revokedKeyStopsTheRunWithoutFailingLines() throws {
        let setup = try Setup()
        let revoked = "sk_test_51REVOKEDsettleKEY"
        try setup.sandbox.configure(#"{"revoked_keys": ["sk_test_51REVOKEDsettleKEY"]}"#)
        let input = try Self.export(orders: 6, in: setup.folder)
        let refused = try SettleProcess.run(
            setup.arguments("run", [input.path], out: "refused"),
            environment: ["STRIPE_API_KEY": revoked])
        #expect(refused.status == 78)
        #expect(refused.stderr.contains("refused the API key"))
        #expect(!refused.stderr.contains("REVOKED"))
        #expect(try setup.sandbox.effects().isEmpty)
        // The key is refused on the first look-up, before the plan is made: nothing is planned
        // from a guess, no line is failed or rejected for it, no plan is sealed.
        let refusedFolder = setup.folder.appendingPathComponent("refused")
        #expect(!FileManager.default.fileExists(atPath: refusedFolder.appendingPathComponent("manifest.json").path))
        #expect(!FileManager.default.fileExists(atPath: refusedFolder.appendingPathComponent("results.csv").path))
        let retried = try setup.run([input], out: "retried")
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(
            setup.results("retried").allSatisfy { $0[8] == "settled" },
            "\(setup.results("retried").map { $0[8] + " " + $0[12] })")
        try Self.expectPaidExactlyOnce(setup.sandbox, transfers: Self.transferTotal(6), payouts: 6 * 250)
    }
}

/// A ledger SQLite finds corrupt is damaged: every command refuses it with 78 (restore it or
/// rebuild it), never 75 "run again later", which cron would retry forever (audit 5 #2).
@Suite struct DamagedLedgerTests {
    @Test func aCorruptLedgerIsRefusedWith78() throws {
        let setup = try ApplyCommandTests.Setup()
        let day1 = try ApplyCommandTests.export(orders: 20, in: setup.folder)
        #expect(try setup.run([day1], out: "day1").status == 0)
        let day2 = try ApplyCommandTests.export(orders: 3, in: setup.folder)
        let plan = try SettleProcess.run(setup.arguments("plan", [day2.path], out: "p2"))
        #expect(plan.status == 0, "\(plan.stderr)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: setup.ledger)[.size] as? Int)
        #expect(truncate(setup.ledger, off_t(size / 2)) == 0)
        let before = try setup.sandbox.effects().count
        let apply = try setup.apply("p2")
        #expect(apply.status == 78, "\(apply.stderr)")
        #expect(apply.stderr.contains("is damaged"), "\(apply.stderr)")
        #expect(try setup.run([day2], out: "r2").status == 78)
        #expect(try SettleProcess.run(setup.arguments("plan", [day2.path], out: "p3")).status == 78)
        #expect(try setup.sandbox.effects().count == before)
    }
}

/// The metrics file counts every request the process sent: the facts looked up before the
/// plan and the payouts followed, not only the apply's (audit 5 #8: 2 of 4).
@Suite struct RequestMetricsTests {
    @Test func theMetricsCountEveryRequestSent() throws {
        let setup = try ApplyCommandTests.Setup()
        let input = try ApplyCommandTests.export(orders: 4, in: setup.folder)
        let metrics = setup.folder.appendingPathComponent("settle.prom").path
        let before = try setup.sandbox.requestCount()
        let outcome = try setup.run([input], out: "day", extra: ["--metrics-file", metrics])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let sent = try setup.sandbox.requestCount() - before
        let parsed = try OperatorCommandTests.parseMetrics(metrics)
        // 4 transfers, 3 payouts (one per recipient), the 3 payout methods looked up first,
        // and the 2 lists a new ledger reads before its first request (EarlierLedgerProbe).
        #expect(parsed["settle_last_run_requests"] == 12, "\(parsed)")
        #expect(parsed["settle_last_run_requests"].map { Int($0) } == sent, "sandbox saw \(sent)")
    }
}
