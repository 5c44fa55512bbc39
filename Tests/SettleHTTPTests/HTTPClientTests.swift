import Foundation
import SettleHTTP
import Testing

@Suite("HTTPClient over loopback")
struct HTTPClientTests {
    func decodeEcho(_ outcome: HTTPOutcome) throws -> (HTTPResponse, Echo) {
        guard case .response(let response) = outcome else {
            Issue.record("expected a response, got \(outcome)")
            throw CancellationError()
        }
        return (response, try JSONDecoder().decode(Echo.self, from: Data(response.body)))
    }

    @Test func getSendsHeadersAndUserAgentAndLowercasesResponseHeaders() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "9.8.7"))
        let outcome = client.perform(
            HTTPRequest(method: "GET", url: server.base + "/echo?x=1", headers: [("X-Custom", "abc")]))
        let (response, echo) = try decodeEcho(outcome)
        #expect(response.status == 200)
        #expect(echo.method == "GET")
        #expect(echo.path == "/echo?x=1")
        #expect(echo.headers["user-agent"] == "settle/9.8.7")
        #expect(echo.headers["x-custom"] == "abc")
        #expect(echo.headers["expect"] == nil)
        #expect(response.header("Request-Id") == "req_test_1")
        #expect(response.headers.contains { $0.name == "x-mixed-case" && $0.value == "Value" })
        #expect(response.headers.allSatisfy { $0.name == $0.name.lowercased() })
    }

    /// A server that echoes the credential (here every header, as a misbehaving proxy or an
    /// "Invalid API Key provided: sk_…" error would) never gets it past the client: the
    /// answer arrives with it replaced, in the body as in the request body it echoes, so no
    /// message built from an answer can carry it into a file.
    @Test func anEchoedCredentialIsRedactedFromTheAnswer() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1"))
        let secret = "sk_test_echo_me_0123456789"
        let outcome = client.perform(
            HTTPRequest(
                method: "POST", url: server.base + "/status/401",
                headers: [("Authorization", "Bearer \(secret)")], body: Array("key=\(secret)&again=\(secret)".utf8)))
        let (response, echo) = try decodeEcho(outcome)
        #expect(response.status == 401)
        #expect(!String(decoding: response.body, as: UTF8.self).contains(secret))
        #expect(echo.headers["authorization"] == "Bearer [redacted]")
        #expect(echo.body == "key=[redacted]&again=[redacted]")
    }

    @Test func postSendsTheBodyBytesExactly() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1"))
        let body = Array("amount=7000&metadata%5Bk%5D=v%20w".utf8) + Array(repeating: UInt8(ascii: "x"), count: 5000)
        let outcome = client.perform(
            HTTPRequest(
                method: "POST", url: server.base + "/echo",
                headers: [("Content-Type", "application/x-www-form-urlencoded")], body: body))
        let (response, echo) = try decodeEcho(outcome)
        #expect(response.status == 200)
        #expect(echo.method == "POST")
        #expect(Array(echo.body.utf8) == body)
        #expect(echo.headers["content-length"] == "\(body.count)")
    }

    @Test func sequentialRequestsReuseTheConnection() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1"))
        let (_, first) = try decodeEcho(client.perform(HTTPRequest(method: "GET", url: server.base + "/a")))
        let (_, second) = try decodeEcho(
            client.perform(HTTPRequest(method: "POST", url: server.base + "/b", body: [1, 2])))
        let (_, third) = try decodeEcho(client.perform(HTTPRequest(method: "GET", url: server.base + "/c")))
        // GETs reuse the connection; a POST goes on a fresh one (HTTPRequest.freshConnection:
        // libcurl never re-sends it behind settle's back).
        #expect(first.client_port != second.client_port)
        #expect(first.client_port == third.client_port)
    }

    @Test func errorStatusesAreResponsesNotTransportErrors() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1"))
        let (response, _) = try decodeEcho(
            client.perform(HTTPRequest(method: "POST", url: server.base + "/status/503")))
        #expect(response.status == 503)
        let (notFound, _) = try decodeEcho(client.perform(HTTPRequest(method: "GET", url: server.base + "/status/404")))
        #expect(notFound.status == 404)
    }

    @Test func totalTimeoutIsReportedAsTimeout() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1", totalTimeout: .milliseconds(300)))
        let started = ContinuousClock.now
        let outcome = client.perform(HTTPRequest(method: "GET", url: server.base + "/slow?ms=3000"))
        guard case .transportError(let kind, _) = outcome else {
            Issue.record("expected a timeout, got \(outcome)")
            return
        }
        #expect(kind == .timeout)
        #expect(started.duration(to: .now) < .seconds(2))
    }

    @Test func refusedConnectionIsNotSent() throws {
        // Bind a port, then close it, so nothing listens there.
        let server = try LoopbackServer()
        let base = server.base
        server.stop()
        let client = try HTTPClient(configuration: .init(version: "1"))
        let outcome = client.perform(HTTPRequest(method: "GET", url: base + "/echo"))
        guard case .transportError(let kind, let message) = outcome else {
            Issue.record("expected a transport error, got \(outcome)")
            return
        }
        // A refused connection never carried the request: the caller may treat it as not sent.
        #expect(kind == .notSent)
        #expect(!outcome.mayHaveReachedServer)
        #expect(!message.isEmpty)
    }

    @Test func runKeepsSeveralTransfersInFlight() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1", maxInFlight: 6))
        let source = ListSource(
            (0..<12).map {
                HTTPRequest(method: "GET", url: server.base + "/slow?ms=300", tag: $0)
            })
        let started = ContinuousClock.now
        client.run(source: source)
        let elapsed = started.duration(to: .now)
        #expect(source.outcomes.count == 12)
        #expect(Set(source.outcomes.keys) == Set(0..<12))
        // 12 × 300 ms one by one would be 3.6 s; six at a time is about 0.6 s.
        #expect(elapsed < .milliseconds(3000))
        var peak = 0
        for (_, outcome) in source.outcomes {
            let (response, echo) = try decodeEcho(outcome)
            #expect(response.status == 200)
            peak = max(peak, echo.peak)
        }
        #expect(peak > 1)
        #expect(peak <= 6)
    }

    @Test func waitStepDelaysTheNextRequest() throws {
        let server = try LoopbackServer()
        let client = try HTTPClient(configuration: .init(version: "1"))
        let source = ListSource([HTTPRequest(method: "GET", url: server.base + "/a", tag: 1)])
        source.holdUntil = ContinuousClock.now + .milliseconds(300)
        let started = ContinuousClock.now
        client.run(source: source)
        #expect(source.outcomes.count == 1)
        #expect(started.duration(to: .now) >= .milliseconds(300))
    }

    @Test func requestDescriptionNeverShowsHeaderValues() {
        let request = HTTPRequest(
            method: "POST", url: "https://api.stripe.com/v1/transfers",
            headers: [("Authorization", "Bearer sk_test_SECRET123")])
        #expect(!"\(request)".contains("SECRET123"))
        #expect(!String(reflecting: request).contains("SECRET123"))
        var dumped = ""
        dump(request, to: &dumped)
        #expect(!dumped.contains("SECRET123"))
        #expect("\(request)".contains("Authorization"))
    }
}

/// Hands out a fixed list of requests and collects their outcomes by tag.
final class ListSource: RequestSource {
    var pending: [HTTPRequest]
    var outcomes: [Int: HTTPOutcome] = [:]
    var holdUntil: ContinuousClock.Instant?
    private var inFlight = 0

    init(_ requests: [HTTPRequest]) { pending = requests.reversed() }

    func next(now: ContinuousClock.Instant) -> RequestSourceStep {
        if let holdUntil, now < holdUntil { return .wait(until: holdUntil) }
        guard let request = pending.popLast() else { return inFlight > 0 ? .idle : .finished }
        inFlight += 1
        return .request(request)
    }

    func completed(_ request: HTTPRequest, _ outcome: HTTPOutcome) {
        inFlight -= 1
        outcomes[request.tag] = outcome
    }
}
