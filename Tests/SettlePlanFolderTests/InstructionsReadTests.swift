import Foundation
import SettleCore
import SettlePlanFolder
import Testing

/// instructions.jsonl as apply reads it: every key of docs/PLAN-FORMAT.md, line by line.
@Suite struct InstructionsReadTests {
    @Test func decodesThePlanFormat() throws {
        let jsonl = """
            {"id":"ins_0123456789abcdef01234567","kind":"transfer","method":"POST","path":"/v1/transfers","idempotency_key":"settle-ins_0123456789abcdef01234567-a1","stripe_context":null,"params":{"amount":"7000","currency":"usd","destination":"acct_rest","metadata[settle_instruction]":"ins_0123456789abcdef01234567"},"lines":[{"line_id":"100-1","kind":"transfer","amount_minor":7000,"content":"00112233aabbccdd"}],"group":"ORDER100","payee":"acct_rest","charge":"ch_1","currency":"usd","amount_minor":7000,"preflight":{}}

            {"id":"ins_p","kind":"payout","method":"POST","path":"/v2/money_management/outbound_payments","idempotency_key":"settle-ins_p-a1","stripe_context":null,"params":{"from":{"financial_account":null,"currency":"usd"},"amount":{"value":2000,"currency":"usd"}},"lines":[],"group":"","payee":"acct_drv","charge":"","currency":"usd","amount_minor":2000,"preflight":{"payout_method":"pm_ap_1","recipient":"acct_drv"}}
            """
        let plan = try Instruction.decodeJSONLines(Data(jsonl.utf8))
        #expect(plan.count == 2)
        #expect(plan[0].kind == .transfer)
        #expect(plan[0].amountMinor == 7000)
        #expect(
            plan[0].lines == [.init(lineID: "100-1", kind: "transfer", amountMinor: 7000, content: "00112233aabbccdd")])
        #expect(plan[0].params["metadata[settle_instruction]"] == .string("ins_0123456789abcdef01234567"))
        #expect(plan[1].isV2)
        #expect(plan[1].params["amount"]?["value"] == .int(2000))
        #expect(plan[1].params["from"]?["financial_account"] == .null)
        #expect(plan[1].preflight == .init(payoutMethod: "pm_ap_1", recipient: "acct_drv"))
        #expect(
            plan[1].params.encoded(sortingKeys: true)
                == #"{"amount":{"currency":"usd","value":2000},"from":{"currency":"usd","financial_account":null}}"#)
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
