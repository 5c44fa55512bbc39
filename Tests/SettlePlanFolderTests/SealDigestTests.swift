import CDirectIO
import Foundation
import SettleDigest
import SettleTestSupport
import Testing

@testable import SettlePlanFolder

/// The digest apply compares with a file's seal is the file's own, whatever its size, read
/// past the page cache where the file system allows it, and it is the digest of the file
/// apply opened, not of one put in its place by name afterwards.
@Suite struct SealDigestTests {
    static func sha256(_ bytes: [UInt8]) -> String {
        let hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.hexDigest()
    }

    static func bytes(_ count: Int, _ random: inout SplitMix64) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    @Test func theDigestIsTheFilesWhateverItsSize() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var random = SplitMix64(seed: 31)
        let sizes = [
            0, 1, 4095, 4096, 4097, (4 << 20) - 1, 4 << 20, (4 << 20) + 1, (9 << 20) + 123,
            Int(random.next() % (6 << 20)),
        ]
        for size in sizes {
            let content = Self.bytes(size, &random)
            let path = folder + "/file-\(size)"
            try Data(content).write(to: URL(fileURLWithPath: path))
            let stream = try #require(InstructionStream(path: path))
            #expect(stream.sha256() == Self.sha256(content), "\(size) bytes")
            #expect(PlanChecks.fileSHA256(path) == Self.sha256(content), "\(size) bytes")
        }
    }

    /// Where the file system reads past the page cache, that is how the digest was read.
    @Test func theDigestIsReadPastThePageCacheWhereItCanBe() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var random = SplitMix64(seed: 32)
        let content = Self.bytes((5 << 20) + 3, &random)
        let path = folder + "/file"
        try Data(content).write(to: URL(fileURLWithPath: path))
        let probe = open(path, O_RDONLY | settle_o_direct())
        defer { if probe >= 0 { close(probe) } }
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        switch DirectReads.sha256(of: descriptor) {
        case .read(let digest): #expect(digest == Self.sha256(content))
        case .unavailable: #expect(probe < 0, "this file system takes O_DIRECT, the digest did not")
        }
    }

    @Test func aFilePutInPlaceByNameAfterOpeningIsNotTheOneHashed() throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var random = SplitMix64(seed: 33)
        let original = Self.bytes((4 << 20) + 77, &random)
        let other = Self.bytes((4 << 20) + 77, &random)
        let path = folder + "/instructions.jsonl"
        try Data(original).write(to: URL(fileURLWithPath: path))
        let stream = try #require(InstructionStream(path: path))
        try Data(other).write(to: URL(fileURLWithPath: folder + "/other"))
        #expect(rename(folder + "/other", path) == 0)
        #expect(stream.sha256() == Self.sha256(original))
    }
}
