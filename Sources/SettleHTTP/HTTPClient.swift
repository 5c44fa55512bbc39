import CCurl
import Glibc

/// An HTTP client on libcurl's multi interface.
///
/// One thread owns the client: create it, call ``run(source:)`` and ``perform(_:)``, and
/// let it go on the same thread. Connections are kept alive between requests and between
/// runs; TLS peer and host verification are always on. Header values are never logged.
public final class HTTPClient {
    /// Timeouts, concurrency and identification.
    public struct Configuration: Sendable {
        /// The version sent in `User-Agent: settle/<version>`.
        public var version: String
        /// Most time to establish a connection (TCP + TLS).
        public var connectTimeout: Duration
        /// Most time for one whole request.
        public var totalTimeout: Duration
        /// Most requests in flight at once.
        public var maxInFlight: Int
        /// Largest response body accepted; a larger one fails the transfer.
        public var maxResponseBytes: Int

        public init(
            version: String, connectTimeout: Duration = .seconds(10),
            totalTimeout: Duration = .seconds(60), maxInFlight: Int = 16,
            maxResponseBytes: Int = 16 << 20
        ) {
            self.version = version
            self.connectTimeout = connectTimeout
            self.totalTimeout = totalTimeout
            self.maxInFlight = max(1, maxInFlight)
            self.maxResponseBytes = maxResponseBytes
        }
    }

    /// The error raised when libcurl cannot even be set up.
    public struct SetupError: Error, CustomStringConvertible {
        public let description: String
    }

    public let configuration: Configuration
    private let multi: UnsafeMutableRawPointer
    private var idleHandles: [UnsafeMutableRawPointer] = []

    /// `curl_global_init` is not thread-safe: run it exactly once, before any handle.
    private static let globalInit: Int = Int(settle_curl_global_init_all().rawValue)

    public init(configuration: Configuration) throws {
        guard Self.globalInit == Int(CURLE_OK.rawValue) else {
            throw SetupError(description: "curl_global_init failed (\(Self.globalInit))")
        }
        guard let multi = curl_multi_init() else {
            throw SetupError(description: "curl_multi_init failed")
        }
        self.multi = multi
        self.configuration = configuration
        // Keep enough connections alive for every slot.
        _ = settle_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, configuration.maxInFlight + 4)
    }

    deinit {
        for handle in idleHandles { curl_easy_cleanup(handle) }
        curl_multi_cleanup(multi)
    }

    /// Runs requests from `source` until it is finished and nothing is in flight,
    /// keeping up to `maxInFlight` transfers going.
    public func run(source: any RequestSource) {
        var inFlight: [UnsafeMutableRawPointer: Transfer] = [:]
        while true {
            // Fill the free slots.
            var wakeAt: ContinuousClock.Instant?
            fill: while inFlight.count < configuration.maxInFlight {
                switch source.next(now: .now) {
                case .request(let request):
                    let transfer = start(request)
                    if let handle = transfer.handle {
                        inFlight[handle] = transfer
                    } else {
                        source.completed(request, .transportError(kind: .other, message: transfer.setupError))
                    }
                case .wait(let until):
                    wakeAt = until
                    break fill
                case .idle, .finished:
                    break fill
                }
            }
            if inFlight.isEmpty {
                guard let wakeAt else { return }
                let delay = ContinuousClock.now.duration(to: wakeAt)
                if delay > .zero { sleep(for: delay) }
                continue
            }

            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            var completedAny = false
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard settle_curl_msg_is_done(message) != 0, let handle = message.pointee.easy_handle,
                    let transfer = inFlight.removeValue(forKey: handle)
                else { continue }
                let outcome = finish(transfer, result: settle_curl_msg_result(message))
                completedAny = true
                source.completed(transfer.request, outcome)
            }
            if completedAny { continue }

            var timeoutMs: Int32 = 1000
            if let wakeAt {
                timeoutMs = Int32(clamping: max(0, min(1000, ContinuousClock.now.duration(to: wakeAt).milliseconds)))
            }
            _ = curl_multi_poll(multi, nil, 0, timeoutMs, nil)
        }
    }

    /// Sends one request and waits for its outcome.
    public func perform(_ request: HTTPRequest) -> HTTPOutcome {
        let single = SingleRequest(request)
        run(source: single)
        return single.outcome ?? .transportError(kind: .other, message: "request did not run")
    }

    // MARK: - Transfers

    private func start(_ request: HTTPRequest) -> Transfer {
        let transfer = Transfer(request: request, maxBody: configuration.maxResponseBytes)
        guard let handle = idleHandles.popLast() ?? curl_easy_init() else {
            transfer.setupError = "curl_easy_init failed"
            return transfer
        }
        curl_easy_reset(handle)
        transfer.handle = handle
        let opaque = Unmanaged.passUnretained(transfer).toOpaque()

        _ = request.url.withCString { settle_curl_easy_setopt_ptr(handle, CURLOPT_URL, $0) }
        _ = "settle/\(configuration.version)".withCString {
            settle_curl_easy_setopt_ptr(handle, CURLOPT_USERAGENT, $0)
        }
        // Only HTTP(S); no redirects: an API answer is never a redirect worth following.
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_PROTOCOLS, Int(CURLPROTO_HTTP | CURLPROTO_HTTPS))
        // Plain http goes to loopback only, and never through a proxy the environment names
        // (`http_proxy`, `ALL_PROXY`): the key would cross the network in the clear (audit 54
        // F7). https may (the proxy sees a tunnel, not the key).
        if request.url.lowercased().hasPrefix("http://") {
            _ = "*".withCString { settle_curl_easy_setopt_ptr(handle, CURLOPT_NOPROXY, $0) }
        }
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1)
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2)
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1)
        // Handles are reused: set it either way (see HTTPRequest.freshConnection).
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_FRESH_CONNECT, request.freshConnection ? 1 : 0)
        _ = settle_curl_easy_setopt_long(
            handle, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        _ = settle_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(configuration.totalTimeout.milliseconds))
        _ = settle_curl_easy_setopt_ptr(handle, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
        _ = settle_curl_easy_setopt_ptr(handle, CURLOPT_PRIVATE, opaque)
        _ = settle_curl_easy_setopt_ptr(handle, CURLOPT_WRITEDATA, opaque)
        _ = settle_curl_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, opaque)
        _ = settle_curl_easy_setopt_write(handle) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let bytes = size * count
            guard transfer.body.count + bytes <= transfer.maxBody else { return 0 }
            if let data, bytes > 0 {
                transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: bytes))
            }
            return bytes
        }
        _ = settle_curl_easy_setopt_header(handle) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let bytes = size * count
            if let data, bytes > 0 {
                transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: bytes))
            }
            return bytes
        }

        // Method and body. COPYPOSTFIELDS copies, so the Swift array need not outlive this.
        switch request.method {
        case "GET":
            _ = settle_curl_easy_setopt_long(handle, CURLOPT_HTTPGET, 1)
        default:
            if request.method != "POST" {
                _ = request.method.withCString { settle_curl_easy_setopt_ptr(handle, CURLOPT_CUSTOMREQUEST, $0) }
            }
            _ = settle_curl_easy_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            _ = request.body.withUnsafeBytes { raw in
                // An empty body still needs a valid pointer.
                settle_curl_easy_setopt_ptr(
                    handle, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(transfer.errorBuffer))
            }
        }

        // Headers. `Expect:` turns off the 100-continue round trip for larger bodies.
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in request.headers {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        list = curl_slist_append(list, "Expect:")
        transfer.headerList = list
        _ = settle_curl_easy_setopt_ptr(handle, CURLOPT_HTTPHEADER, list)

        let added = curl_multi_add_handle(multi, handle)
        if added != CURLM_OK {
            transfer.setupError = "curl_multi_add_handle failed (\(added.rawValue))"
            release(transfer)
        }
        return transfer
    }

    private func finish(_ transfer: Transfer, result: CURLcode) -> HTTPOutcome {
        let outcome: HTTPOutcome
        if result == CURLE_OK, let handle = transfer.handle {
            var status = 0
            _ = settle_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            outcome = .response(
                HTTPResponse(status: status, headers: transfer.headers, body: transfer.body)
                    .withoutCredential(of: transfer.request))
        } else {
            let message = Credential.scrub(transfer.errorMessage(result), of: transfer.request)
            outcome = .transportError(kind: Self.kind(of: result), message: message)
        }
        if let handle = transfer.handle { _ = curl_multi_remove_handle(multi, handle) }
        release(transfer)
        return outcome
    }

    private func release(_ transfer: Transfer) {
        if let list = transfer.headerList { curl_slist_free_all(list) }
        transfer.headerList = nil
        if let handle = transfer.handle {
            // Detach the callbacks' context before the Transfer may go away.
            _ = settle_curl_easy_setopt_ptr(handle, CURLOPT_HTTPHEADER, nil)
            if idleHandles.count < configuration.maxInFlight {
                idleHandles.append(handle)
            } else {
                curl_easy_cleanup(handle)
            }
        }
        transfer.handle = nil
    }

    private static func kind(of code: CURLcode) -> HTTPOutcome.TransportErrorKind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        // Before the first byte of the request left: nothing can have reached the server.
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY,
            CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION:
            return .notSent
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2,
            CURLE_HTTP2_STREAM:
            return .connection
        default:
            return .other
        }
    }
}

