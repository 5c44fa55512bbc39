import Foundation
import SettleApply
import SettleCore
import SettlePlanFolder
import Testing

/// instructions.jsonl as apply reads it: every key of docs/PLAN-FORMAT.md, line by line.
@Suite struct InstructionsReadTests {
    static let transfer =
        #"{"id":"ins_0123456789abcdef01234567","kind":"transfer","method":"POST","path":"/v1/transfers","idempotency_key":"settle-ins_0123456789abcdef01234567-a1","stripe_context":null,"params":{"amount":"6500","currency":"usd","destination":"acct_rest","source_transaction":"ch_1","transfer_group":"ORDER100","description":"Order 100","metadata[settle_instruction]":"ins_0123456789abcdef01234567","metadata[shift]":"lunch"},"lines":[{"line_id":"100-1","kind":"transfer","amount_minor":7000,"content":"00112233aabbccdd"},{"line_id":"100-2","kind":"reversal","amount_minor":500,"content":"0011223344556677"}],"group":"ORDER100","payee":"acct_rest","charge":"ch_1","currency":"usd","amount_minor":6500,"preflight":{"charge":"ch_1"}}"#
    static let payout =
        #"{"id":"ins_p","kind":"payout","method":"POST","path":"/v2/money_management/outbound_payments","idempotency_key":"settle-ins_p-a1","stripe_context":null,"params":{"from":{"financial_account":null,"currency":"usd"},"to":{"recipient":"acct_drv","payout_method":"pm_ap_1","currency":"usd"},"amount":{"value":2000,"currency":"usd"},"delivery_options":{"speed":"instant"},"metadata":{"settle_instruction":"ins_p"}},"lines":[{"line_id":"100-3","kind":"payout","amount_minor":2000,"content":"8899aabbccddeeff"}],"group":"","payee":"acct_drv","charge":"","currency":"usd","amount_minor":2000,"preflight":{"payout_method":"pm_ap_1","recipient":"acct_drv"}}"#
    static let reversal =
        #"{"id":"ins_r","kind":"reversal","method":"POST","path":"/v1/transfers/tr_9/reversals","idempotency_key":"settle-ins_r-a1","stripe_context":null,"params":{"amount":"300","metadata[settle_instruction]":"ins_r"},"lines":[{"line_id":"9-1","kind":"reversal","amount_minor":300,"content":"0123012301230123"}],"group":"ORDER9","payee":"acct_rest","charge":"","currency":"usd","amount_minor":300,"preflight":{}}"#

    @Test func decodesThePlanFormat() throws {
        let jsonl = Self.transfer + "\n\n" + Self.payout + "\n" + Self.reversal
        let plan = try Instruction.decodeJSONLines(Data(jsonl.utf8))
        #expect(plan.count == 3)
        #expect(plan[0].kind == .transfer)
        #expect(plan[0].amountMinor == 6500)
        #expect(plan[0].path == "/v1/transfers")
        #expect(plan[0].idempotencyKey == "settle-ins_0123456789abcdef01234567-a1")
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
                    ("metadata[settle_instruction]", "ins_0123456789abcdef01234567"), ("metadata[shift]", "lunch"),
                ]))
        #expect(plan[1].isV2)
        #expect(plan[1].group == "")
        #expect(plan[1].preflight == .init(payoutMethod: "pm_ap_1", recipient: "acct_drv"))
        #expect(plan[2].path == "/v1/transfers/tr_9/reversals")
        #expect(plan[2].charge == "")
        #expect(plan[2].lines.map(\.kind) == ["reversal"])
        // What the planner writes is what apply builds again from the facts.
        for instruction in plan { #expect(RequestParams.mismatch(instruction) == nil, "\(instruction.id)") }
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
        return RequestParams.mismatch(instruction)
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
                transfer, #""metadata[settle_instruction]":"ins_0123456789abcdef01234567""#,
                #""metadata[settle_instruction]":"ins_other""#
            ),
            (transfer, #""stripe_context":null"#, #""stripe_context":"acct_other""#),
            (transfer, #""idempotency_key":"settle-ins_0123456789abcdef01234567-a1""#, #""idempotency_key":"mine-1""#),
            (transfer, #""method":"POST""#, #""method":"DELETE""#),
            (payout, #""value":2000"#, #""value":2500"#),
            (payout, #""recipient":"acct_drv","payout_method""#, #""recipient":"acct_x","payout_method""#),
            (payout, #""speed":"instant""#, #""speed":"standard""#),
            (reversal, #""params":{"amount":"300""#, #""params":{"amount":"3000""#),
            (reversal, #""path":"/v1/transfers/tr_9/reversals""#, #""path":"/v1/transfers""#),
        ]
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
        #expect(try mismatch(payout, replacing: #""settle-ins_p-a1""#, with: #""settle-ins_p-a2""#) == nil)
        #expect(try mismatch(payout, replacing: #""settle-ins_p-a1""#, with: #""settle-ins_p-a0""#) != nil)
    }
}
