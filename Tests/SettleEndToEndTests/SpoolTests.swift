import Foundation
import SettleTestSupport
import Testing

/// The plan folder's spool is the input's own bytes (issue 12): a gzip input stays gzip, also
/// from standard input, and the strings of errors.csv and deferred.csv, at plan and at apply,
/// and of the lines held for later runs still come from it byte for byte.
@Suite struct SpoolTests {
    typealias Setup = ApplyCommandTests.Setup

    enum Input: String, CaseIterable, Sendable {
        case plain, gzip, stdinGzip
    }

    /// BOM, CRLF, blank lines, a quoted newline and no line end at the end: a record's place in
    /// the input is not its place among the records.
    static let export =
        "\u{FEFF}" + DailyLoopTests.header.dropLast() + ",note\r\n"
        + "G1,1001,transfer,60.00,usd,ORDER1001,acct_rest,ch_card1,100.00,usd,succeeded,card,,,,plain note\r\n"
        + "\r\n"
        + "X1,2002,transfer,5.00,usdd,ORDER2002,acct_rest,ch_card3,20.00,usd,succeeded,card,,,,\"Café, \"\"quoted\"\"\nsecond\"\r\n"
        + "\r\n"
        + "S1,1003,transfer,25.00,usd,ORDER1003,acct_rest,ch_card2,30.00,usd,succeeded,card,,,2026-12-05,\"later, \"\"too\"\"\""

    static let rejectedRow =
        "X1,2002,transfer,5.00,usdd,ORDER2002,acct_rest,ch_card3,20.00,usd,succeeded,card,,,,\"Café, \"\"quoted\"\"\nsecond\","
    static let deferredRow =
        "S1,1003,transfer,25.00,usd,ORDER1003,acct_rest,ch_card2,30.00,usd,succeeded,card,,,2026-12-05,\"later, \"\"too\"\"\",scheduled,"

    static func gzip(_ data: Data) throws -> Data { try gzipped(data) }

