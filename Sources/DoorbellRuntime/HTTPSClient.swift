import CCurl
import Glibc

// libcurl's multi interface with one connection to the receiver, kept alive between calls.
// `send` takes a window of requests: over HTTP/2 (negotiated by ALPN when the server offers it)
// they are in flight together as streams of that one connection; over HTTP/1.1 they go one after
// the other on it, each with its own timeout. Requests start in the order given.
// Redirects are never followed (a 3xx is returned as is: the uplink treats it as a failure).
// Each libcurl error becomes a message an installer can act on.

public struct HTTPSClientOptions: Sendable {
    public var url: String
    public var caFile: String?
    public var connectTimeoutMs: Int
    public var requestTimeoutMs: Int
    public var userAgent: String
    public var pinnedPublicKey: String?
    public var clientCertFile: String?
    public var clientKeyFile: String?
    public var proxy: String?

    public init(url: String, caFile: String? = nil, connectTimeoutMs: Int = 5_000, requestTimeoutMs: Int = 15_000,
                userAgent: String = "doorbell-agent", pinnedPublicKey: String? = nil, clientCertFile: String? = nil,
                clientKeyFile: String? = nil, proxy: String? = nil) {
        self.pinnedPublicKey = pinnedPublicKey
        self.clientCertFile = clientCertFile
        self.clientKeyFile = clientKeyFile
        self.proxy = proxy
        self.url = url
        self.caFile = caFile
        self.connectTimeoutMs = connectTimeoutMs
        self.requestTimeoutMs = requestTimeoutMs
        self.userAgent = userAgent
    }
}

public struct HTTPRequest: Sendable {
    public var body: [UInt8]
    public var headers: [(String, String)]
    /// Another path on the same server (the heartbeat), over the same kept-alive connection;
    /// nil: the client's URL.
    public var url: String?
    public init(body: [UInt8], headers: [(String, String)], url: String? = nil) {
        self.body = body
        self.headers = headers
        self.url = url
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// 2 for HTTP/2, 1 for HTTP/1.x.
    public var httpVersion: Int = 1
    /// This request's own time, from its start to the end of the answer (libcurl's total time).
    public var elapsedMicros: Int64 = 0

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], httpVersion: Int = 1, elapsedMicros: Int64 = 0) {
        self.status = status
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
        self.elapsedMicros = elapsedMicros
    }

    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.last(where: { $0.name.lowercased() == lower })?.value
    }
}

public struct TransportError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable { case dns, connectionRefused, tlsVerify, tls, timeout, connectionReset, badURL, other }
    public let code: Code
    public let curlCode: Int32
    public let message: String
    public var description: String { message }
}

private let curlGlobalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

/// One easy handle with its response buffers; reused for request after request. The multi
/// handle owns the connection, so every transfer rides the same one.
private final class Transfer {
    let handle: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// Index in the current `send` call, -1 when idle.
    var index = -1
    static let maxBody = 1 << 20

    init(handle: UnsafeMutableRawPointer) {
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// One header line from libcurl (`Name: value\r\n`, or the status line), parsed on bytes.
    func headerLine(_ p: UnsafeBufferPointer<UInt8>) {
        if p.count >= 5, p[0] == 0x48, p[1] == 0x54, p[2] == 0x54, p[3] == 0x50, p[4] == 0x2F { // "HTTP/"
            headers.removeAll() // a new response (e.g. after 100-continue): keep only the last
            return
        }
        guard let colon = p.firstIndex(of: 0x3A) else { return }
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
        var start = colon + 1
        var end = p.count
        while start < end, isSpace(p[start]) { start += 1 }
        while end > start, isSpace(p[end - 1]) { end -= 1 }
        headers.append((String(decoding: UnsafeBufferPointer(rebasing: p[..<colon]), as: UTF8.self),
                        String(decoding: UnsafeBufferPointer(rebasing: p[start..<end]), as: UTF8.self)))
    }
}

public final class HTTPSClient {
    public let options: HTTPSClientOptions
    private let multi: UnsafeMutableRawPointer
    private var transfers: [Transfer] = []
    /// Whether the connection multiplexes (HTTP/2), learnt from the last response; until then a
    /// window goes one request at a time.
    public private(set) var multiplexing = false

