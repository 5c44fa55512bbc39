import Foundation
import SettleApply
import SettleCore
import SettlePlanFolder
import Testing

/// instructions.jsonl as apply reads it: every key of docs/PLAN-FORMAT.md, line by line.
@Suite struct InstructionsReadTests {
    /// A line of plan format 4 with `ID` standing for the id its facts give.
    static func withID(
        _ line: String, kind: String, group: String, payee: String, chargeOrTarget: String, amount: Int64,
        lines: [String]
    ) -> String {
        let id = InstructionID.make(
            kind: kind, group: group, payee: payee, chargeOrTarget: chargeOrTarget, currency: "usd",
            amountMinor: amount, lineIDs: lines)
        return line.replacingOccurrences(of: "ID", with: id)
    }

    static let transfer = withID(
        #"{"id":"ID","kind":"transfer","method":"POST","path":"/v1/transfers","idempotency_key":"settle-ID-a1","stripe_context":null,"params":{"amount":"6500","currency":"usd","destination":"acct_rest","source_transaction":"ch_1","transfer_group":"ORDER100","description":"Order 100","metadata[settle_instruction]":"ID","metadata[shift]":"lunch"},"lines":["100-1","100-2"],"line_claims":[[7000,"00112233aabbccdd"],[-500,"0011223344556677"]],"preflight":{"charge":"ch_1"}}"#,
        kind: "transfer", group: "ORDER100", payee: "acct_rest", chargeOrTarget: "ch_1", amount: 6500,
        lines: ["100-1", "100-2"])
    static let payout = withID(
        #"{"id":"ID","kind":"payout","method":"POST","path":"/v2/money_management/outbound_payments","idempotency_key":"settle-ID-a1","stripe_context":null,"params":{"from":{"financial_account":null,"currency":"usd"},"to":{"recipient":"acct_drv","payout_method":"pm_ap_1","currency":"usd"},"amount":{"value":2000,"currency":"usd"},"delivery_options":{"speed":"instant"},"metadata":{"settle_instruction":"ID"}},"lines":["100-3"],"line_claims":[[2000,"8899aabbccddeeff"]]}"#,
        kind: "payout", group: "", payee: "acct_drv", chargeOrTarget: "", amount: 2000, lines: ["100-3"])
    static let reversal = withID(
        #"{"id":"ID","kind":"reversal","method":"POST","path":"/v1/transfers/tr_9/reversals","idempotency_key":"settle-ID-a1","stripe_context":null,"params":{"amount":"300","metadata[settle_instruction]":"ID"},"lines":["9-1"],"line_claims":[[300,"0123012301230123"]],"group":"ORDER9","payee":"acct_rest","currency":"usd"}"#,
        kind: "reversal", group: "ORDER9", payee: "acct_rest", chargeOrTarget: "tr_9", amount: 300, lines: ["9-1"])