    static func sha256(_ data: Data) throws -> String {
        let url = SettleProcess.temporaryFolder().appendingPathComponent("bytes")
        try data.write(to: url)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [url.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return String(text.prefix(64))
    }

    @Test(arguments: Input.allCases)
    func spoolIsTheInputAndCorrectionsAndHeldLinesKeepTheOriginalStrings(_ kind: Input) throws {
        let setup = try Setup()
        try setup.sandbox.seed(DailyLoopTests.fixtures)
        let plain = Data(Self.export.utf8)
        let bytes = kind == .plain ? plain : try Self.gzip(plain)
        let file = setup.folder.appendingPathComponent(kind == .plain ? "day1.csv" : "day1.csv.gz")
        if kind != .stdinGzip { try bytes.write(to: file) }
        var arguments = setup.arguments("run", [kind == .stdinGzip ? "-" : file.path], out: "day1")
        arguments[arguments.firstIndex(of: "--as-of")! + 1] = "2026-12-01"
        let first = try SettleProcess.run(
            arguments, stdin: kind == .stdinGzip ? bytes : nil, environment: ["STRIPE_API_KEY": testKey])
        #expect(first.status == 65, "\(first.stderr)")
        let day1 = setup.folder.appendingPathComponent("day1")
        let rows = Dictionary(setup.results("day1").map { ($0[0], $0) }, uniquingKeysWith: { a, _ in a })
        #expect(rows["G1"]?[8] == "settled")
        #expect(rows["X1"]?[8] == "rejected")
        #expect(rows["S1"]?[8] == "deferred")
        let name = kind == .stdinGzip ? "stdin" : file.path
        #expect(rows["S1"]?[13] == "\(name):7")

        // The spool is the input byte for byte, named for what it holds, sealed with the
        // input's own checksum.
        let ending = kind == .plain ? "csv" : "csv.gz"
        let spool = try Data(contentsOf: day1.appendingPathComponent(".settle/input-1.\(ending)"))
        #expect(spool == bytes)
        #expect(try Self.sha256(spool) == Self.sha256(bytes))
        let other = kind == .plain ? "csv.gz" : "csv"
        #expect(!FileManager.default.fileExists(atPath: day1.appendingPathComponent(".settle/input-1.\(other)").path))
        let manifest = SettleProcess.read(day1.appendingPathComponent("manifest.json"))
        #expect(manifest.contains("\".settle/input-1.\(ending)\""), "\(manifest)")
        #expect(manifest.contains("\"format\": \"\(ending)\""), "\(manifest)")
        #expect(manifest.contains(try Self.sha256(bytes)))

        // errors.csv and deferred.csv as apply rewrote them: the input's strings.
        let errors = SettleProcess.read(day1.appendingPathComponent("errors.csv"))
        #expect(errors.contains(Self.rejectedRow), "\(errors)")
        #expect(errors.contains(",\(name):4\n"), "\(errors)")
        let deferred = SettleProcess.read(day1.appendingPathComponent("deferred.csv"))
        #expect(deferred.contains(Self.deferredRow), "\(deferred)")

        // Day 2: the held line comes back from the ledger at its file:line and settles.
        let next = setup.folder.appendingPathComponent("day2.csv")
        try
            (DailyLoopTests.header
            + "E1,2001,transfer,10.00,usd,ORDER2001,acct_rest,ch_card3,20.00,usd,succeeded,card,,,\n")
            .write(to: next, atomically: true, encoding: .utf8)
        var second = setup.arguments("run", [next.path], out: "day2")
        second[second.firstIndex(of: "--as-of")! + 1] = "2026-12-05"
        let outcome = try SettleProcess.run(second, environment: ["STRIPE_API_KEY": testKey])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let day2 = Dictionary(setup.results("day2").map { ($0[0], $0) }, uniquingKeysWith: { a, _ in a })
        #expect(day2["E1"]?[8] == "settled")
        #expect(day2["S1"]?[8] == "settled", "\(day2["S1"] ?? [])")
        #expect(day2["S1"]?[13] == "\(name):7")
        let effects = try setup.sandbox.effects()
        let transferred = effects.filter { $0["type"] as? String == "transfer" }.reduce(0) {
            $0 + (($1["amount"] as? Int) ?? 0)
        }
        #expect(transferred == 6000 + 2500 + 1000)
    }

    /// A file rejected before its end is described whole in the manifest (its size and SHA-256
    /// are the file's), while its spool keeps the part read, sealed with that part's checksum,
    /// and the folder applies (audit 60 F3: the manifest gave the part read, 1,310,720 bytes of
    /// a 3 MB file, as the file's size and checksum).
    @Test(arguments: [false, true])
    func aFileRejectedBeforeItsEndIsDescribedWhole(gzip: Bool) throws {
        let setup = try Setup()
        let good = try ApplyCommandTests.export(orders: 1, in: setup.folder)
        // A header of more columns than settle reads (rejected once 1 MiB of it is read),
        // then more: random letters, so the gzip is about as large as its text.
        var random = SplitMix64(seed: 0x60F3)
        let letters = Array("abcdefghijklmnopqrstuvwxyz".utf8)
        func text(_ count: Int) -> [UInt8] { (0..<count).map { _ in letters[Int(random.next() % 26)] } }
        var wide: [UInt8] = []
        for column in 0..<2000 {
            if column > 0 { wide.append(UInt8(ascii: ",")) }
            wide += text(600)
        }
        for _ in 0..<3000 { wide += [0x0A] + text(600) }
        let bytes = gzip ? try Self.gzip(Data(wide)) : Data(wide)
        let file = setup.folder.appendingPathComponent(gzip ? "wide.csv.gz" : "wide.csv")
        try bytes.write(to: file)
        let plan = try SettleProcess.run(setup.arguments("plan", [good.path, file.path], out: "p"))
        #expect(plan.status == 65, "\(plan.stderr)")
        let folder = setup.folder.appendingPathComponent("p")
        let data = try #require(
            FileManager.default.contents(atPath: folder.appendingPathComponent("manifest.json").path))
        let manifest = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let inputs = try #require(manifest["inputs"] as? [[String: Any]])
        #expect(inputs[1]["reason_code"] as? String == "header_invalid", "\(inputs[1])")
        #expect(inputs[1]["bytes"] as? Int == bytes.count, "\(inputs[1])")
        #expect(inputs[1]["sha256"] as? String == (try Self.sha256(bytes)))
        let name = ".settle/input-2.\(gzip ? "csv.gz" : "csv")"
        let spool = try Data(contentsOf: folder.appendingPathComponent(name))
        #expect(spool.count < bytes.count && spool == bytes.prefix(spool.count), "\(spool.count)")
        let spools = try #require(manifest["spool"] as? [String: [String: Any]])
        #expect(spools[name]?["sha256"] as? String == (try Self.sha256(spool)), "\(spools)")
        let applied = try setup.apply("p")
        #expect(applied.status == 65, "\(applied.stderr)")
        #expect(setup.results("p").allSatisfy { $0[8] == "settled" }, "\(setup.results("p"))")
    }

    /// `plan` alone (no apply): errors.csv and deferred.csv come from the gzip spool too.
    @Test func planOfAGzipInputWritesCorrectionsFromTheSpool() throws {
        let folder = SettleProcess.temporaryFolder()
        let input = folder.appendingPathComponent("in.csv.gz")
        let bytes = try Self.gzip(Data(Self.export.utf8))
        try bytes.write(to: input)
        let out = folder.appendingPathComponent("plan")
        let outcome = try SettleProcess.run([
            "plan", input.path, "--out", out.path, "--as-of", "2026-12-01", "--progress", "off",
        ])
        #expect(outcome.status == 65, "\(outcome.stderr)")
        #expect(try Data(contentsOf: out.appendingPathComponent(".settle/input-1.csv.gz")) == bytes)
        #expect(SettleProcess.read(out.appendingPathComponent("errors.csv")).contains(Self.rejectedRow))
        #expect(SettleProcess.read(out.appendingPathComponent("deferred.csv")).contains(Self.deferredRow))
        // The spool offsets are places in the inflated input (the BOM counts).
        // lines.idx: 20 bytes a line, the offset a little-endian u64 at byte 8.
        let index = [UInt8](try Data(contentsOf: out.appendingPathComponent(".settle/lines.idx")))
        let offsets = stride(from: 0, to: index.count, by: 20).map { start in
            (0..<8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64(index[start + 8 + $1]) }
        }
        let offset = Array(Self.export.utf8).firstIndex(of: 0x0A)! + 1
        #expect(offsets.contains(UInt64(offset)), "\(offsets)")
    }
}
