import Foundation
import Testing

/// Runs the built `settle` binary as a user would, and captures what it says.
struct SettleProcess {
    struct Outcome {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The package root (tests run the binary on the checked-in samples).
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no Package.swift above \(#filePath)")
    }()

    /// The `settle` executable next to the test bundle.
    static let binary: URL = {
        var folder = Bundle.module.bundleURL.deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = folder.appendingPathComponent("settle")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            folder.deleteLastPathComponent()
        }
        fatalError("settle binary not found near \(Bundle.module.bundleURL.path)")
    }()

    /// Runs SQL on a ledger through Python's sqlite3 (a trigger that fails one write, as a full
    /// disk would, at exactly the step a test aims at).
    static func onLedger(_ ledger: String, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", "import sqlite3,sys\nsqlite3.connect(sys.argv[1]).executescript(sys.argv[2])", ledger, sql,
        ]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0)
    }

    @discardableResult
    static func run(
        _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
        in directory: URL = root
    ) throws -> Outcome {
        let process = prepare(arguments, environment: environment, in: directory)
        // Output goes to files, so a chatty child never blocks on a full pipe.
        let scratch = temporaryFolder()
        let outURL = scratch.appendingPathComponent("stdout")
        let errURL = scratch.appendingPathComponent("stderr")
        FileManager.default.createFile(atPath: outURL.path, contents: nil)
        FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        try out.close()
        try err.close()
        let outData = (try? Data(contentsOf: outURL)) ?? Data()
        let errData = (try? Data(contentsOf: errURL)) ?? Data()
        try? FileManager.default.removeItem(at: scratch)
        return Outcome(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }

    /// Starts the binary without waiting (its output goes to /dev/null): for kill tests.
    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> Process {
        let process = prepare(arguments, environment: environment, in: root)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// The binary with its arguments, folder and environment (no inherited STRIPE_API_KEY).
    static func prepare(_ arguments: [String], environment: [String: String], in directory: URL) -> Process {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.currentDirectoryURL = directory
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "STRIPE_API_KEY")
        env.merge(environment) { $1 }
        process.environment = env
        return process
    }

    /// A fresh temporary folder.
    static func temporaryFolder() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("settle-e2e-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The run that counts each charge of a plan folder, by `charge,currency`: its sealed
    /// `.settle/charges-counted.csv`.
    static func countedIn(_ folder: URL) -> [String: String] {
        var found: [String: String] = [:]
        for row in read(folder.appendingPathComponent(".settle/charges-counted.csv")).split(separator: "\n").dropFirst()
        {
            let cells = row.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            if cells.count == 3 { found[cells[0] + "," + cells[1]] = cells[2] }
        }
        return found
    }

    static func read(_ url: URL) -> String {
        (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }

    /// results.csv as line_id → row fields (first occurrence wins).
    static func results(_ folder: URL) -> [[String]] {
        read(folder.appendingPathComponent("results.csv")).split(separator: "\n").dropFirst().map {
            csvFields(String($0))
        }
    }

    /// Splits one CSV line (no embedded newlines) into fields.
    static func csvFields(_ line: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var inQuotes = false
        var iterator = Array(line).makeIterator()
        var pending: Character? = nil
        while let character = pending ?? iterator.next() {
            pending = nil
            if inQuotes {
                if character == "\"" {
                    if let next = iterator.next() {
                        if next == "\"" { current.append("\"") } else { inQuotes = false; pending = next }
                    } else {
                        inQuotes = false
                    }
                } else {
                    current.append(character)
                }
            } else if character == "," {
                fields.append(current)
                current = ""
            } else if character == "\"" {
                inQuotes = true
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }
}
