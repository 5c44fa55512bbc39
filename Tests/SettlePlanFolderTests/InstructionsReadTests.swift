import Foundation
import SettleCore
import SettlePlanFolder
import Testing

/// instructions.jsonl as apply reads it: every position of docs/PLAN-FORMAT.md, line by line.
@Suite struct InstructionsReadTests {
    @Test func decodesThePlanFormat() throws {
        let jsonl = """
            ["ins_0123456789abcdef01234567","transfer","ORDER100","acct_rest","ch_1","usd",6500,[["100-1",7000,"00112233aabbccdd"],["100-2",-500,"0011223344556677"]],"Order 100",{"metadata":{"shift":"lunch"},"preflight_charge":true}]

            ["ins_p","payout","","acct_drv","","usd",2000,[["100-3",2000,"8899aabbccddeeff"]],null,{"payout_method":"pm_ap_1"}]
            ["ins_r","reversal","ORDER9","acct_rest","tr_9","usd",300,[["9-1",300,"0123012301230123"]]]
            """
        let plan = try Instruction.decodeJSONLines(Data(jsonl.utf8))
        #expect(plan.count == 3)
        #expect(plan[0].kind == .transfer)
        #expect(plan[0].amountMinor == 6500)
        #expect(plan[0].path == "/v1/transfers")
        #expect(plan[0].idempotencyKey == "settle-ins_0123456789abcdef01234567-a1")
        #expect(plan[0].charge == "ch_1")
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
        #expect(
            plan[1].params.encoded()
                == #"{"from":{"financial_account":null,"currency":"usd"},"to":{"recipient":"acct_drv","payout_method":"pm_ap_1","currency":"usd"},"amount":{"value":2000,"currency":"usd"},"delivery_options":{"speed":"instant"},"metadata":{"settle_instruction":"ins_p"}}"#
        )
        #expect(plan[2].path == "/v1/transfers/tr_9/reversals")
        #expect(plan[2].charge == "")
        #expect(plan[2].lines.map(\.kind) == ["reversal"])
        #expect(
            plan[2].params
                == .object([("amount", "300"), ("metadata[settle_instruction]", "ins_r")]))
        do {
            _ = try Instruction.decodeJSONLines(Data("\n[\"x\"]\n".utf8))
            Issue.record("an incomplete instruction decoded")
        } catch {
            #expect(
                error
                    == SettleError(
                        .planInvalid, "instructions.jsonl line 2: is not an array of 8 to 10 items",
                        at: .init(file: "instructions.jsonl", line: 2), cause: "is not an array of 8 to 10 items"))
            #expect(error.exitCode == .linesRejected)
        }
        // A line of plan format 1 (an object) is not misread.
        #expect(throws: SettleError.self) {
            try Instruction.decode(line: Array(#"{"id":"x","kind":"transfer"}"#.utf8), number: 1)
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
