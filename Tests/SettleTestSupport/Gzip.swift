public import Foundation

/// Bytes gzipped by the system's `gzip -c -n` (a real encoder, not settle's own): what an
/// order system's export looks like. Throws when gzip cannot be run or exits non-zero.
public func gzipped(_ data: Data) throws -> Data {
    // The input from a file, not a pipe: gzip writes its output while it reads, and a pipe
    // written whole before the output is read deadlocks past the pipe's 64 KiB.
    let input = FileManager.default.temporaryDirectory.appendingPathComponent("settle-gzip-\(UUID().uuidString)")
    try data.write(to: input)
    defer { try? FileManager.default.removeItem(at: input) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
    process.arguments = ["-c", "-n", input.path]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let compressed = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw CocoaError(
            .fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "gzip exited \(process.terminationStatus)"])
    }
    return compressed
}
