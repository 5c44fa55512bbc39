import Foundation
import SettleTestSupport
import Testing

/// `settle plan` and `settle validate` end to end: the real binary on real files.
@Suite struct PlanCommandTests {
    static let sample = "samples/orders-2026-11-29.csv.gz"
    static let goldenFiles = [
        "results.csv", "errors.csv", "deferred.csv", "instructions.jsonl", "summary.csv", "charges.csv",
    ]

    @Test(arguments: ["orders-2026-11-29.csv.gz", "orders-2026-11-29.xml.gz"])
    func sampleMatchesTheCheckedInExpectedFolder(_ sample: String) throws {
        let out = SettleProcess.temporaryFolder()
        let outcome = try SettleProcess.run(
            [
                "plan", "samples/" + sample, "--out", out.path, "--as-of", "2026-11-29", "-q",
            ], environment: ["SETTLE_RUN_ID": "run_golden"])
        #expect(outcome.status == 65)
        let name = sample.replacingOccurrences(of: ".gz", with: "").replacingOccurrences(of: ".", with: "-")
        let expected = SettleProcess.root.appendingPathComponent("samples/expected/\(name)")
        for name in Self.goldenFiles {
            let actual = SettleProcess.read(out.appendingPathComponent(name))
            let wanted = SettleProcess.read(expected.appendingPathComponent(name))
            #expect(!wanted.isEmpty, "samples/expected is missing \(name)")
            #expect(
                actual == wanted, "\(name) differs from samples/expected (run `make golden` after an intended change)")
        }
    }

    /// A `metadata.` column with no key, and `metadata.settle_instruction` (settle's own key),
    /// are not sent: the plan says so, once per file; `metadata.shift` is sent as given. Before,
    /// both were dropped without a word (audit 38 D10).
    @Test func metadataColumnsThatAreNotSentAreNamed() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv")
        try """
        line_id,order_id,destination,currency,amount,metadata.,metadata.settle_instruction,metadata.shift
        1-1,1,acct_A,usd,2.00,a,b,evening
        1-2,1,acct_B,usd,3.00,c,d,evening

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        let outcome = try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29"])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let warnings = outcome.stderr.split(separator: "\n").filter { $0.contains("is not sent to Stripe") }
        #expect(
            warnings == [
                "settle: warning: \(input.path): column metadata. is not sent to Stripe: it names no key; it stays in the files",
                "settle: warning: \(input.path): column metadata.settle_instruction is not sent to Stripe: it is settle's own key (settle sends the instruction id there and finds its objects by it); it stays in the files",
            ], "\(outcome.stderr)")
        let instructions = SettleProcess.read(out.appendingPathComponent("instructions.jsonl"))
        #expect(instructions.contains(#""metadata[shift]":"evening""#), "\(instructions)")
    }

    @Test func seedExampleSummaryKeepsSixEighty() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("seed.csv")
        try """
        line_id,order_id,kind,amount,currency,transfer_group,destination,source_transaction,charge_amount,charge_currency,charge_status,charge_fee,recipient,payout_method
        100-1,100,transfer,70.00,usd,ORDER100,acct_rest,ch_1,100.00,usd,succeeded,3.20,,
        100-2,100,payout,20.00,usd,ORDER100,,ch_1,100.00,usd,succeeded,3.20,acct_drv,pm_ap_1

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        let outcome = try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29"])
        #expect(outcome.status == 0)
        let summary = SettleProcess.read(out.appendingPathComponent("summary.csv"))
        #expect(summary.contains(",2026-11-29,usd,charges_gross,1,100.00,10000\n"))
        #expect(summary.contains(",2026-11-29,usd,charges_fees,,3.20,320\n"))
        #expect(summary.contains(",2026-11-29,usd,planned_transfers,1,70.00,7000\n"))
        #expect(summary.contains(",2026-11-29,usd,planned_payouts,1,20.00,2000\n"))
        #expect(summary.contains(",2026-11-29,usd,platform_retained_planned,,6.80,680\n"))
        #expect(!summary.contains(",transferred,"))
        #expect(outcome.stderr.contains("results.csv"))
    }

    @Test func everyLineEndsInExactlyOneStatus() throws {
        let out = SettleProcess.temporaryFolder()
        try SettleProcess.run(["plan", Self.sample, "--out", out.path, "--as-of", "2026-11-29", "-q"])
        let rows = SettleProcess.results(out)
        #expect(rows.count == 36)
        #expect(rows.allSatisfy { $0.count == 14 })
        let statuses = Set(rows.map { $0[8] })
        #expect(statuses.isSubset(of: ["planned", "rejected", "deferred", "netted"]))
        let errors = SettleProcess.read(out.appendingPathComponent("errors.csv")).split(separator: "\n").count - 1
        let deferred = SettleProcess.read(out.appendingPathComponent("deferred.csv")).split(separator: "\n").count - 1
        #expect(errors == rows.filter { $0[8] == "rejected" }.count)
        #expect(deferred == rows.filter { $0[8] == "deferred" }.count)
    }

    @Test func fixedErrorsFileFedBackSettlesOnlyTheFixedLines() throws {
        let folder = SettleProcess.temporaryFolder()
        let first = folder.appendingPathComponent("first")
        try SettleProcess.run(["plan", Self.sample, "--out", first.path, "--as-of", "2026-11-29", "-q"])
        var errors = SettleProcess.read(first.appendingPathComponent("errors.csv"))
        // Finance fixes the amount typo of order 117 and the thousands separator of order 118.
        errors = errors.replacingOccurrences(of: "117-1,117,transfer,70.005,", with: "117-1,117,transfer,70.00,")
        errors = errors.replacingOccurrences(of: "\"1,250.00\"", with: "1250.00")
        // and drops the duplicate copy of line 100-1.
        errors = errors.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("100-1,") }.joined(separator: "\n")
        let fixed = folder.appendingPathComponent("errors-fixed.csv")
        try errors.write(to: fixed, atomically: true, encoding: .utf8)
        let second = folder.appendingPathComponent("second")
        let outcome = try SettleProcess.run(["plan", fixed.path, "--out", second.path, "--as-of", "2026-11-29", "-q"])
        #expect(outcome.status == 65)
        let rows = SettleProcess.results(second)
        let planned = rows.filter { $0[8] == "planned" }.map { $0[0] }.sorted()
        #expect(planned == ["117-1", "118-1"])
        let row117 = try #require(rows.first { $0[0] == "117-1" })
        #expect(row117[6] == "7000")
        // The source points into the fed-back file, and the old annotations are not carried twice.
        #expect(
            row117[13]
                == "\(fixed.path):\(try #require(errors.split(separator: "\n").firstIndex { $0.hasPrefix("117-1,") }) + 1)"
        )
        let header = SettleProcess.read(second.appendingPathComponent("errors.csv")).split(separator: "\n").first ?? ""
        #expect(header.components(separatedBy: "reason_code").count == 2)
    }

    @Test func fileRejectedWholeContributesNoLines() throws {
        let folder = SettleProcess.temporaryFolder()
        let good = folder.appendingPathComponent("good.csv")
        try "line_id,order_id,amount,currency,destination\n1,1,1.00,usd,acct_a\n".write(
            to: good, atomically: true, encoding: .utf8)
        let truncated = SettleProcess.root.appendingPathComponent("Tests/SettleReadTests/Fixtures/csv/truncated.csv.gz")
        let out = folder.appendingPathComponent("out")
        let outcome = try SettleProcess.run([
            "plan", good.path, truncated.path, "--out", out.path, "--as-of", "2026-11-29",
        ])
        #expect(outcome.status == 65)
        #expect(outcome.stderr.contains("gzip_truncated"))
        #expect(SettleProcess.results(out).map { $0[0] } == ["1"])
        let manifest = SettleProcess.read(out.appendingPathComponent("manifest.json"))
        #expect(manifest.contains("\"reason_code\": \"gzip_truncated\""))
        #expect(manifest.contains("\"exit_status\": 65"))
        // A gzip that fails in its first bytes names its file like any other (audit 38 D5:
        // `byte 10` alone).
        let corrupt = folder.appendingPathComponent("corrupt.csv.gz")
        try Data([0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 0x03] + [UInt8](repeating: 0xFF, count: 70)).write(to: corrupt)
        let again = folder.appendingPathComponent("again")
        let rejected = try SettleProcess.run([
            "plan", good.path, corrupt.path, "--out", again.path, "--as-of", "2026-11-29",
        ])
        #expect(rejected.status == 65, "\(rejected.stderr)")
        let named = SettleProcess.read(again.appendingPathComponent("manifest.json"))
        #expect(named.contains("\"reason_code\": \"gzip_corrupt\""), "\(named)")
        #expect(named.contains("\"position\": \"\(corrupt.path): byte "), "\(named)")
        #expect(
            rejected.stderr.contains("\(corrupt.path) rejected whole at \(corrupt.path): byte "), "\(rejected.stderr)")
        // errors.csv has no row: the warning points at the manifest, not at an empty file
        // (audit 72 F5); with a rejected line too, at errors.csv.
        #expect(
            rejected.stderr.contains("an input was rejected whole: see its reason in \(again.path)/manifest.json")
                && !rejected.stderr.contains("some lines were rejected"), "\(rejected.stderr)")
        let bad = folder.appendingPathComponent("bad.csv")
        try "line_id,order_id,amount,currency,destination\nB1,O9,x,usd,acct_1\n".write(
            to: bad, atomically: true, encoding: .utf8)
        let both = folder.appendingPathComponent("both")
        let mixed = try SettleProcess.run([
            "plan", bad.path, corrupt.path, "--out", both.path, "--as-of", "2026-11-29",
        ])
        #expect(mixed.status == 65, "\(mixed.stderr)")
        #expect(mixed.stderr.contains("some lines were rejected: see \(both.path)/errors.csv"), "\(mixed.stderr)")
    }

    /// Files rejected before their header and files rejected mid-read, in any order among good
    /// ones (seeded): every good line is planned, no rejected file gives a row, exit 65.
    /// Before, a file rejected at open followed by one rejected after its first line crashed
    /// the run (its slot was added beside the checker's file table; audit 5, finding 1).
    @Test func filesRejectedWholeInAnyOrder() throws {
        let folder = SettleProcess.temporaryFolder()
        let header = "line_id,order_id,amount,currency,destination\n"
        let xmlHead = #"<?xml version="1.0"?>"#
        let bad: [(String, String, String)] = [
            ("empty.csv", "", "empty_file"),
            ("noheader.csv", "line_id,order_id,amount\nE1,1,1.00\n", "header_missing_column"),
            ("unclosed.csv", header + "U1,1,1.00,usd,acct_a\nU2,2,\"1.00,usd,acct_a\n", "csv_unclosed_quote"),
            (
                "doctype.xml",
                xmlHead + "<!DOCTYPE orderExport><orderExport xmlns=\"urn:settle:order-export:1\"></orderExport>\n",
                "xml_doctype_forbidden"
            ),
            (
                "cut.xml",
                xmlHead
                    + #"<orderExport xmlns="urn:settle:order-export:1"><order id="9"><line id="X1" destination="acct_a" amount="1.00" currency="usd"/></order>"#,
                "xml_malformed"
            ),
        ]
        for (name, text, _) in bad {
            try text.write(to: folder.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let truncated = SettleProcess.root.appendingPathComponent("Tests/SettleReadTests/Fixtures/csv/truncated.csv.gz")
        let pool = bad.map { (folder.appendingPathComponent($0.0).path, $0.2) } + [(truncated.path, "gzip_truncated")]
        var random = SplitMix64(seed: 0x5EED_0005)
        for round in 0..<14 {
            var inputs: [String] = []
            var expectedIDs: [String] = []
            var codes: [String] = []
            for position in 0..<(2 + random.below(4)) {
                if random.chance(35) {
                    let good = folder.appendingPathComponent("good-\(round)-\(position).csv")
                    let id = "G\(round)-\(position)"
                    try (header + "\(id),\(round)\(position),1.00,usd,acct_a\n").write(
                        to: good, atomically: true, encoding: .utf8)
                    inputs.append(good.path)
                    expectedIDs.append(id)
                } else {
                    let (path, code) = pool[random.below(pool.count)]
                    inputs.append(path)
                    codes.append(code)
                }
            }
            let out = folder.appendingPathComponent("out-\(round)")
            let outcome = try SettleProcess.run(["plan"] + inputs + ["--out", out.path, "--as-of", "2026-11-29", "-q"])
            #expect(outcome.status == (codes.isEmpty ? 0 : 65), "\(inputs) \(outcome.stderr)")
            #expect(SettleProcess.results(out).map { $0[0] } == expectedIDs, "\(inputs)")
            #expect(SettleProcess.results(out).allSatisfy { $0[8] == "planned" }, "\(inputs)")
            let manifest = SettleProcess.read(out.appendingPathComponent("manifest.json"))
            for code in Set(codes) {
                #expect(
                    manifest.components(separatedBy: "\"reason_code\": \"\(code)\"").count - 1
                        == codes.filter { $0 == code }.count, "\(code) in \(inputs)")
            }
        }
    }

    /// A later copy of a line_id is `duplicate_line_id` whatever else is wrong with its record;
    /// a stray quote in it is still kept as read in errors.csv, so fed back unchanged the row
    /// is `malformed_record`, not a clean line. Before, `"10.00"5` was written `10.00` and the
    /// fed-back copy was planned (audit 49, the input fuzzer's F1).
    @Test func aLaterCopyKeepsItsStrayQuoteInErrorsCSV() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv")
        try """
        line_id,order_id,kind,amount,currency,destination
        D1,O1,transfer,10.00,usd,acct_r1
        D1,O1,transfer,"10.00"5,usd,acct_r1

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        #expect(
            try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "-q"]).status == 65)
        let errors = SettleProcess.read(out.appendingPathComponent("errors.csv"))
        #expect(errors.contains(#"D1,O1,transfer,"10.00"5,usd,acct_r1,duplicate_line_id,"#), "\(errors)")
        let again = folder.appendingPathComponent("again")
        let fed = try SettleProcess.run([
            "plan", out.appendingPathComponent("errors.csv").path, "--out", again.path, "--as-of", "2026-11-29", "-q",
        ])
        #expect(fed.status == 65)
        #expect(SettleProcess.results(again).map { "\($0[0]) \($0[8]) \($0[11])" } == ["D1 rejected malformed_record"])
    }

    /// A malformed record's row in errors.csv keeps every byte it was read with (the text
    /// after a stray quote, fields past the header), and fed back unchanged it is rejected
    /// again. Before, `"1.00"5` came back as 1.00 and was planned (audit 5 #3), and so was a
    /// record with too many fields, its extra text folded into the last cell (audit 15 F3).
    /// A field with a stray quote is written as it was read, not quoted: fed back it is the
    /// same malformed record (quoted, `say "hi" now` read back clean and the line moved with
    /// nobody having fixed it, audit 17 F1).
    /// An export's own `source` and `reason` columns are kept as extras, not taken for
    /// settle's (#10).
    @Test func correctionsKeepWhatTheExportSaid() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv")
        try """
        line_id,order_id,amount,currency,destination,source,reason
        S1,O1,"1.00"5,usd,acct_r1,shop,a
        S2,O2,2.00,usd,acct_r1,shop,b,acct_r2
        S3,O3,1.001,usd,acct_r1,app,xmas
        S4,O4,5.00,usd,acct_r1,say "hi" now,c
        S5,O5,=HYPERLINK("x"),usd,acct_r1,"=1"x,d

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        #expect(
            try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "-q"]).status == 65)
        let errors = SettleProcess.read(out.appendingPathComponent("errors.csv"))
        #expect(
            errors.split(separator: "\n").map(String.init) == [
                "line_id,order_id,amount,currency,destination,source,reason,reason_code,reason,source",
                #"S1,O1,"1.00"5,usd,acct_r1,shop,a,malformed_record,text after a closing quote,"#
                    + "\(input.path):2",
                #"S2,O2,2.00,usd,acct_r1,shop,b,acct_r2,malformed_record,"the record has 8 fields, the header 7","#
                    + "\(input.path):3",
                "S3,O3,1.001,usd,acct_r1,app,xmas,amount_invalid,amount '1.001' has more decimals than USD allows,"
                    + "\(input.path):4",
                #"S4,O4,5.00,usd,acct_r1,say "hi" now,c,malformed_record,a quote inside an unquoted field,"#
                    + "\(input.path):5",
                // An amount that is no number gets the formula guard too; one inside the quote.
                #"S5,O5,'=HYPERLINK("x"),usd,acct_r1,"'=1"x,d,malformed_record,a quote inside an unquoted field,"#
                    + "\(input.path):6",
            ], "\(errors)")
        let again = folder.appendingPathComponent("again")
        let fed = try SettleProcess.run([
            "plan", out.appendingPathComponent("errors.csv").path, "--out", again.path, "--as-of", "2026-11-29", "-q",
        ])
        #expect(fed.status == 65)
        #expect(
            SettleProcess.results(again).map { "\($0[0]) \($0[8]) \($0[11])" } == [
                "S1 rejected malformed_record", "S2 rejected malformed_record", "S3 rejected amount_invalid",
                "S4 rejected malformed_record", "S5 rejected malformed_record",
            ])
        // Its rows the same bytes, the guards not doubled.
        func inputCells(_ text: String) -> [String] {
            text.split(separator: "\n").dropFirst().map { row in
                row.split(separator: ",").prefix(6).joined(separator: ",")
            }
        }
        let errorsAgain = SettleProcess.read(again.appendingPathComponent("errors.csv"))
        #expect(inputCells(errorsAgain) == inputCells(errors))
        // Fixed by a person (the quote made right), it moves.
        let fixed = folder.appendingPathComponent("fixed.csv")
        try SettleProcess.read(out.appendingPathComponent("errors.csv"))
            .replacingOccurrences(of: #"say "hi" now"#, with: #""say ""hi"" now""#)
            .write(to: fixed, atomically: true, encoding: .utf8)
        let mended = folder.appendingPathComponent("mended")
        _ = try SettleProcess.run(["plan", fixed.path, "--out", mended.path, "--as-of", "2026-11-29", "-q"])
        #expect(SettleProcess.results(mended).first { $0[0] == "S4" }?[8] == "planned")
    }

    /// A record whose cells do not line up with the header (too many: an unquoted thousands
    /// separator; too few, at the end or in the middle) comes back from errors.csv with its
    /// own cells and no other: fed back unchanged it is rejected `malformed_record` again,
    /// its row the same; once a person fixes the cells it is a normal line, planned at the
    /// amount it says. Before, the extra text was folded into the last cell (`1` read as the
    /// amount, planned at 1.00) and a short record was padded (planned, or read shifted)
    /// (audit 15 F3). The file's other rows are as before.
    @Test(arguments: [
        (
            "9-1,9,acct_A,usd,1,250.00,weekly", "the record has 7 fields, the header 6",
            "9-1,9,acct_A,usd,1250.00,weekly"
        ),
        ("9-1,9,acct_A,usd,1250.00", "the record has 5 fields, the header 6", "9-1,9,acct_A,usd,1250.00,"),
        ("9-1,9,acct_A,1250.00,weekly", "the record has 5 fields, the header 6", "9-1,9,acct_A,usd,1250.00,weekly"),
    ])
    func aRecordThatDoesNotLineUpStaysMalformedUntilFixed(record: String, reason: String, fixed: String) throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv")
        try """
        line_id,order_id,destination,currency,amount,note
        8-1,8,acct_A,usd,2.00,"=SUM(A1)"
        \(record)
        7-1,7,acct_A,usd,"3.00"0,x

        """.write(to: input, atomically: true, encoding: .utf8)
        func plan(_ file: URL, _ name: String) throws -> URL {
            let out = folder.appendingPathComponent(name)
            let outcome = try SettleProcess.run(["plan", file.path, "--out", out.path, "--as-of", "2026-11-29", "-q"])
            #expect(outcome.status == 65, "\(outcome.stderr)")
            return out
        }
        func rows(_ out: URL) -> [String] {
            SettleProcess.results(out).map { "\($0[0]) \($0[5]) \($0[6]) \($0[7]) \($0[8]) \($0[11])" }
        }
        let header = "line_id,order_id,destination,currency,amount,note,reason_code,reason,source"
        let first = try plan(input, "first")
        #expect(
            rows(first) == [
                "8-1 2.00 200 usd planned ", "9-1    rejected malformed_record", "7-1    rejected malformed_record",
            ])
        let errors = first.appendingPathComponent("errors.csv")
        #expect(
            SettleProcess.read(errors).split(separator: "\n").map(String.init) == [
                header,
                "\(record),malformed_record,\"\(reason)\",\(input.path):3",
                #"7-1,7,acct_A,usd,"3.00"0,x,malformed_record,text after a closing quote,"# + "\(input.path):4",
            ])

        // Fed back unchanged: the same line, rejected the same way, its row the same.
        let again = try plan(errors, "again")
        #expect(rows(again) == ["9-1    rejected malformed_record", "7-1    rejected malformed_record"])
        #expect(SettleProcess.results(again)[0][12] == reason)
        #expect(SettleProcess.results(again)[0][13] == "\(errors.path):2")
        let errorsAgain = SettleProcess.read(again.appendingPathComponent("errors.csv")).split(separator: "\n")
        #expect(errorsAgain.count == 3)
        #expect(
            errorsAgain.dropFirst().first.map(String.init)
                == "\(record),malformed_record,\"\(reason)\",\(errors.path):2")

        // Fixed by a person (the row's cells put right, the reason cells left as they are).
        let fixedFile = folder.appendingPathComponent("fixed.csv")
        try (header + "\n" + "\(fixed),malformed_record,\"\(reason)\",\(input.path):3\n").write(
            to: fixedFile, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("fixed")
        let outcome = try SettleProcess.run(["plan", fixedFile.path, "--out", out.path, "--as-of", "2026-11-29", "-q"])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(rows(out) == ["9-1 1250.00 125000 usd planned "])
    }

    /// A record that does not line up, in a file whose columns come in another order than
    /// errors.csv's (the first file's): each cell it has goes to its column, the cells past
    /// its file's columns follow the header's, the cells it lacks are left out; fed back
    /// unchanged, rejected `malformed_record` again (audit 15 F3).
    @Test func aMisalignedRecordOfASecondFileStaysMalformed() throws {
        let folder = SettleProcess.temporaryFolder()
        let first = folder.appendingPathComponent("a.csv")
        let second = folder.appendingPathComponent("b.csv")
        try "line_id,order_id,destination,currency,amount,note\n1-1,1,acct_A,usd,1.00,n\n".write(
            to: first, atomically: true, encoding: .utf8)
        try
            "order_id,line_id,amount,currency,destination\n2,2-1,1,250.00,usd,acct_B\n3,3-1,5.00,usd\n4,4-1,4.00,usd,acct_C\n"
            .write(to: second, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        #expect(
            try SettleProcess.run(["plan", first.path, second.path, "--out", out.path, "--as-of", "2026-11-29", "-q"])
                .status == 65)
        let errors = out.appendingPathComponent("errors.csv")
        #expect(
            SettleProcess.read(errors).split(separator: "\n").map(String.init) == [
                "line_id,order_id,destination,currency,amount,note,reason_code,reason,source",
                #"2-1,2,usd,250.00,1,,acct_B,malformed_record,"the record has 6 fields, the header 5","#
                    + "\(second.path):2",
                #"3-1,3,usd,5.00,,malformed_record,"the record has 4 fields, the header 5","# + "\(second.path):3",
            ])
        let again = folder.appendingPathComponent("again")
        #expect(
            try Self.fedBack(errors, into: again) == [
                "2-1 rejected malformed_record", "3-1 rejected malformed_record",
            ])
    }

    /// What the XML schema refused of a line has no CSV column: errors.csv keeps it in
    /// `schema_refused` (an attribute it does not allow with its value, else the schema's
    /// words), so the row fed back unchanged is rejected `schema_invalid` again, and a person
    /// who puts the value where it belongs and empties the cell gets the line they meant.
    /// Before, the row came back valid: a misspelled `transferOnn` moved its money at once
    /// instead of on 12-20 (audit 46 F2).
    @Test func anXMLLineTheSchemaRefusedStaysRefusedUntilFixed() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.xml")
        try """
        <orderExport xmlns="urn:settle:order-export:1">
          <order id="203" transferGroup="ORDER203" sourceTransaction="ch_1" chargeAmount="40.00" chargeCurrency="usd" chargeStatus="succeeded">
            <line id="203-1" destination="acct_a" amount="25.00" currency="usd"/>
            <line id="203-2" destination="acct_c" amount="5.00" currency="usd" colour="red"/>
            <line id="203-3" destination="acct_c" amount="1.00" currency="usd" transferOnn="2026-12-20"/>
          </order>
          <order id="204" transferGroup="ORDER204" sourceTransaction="ch_2" chargeAmount="9.00" chargeCurrency="usd" chargeStatus="succeeded">
            <line id="204-1" destination="acct_a" amount="2.00" currency="usd"><note/></line>
          </order>
        </orderExport>

        """.write(to: input, atomically: true, encoding: .utf8)
        let first = folder.appendingPathComponent("first")
        #expect(
            try SettleProcess.run(["plan", input.path, "--out", first.path, "--as-of", "2026-11-29", "-q"]).status == 65
        )
        let errors = first.appendingPathComponent("errors.csv")
        let table = SettleProcess.read(errors).split(separator: "\n").map { SettleProcess.csvFields(String($0)) }
        let column = try #require(table.first?.firstIndex(of: "schema_refused"))
        let refused = Dictionary(uniqueKeysWithValues: table.dropFirst().map { ($0[0], $0[column]) })
        #expect(
            refused == [
                "203-1": "", "203-2": #"colour="red""#, "203-3": #"transferOnn="2026-12-20""#,
                "204-1": "schema: Element 'note': This element is not expected. Expected is ( metadata ).",
            ], "\(table)")

        // Fed back unchanged: refused again, the group with them.
        #expect(
            try Self.fedBack(errors, into: folder.appendingPathComponent("again")) == [
                "203-1 rejected group_rejected", "203-2 rejected schema_invalid", "203-3 rejected schema_invalid",
                "204-1 rejected schema_invalid",
            ])

        // Put right: the date in transfer_on, the colour dropped, the cells emptied.
        let fixed = folder.appendingPathComponent("fixed.csv")
        let transferOn = try #require(table[0].firstIndex(of: "transfer_on"))
        let rows = table.map { row -> String in
            var row = row
            if row[0] == "203-3" { row[transferOn] = "2026-12-20" }
            if row[0] != "line_id" { row[column] = "" }
            return row.map {
                $0.contains(",") || $0.contains("\"") ? "\"" + $0.replacing("\"", with: "\"\"") + "\"" : $0
            }
            .joined(separator: ",")
        }
        try (rows.joined(separator: "\n") + "\n").write(to: fixed, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("fixed")
        let outcome = try SettleProcess.run(["plan", fixed.path, "--out", out.path, "--as-of", "2026-11-29", "-q"])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(
            SettleProcess.results(out).map { "\($0[0]) \($0[8]) \($0[11])" } == [
                "203-1 planned ", "203-2 planned ", "203-3 deferred scheduled", "204-1 planned ",
            ])
    }

    /// A line element an order system misnamed (`<Line>`) or put in another namespace is a line
    /// all the same: rejected `schema_invalid` with a row of its own (its order's other lines
    /// with it), and the run exits 65. Before, an order whose only line was such an element
    /// left no row at all and the plan exited 0 (audit 47 S1). An order's other stray child
    /// (`<summary total=…>`) only rejects the order's lines.
    @Test func aMisnamedXMLLineIsRejectedNotDropped() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.xml")
        try """
        <orderExport xmlns="urn:settle:order-export:1">
          <order id="o1" sourceTransaction="ch_1">
            <Line id="o1-1" destination="acct_a" amount="5.00" currency="usd"/>
          </order>
          <order id="o2" sourceTransaction="ch_2">
            <line xmlns="urn:settle:order-export:2" id="o2-1" destination="acct_a" amount="1.00" currency="usd"/>
            <line id="o2-2" destination="acct_a" amount="2.00" currency="usd"/>
          </order>
          <order id="o3" sourceTransaction="ch_3">
            <line id="o3-1" destination="acct_a" amount="3.00" currency="usd"/>
            <summary total="3.00"/>
          </order>
          <order id="o4" sourceTransaction="ch_4">
            <line id="o4-1" destination="acct_a" amount="4.00" currency="usd"/>
          </order>
        </orderExport>

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        let outcome = try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "-q"])
        #expect(outcome.status == 65, "\(outcome.stderr)")
        #expect(
            SettleProcess.results(out).map { "\($0[0]) \($0[5]) \($0[8]) \($0[11]) \($0[13])" } == [
                "o1-1 5.00 rejected schema_invalid \(input.path):3",
                "o2-1 1.00 rejected schema_invalid \(input.path):6",
                "o2-2 2.00 rejected schema_invalid \(input.path):7",
                "o3-1 3.00 rejected schema_invalid \(input.path):10",
                "o4-1 4.00 planned  \(input.path):14",
            ])
    }

    /// `errors` planned again into `again` (exit 65): each row's line id, status and reason code.
    static func fedBack(_ errors: URL, into again: URL) throws -> [String] {
        let outcome = try SettleProcess.run(["plan", errors.path, "--out", again.path, "--as-of", "2026-11-29", "-q"])
        #expect(outcome.status == 65, "\(outcome.stderr)")
        return SettleProcess.results(again).map { "\($0[0]) \($0[8]) \($0[11])" }
    }

    /// An extra column named twice in one file is two columns of errors.csv: the second's
    /// cell never overwrites the first's (before, `first` was lost), and a record too long
    /// for it is still kept whole and rejected again when fed back.
    @Test func anExtraColumnNamedTwiceKeepsBothCells() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv")
        try """
        line_id,order_id,destination,currency,amount,note,note
        1-1,1,acct_A,usd,1.001,first,second
        2-1,2,acct_A,usd,1,250.00,a,b

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        #expect(
            try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "-q"]).status == 65)
        let errors = out.appendingPathComponent("errors.csv")
        #expect(
            SettleProcess.read(errors).split(separator: "\n").map(String.init) == [
                "line_id,order_id,destination,currency,amount,note,note,reason_code,reason,source",
                "1-1,1,acct_A,usd,1.001,first,second,amount_invalid,amount '1.001' has more decimals than USD allows,"
                    + "\(input.path):2",
                #"2-1,2,acct_A,usd,1,250.00,a,b,malformed_record,"the record has 8 fields, the header 7","#
                    + "\(input.path):3",
            ])
        let again = folder.appendingPathComponent("again")
        #expect(
            try Self.fedBack(errors, into: again) == [
                "1-1 rejected amount_invalid", "2-1 rejected malformed_record",
            ])
        #expect(
            SettleProcess.read(again.appendingPathComponent("errors.csv")).split(separator: "\n").dropFirst().first
                .map(String.init)
                == "1-1,1,acct_A,usd,1.001,first,second,amount_invalid,amount '1.001' has more decimals than USD allows,"
                + "\(errors.path):2")
    }

    /// A later copy of a line_id whose kind is none settle knows shows no kind in
    /// results.csv, as the same line does when it is not a copy (audit 15 C1: `transfer`).
    @Test func aDuplicateWithAnInvalidKindShowsNoKind() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv")
        try """
        line_id,order_id,kind,amount,currency,destination
        1-1,1,transfer,4.40,usd,acct_A
        1-1,1,pay out,4.40,usd,acct_A
        2-1,2,pay out,4.40,usd,acct_A
        1-1,1,payout,4.40,usd,acct_A

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        #expect(
            try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "-q"]).status == 65)
        #expect(
            SettleProcess.results(out).map { "\($0[0]) \($0[3]) \($0[5]) \($0[8]) \($0[11])" } == [
                "1-1 transfer 4.40 planned ", "1-1  4.40 rejected duplicate_line_id", "2-1  4.40 rejected kind_invalid",
                "1-1 payout 4.40 rejected duplicate_line_id",
            ])
    }

    @Test func standardInputIsAnInput() throws {
        let out = SettleProcess.temporaryFolder()
        let csv = "line_id,order_id,amount,currency,destination\n1,1,1.00,usd,acct_a\n"
        let outcome = try SettleProcess.run(
            ["plan", "-", "--out", out.path, "--as-of", "2026-11-29"], stdin: Data(csv.utf8))
        #expect(outcome.status == 0)
        #expect(SettleProcess.results(out).first?[13] == "stdin:2")
    }

    @Test func exitStatusesForBadRuns() throws {
        let folder = SettleProcess.temporaryFolder()
        #expect(try SettleProcess.run(["plan", Self.sample, "--out", folder.path, "--bogus"]).status == 64)
        #expect(try SettleProcess.run(["plan", Self.sample]).status == 64)
        #expect(try SettleProcess.run(["frobnicate"]).status == 64)
        // An option the command has no use for, or a stray argument to status, is refused
        // (64), never ignored (audit 5 #9).
        let ledger = folder.appendingPathComponent("none.sqlite").path
        for arguments in [
            ["status", "--ledger", ledger, "stray-argument"], ["status", "--ledger", ledger, "--out", "somewhere"],
            ["apply", folder.path, "--as-of", "2031-01-01"], ["apply", folder.path, "--payouts", "per-line"],
            ["plan", Self.sample, "--out", folder.appendingPathComponent("j").path, "--json"],
            ["plan", Self.sample, "--out", folder.appendingPathComponent("l").path, "--line", "x"],
        ] {
            let refused = try SettleProcess.run(arguments)
            #expect(refused.status == 64, "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.contains("takes no"), "\(arguments): \(refused.stderr)")
        }
        // The same status, well formed, is refused for what it finds: no ledger there (78).
        #expect(try SettleProcess.run(["status", "--ledger", ledger]).status == 78)
        // http:// to a host that is not loopback is refused by every command, a plan that sends
        // nothing too (78), before any input is read or folder made.
        let remote = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("remote").path, "--api-base",
            "http://example.com",
        ])
        #expect(remote.status == 78, "\(remote.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("remote").path))
        // run without INPUT or --out is a bad command line (64) before any key or ledger is asked for.
        for arguments in [["run", "--out", folder.appendingPathComponent("r").path], ["run", Self.sample]] {
            let bad = try SettleProcess.run(arguments + ["--ledger", folder.appendingPathComponent("none").path])
            #expect(bad.status == 64, "\(arguments): \(bad.stderr)")
        }
        #expect(
            try SettleProcess.run(["plan", "/nonexistent.csv", "--out", folder.appendingPathComponent("o").path]).status
                == 66)
        let foreign = folder.appendingPathComponent("foreign")
        try FileManager.default.createDirectory(at: foreign, withIntermediateDirectories: true)
        try "x".write(to: foreign.appendingPathComponent("notes.txt"), atomically: true, encoding: .utf8)
        let refused = try SettleProcess.run(["plan", Self.sample, "--out", foreign.path])
        #expect(refused.status == 73)
        #expect(refused.stderr.contains("notes.txt"))
        // A file with settle's name in a folder settle never wrote (no .settle/) is someone
        // else's, and so is a file of another name in .settle/: refused, kept (audit 13: the
        // first was overwritten and the second deleted, with exit 0).
        let handMade = folder.appendingPathComponent("handmade")
        try FileManager.default.createDirectory(at: handMade, withIntermediateDirectories: true)
        try "mine\n".write(to: handMade.appendingPathComponent("results.csv"), atomically: true, encoding: .utf8)
        let overwrite = try SettleProcess.run(["plan", Self.sample, "--out", handMade.path])
        #expect(overwrite.status == 73, "\(overwrite.stderr)")
        #expect(SettleProcess.read(handMade.appendingPathComponent("results.csv")) == "mine\n")
        let planned = folder.appendingPathComponent("planned")
        #expect(try SettleProcess.run(["plan", Self.sample, "--out", planned.path, "-q"]).status == 65)
        let note = planned.appendingPathComponent(".settle/notes.txt")
        try "mine\n".write(to: note, atomically: true, encoding: .utf8)
        let cleared = try SettleProcess.run(["plan", Self.sample, "--out", planned.path])
        #expect(cleared.status == 73, "\(cleared.stderr)")
        #expect(cleared.stderr.contains(".settle/notes.txt"), "\(cleared.stderr)")
        #expect(SettleProcess.read(note) == "mine\n")
        // Without it, planning again into a settle-made folder is allowed.
        try FileManager.default.removeItem(at: note)
        #expect(try SettleProcess.run(["plan", Self.sample, "--out", planned.path, "-q"]).status == 65)
        let config = folder.appendingPathComponent("config.json")
        try #"{"platform_country": "US", "finacial_account": "fa_1"}"#.write(
            to: config, atomically: true, encoding: .utf8)
        let badConfig = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("c").path, "--config", config.path,
        ])
        #expect(badConfig.status == 78)
        #expect(badConfig.stderr.contains("finacial_account"))
        // A key is its option's name with `-` written `_`: the option's own spelling is no key
        // (audit 38 D3: `as-of` was taken as `as_of`).
        for key in ["as-of", "financial-account", "platform-country"] {
            try #"{"\#(key)": "US"}"#.write(to: config, atomically: true, encoding: .utf8)
            let dashed = try SettleProcess.run([
                "plan", Self.sample, "--out", folder.appendingPathComponent("d").path, "--config", config.path,
            ])
            #expect(dashed.status == 78, "\(key): \(dashed.stderr)")
            #expect(dashed.stderr.contains("\(key): unknown key"), "\(dashed.stderr)")
        }
        #expect(try SettleProcess.run(["--help"]).stdout.contains("75  some outcomes are not known yet"))
        #expect(try SettleProcess.run(["--version"]).status == 0)
    }

    /// A second process on the ledger is refused (75): `plan` and `validate` too, while a
    /// process that settles holds it (audit 14: plan wrote a whole folder from a snapshot taken
    /// mid-apply). Two plans may read it at once; the lock file is not made by a plan.
    @Test func planAndValidateAreRefusedWhileAnotherProcessSettlesOnTheLedger() throws {
        let folder = SettleProcess.temporaryFolder()
        let ledger = folder.appendingPathComponent("ledger.sqlite").path
        #expect(try SettleProcess.run(["ledger", "init", "--ledger", ledger]).status == 0)
        let plain = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("free").path, "--ledger", ledger, "-q",
        ])
        #expect(plain.status == 65, "\(plain.stderr)")
        // What `run` and `apply` hold while they settle: an exclusive flock on <ledger>.lock.
        let descriptor = open(ledger + ".lock", O_RDWR | O_CREAT, 0o600)
        try #require(descriptor >= 0)
        #expect(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
        let busy = try SettleProcess.run([
            "plan", Self.sample, "--out", folder.appendingPathComponent("busy").path, "--ledger", ledger,
        ])
        #expect(busy.status == 75, "\(busy.stderr)")
        #expect(busy.stderr.contains("in use by another settle process"), "\(busy.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("busy").path))
        #expect(try SettleProcess.run(["validate", Self.sample, "--ledger", ledger]).status == 75)
        // A reader's shared hold does not stop another reader.
        _ = flock(descriptor, LOCK_UN)
        #expect(flock(descriptor, LOCK_SH | LOCK_NB) == 0)
        #expect(try SettleProcess.run(["validate", Self.sample, "--ledger", ledger]).status == 65)
        close(descriptor)
    }

    /// `-q` and `-v` have config keys too (`q`, `v`: true or a count).
    @Test func configKeysOfQuietAndVerbose() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("one.csv")
        try "line_id,order_id,amount,currency,destination\nA1,9,5.00,usd,acct_s\n".write(
            to: input, atomically: true, encoding: .utf8)
        func plan(_ config: String, _ name: String) throws -> SettleProcess.Outcome {
            let file = folder.appendingPathComponent("\(name).json")
            try config.write(to: file, atomically: true, encoding: .utf8)
            return try SettleProcess.run([
                "plan", input.path, "--out", folder.appendingPathComponent(name).path, "--config", file.path,
                "--as-of", "2026-11-29",
            ])
        }
        let verbose = try plan(#"{"v": true}"#, "v")
        #expect(verbose.status == 0)
        #expect(verbose.stderr.contains("interned strings"), "\(verbose.stderr)")
        let plain = try plan(#"{}"#, "plain")
        #expect(plain.status == 0)
        #expect(!plain.stderr.contains("interned strings"))
        #expect(plain.stderr.contains("no ledger"))
        let quiet = try plan(#"{"q": 1}"#, "q")
        #expect(quiet.status == 0)
        #expect(quiet.stderr.contains("no ledger"), "a warning still shows at -q")
        #expect(try plan(#"{"q": "yes"}"#, "bad").status == 78)
    }

    /// charges.csv keeps one currency a row: a USD payout of an order paid by a EUR charge is
    /// not subtracted from that charge (before, its row read 90 − 2 − 10 − 5 "EUR").
    @Test func aChargeRowCountsOnlyMovesInItsCurrency() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("xe.csv")
        try """
        line_id,order_id,kind,amount,currency,destination,source_transaction,charge_amount,charge_currency,charge_status,charge_fee,recipient,payout_method
        XE-1,1,transfer,10.00,eur,acct_1A,ch_E,90.00,eur,succeeded,2.00,,
        XE-2,1,payout,5.00,usd,,,,,,,acct_1Drv,pm_ap_1

        """.write(to: input, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        let outcome = try SettleProcess.run([
            "plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "--financial-account", "fa_1", "-q",
        ])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let rows = SettleProcess.read(out.appendingPathComponent("charges.csv")).split(separator: "\n")
        #expect(rows.count == 2, "\(rows)")
        #expect(rows.last?.hasSuffix(",ch_E,eur,succeeded,90.00,2.00,0.00,10.00,0.00,0.00,78.00") == true, "\(rows)")
        let run = rows.last?.split(separator: ",").first.map(String.init)
        #expect(run?.hasPrefix("run_") == true && SettleProcess.countedIn(out) == ["ch_E,eur": run ?? ""])
    }

    @Test func configMapsHeaderNames() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("seller.csv")
        try "Line ID,order_id,amount,currency,Seller Account\nA1,9,5.00,usd,acct_s\n".write(
            to: input, atomically: true, encoding: .utf8)
        let config = folder.appendingPathComponent("config.json")
        try #"{"columns": {"line_id": "Line ID", "destination": "Seller Account"}, "payouts": "per-line"}"#
            .write(to: config, atomically: true, encoding: .utf8)
        let out = folder.appendingPathComponent("out")
        let outcome = try SettleProcess.run([
            "plan", input.path, "--out", out.path, "--config", config.path, "--as-of", "2026-11-29",
        ])
        #expect(outcome.status == 0)
        let row = try #require(SettleProcess.results(out).first)
        #expect(row[0] == "A1")
        #expect(row[4] == "acct_s")
        #expect(row[8] == "planned")
    }

    @Test func validateWritesNothingAndReports() throws {
        let folder = SettleProcess.temporaryFolder()
        let sample = SettleProcess.root.appendingPathComponent(Self.sample).path
        let outcome = try SettleProcess.run(["validate", sample, "--as-of", "2026-11-29"], in: folder)
        #expect(outcome.status == 65)
        #expect(outcome.stdout.contains("36 lines in 1 file(s)"))
        #expect(outcome.stdout.contains("reason over_allocated: 2"))
        // The count plan writes (samples/expected: 11 instructions), without forming their ids.
        #expect(outcome.stdout.contains("instructions that would be sent: 11\n"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    /// `validate` writes nothing, also beside the ledger it reads: SQLite's `-wal` and `-shm`,
    /// which a reader of a WAL ledger makes and cannot remove, are removed again (audit 56
    /// L1); `plan` and `status` leave the ledger's folder as they found it too. The ledger's
    /// bytes do not change.
    @Test func readingTheLedgerLeavesItsFolderAsItWas() throws {
        let ledger = try StatusCommandTests.ledger()
        let folder = URL(fileURLWithPath: ledger).deletingLastPathComponent()
        func listing() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() }
        let before = try listing()
        #expect(before == ["ledger.sqlite", "ledger.sqlite.lock", "ledger.sqlite.mark"])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: ledger))
        let sample = SettleProcess.root.appendingPathComponent(Self.sample).path
        let validate = try SettleProcess.run(["validate", sample, "--ledger", ledger, "--as-of", "2026-11-29"])
        #expect(validate.status == 65, "\(validate.stderr)")
        #expect(try listing() == before)
        let out = SettleProcess.temporaryFolder().appendingPathComponent("out").path
        let plan = try SettleProcess.run(["plan", sample, "--ledger", ledger, "--out", out, "--as-of", "2026-11-29"])
        #expect(plan.status == 65, "\(plan.stderr)")
        #expect(try listing() == before)
        let status = try SettleProcess.run(["status", "--ledger", ledger])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(try listing() == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: ledger)) == bytes)
    }

    /// Lines of one charge that state different fees: the charge keeps the largest, whatever
    /// the line order (docs/RULES.md; audit 57 F1: the first line's fee was kept, and
    /// charges.csv's fee and retained, and summary's charges_fees, followed the line order).
    @Test func aChargesFeeIsTheLargestStatedWhateverTheLineOrder() throws {
        var random = SplitMix64(seed: 0x57F1)
        let header =
            "line_id,order_id,kind,amount,currency,destination,source_transaction,charge_amount,charge_currency,charge_status,charge_fee\n"
        for round in 0..<8 {
            let fees = (0..<(2 + Int(random.next() % 3))).map { _ in Int(random.next() % 500) }
            var lines = fees.enumerated().map { index, fee in
                "F\(index),\(index),transfer,1.00,usd,acct_\(index),ch_f,100.00,usd,succeeded,"
                    + String(format: "%d.%02d", fee / 100, fee % 100) + "\n"
            }
            lines.shuffle(using: &random)
            let folder = SettleProcess.temporaryFolder()
            let input = folder.appendingPathComponent("fees.csv")
            try (header + lines.joined()).write(to: input, atomically: true, encoding: .utf8)
            let out = folder.appendingPathComponent("out")
            let plan = try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29", "-q"])
            #expect(plan.status == 0, "\(plan.stderr)")
            let largest = fees.max()!
            let row =
                SettleProcess.read(out.appendingPathComponent("charges.csv")).split(separator: "\n")
                .dropFirst().first?.split(separator: ",", omittingEmptySubsequences: false).map(String.init) ?? []
            let retained = 10000 - largest - 100 * fees.count
            #expect(
                Array(row.dropFirst().prefix(5)) + [row.last ?? ""] == [
                    "ch_f", "usd", "succeeded", "100.00", String(format: "%d.%02d", largest / 100, largest % 100),
                    String(format: "%d.%02d", retained / 100, retained % 100),
                ], "round \(round): fees \(fees), lines \(lines): \(row)")
        }
    }

    @Test func formulaCellsAreGuardedInResultsButNotInErrors() throws {
        let out = SettleProcess.temporaryFolder()
        try SettleProcess.run(["plan", Self.sample, "--out", out.path, "--as-of", "2026-11-29", "-q"])
        let results = SettleProcess.read(out.appendingPathComponent("results.csv"))
        #expect(results.contains("\"'=HYPERLINK(\"\"http://example.com\"\")\""))
        #expect(!results.contains(",=HYPERLINK"))
    }

    @Test(arguments: ["xxe.xml", "billion-laughs.xml"])
    func hostileXMLIsRejectedWholeWithoutExpansion(_ name: String) throws {
        let input = SettleProcess.root.appendingPathComponent("Tests/SettleReadTests/Fixtures/xml/\(name)")
        let out = SettleProcess.temporaryFolder()
        let outcome = try SettleProcess.run(["plan", input.path, "--out", out.path, "--as-of", "2026-11-29"])
        #expect(outcome.status == 65)
        #expect(outcome.stderr.contains("xml_doctype_forbidden"))
        #expect(SettleProcess.results(out).isEmpty)
        for file in ["results.csv", "errors.csv", "manifest.json"] {
            #expect(!SettleProcess.read(out.appendingPathComponent(file)).contains("root:x:0:0"))
        }
    }
}

/// A bug that traps ends the process with 70 (internal error), not with a signal status cron
/// cannot tell from a kill (audit 5: 132 after a crash).
@Suite struct InternalErrorTests {
    @Test func aTrapExitsSeventy() throws {
        let out = SettleProcess.temporaryFolder()
        let outcome = try SettleProcess.run(
            ["plan", PlanCommandTests.sample, "--out", out.path, "--as-of", "2026-11-29", "-q"],
            environment: ["SETTLE_CRASH_AT": "trap"])
        #expect(outcome.status == 70, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("settle: internal error"), "\(outcome.stderr)")
    }
}
