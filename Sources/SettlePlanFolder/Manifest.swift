import Foundation
public import SettleCore
public import SettleWrite

/// `manifest.json` and its seal: the manifest lists every file of the folder with its
/// SHA-256 and rows; its own SHA-256 sits beside the spool, so `apply` can tell that
/// neither the manifest nor what it lists changed since settle wrote them.
public enum Manifest {
    /// The manifest's seal, relative to the folder.
    public static let sealName = ".settle/manifest.sha256"

    /// Writes manifest.json (pretty, two-space indent) and then its seal (given a set, put in
    /// place with the set's other files).
    public static func write(_ manifest: JSON, folder: String, into set: FileSet? = nil) throws(WriteFailure) {
        let file = try OutputFile(path: (folder as NSString).appendingPathComponent("manifest.json"))
        file.withBuffer { manifest.appendPretty(to: &$0) }
        file.append(0x0A)
        file.endRow()
        let sha = try file.commit(into: set)
        let seal = try OutputFile(path: (folder as NSString).appendingPathComponent(sealName))
        seal.append(sha + "\n")
        seal.endRow()
        _ = try seal.commit(into: set)
    }
}