    public init(options: HTTPSClientOptions) throws(TransportError) {
        _ = curlGlobalInit
        self.options = options
        guard options.url.hasPrefix("https://") else {
            throw TransportError(code: .badURL, curlCode: 0, message: "uplink URL must be https://, got \(options.url)")
        }
        if let ca = options.caFile, !isReadableFile(ca) {
            throw TransportError(code: .tlsVerify, curlCode: 0, message: "cannot read CA file \(ca): \(errnoText()). Check uplink.ca_file.")
        }
        guard let m = curl_multi_init() else {
            throw TransportError(code: .other, curlCode: 0, message: "libcurl could not create a handle (out of memory?)")
        }
        multi = m
        // One connection to the receiver: HTTP/2 streams share it; HTTP/1.1 requests queue for it.
        _ = doorbell_curl_multi_setopt_long(m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
        _ = doorbell_curl_multi_setopt_long(m, CURLMOPT_MAX_HOST_CONNECTIONS, 1)
        _ = doorbell_curl_multi_setopt_long(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1)
        _ = doorbell_curl_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, 1)
        _ = try transfer(0) // fail early on a bad option
    }

    deinit {
        for t in transfers where t.index >= 0 { curl_multi_remove_handle(multi, t.handle) }
        transfers.removeAll() // easy handles go before the multi handle that holds their connection
        curl_multi_cleanup(multi)
    }

    private func transfer(_ i: Int) throws(TransportError) -> Transfer {
        while transfers.count <= i {
            guard let h = curl_easy_init() else {
                throw TransportError(code: .other, curlCode: 0, message: "libcurl could not create a handle (out of memory?)")
            }
            let t = Transfer(handle: h)
            try configure(t)
            transfers.append(t)
        }
        return transfers[i]
    }

    private func set(_ t: Transfer, _ option: CURLoption, _ value: Int) throws(TransportError) {
        let rc = doorbell_curl_setopt_long(t.handle, option, value)
        guard rc == CURLE_OK else { throw error(rc, t, context: "setting libcurl option \(option.rawValue)") }
    }

    private func set(_ t: Transfer, _ option: CURLoption, string value: String) throws(TransportError) {
        // libcurl copies string options since 7.17.
        let rc = value.withCString { doorbell_curl_setopt_ptr(t.handle, option, $0) }
        guard rc == CURLE_OK else { throw error(rc, t, context: "setting libcurl option \(option.rawValue)") }
    }

    private func configure(_ t: Transfer) throws(TransportError) {
        try set(t, CURLOPT_URL, string: options.url)
        try set(t, CURLOPT_NOSIGNAL, 1)
        try set(t, CURLOPT_FOLLOWLOCATION, 0)
        try set(t, CURLOPT_PROTOCOLS_STR, string: "https")
        try set(t, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        try set(t, CURLOPT_SSL_VERIFYPEER, 1)
        try set(t, CURLOPT_SSL_VERIFYHOST, 2)
        try set(t, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        // Wait for the connection (and its ALPN answer) rather than opening a second one.
        try set(t, CURLOPT_PIPEWAIT, 1)
        try set(t, CURLOPT_TCP_KEEPALIVE, 1)
        try set(t, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMs)
        try set(t, CURLOPT_TIMEOUT_MS, options.requestTimeoutMs)
        try set(t, CURLOPT_USERAGENT, string: options.userAgent)
        if let ca = options.caFile { try set(t, CURLOPT_CAINFO, string: ca) }
        if let pin = options.pinnedPublicKey { try set(t, CURLOPT_PINNEDPUBLICKEY, string: pin) }
        if let cert = options.clientCertFile, let key = options.clientKeyFile {
            try set(t, CURLOPT_SSLCERT, string: cert)
            try set(t, CURLOPT_SSLKEY, string: key)
        }
        // An explicit proxy, or none at all: an inherited https_proxy must not reroute a doorbell.
        try set(t, CURLOPT_PROXY, string: options.proxy ?? "")
        _ = doorbell_curl_setopt_ptr(t.handle, CURLOPT_ERRORBUFFER, t.errorBuffer)
        let context = Unmanaged.passUnretained(t).toOpaque()
        _ = doorbell_curl_setopt_ptr(t.handle, CURLOPT_WRITEDATA, context)
        _ = doorbell_curl_setopt_ptr(t.handle, CURLOPT_HEADERDATA, context)
        _ = doorbell_curl_setopt_write(t.handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            guard let data, let context else { return 0 }
            let t = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
            let n = size * count
            if t.body.count < Transfer.maxBody {
                data.withMemoryRebound(to: UInt8.self, capacity: n) {
                    t.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: min(n, Transfer.maxBody - t.body.count)))
                }
            }
            return n
        }
        _ = doorbell_curl_setopt_write(t.handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            guard let data, let context else { return 0 }
            let n = size * count
            data.withMemoryRebound(to: UInt8.self, capacity: n) {
                Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().headerLine(UnsafeBufferPointer(start: $0, count: n))
            }
            return n
        }
    }

