import Foundation
import SettleCore
import SettleLedger
import SettlePlanFolder
import SettleWrite
import Testing

/// The plan folder's contract, both sides: written by the module's writers, read back by
/// `PlanFolder.open`, refused when edited, rewritten from a given list of outcomes.
@Suite struct PlanFolderTests {
    static let plan = makePlan([
        transferRow("L1", order: "1", amount: "10.00"),
        transferRow("L2", order: "2", amount: "20.00", destination: "acct_two"),
        transferRow("L3", order: "3", amount: "30.00", destination: "acct_three"),
    ])

    @Test func writtenFolderReadsBackAsThePlan() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try writePlanFolder(Self.plan, to: folder)
        let opened = try PlanFolder.open(folder)
        #expect(opened.manifest["run_id"] == "run_test")
        #expect(!opened.madeOnline)
        let stream = opened.instructions()
        var instructions: [Instruction] = []
        while let instruction = try stream.next() { instructions.append(instruction) }
        #expect(stream.overview.count == 3)
        #expect(instructions.map(\.id) == Self.plan.instructions.map(\.id))
        #expect(instructions.map(\.amountMinor) == [1000, 2000, 3000])
        #expect(instructions.map(\.payee) == ["acct_rest", "acct_two", "acct_three"])
        #expect(instructions.map { $0.lines.map(\.lineID) } == [["L1"], ["L2"], ["L3"]])
        #expect(instructions[0].params["metadata[settle_instruction]"]?.stringValue == instructions[0].id)
        #expect(instructions[0].params["source_transaction"] == "ch_1")
        #expect(instructions.allSatisfy { $0.inconsistency == nil })
        // The value the plan materialises from its row is the one apply reads.
        #expect(Self.plan.instructions.indices.map { Self.plan.instruction(at: $0) } == instructions)
        #expect(Self.plan.instruction(at: 2).kind == .transfer)
        #expect(Self.plan.instruction(at: 2).path == "/v1/transfers")
    }

    @Test func anEditedManifestIsRefusedByItsSeal() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try writePlanFolder(Self.plan, to: folder)
        let handle = FileHandle(forWritingAtPath: folder + "/manifest.json")!
        handle.seekToEndOfFile()
        handle.write(Data(" ".utf8))
        handle.closeFile()
        let error = SettleError.of { () throws(SettleError) in _ = try PlanFolder.open(folder) }
        #expect(
            error
                == SettleError(
                    .planChanged, "\(folder)/manifest.json changed since settle wrote it; nothing was sent (plan again)"
                ))
        #expect(error?.exitCode == .linesRejected)
    }

    @Test func aFolderOfAnOlderPlanFormatIsRefusedBeforeItsInstructionsAreRead() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try writePlanFolder(Self.plan, to: folder)
        // A folder of plan format 1 has no "plan_format" (its manifest sealed as it was).
        let manifest = try JSON.parse(FileManager.default.contents(atPath: folder + "/manifest.json")!)
        guard case .object(let pairs) = manifest else { throw SettleError(.internalError, "no manifest object") }
        try Manifest.write(.object(pairs.filter { $0.0 != "plan_format" }), folder: folder)
        let error = SettleError.of { () throws(SettleError) in _ = try PlanFolder.open(folder) }
        #expect(
            error
                == SettleError(
                    .planInvalid,
                    "\(folder) was written by another settle in an older plan format (1); this settle applies plan format 4 only; nothing was sent (plan again with this settle)",
                    at: .init(file: "\(folder)/manifest.json")))
        #expect(error?.exitCode == .linesRejected)
        // Format 3 (every fact beside the parameters) and a newer one are refused alike.
        for other in [3, 5] {
            try Manifest.write(
                .object(pairs.map { $0.0 == "plan_format" ? ($0.0, .int(Int64(other))) : $0 }), folder: folder)
            let refused = SettleError.of { () throws(SettleError) in _ = try PlanFolder.open(folder) }
            #expect(
                refused?.message.hasPrefix("\(folder) was written by another settle in plan format \(other);") == true)
        }
    }

    @Test func anEditedInstructionIsRefused() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try writePlanFolder(Self.plan, to: folder)
        let path = folder + "/instructions.jsonl"
        let text = String(decoding: FileManager.default.contents(atPath: path)!, as: UTF8.self)
        // Two more dollars to acct_two, in every place that says the amount.
        let edited = text.replacingOccurrences(of: "\"2000\"", with: "\"2200\"")
            .replacingOccurrences(of: "\"amount_minor\":2000", with: "\"amount_minor\":2200")
        #expect(edited != text)
        try Data(edited.utf8).write(to: URL(fileURLWithPath: path))
        // Without a new seal, the checksum tells.
        let unsealed = SettleError.of { () throws(SettleError) in _ = try PlanFolder.open(folder) }
        #expect(
            unsealed
                == SettleError(
                    .planChanged,
                    "\(folder)/instructions.jsonl changed since settle wrote it; nothing was sent (plan again)",
                    at: .init(file: "\(folder)/instructions.jsonl")))
        // Sealed again, the folder opens, and the instruction's own id tells as it is read,
        // before it can be sent.
        try reseal(folder)
        let stream = try PlanFolder.open(folder).instructions()
        #expect(try stream.next()?.id == Self.plan.instructions[0].id)
        let id = Self.plan.instructions[1].id
        do {
            _ = try stream.next()
            Issue.record("an edited instruction was read")
        } catch {
            guard case .planInvalid(let line, let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(line == 2)
            #expect(message.hasPrefix("instruction \(id) does not match its content"), "\(message)")
        }
    }

    @Test func aManifestThatIsNotJSONNamesTheByte() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try writePlanFolder(Self.plan, to: folder)
        try Data("{\"run_id\": }".utf8).write(to: URL(fileURLWithPath: folder + "/manifest.json"))
        let error = SettleError.of { () throws(SettleError) in _ = try PlanFolder.open(folder) }
        #expect(error?.code == .planInvalid)
        #expect(error?.location == .init(file: "\(folder)/manifest.json", byteOffset: 11))
        #expect(
            error?.message
                == "\(folder)/manifest.json is not valid JSON (byte 11: expected a value); nothing was sent")
    }

    @Test func rewriteWritesEachLineItsOutcome() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try writePlanFolder(Self.plan, to: folder)
        let ledger = try openTestLedger(path: folder + "/ledger.sqlite")
        defer { ledger.close() }
        let ids = Self.plan.instructions.map(\.id)
        var run = AppliedRun(
            lineResults: [
                ids[0]: LineResult(status: .settled, stripeID: "tr_1"),
                ids[1]: LineResult(status: .failed, reasonCode: "account_invalid", reason: "No such destination"),
            ],
            unreached: LineResult(status: .planned, reason: "not reached"), mode: "apply",
            apiBase: "http://127.0.0.1:1", appliedAt: "2026-11-29T10:00:00Z", startedAt: Date())
        run.requests = 2
        let opened = try PlanFolder.open(folder)
        let rewritten = try opened.rewrite(
            run, ledger: ledger, records: FixedRecords(),
            reportFacts: { exit in
                ReportPage.Facts(
                    runID: "run_test", asOf: "2026-11-29", mode: "apply", exitStatus: exit.rawValue,
                    writtenAt: "2026-11-29T10:00:00Z", settleVersion: "test", rejectedFiles: [])
            })
        #expect(rewritten.exit == .tryAgain)
        // A line the apply did not send waits in the ledger (deferred), and the run exits 75.
        #expect(rewritten.counts == [.settled: 1, .failed: 1, .deferred: 1])
        let results = String(decoding: FileManager.default.contents(atPath: folder + "/results.csv")!, as: UTF8.self)
        let rows = results.split(separator: "\n").map(String.init)
        #expect(rows.count == 4)
        #expect(rows[0] == ResultsFile.header.joined(separator: ","))
        #expect(
            rows[1]
                == "L1,1,ORDER1,transfer,acct_rest,10.00,1000,usd,settled,\(ids[0]),tr_1,,,test.csv:2")
        #expect(
            rows[2]
                == "L2,2,ORDER2,transfer,acct_two,20.00,2000,usd,failed,\(ids[1]),,account_invalid,No such destination,test.csv:3"
        )
        #expect(
            rows[3]
                == "L3,3,ORDER3,transfer,acct_three,30.00,3000,usd,deferred,\(ids[2]),,scheduled,not reached; it waits in the ledger for the next run,test.csv:4"
        )
        #expect(try ledger.heldLines([.waiting]).map(\.lineID) == ["L3"])
        let manifest = try JSON.parse(FileManager.default.contents(atPath: folder + "/manifest.json")!)
        #expect(
            manifest["counts"]
                == [
                    "planned": 0, "settled": 1, "already_settled": 0, "deferred": 1, "rejected": 0, "failed": 1,
                    "unknown": 0, "netted": 0,
                ])
        #expect(manifest["exit_status"] == 75)
        #expect(manifest["mode"] == "apply")
        #expect(manifest["apply"]?["attempt"] == 1)
        #expect(manifest["apply"]?["requests"] == 2)
        #expect(manifest["apply"]?["applied_at"] == "2026-11-29T10:00:00Z")
        // The rewritten folder is sealed again: it opens.
        #expect(try PlanFolder.open(folder).manifest["exit_status"] == 75)
        // The failed line is in errors.csv, from its spool record.
        let errors = String(decoding: FileManager.default.contents(atPath: folder + "/errors.csv")!, as: UTF8.self)
        #expect(errors.split(separator: "\n").count == 2)
        #expect(errors.contains("account_invalid"))
    }
}
