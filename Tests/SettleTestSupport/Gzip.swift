public import Foundation

/// Bytes gzipped by the system's `gzip -c -n` (a real encoder, not settle's own): what an
/// order system's export looks like. Throws when gzip cannot be run or exits non-zero.
public func gzipped(_ data: Data) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
    process.arguments = ["-c", "-n"]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(data)
    try input.fileHandleForWriting.close()
    let compressed = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw CocoaError(
            .fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "gzip exited \(process.terminationStatus)"])
    }
    return compressed
}