    /// One POST with `body` and `headers`. Blocks up to connect + request timeout.
    public func post(body: [UInt8], headers: [(String, String)]) -> Result<HTTPResponse, TransportError> {
        var result: Result<HTTPResponse, TransportError> = .failure(TransportError(code: .other, curlCode: 0, message: "request to \(options.url) was not sent"))
        send([HTTPRequest(body: body, headers: headers)]) { _, r in result = r }
        return result
    }

    /// POSTs every request — started in the given order, several at once when the connection
    /// multiplexes — and calls `completed(index, result)` for each as it finishes (in any
    /// order), on this thread. Returns when all have finished; each has libcurl's own timeouts,
    /// and the whole call is bounded by as many timeouts as requests.
    public func send(_ requests: [HTTPRequest], completed: (Int, Result<HTTPResponse, TransportError>) -> Void) {
        send(count: requests.count, request: { requests[$0] }, whileWaiting: {}, completed: completed)
    }

    /// The same for `count` requests made as each is handed to libcurl (over HTTP/1.1 one at a
    /// time, so the caller can sign each just before it goes); `request(i)` nil skips it (the
    /// caller has counted it). `whileWaiting` runs on this thread each time the call is about to
    /// wait for the receiver: small pieces of work the caller would otherwise do while the
    /// receiver idles (the uplink writes the last window's outcomes and signs the next request).
    public func send(count: Int, request: (Int) -> HTTPRequest?, whileWaiting: () -> Void,
                     completed: (Int, Result<HTTPResponse, TransportError>) -> Void) {
        guard count > 0 else { return }
        var slots: [Transfer] = []
        for i in 0..<count {
            do {
                slots.append(try transfer(i))
            } catch {
                for j in i..<count { completed(j, .failure(error)) }
                break
            }
        }
        var next = 0 // the next request to hand to libcurl
        var active = 0
        /// Whether it handed libcurl a request.
        @discardableResult func start() -> Bool {
            let before = active
            // Over HTTP/2 the whole window at once; otherwise one at a time, so each request's
            // timeout runs while it is on the wire, not while it waits for the connection.
            while next < slots.count && (active == 0 || multiplexing) {
                let t = slots[next]
                guard let made = request(next) else {
                    t.index = -1
                    next += 1
                    continue
                }
                prepare(t, made, index: next)
                let rc = curl_multi_add_handle(multi, t.handle)
                if rc != CURLM_OK {
                    t.index = -1
                    completed(next, .failure(TransportError(code: .other, curlCode: Int32(rc.rawValue),
                                                            message: "libcurl could not start a request: \(String(cString: curl_multi_strerror(rc)))")))
                } else {
                    active += 1
                }
                next += 1
            }
            return active > before
        }
        start()
        let perRequest = Int64(options.connectTimeoutMs + options.requestTimeoutMs) * 1000
        let deadline = Clocks.monotonicMicros() + perRequest * Int64(slots.count) + 5_000_000
        while active > 0 {
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE,
                      let t = slots.first(where: { $0.handle == message.pointee.easy_handle && $0.index >= 0 }) else { continue }
                let index = t.index
                let wasMultiplexing = multiplexing
                let result = finish(t, doorbell_curl_msg_result(message))
                curl_multi_remove_handle(multi, t.handle)
                t.index = -1
                active -= 1
                completed(index, result)
                if wasMultiplexing, case let .failure(broken) = result, broken.code == .connectionReset {
                    // The connection under the window is gone (a server closing it after a
                    // GOAWAY, a reset): libcurl 7.88 can leave the other streams waiting out their
                    // whole timeout, so they are failed now and retried on a new connection.
                    for other in slots where other.index >= 0 {
                        let i = other.index
                        curl_multi_remove_handle(multi, other.handle)
                        other.index = -1
                        active -= 1
                        completed(i, .failure(TransportError(code: .connectionReset, curlCode: broken.curlCode,
                                                             message: "request to \(options.url) was not answered: the connection broke under it (\(broken.message))")))
                    }
                    multiplexing = false // the next window learns the new connection's protocol first
                }
            }
            let started = start()
            if active == 0 { break }
            if Clocks.monotonicMicros() > deadline {
                // libcurl enforces every timeout itself; this only bounds the loop for certain.
                for t in slots where t.index >= 0 {
                    let index = t.index
                    curl_multi_remove_handle(multi, t.handle)
                    t.index = -1
                    completed(index, .failure(TransportError(code: .timeout, curlCode: Int32(CURLE_OPERATION_TIMEDOUT.rawValue),
                                                             message: "request to \(options.url) timed out (no answer within the uplink timeouts).")))
                }
                active = 0
                break
            }
            // A request just handed over goes on the wire (the next perform) before other work.
            if started { continue }
            whileWaiting()
            var fds: Int32 = 0
            _ = curl_multi_poll(multi, nil, 0, 1000, &fds)
        }
        for t in slots {
            if let list = t.headerList { curl_slist_free_all(list) }
            t.headerList = nil
            _ = doorbell_curl_setopt_ptr(t.handle, CURLOPT_HTTPHEADER, nil)
        }
    }

