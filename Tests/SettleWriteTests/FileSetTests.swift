import Foundation
import Testing

@testable import SettleWrite

/// Files put in place together: all of them, the journal gone; after a stop among the
/// renames, ``FileSet/finish(folder:)`` does the rest; a journal naming anything outside
/// the folder is refused.
@Suite struct FileSetTests {
    static func folder() -> String {
        let path = NSTemporaryDirectory() + "settle-file-set-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path + "/.settle", withIntermediateDirectories: true)
        return path
    }

    static func read(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func everyFileGoesInPlaceAndTheJournalGoes() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for name in ["a.csv", ".settle/seal"] {
            try "old \(name)\n".write(toFile: folder + "/" + name, atomically: false, encoding: .utf8)
        }
        let set = FileSet(folder: folder)
        var betweens = 0
        for name in ["a.csv", "b.csv", ".settle/seal"] {
            let file = try OutputFile(path: (folder as NSString).appendingPathComponent(name))
            file.append("new \(name)\n")
            file.endRow()
            _ = try file.commit(into: set)
            #expect(Self.read(folder + "/" + name) != "new \(name)\n", "\(name) is not in place before publish")
        }
        try set.publish(between: { betweens += 1 })
        #expect(betweens == 2)
        for name in ["a.csv", "b.csv", ".settle/seal"] { #expect(Self.read(folder + "/" + name) == "new \(name)\n") }
        #expect(!FileManager.default.fileExists(atPath: folder + "/" + FileSet.journalName))
        let left =
            try FileManager.default.contentsOfDirectory(atPath: folder)
            + FileManager.default.contentsOfDirectory(atPath: folder + "/.settle")
        #expect(!left.contains { $0.contains(".tmp-") }, "\(left)")
    }

    /// A stop after the first rename: the journal and two temporary files are left.
    @Test func finishDoesTheRenamesAStoppedPublishDidNot() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let names = ["a.csv", "b.csv", ".settle/seal"]
        var journal = ""
        for (index, name) in names.enumerated() {
            try "old \(name)\n".write(toFile: folder + "/" + name, atomically: false, encoding: .utf8)
            let temporary = name + ".tmp-00000000000000a\(index)"
            if index == 0 {
                try "new \(name)\n".write(toFile: folder + "/" + name, atomically: false, encoding: .utf8)
            } else {
                try "new \(name)\n".write(toFile: folder + "/" + temporary, atomically: false, encoding: .utf8)
            }
            journal += temporary + "\t" + name + "\n"
        }
        try journal.write(toFile: folder + "/" + FileSet.journalName, atomically: false, encoding: .utf8)
        try FileSet.finish(folder: folder)
        for name in names { #expect(Self.read(folder + "/" + name) == "new \(name)\n") }
        #expect(!FileManager.default.fileExists(atPath: folder + "/" + FileSet.journalName))
        try FileSet.finish(folder: folder)  // nothing to do
    }

    @Test(arguments: [
        "../x.tmp-0000000000000000\t../x", "a.csv.tmp-0000000000000000\tb.csv", "a/b.tmp-0000000000000000\ta/b",
    ])
    func aJournalNamingAnythingElseIsRefused(_ line: String) throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try (line + "\n").write(toFile: folder + "/" + FileSet.journalName, atomically: false, encoding: .utf8)
        #expect(throws: WriteFailure.self) { try FileSet.finish(folder: folder) }
        #expect(FileManager.default.fileExists(atPath: folder + "/" + FileSet.journalName), "kept for a person to see")
    }
}
