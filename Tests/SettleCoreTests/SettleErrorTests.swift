import SettleCore
import Testing

/// The one error type: its exit status and how its place reads.
@Suite struct SettleErrorTests {
    @Test func everyCodeHasItsExitStatus() {
        let expected: [SettleError.Code: ExitCode] = [
            .notAPlanFolder: .inputUnreadable, .planChanged: .linesRejected, .planInvalid: .linesRejected,
            .folderUnwritable: .outputUnwritable, .folderRefused: .outputUnwritable, .folderBusy: .tryAgain,
            .ledgerFailed: .tryAgain, .internalError: .internalError,
        ]
        #expect(Set(expected.keys) == Set(SettleError.Code.allCases))
        for code in SettleError.Code.allCases {
            #expect(SettleError(code, "x").exitCode == expected[code])
        }
    }

    @Test func aLocationReadsAsFileLineAndByte() {
        #expect(SettleError.Location(file: "a.jsonl").description == "a.jsonl")
        #expect(SettleError.Location(file: "a.jsonl", line: 3).description == "a.jsonl:3")
        #expect(SettleError.Location(file: "m.json", byteOffset: 11).description == "m.json, byte 11")
        #expect(SettleError.Location(file: "a.jsonl", line: 3, byteOffset: 9).description == "a.jsonl:3, byte 9")
        #expect(SettleError(.planInvalid, "the message").description == "the message")
    }
}