    private func prepare(_ t: Transfer, _ request: HTTPRequest, index: Int) {
        t.body.removeAll(keepingCapacity: true)
        t.headers.removeAll(keepingCapacity: true)
        t.errorBuffer[0] = 0
        t.index = index
        if let list = t.headerList { curl_slist_free_all(list) }
        var list: UnsafeMutablePointer<curl_slist>?
        // An empty Expect stops libcurl waiting a second for "100 Continue" on larger bodies.
        for (name, value) in request.headers + [("Expect", "")] {
            let line = value.isEmpty ? "\(name):" : "\(name): \(value)"
            list = curl_slist_append(list, line)
        }
        t.headerList = list
        // Set every time: a handle that carried a heartbeat carries an event next.
        _ = (request.url ?? options.url).withCString { doorbell_curl_setopt_ptr(t.handle, CURLOPT_URL, $0) }
        _ = doorbell_curl_setopt_ptr(t.handle, CURLOPT_HTTPHEADER, UnsafeRawPointer(list))
        _ = doorbell_curl_setopt_long(t.handle, CURLOPT_POST, 1)
        request.body.withUnsafeBytes { raw in
            _ = doorbell_curl_setopt_off(t.handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(raw.count))
            _ = doorbell_curl_setopt_ptr(t.handle, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
        }
    }

    private func finish(_ t: Transfer, _ rc: CURLcode) -> Result<HTTPResponse, TransportError> {
        guard rc == CURLE_OK else { return .failure(error(rc, t, context: nil)) }
        var status = 0
        _ = doorbell_curl_getinfo_long(t.handle, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        _ = doorbell_curl_getinfo_long(t.handle, CURLINFO_HTTP_VERSION, &version)
        var elapsed: curl_off_t = 0
        _ = doorbell_curl_getinfo_off(t.handle, CURLINFO_TOTAL_TIME_T, &elapsed)
        let http2 = version == Int(CURL_HTTP_VERSION_2_0)
        multiplexing = http2
        return .success(HTTPResponse(status: status, headers: t.headers, body: t.body, httpVersion: http2 ? 2 : 1, elapsedMicros: Int64(elapsed)))
    }

    private func error(_ rc: CURLcode, _ t: Transfer, context: String?) -> TransportError {
        let detail = t.errorBuffer[0] != 0 ? String(cString: t.errorBuffer) : String(cString: curl_easy_strerror(rc))
        let url = options.url
        let code: TransportError.Code
        let message: String
        switch rc {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            code = .dns
            message = "cannot resolve the host of \(url): \(detail). Check the URL and the gateway's DNS."
        case CURLE_COULDNT_CONNECT:
            code = .connectionRefused
            message = "connection refused by \(url): \(detail). Is the receiver running and reachable from the gateway?"
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            code = .tlsVerify
            message = "the server's public key at \(url) does not match uplink.pinned_public_key: \(detail). Update the pin if the cloud rotated its key; otherwise this may be an interception."
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR:
            code = .tlsVerify
            message = "TLS certificate verification failed for \(url): \(detail). Check uplink.ca_file and the server's certificate chain and name."
        case CURLE_SSL_CERTPROBLEM:
            code = .tls
            message = "the client certificate for \(url) could not be used: \(detail). Check uplink.client_cert_file and client_key_file."
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CIPHER:
            code = .tls
            message = "TLS handshake with \(url) failed: \(detail)."
        case CURLE_OPERATION_TIMEDOUT:
            code = .timeout
            message = "request to \(url) timed out: \(detail). The network or the receiver is slow or down."
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            code = .connectionReset
            message = "connection to \(url) broke: \(detail)."
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            code = .badURL
            message = "bad uplink URL \(url): \(detail)."
        default:
            code = .other
            message = (context.map { "\($0): " } ?? "request to \(url) failed: ") + "\(detail) (libcurl error \(rc.rawValue))."
        }
        return TransportError(code: code, curlCode: Int32(rc.rawValue), message: message)
    }
}