/// The per-request state libcurl's callbacks fill in.
private final class Transfer {
    let request: HTTPRequest
    let maxBody: Int
    var handle: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var setupError = ""
    let errorBuffer: UnsafeMutablePointer<CChar>

    init(request: HTTPRequest, maxBody: Int) {
        self.request = request
        self.maxBody = maxBody
        let size = Int(settle_curl_error_size())
        errorBuffer = .allocate(capacity: size)
        errorBuffer.initialize(repeating: 0, count: size)
    }

    deinit { errorBuffer.deallocate() }

    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) {
        // A new status line starts a new header block (100 Continue, 1xx, retries).
        if line.starts(with: "HTTP/".utf8) {
            headers.removeAll(keepingCapacity: true)
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
            .trimmingASCIIWhitespace()
        headers.append((name, value))
    }

    func errorMessage(_ code: CURLcode) -> String {
        let detail = String(cString: errorBuffer)
        let summary = String(cString: curl_easy_strerror(code))
        return detail.isEmpty ? summary : "\(summary): \(detail)"
    }
}

/// A source that sends one request.
private final class SingleRequest: RequestSource {
    private var pending: HTTPRequest?
    var outcome: HTTPOutcome?

    init(_ request: HTTPRequest) { pending = request }

    func next(now: ContinuousClock.Instant) -> RequestSourceStep {
        guard let request = pending else { return outcome == nil ? .idle : .finished }
        pending = nil
        return .request(request)
    }

    func completed(_ request: HTTPRequest, _ outcome: HTTPOutcome) { self.outcome = outcome }
}

extension String {
    fileprivate func trimmingASCIIWhitespace() -> String {
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, [0x20, 0x09, 0x0D, 0x0A].contains(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

private func sleep(for duration: Duration) {
    var spec = timespec(
        tv_sec: Int(duration.components.seconds),
        tv_nsec: Int(duration.components.attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&spec, &remaining) == -1 && errno == EINTR { spec = remaining }
}
