import Foundation
import Glibc

/// Files that replace a folder's files together, all or none: each is written whole and
/// synced under its temporary name (``add(_:)``), then a journal naming every one of them
/// is written, then they are renamed into place and the journal is removed (``publish(between:)``).
///
/// A process stopped among the renames (a SIGTERM from a deploy or `timeout`, a kill, a
/// power cut) leaves the journal, and ``finish(folder:)``, which the next settle to lock the
/// folder runs before anything reads it, does the rest of the renames: the folder holds
/// all the old files or all the new ones, never a mix (audit 31 K1: apply's rewrite stopped
/// between results.csv and manifest.json broke the folder's seal for good).
///
/// The journal (``journalName``) has one line per file, `<temporary name>` TAB `<name>`,
/// both relative to the folder; every file is in the folder or in its `.settle`.
///
/// Files may be added from two threads (the plan writes on both cores); they are renamed in
/// the order they were added, so the one added last (the manifest's seal) goes last.
public final class FileSet: @unchecked Sendable {
    public static let journalName = ".settle/publishing"
    public let folder: String
    private var files: [(file: OutputFile, name: String)] = []
    private let mutex = NSLock()

    public init(folder: String) { self.folder = folder }

    /// Syncs `file` under its temporary name, to be renamed with the others; returns its SHA-256.
    public func add(_ file: OutputFile) throws(WriteFailure) -> String {
        guard let name = FileSet.name(of: file.path, in: folder) else {
            throw WriteFailure(path: file.path, message: "not a file of the folder \(folder)")
        }
        let sha256 = try file.prepare()
        mutex.lock()
        files.append((file, name))
        mutex.unlock()
        return sha256
    }

    /// Removes the temporary files of the set, when it will not be published (another file of
    /// it failed): none is left behind, also when the process exits right after.
    public func discard() {
        mutex.lock()
        defer { mutex.unlock() }
        for (file, _) in files where !file.journaled { file.discard() }
        files = []
    }

    /// Writes the journal, renames every file into place (calling `between` after each
    /// rename but the last: the tests' crash point), and removes the journal.
    public func publish(between: () -> Void = {}) throws(WriteFailure) {
        let journal = try OutputFile(path: path(FileSet.journalName))
        for (file, name) in files {
            journal.append(FileSet.relative(file.temporaryName, as: name) + "\t" + name + "\n")
            journal.endRow()
        }
        try journal.commit()
        for (file, _) in files { file.journaled = true }
        for (index, (file, _)) in files.enumerated() {
            try file.publish()
            if index < files.count - 1 { between() }
        }
        try FileSet.removeJournal(folder)
    }

    /// Does the renames a stopped ``publish(between:)`` did not, then removes its journal.
    /// Nothing to do without a journal. Call under the folder's lock, before its temporary
    /// files are cleared and before anything reads it.
    public static func finish(folder: String) throws(WriteFailure) {
        let journalPath = (folder as NSString).appendingPathComponent(journalName)
        guard let data = FileManager.default.contents(atPath: journalPath) else { return }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, let name = valid(parts[1]),
                OutputFile.baseOfTemporaryName(parts[0]) == name, valid(parts[0]) != nil
            else {
                throw WriteFailure(path: journalPath, message: "not a journal settle wrote (\(line))")
            }
            let temporary = (folder as NSString).appendingPathComponent(parts[0])
            let target = (folder as NSString).appendingPathComponent(name)
            // Gone: renamed before the stop (its new content is in place).
            guard access(temporary, F_OK) == 0 else { continue }
            guard rename(temporary, target) == 0 else {
                throw WriteFailure(path: target, message: "rename: " + String(cString: strerror(errno)))
            }
            try OutputFile.syncFolder(of: target)
        }
        try removeJournal(folder)
    }

    private func path(_ name: String) -> String { (folder as NSString).appendingPathComponent(name) }

    private static func removeJournal(_ folder: String) throws(WriteFailure) {
        let journal = (folder as NSString).appendingPathComponent(journalName)
        guard unlink(journal) == 0 || errno == ENOENT else {
            throw WriteFailure(path: journal, message: "unlink: " + String(cString: strerror(errno)))
        }
        try OutputFile.syncFolder(of: journal)
    }

    /// A file's name relative to the folder: `results.csv`, or `.settle/manifest.sha256`.
    static func name(of path: String, in folder: String) -> String? {
        let parts = path.split(separator: "/").map(String.init)
        guard let base = parts.last else { return nil }
        let name = parts.count >= 2 && parts[parts.count - 2] == ".settle" ? ".settle/" + base : base
        guard
            (folder as NSString).appendingPathComponent(name) == (path as NSString).standardizingPath
                || (folder as NSString).appendingPathComponent(name) == path
        else { return nil }
        return name
    }

    /// The temporary name's path relative to the folder, beside `name`.
    static func relative(_ temporary: String, as name: String) -> String {
        let base = (temporary as NSString).lastPathComponent
        return name.hasPrefix(".settle/") ? ".settle/" + base : base
    }

    /// `name` when it is a plain name, or one in `.settle/`: never anything outside the folder.
    static func valid(_ name: String) -> String? {
        let plain = name.hasPrefix(".settle/") ? String(name.dropFirst(".settle/".count)) : name
        guard !plain.isEmpty, !plain.contains("/"), plain != ".", plain != "..", !plain.contains("\0") else {
            return nil
        }
        return name
    }
}
