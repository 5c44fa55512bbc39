import Glibc

/// Writes to standard error without Foundation.
func printError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

/// Prints the message and exits with 64 (usage), the only failure settle-gen has.
@inline(never) func fatal(_ message: String) -> Never {
    printError("settle-gen: \(message)\n")
    exit(64)
}
