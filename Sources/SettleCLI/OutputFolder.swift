import Foundation

/// The output folder: created when missing, refused when it holds files settle did not write.
enum OutputFolder {
    static let ownFiles: Set<String> = [
        "results.csv", "errors.csv", "deferred.csv", "instructions.jsonl", "summary.csv", "manifest.json", ".settle",
        "report.html",
    ]
    static let spoolFolder = ".settle"

    static func prepare(_ path: String) throws(CommandFailure) {
        let manager = FileManager.default
        var isFolder: ObjCBool = false
        if manager.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else {
                throw CommandFailure(.outputUnwritable, "--out \(path) is a file, not a folder")
            }
            let entries = (try? manager.contentsOfDirectory(atPath: path)) ?? []
            let foreign = entries.filter { !ownFiles.contains($0) && !$0.contains(".tmp-") }
            if !foreign.isEmpty {
                throw CommandFailure(
                    .outputUnwritable,
                    "--out \(path) holds files settle did not write (\(foreign.sorted().prefix(3).joined(separator: ", "))); choose an empty or settle-made folder"
                )
            }
        } else {
            do {
                try manager.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw CommandFailure(.outputUnwritable, "cannot create --out \(path): \(error.localizedDescription)")
            }
        }
        let spool = (path as NSString).appendingPathComponent(spoolFolder)
        try? manager.removeItem(atPath: spool)
        do {
            try manager.createDirectory(atPath: spool, withIntermediateDirectories: true)
        } catch {
            throw CommandFailure(.outputUnwritable, "cannot write in --out \(path): \(error.localizedDescription)")
        }
        guard access(path, W_OK) == 0 else { throw CommandFailure(.outputUnwritable, "cannot write in --out \(path)") }
    }

    static func spoolPath(_ folder: String, file: Int) -> String {
        "\(folder)/\(spoolFolder)/input-\(file + 1).csv"
    }
}
