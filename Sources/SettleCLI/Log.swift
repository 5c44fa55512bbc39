import Foundation

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
            Log.appendJSONString(message, &out)
            for (key, value) in fields {
                out.append(UInt8(ascii: ","))
                Log.appendJSONString(key, &out)
                out.append(UInt8(ascii: ":"))
                Log.appendJSONString(value, &out)
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

    static func appendJSONString(_ text: String, _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out.append(contentsOf: "\\\"".utf8)
            case "\\": out.append(contentsOf: "\\\\".utf8)
            case "\n": out.append(contentsOf: "\\n".utf8)
            case _ where scalar.value < 0x20: out.append(contentsOf: String(format: "\\u%04x", scalar.value).utf8)
            default: out.append(contentsOf: String(scalar).utf8)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