    @Test func decodesThePlanFormat() throws {
        let jsonl = Self.transfer + "\n\n" + Self.payout + "\n" + Self.reversal
        let plan = try Instruction.decodeJSONLines(Data(jsonl.utf8))
        #expect(plan.count == 3)
        #expect(plan[0].kind == .transfer)
        #expect(plan[0].amountMinor == 6500)
        #expect(plan[0].path == "/v1/transfers")
        #expect(plan[0].idempotencyKey == IdempotencyKey.make(instruction: plan[0].id, attempt: 1))
        #expect(plan[0].charge == "ch_1")
        #expect(plan[0].group == "ORDER100")
        #expect(plan[0].preflight == .init(charge: "ch_1"))
        #expect(
            plan[0].lines == [
                .init(lineID: "100-1", kind: "transfer", amountMinor: 7000, content: "00112233aabbccdd"),
                .init(lineID: "100-2", kind: "reversal", amountMinor: 500, content: "0011223344556677"),
            ])
        // The form keys in the order settle has always sent them.
        #expect(
            plan[0].params
                == .object([
                    ("amount", "6500"), ("currency", "usd"), ("destination", "acct_rest"),
                    ("source_transaction", "ch_1"), ("transfer_group", "ORDER100"), ("description", "Order 100"),
                    ("metadata[settle_instruction]", .string(plan[0].id)), ("metadata[shift]", "lunch"),
                ]))
        #expect(plan[1].isV2)
        #expect(plan[1].group == "")
        #expect(plan[1].preflight == .init(payoutMethod: "pm_ap_1", recipient: "acct_drv"))
        #expect(plan[2].path == "/v1/transfers/tr_9/reversals")
        #expect(plan[2].charge == "")
        #expect(plan[2].lines.map(\.kind) == ["reversal"])
        #expect(plan[2].group == "ORDER9" && plan[2].payee == "acct_rest" && plan[2].currency == "usd")
        #expect(plan[2].amountMinor == 300)
        // What the planner writes is what apply builds again from the facts, and the facts give the id.
        for instruction in plan {
            #expect(RequestParams.mismatch(instruction) == nil, "\(instruction.id)")
            #expect(instruction.inconsistency == nil, "\(instruction.id)")
        }
        // Claims that do not pair with the ids, or a negative amount outside a transfer, are refused.
        for (line, old, new) in [
            (Self.payout, #""lines":["100-3"]"#, #""lines":["100-3","100-4"]"#),
            (Self.payout, #"[[2000,"#, #"[[-2000,"#),
            (Self.reversal, #"[[300,"#, #"[[0,"#),
            (Self.transfer, #"[7000,"00112233aabbccdd"]"#, #"[7000]"#),
        ] {
            #expect(line.contains(old), "\(old)")
            #expect(throws: SettleError.self, "\(new)") {
                try Instruction.decode(line: Array(line.replacingOccurrences(of: old, with: new).utf8), number: 1)
            }
        }
        do {
            _ = try Instruction.decodeJSONLines(Data("\n{\"id\":\"x\"}\n".utf8))
            Issue.record("an incomplete instruction decoded")
        } catch {
            #expect(
                error
                    == SettleError(
                        .planInvalid, "instructions.jsonl line 2: the instruction has no \"kind\"",
                        at: .init(file: "instructions.jsonl", line: 2), cause: "the instruction has no \"kind\""))
            #expect(error.exitCode == .linesRejected)
        }
        // A line of plan format 2 (an array) is not misread.
        #expect(throws: SettleError.self) {
            try Instruction.decode(line: Array(#"["ins_x","transfer"]"#.utf8), number: 1)
        }
        // A syntax error names the byte in the line.
        let broken = Array(#"{"id":"x",}"#.utf8)
        #expect(
            throws: SettleError(
                .planInvalid, "instructions.jsonl line 7: byte 10: expected a key (a string)",
                at: .init(file: "instructions.jsonl", line: 7, byteOffset: 10),
                cause: "byte 10: expected a key (a string)")
        ) {
            try Instruction.decode(line: broken, number: 7)
        }
    }
}

/// apply sends only parameters its own function builds from the instruction's facts: every
/// edit of what would be sent is refused, whatever the seal says.
@Suite struct RequestParamsMismatchTests {
    func mismatch(_ line: String, replacing old: String, with new: String) throws -> String? {
        #expect(line.contains(old), "\(old)")
        let edited = line.replacingOccurrences(of: old, with: new)
        let instruction = try #require(try Instruction.decode(line: Array(edited.utf8), number: 1))
        // What apply asks of every instruction it reads (InstructionStream).
        return instruction.inconsistency ?? RequestParams.mismatch(instruction)
    }

    @Test func anEditOfWhatIsSentIsRefused() throws {
        let transfer = InstructionsReadTests.transfer
        let payout = InstructionsReadTests.payout
        let reversal = InstructionsReadTests.reversal
        let edits: [(String, String, String)] = [
            (transfer, #""amount":"6500""#, #""amount":"9500""#),
            (transfer, #""destination":"acct_rest""#, #""destination":"acct_thief""#),
            (transfer, #""source_transaction":"ch_1""#, #""source_transaction":"ch_2""#),
            (transfer, #""transfer_group":"ORDER100""#, #""transfer_group":"ORDER101""#),
            (transfer, #""currency":"usd","destination""#, #""currency":"eur","destination""#),
            (transfer, #""amount":"6500","#, #""amount":"6500","application_fee_amount":"1","#),
            (
                transfer, #""metadata[settle_instruction]":"ins_"#, #""metadata[settle_instruction]":"ins_0"#
            ),
            (transfer, #""stripe_context":null"#, #""stripe_context":"acct_other""#),
            (transfer, #""idempotency_key":"settle-"#, #""idempotency_key":"mine-"#),
            (transfer, #""method":"POST""#, #""method":"DELETE""#),
            (payout, #""value":2000"#, #""value":2500"#),
            (payout, #""recipient":"acct_drv","payout_method""#, #""recipient":"acct_x","payout_method""#),
            (payout, #""speed":"instant""#, #""speed":"standard""#),
            (reversal, #""params":{"amount":"300""#, #""params":{"amount":"3000""#),
            (reversal, #""path":"/v1/transfers/tr_9/reversals""#, #""path":"/v1/transfers""#),
            (reversal, #""payee":"acct_rest""#, #""payee":"acct_thief""#),
            (reversal, #""group":"ORDER9""#, #""group":"ORDER8""#),
            (payout, #""8899aabbccddeeff"]]}"#, #""8899aabbccddeeff"]],"group":"ORDER1"}"#),
            (transfer, #"[-500,"#, #"[500,"#),
        ]
        // Unedited, each goes.
        for line in [transfer, payout, reversal] {
            #expect(try mismatch(line, replacing: #""method":"POST""#, with: #""method":"POST""#) == nil)
        }
        for (line, old, new) in edits {
            #expect(try mismatch(line, replacing: old, with: new) != nil, "\(new)")
        }
        // What the input decides (description, metadata, the payout's method and account)
        // is read from the parameters themselves: editing it consistently is not a mismatch
        // of facts (the seal and the id guard those).
        #expect(try mismatch(transfer, replacing: #""Order 100""#, with: #""Order 100 (late)""#) == nil)
        #expect(
            try mismatch(payout, replacing: #""financial_account":null"#, with: #""financial_account":"fa_1""#) == nil)
        // A later attempt's key is settle's too.
        #expect(try mismatch(payout, replacing: #"-a1""#, with: #"-a2""#) == nil)
        #expect(try mismatch(payout, replacing: #"-a1""#, with: #"-a0""#) != nil)
    }
}
