import Foundation
import SettleDigest
import SettleTestSupport
import Testing

@testable import SettleWrite

/// An output file holds exactly the rows written to it, and its digest is theirs, whatever
/// the sizes, whether its bytes skip the page cache (O_DIRECT, whole aligned blocks, the
/// tail through the cache) or the file system refuses that, at open or at a write.
@Suite struct OutputFileTests {
    /// Writes `rows` through an ``OutputFile`` and returns what the file holds, the digest
    /// commit gave, and whether it wrote directly just before commit.
    static func write(
        _ rows: [[UInt8]], in folder: String, directBlocks: Int = DirectWrites.capacity
    ) throws -> (bytes: [UInt8], sha256: String, direct: Bool) {
        let path = folder + "/out-\(UInt64.random(in: 0 ... .max)).csv"
        let file = try OutputFile(path: path, directBlocks: directBlocks)
        for row in rows {
            file.append(bytes: row)
            file.endRow()
        }
        let direct = file.writesDirect
        let sha256 = try file.commit()
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        try FileManager.default.removeItem(atPath: path)
        return (bytes, sha256, direct)
    }

    /// A fresh folder under the temporary directory (removed by the test).
    static func folder() -> String {
        let path = NSTemporaryDirectory() + "settle-output-file-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        let hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.hexDigest()
    }

    /// Whether this folder's file system takes O_DIRECT (what settle asks of it, asked here
    /// on a file of the test's own).
    static func takesDirectWrites(_ folder: String) -> Bool {
        let path = folder + "/probe"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer {
            close(descriptor)
            unlink(path)
        }
        return DirectWrites(descriptor: descriptor) != nil
    }

    /// Rows whose total lands on and beside every block edge that matters: the 4 KiB block,
    /// the 1 MiB row buffer and the 4 MiB direct write.
    static let totals = [
        0, 1, 4095, 4096, 4097, (1 << 20) - 1, 1 << 20, (4 << 20) - 1, 4 << 20, (4 << 20) + 1,
        (8 << 20) + 4096, (9 << 20) + 123,
    ]

    static func rows(total: Int, random: inout SplitMix64) -> [[UInt8]] {
        var rows: [[UInt8]] = []
        var left = total
        while left > 0 {
            // Mostly short rows, now and then one longer than the row buffer.
            let size = min(
                left, random.next() % 16 == 0 ? Int(random.next() % (3 << 20)) + 1 : Int(random.next() % 300) + 1)
            rows.append((0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            left -= size
        }
        return rows
    }

    @Test func everyByteLandsWhateverTheSizeWhenItSkipsThePageCache() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var random = SplitMix64(seed: 12)
        let direct = Self.takesDirectWrites(folder)
        for total in Self.totals {
            let rows = Self.rows(total: total, random: &random)
            let expected = rows.flatMap { $0 }
            let written = try Self.write(rows, in: folder)
            let same = written.bytes == expected  // not inside #expect: it would print every byte
            #expect(same, "total \(total): \(written.bytes.count) bytes written, \(expected.count) expected")
            #expect(written.sha256 == Self.sha256(expected), "total \(total)")
            #expect(written.direct == direct, "total \(total)")
        }
    }

    /// The kernel refuses a direct write whose length is not whole blocks (EINVAL): the file
    /// goes on through the page cache from that byte on, and nothing is lost or doubled.
    @Test func aRefusedDirectWriteGoesOnThroughThePageCache() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        guard Self.takesDirectWrites(folder) else { return }
        var random = SplitMix64(seed: 13)
        for total in [(1 << 20) + 100, (3 << 20) + 7, (9 << 20) + 4096] {
            let rows = Self.rows(total: total, random: &random)
            let expected = rows.flatMap { $0 }
            let written = try Self.write(rows, in: folder, directBlocks: (1 << 20) + 100)
            let same = written.bytes == expected  // not inside #expect: it would print every byte
            #expect(same, "total \(total): \(written.bytes.count) bytes written, \(expected.count) expected")
            #expect(written.sha256 == Self.sha256(expected), "total \(total)")
            #expect(!written.direct, "total \(total): the refusal turned direct writes off")
        }
    }

    /// Without O_DIRECT (a file system that refuses it at open; here no direct block size
    /// at all) the file goes through the page cache, with the same bytes.
    @Test func aFileWithoutDirectWritesGetsTheSameBytes() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var random = SplitMix64(seed: 14)
        let rows = Self.rows(total: (5 << 20) + 17, random: &random)
        let expected = rows.flatMap { $0 }
        let written = try Self.write(rows, in: folder, directBlocks: 0)
        let same = written.bytes == expected
        #expect(same, "\(written.bytes.count) bytes written, \(expected.count) expected")
        #expect(written.sha256 == Self.sha256(expected))
        #expect(!written.direct)
    }
}
