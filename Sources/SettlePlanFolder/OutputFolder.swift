import Foundation
import Glibc
public import SettleCore
public import SettleRead
import SettleWrite

/// The output folder: created when missing (0700), refused when it holds files settle did
/// not write, locked for the whole command.
///
/// The lock is an exclusive, non-blocking `flock` on `DIR/.settle/lock`, taken by `plan`
/// (``prepare(_:)``), `apply` and `run` (``lock(_:)``) and held until the process ends, so
/// two settle processes never write one folder at the same time (the second exits 75).
public enum OutputFolder {
    public static let ownFiles: Set<String> = [
        "results.csv", "errors.csv", "deferred.csv", "instructions.jsonl", "summary.csv", "manifest.json", ".settle",
        "report.html", "charges.csv",
    ]

    /// The outcome files an apply rewrites; a re-apply keeps the earlier ones as
    /// `<name>.<attempt>` (results.csv is always the latest).
    public static let outcomeFiles = [
        "results.csv", "errors.csv", "deferred.csv", "summary.csv", "charges.csv", "report.html",
    ]

    /// Whether a name is an earlier attempt's outcome file (`results.csv.2`).
    public static func isKeptOutcome(_ name: String) -> Bool {
        guard let dot = name.lastIndex(of: "."), Int(name[name.index(after: dot)...]) != nil else { return false }
        return outcomeFiles.contains(String(name[..<dot]))
    }
    public static let spoolFolder = ".settle"
    public static let lockName = "lock"

    /// Whether `path` could take a new plan, without touching it: a file, a folder holding
    /// files settle did not write, or one holding an applied run is refused (73), as
    /// ``prepare(_:)`` would. `run` asks before it asks Stripe anything, so an unusable `--out`
    /// is 73 whatever the network (audit 32 N3: a new ledger's probe without a connection
    /// said 75 first).
    public static func checkUsable(_ path: String) throws(SettleError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            // To be made: the nearest folder above it that exists must take it (audit 33 O10:
            // `--out afile/day1` got as far as Stripe, 75, before the folder failed, 73).
            var above = OutputFolder.parent(of: path)
            while stat(above, &info) != 0, above != "/", above != "." { above = OutputFolder.parent(of: above) }
            guard stat(above, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, access(above, W_OK | X_OK) == 0 else {
                throw SettleError(
                    .folderUnwritable, "cannot create --out \(path): \(above) is not a folder settle can write in")
            }
            return
        }
        try refuseAsPlanFolder(path, info)
    }

