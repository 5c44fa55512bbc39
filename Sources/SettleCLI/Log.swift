import Foundation
import SettleWrite

/// Log lines on standard error, as text or JSON, never carrying a secret.
final class Log: @unchecked Sendable {
    enum Level: Int { case debug = 0, info = 1, warning = 2, error = 3 }
    let json: Bool
    let threshold: Level

    init(format: String, verbosity: Int) {
        json = format == "json"
        threshold = verbosity > 0 ? .debug : verbosity < 0 ? .warning : .info
    }

    func callAsFunction(_ level: Level, _ message: String, _ fields: [(String, String)] = []) {
        guard level.rawValue >= threshold.rawValue else { return }
        let name = ["debug", "info", "warning", "error"][level.rawValue]
        var line: String
        if json {
            var out: [UInt8] = []
            out.append(contentsOf: "{\"time\":\"\(Log.timestamp())\",\"level\":\"\(name)\",\"message\":".utf8)
            JSON.appendString(message, to: &out)
            for (key, value) in fields {
                out.append(UInt8(ascii: ","))
                JSON.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                JSON.appendString(value, to: &out)
            }
            out.append(contentsOf: "}\n".utf8)
            line = String(decoding: out, as: UTF8.self)
        } else {
            line = "settle: \(level == .info ? "" : name + ": ")\(message)"
            for (key, value) in fields { line += " \(key)=\(value)" }
            line += "\n"
        }
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date())
    }

}
