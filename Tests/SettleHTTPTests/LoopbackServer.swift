import Foundation

/// A small HTTP/1.1 server on 127.0.0.1 in a child Python process: real sockets, real
/// keep-alive, no mocks.
final class LoopbackServer {
    let process = Process()
    let port: Int
    let directory: URL

    static let script = #"""
        import json, sys, time, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlparse, parse_qs

        active = 0
        peak = 0
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args): pass
            def handle_any(self):
                global active, peak
                with lock:
                    active += 1
                    peak = max(peak, active)
                try:
                    url = urlparse(self.path)
                    query = parse_qs(url.query)
                    length = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(length) if length else b""
                    if url.path == "/slow":
                        time.sleep(int(query.get("ms", ["100"])[0]) / 1000)
                    status = 200
                    if url.path.startswith("/status/"):
                        status = int(url.path.split("/")[2])
                    with lock:
                        current_peak = peak
                    payload = json.dumps({
                        "method": self.command, "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body.decode("utf-8", "replace"),
                        "client_port": self.client_address[1], "peak": current_peak,
                    }).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Request-Id", "req_test_1")
                    self.send_header("X-Mixed-Case", "  Value  ")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                finally:
                    with lock:
                        active -= 1
            do_GET = do_POST = do_DELETE = handle_any

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        import os
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        server.serve_forever()
        """#

    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("settle-http-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let scriptURL = directory.appendingPathComponent("server.py")
        try Self.script.write(to: scriptURL, atomically: true, encoding: .utf8)
        let portFile = directory.appendingPathComponent("port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", scriptURL.path, portFile.path]
        try process.run()
        let deadline = Date().addingTimeInterval(15)
        var found: Int?
        while Date() < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let value = Int(text) {
                found = value
                break
            }
            usleep(20_000)
        }
        guard let found else {
            kill(process.processIdentifier, SIGKILL)
            throw CocoaError(.fileReadNoSuchFile)
        }
        port = found
    }

    var base: String { "http://127.0.0.1:\(port)" }

    /// SIGKILL: a child of the test runner may inherit a mask that blocks SIGTERM.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// The JSON the server echoes back.
struct Echo: Decodable {
    let method: String
    let path: String
    let headers: [String: String]
    let body: String
    let client_port: Int
    let peak: Int
}