    /// The folder a path is in: "." for a bare name, "/" for one at the root. Foundation's
    /// `deletingLastPathComponent` traps on a one-character path (audit 35 C2: `run --out a`
    /// exited 70).
    static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// An existing `--out` that cannot take a new plan: a file, a folder holding files settle
    /// did not write, or one holding an applied run (73).
    private static func refuseAsPlanFolder(_ path: String, _ info: stat) throws(SettleError) {
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw SettleError(.folderUnwritable, "--out \(path) is a file, not a folder")
        }
        try refuseForeign(path)
        try refuseApplied(path)
    }

    /// Makes `path` ready for a new plan: creates it when missing, refuses it when it holds
    /// files settle did not write, locks it, and removes what an earlier plan or a crashed
    /// run left there that the new plan does not replace (its spool, seal and manifest).
    public static func prepare(_ path: String) throws(SettleError) {
        var info = stat()
        if stat(path, &info) == 0 {
            try refuseAsPlanFolder(path, info)
            try makePrivateFolder(path, what: "--out \(path)", following: true)
        } else {
            try create(path)
        }
        try lock(path)
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? [] where name != lockName {
            let entry = (spool as NSString).appendingPathComponent(name)
            guard unlink(entry) == 0 || errno == ENOENT else {
                throw SettleError(
                    .folderUnwritable, "cannot remove \(entry) of an earlier plan: \(String(cString: strerror(errno)))")
            }
        }
        // A manifest of an earlier plan must not stand beside this plan's files.
        let manifest = (path as NSString).appendingPathComponent("manifest.json")
        guard unlink(manifest) == 0 || errno == ENOENT else {
            throw SettleError(
                .folderUnwritable, "cannot remove \(manifest) of an earlier plan: \(String(cString: strerror(errno)))")
        }
        guard access(path, W_OK) == 0 else { throw SettleError(.folderUnwritable, "cannot write in --out \(path)") }
    }

    /// The mark an apply leaves in the folder before its first request (`.settle/applying`,
    /// the run id of the apply: the plan's, `.aN` for a re-apply; the plan's for every apply
    /// before 2026-12-07): a run killed mid-apply has no rewritten manifest yet, and its
    /// folder is still that run's record.
    public static let applyingMark = "applying"
    /// ``FileSet``'s journal, in `.settle`.
    static let publishingJournal = (FileSet.journalName as NSString).lastPathComponent

    /// Marks the folder as applied from now on (written and synced before anything is sent).
    public static func markApplying(_ path: String, runID: String) throws(SettleError) {
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        do throws(WriteFailure) {
            let file = try OutputFile(path: (spool as NSString).appendingPathComponent(applyingMark))
            file.append(runID + "\n")
            file.endRow()
            _ = try file.commit()
        } catch {
            throw SettleError(.folderUnwritable, "cannot write \(error.path): \(error.message); nothing was sent")
        }
    }

    /// The run id ``markApplying(_:runID:)`` left in the folder; nil when no apply began.
    static func applyingRun(_ path: String) -> String? {
        let mark = ((path as NSString).appendingPathComponent(spoolFolder) as NSString).appendingPathComponent(
            applyingMark)
        guard let bytes = FileManager.default.contents(atPath: mark) else { return nil }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    }

    /// ``holdsAppliedRun(_:manifest:)`` with the folder's own manifest.json, if any.
    public static func holdsAppliedRun(_ path: String) -> Bool {
        holdsAppliedRun(path, manifest: manifestJSON(path))
    }

    /// The folder's manifest.json as JSON; nil when there is none or it does not parse.
    static func manifestJSON(_ path: String) -> JSON? {
        FileManager.default.contents(atPath: (path as NSString).appendingPathComponent("manifest.json")).flatMap {
            try? JSON.parse($0)
        }
    }

    /// Whether an apply of the folder's plan began (``applyingMark``, written before the first
    /// request) or ended (the manifest's `apply`): requests of it may have reached Stripe.
    public static func holdsAppliedRun(_ path: String, manifest: JSON?) -> Bool {
        let mark = ((path as NSString).appendingPathComponent(spoolFolder) as NSString).appendingPathComponent(
            applyingMark)
        return manifest?["apply"] != nil || FileManager.default.fileExists(atPath: mark)
    }

    /// A folder whose plan was applied, or began to be, holds a run's record: planning into
    /// it again would overwrite it (exit 73; re-applying the same plan is allowed).
    private static func refuseApplied(_ path: String) throws(SettleError) {
        let json = manifestJSON(path)
        guard holdsAppliedRun(path, manifest: json) else { return }
        let run = json?["run_id"]?.stringValue.map { " (run \($0))" } ?? ""
        throw SettleError(
            .folderRefused,
            "--out \(path) holds a run that was applied\(run): its files are that run's record. "
                + "Plan into a new folder (for example \(path)-2); to retry what failed, re-apply it: settle apply \(path)"
        )
    }

    /// Takes the folder's lock for the rest of the process (a second call for the same
    /// folder is a no-op), then removes temporary files a crashed settle left behind.
    /// Another settle process holding it: exit 75, naming the folder.
    public static func lock(_ path: String) throws(SettleError) {
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        try makePrivateFolder(spool, what: "--out \(path)")
        let key = (spool as NSString).resolvingSymlinksInPath
        try Held.shared.lock(key) { () throws(SettleError) -> Int32 in try takeLock(path) }
        // An apply stopped among the renames of its rewrite: its new files go into place
        // before anything reads the folder or clears temporary files (audit 31 K1).
        try finishPublishing(path)
        removeLeftovers(path)
    }

    /// Puts into place the files of an apply stopped among the renames of its rewrite, if the
    /// folder holds its journal, under the folder's lock for only that long: the daily `run`
    /// finishes an earlier folder this way before it reads it, as `settle apply` of the
    /// folder would. Another settle process holding the folder: exit 75 (`folderBusy`), and
    /// that process finishes it.
    /// A folder with no journal that no process holds loses the temporary files a stopped run
    /// left in it (a kill or a signal while it wrote its plan or its rewrite): the next `plan`
    /// or `apply` into it would remove them, and a run killed before its apply is taken over
    /// by a run into another folder (audit 65 F5: they stayed beside finance's files).
    public static func finishStoppedRewrite(_ path: String) throws(SettleError) {
        guard access((path as NSString).appendingPathComponent(FileSet.journalName), F_OK) == 0 else {
            var info = stat()
            guard stat((path as NSString).appendingPathComponent(spoolFolder), &info) == 0,
                let fd = try? takeLock(path)
            else { return }
            removeLeftovers(path)
            close(fd)
            return
        }
        let fd = try takeLock(path)
        defer { close(fd) }
        try finishPublishing(path)
        removeLeftovers(path)
    }

    private static func finishPublishing(_ path: String) throws(SettleError) {
        do throws(WriteFailure) {
            try FileSet.finish(folder: path)
        } catch {
            throw SettleError(
                .folderUnwritable,
                "cannot finish putting the files of an apply stopped in \(path) into place: \(error.path): \(error.message)"
            )
        }
    }

    /// The folder's lock file, opened and locked (`flock`, exclusive, not waiting).
    private static func takeLock(_ path: String) throws(SettleError) -> Int32 {
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        let lockPath = (spool as NSString).appendingPathComponent(lockName)
        let fd = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw SettleError(
                .folderUnwritable, "cannot create the lock \(lockPath): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            close(fd)
            if busy {
                throw SettleError(
                    .folderBusy, "--out \(path) is in use by another settle process; run again when it has finished")
            }
            throw SettleError(.folderUnwritable, "cannot lock \(lockPath): \(reason)")
        }
        return fd
    }

    /// The spool file of input `file`, relative to the folder: its ending says what it holds
    /// (`input-1.csv.gz`: the gzip input itself).
    public static func spoolName(file: Int, format: SpoolFormat) -> String {
        "\(spoolFolder)/input-\(file + 1).\(format.fileExtension)"
    }
    // MARK: -

    /// The folder's entries that are not settle's: unknown names, settle's names of the
    /// wrong type, and `*.tmp-*` files that are not settle's temporary names.
    private static func refuseForeign(_ path: String) throws(SettleError) {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        var foreign = entries.filter { name in
            if let base = OutputFile.baseOfTemporaryName(name) { return !ownFiles.contains(base) }
            if isKeptOutcome(name) { return false }
            guard ownFiles.contains(name) else { return true }
            var info = stat()
            guard lstat((path as NSString).appendingPathComponent(name), &info) == 0 else { return false }
            return info.st_mode & S_IFMT != (name == spoolFolder ? S_IFDIR : S_IFREG)
        }
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        if entries.contains(spoolFolder) {
            // What settle keeps in .settle/ is all it may hold: a plan clears it.
            let kept = (try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? []
            foreign += kept.filter { !isOwnSpoolEntry($0) }.map { spoolFolder + "/" + $0 }
        } else if !entries.isEmpty {
            // Every folder settle wrote has .settle/ (its lock is there from the start): files
            // with settle's names without it are someone else's (audit 13: a hand-made
            // results.csv was overwritten).
            foreign = entries
        }
        if !foreign.isEmpty {
            throw SettleError(
                .folderRefused,
                "--out \(path) holds files settle did not write (\(foreign.sorted().prefix(3).joined(separator: ", "))); choose an empty or settle-made folder"
            )
        }
    }

    /// Whether a name in `.settle/` is one settle writes there (or its temporary name).
    static func isOwnSpoolEntry(_ name: String) -> Bool {
        let name = OutputFile.baseOfTemporaryName(name) ?? name
        if [
            lockName, applyingMark, "manifest.sha256", "lines.idx", "netted.jsonl", "charges-counted.csv",
            "charge-intents.csv",
            publishingJournal,
        ].contains(name) {
            return true
        }
        let numbered: [(prefix: String, endings: [String])] = [
            ("input-", SpoolFormat.allCases.map { "." + $0.fileExtension }), ("held-", [".csv"]),
        ]
        for (prefix, endings) in numbered where name.hasPrefix(prefix) {
            let rest = name.dropFirst(prefix.count)
            for ending in endings where rest.hasSuffix(ending) {
                let number = rest.dropLast(ending.count)
                if !number.isEmpty, number.allSatisfy({ $0.isASCII && $0.isNumber }) { return true }
            }
        }
        return false
    }

    private static func create(_ path: String) throws(SettleError) {
        // The missing folders above it are made 0700 too, whatever the umask (audit 14: with
        // umask 000 they were 0777, and another user could swap the plan folder).
        var prefix = path.hasPrefix("/") ? "/" : ""
        let parts = path.split(separator: "/").map(String.init)
        for part in parts.dropLast() {
            prefix += part
            if mkdir(prefix, 0o700) != 0, errno != EEXIST {
                throw SettleError(.folderUnwritable, "cannot create --out \(path): \(String(cString: strerror(errno)))")
            }
            prefix += "/"
        }
        try makePrivateFolder(path, what: "--out \(path)", following: true)
    }

    /// Creates a folder 0700 (whatever the umask), or makes an existing one 0700.
    /// `following`: the path may be a symlink to a folder (the user's `--out`, not `.settle`).
    private static func makePrivateFolder(_ path: String, what: String, following: Bool = false)
        throws(SettleError)
    {
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw SettleError(.folderUnwritable, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard (following ? stat(path, &info) : lstat(path, &info)) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw SettleError(.folderUnwritable, "\(what): \(path) is not a folder")
        }
        if info.st_mode & 0o7777 != 0o700, chmod(path, 0o700) != 0, errno != EPERM {
            throw SettleError(.folderUnwritable, "cannot make \(path) private: \(String(cString: strerror(errno)))")
        }
    }

    /// Removes settle's own temporary files (`<name>.tmp-<16 hex digits>`) that a crashed
    /// run left in the folder or its `.settle`; only ever called under the lock.
    private static func removeLeftovers(_ path: String) {
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        for (folder, isSpool) in [(path, false), (spool, true)] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
                guard let base = OutputFile.baseOfTemporaryName(name), isSpool || ownFiles.contains(base) else {
                    continue
                }
                let entry = (folder as NSString).appendingPathComponent(name)
                var info = stat()
                if lstat(entry, &info) == 0, info.st_mode & S_IFMT == S_IFREG { unlink(entry) }
            }
        }
    }

    /// The folder locks this process holds (descriptors stay open until it exits).
    private final class Held: @unchecked Sendable {
        static let shared = Held()
        private let mutex = NSLock()
        private var descriptors: [String: Int32] = [:]

        func lock(_ key: String, _ take: () throws(SettleError) -> Int32) throws(SettleError) {
            mutex.lock()
            defer { mutex.unlock() }
            guard descriptors[key] == nil else { return }
            descriptors[key] = try take()
        }
    }
}
