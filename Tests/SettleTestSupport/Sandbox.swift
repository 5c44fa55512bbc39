public import Foundation
import SettleHTTP

/// The Python Stripe sandbox in a child process, on a loopback port of its own.
/// The script is the repository's `sandbox/stripe_sandbox.py` (found from this file's path).
public final class Sandbox {
    public static let script: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
            let candidate = url.appendingPathComponent("sandbox/stripe_sandbox.py")
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate.path }
        }
        return "sandbox/stripe_sandbox.py"
    }()

    public let process = Process()
    public let base: String
    public let directory: URL
    private let client: HTTPClient

    public init(flags: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("settle-apply-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let portFile = directory.appendingPathComponent("port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", Self.script, "--port", "0", "--port-file", portFile.path, "--quiet", "--seed", "7"] + flags
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        var port: Int?
        while Date() < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8),
                let value = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                port = value
                break
            }
            usleep(20_000)
        }
        guard let port else {
            kill(process.processIdentifier, SIGKILL)
            throw SandboxError.didNotStart
        }
        base = "http://127.0.0.1:\(port)"
        client = try HTTPClient(configuration: .init(version: "test"))
    }

    public enum SandboxError: Error { case didNotStart, badAnswer(String) }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    public var ledgerPath: String { directory.appendingPathComponent("ledger.sqlite").path }

    @discardableResult
    public func control(_ method: String, _ path: String, json: String? = nil) throws -> Any {
        let request = HTTPRequest(
            method: method, url: base + path, headers: json == nil ? [] : [("Content-Type", "application/json")],
            body: Array((json ?? "").utf8))
        guard case .response(let response) = client.perform(request), response.status == 200 else {
            throw SandboxError.badAnswer("\(method) \(path)")
        }
        return try JSONSerialization.jsonObject(with: Data(response.body))
    }

    /// A raw Stripe call with the test key (to stage what a crashed run had sent).
    public func stripe(_ method: String, _ path: String, form: String, key: String) throws -> [String: Any] {
        let request = HTTPRequest(
            method: method, url: base + path,
            headers: [
                ("Authorization", "Bearer \(testKey)"), ("Content-Type", "application/x-www-form-urlencoded"),
                ("Idempotency-Key", key),
            ],
            body: Array(form.utf8))
        guard case .response(let response) = client.perform(request) else { throw SandboxError.badAnswer(path) }
        return (try JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
    }

    /// A raw v2 Stripe call with a JSON body (to stage what a crashed run had sent).
    public func stripeJSON(_ path: String, json: String, key: String) throws -> [String: Any] {
        let request = HTTPRequest(
            method: "POST", url: base + path,
            headers: [
                ("Authorization", "Bearer \(testKey)"), ("Content-Type", "application/json"), ("Idempotency-Key", key),
                ("Stripe-Version", "2026-11-18.preview"),
            ],
            body: Array(json.utf8))
        guard case .response(let response) = client.perform(request) else { throw SandboxError.badAnswer(path) }
        return (try JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
    }

    public func seed(_ fixtures: String = Sandbox.standardFixtures) throws {
        try control("POST", "/_sandbox/fixtures", json: fixtures)
    }

    public func configure(_ json: String) throws { try control("POST", "/_sandbox/config", json: json) }

    /// The committed effects, in order.
    public func effects() throws -> [[String: Any]] {
        let body = try control("GET", "/_sandbox/effects") as? [String: Any]
        return body?["data"] as? [[String: Any]] ?? []
    }

    /// How many effects carry each `settle_instruction`.
    public func effectCounts() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for effect in try effects() {
            if let id = (effect["metadata"] as? [String: Any])?["settle_instruction"] as? String {
                counts[id, default: 0] += 1
            }
        }
        return counts
    }

    public func requestCount() throws -> Int {
        ((try control("GET", "/_sandbox/stats") as? [String: Any])?["requests"] as? Int) ?? -1
    }

    public static let standardFixtures = """
        {"balances": {"usd": 100000000},
         "charges": [
           {"id": "ch_1", "amount": 100000000, "currency": "usd", "status": "succeeded", "transfer_group": "ORDER100"},
           {"id": "ch_pending", "amount": 5000, "currency": "usd", "status": "pending"},
           {"id": "ch_failed", "amount": 5000, "currency": "usd", "status": "failed"}],
         "accounts": [{"id": "acct_rest"}, {"id": "acct_closed", "transfers_disabled": true}],
         "financial_accounts": [{"id": "fa_1", "balance": {"usd": 100000000}}],
         "payout_methods": [
           {"id": "pm_ap_1", "recipient": "acct_drv"},
           {"id": "pm_ap_archived", "recipient": "acct_drv", "archived": true}]}
        """
}

public let testKey = "sk_test_51SECRETsettleKEY0123456789"
