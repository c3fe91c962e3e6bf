import CCurl
import Glibc

// One libcurl easy handle, reused, so every POST rides the same kept-alive TLS connection.
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

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

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

/// Response accumulation for libcurl's callbacks.
private final class ResponseSink {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    static let maxBody = 1 << 20
}

public final class HTTPSClient {
    public let options: HTTPSClientOptions
    private let handle: UnsafeMutableRawPointer
    private var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    private let sink = ResponseSink()

    public init(options: HTTPSClientOptions) throws(TransportError) {
        _ = curlGlobalInit
        self.options = options
        guard options.url.hasPrefix("https://") else {
            throw TransportError(code: .badURL, curlCode: 0, message: "uplink URL must be https://, got \(options.url)")
        }
        if let ca = options.caFile, !isReadableFile(ca) {
            throw TransportError(code: .tlsVerify, curlCode: 0, message: "cannot read CA file \(ca): \(errnoText()). Check uplink.ca_file.")
        }
        guard let h = curl_easy_init() else {
            throw TransportError(code: .other, curlCode: 0, message: "libcurl could not create a handle (out of memory?)")
        }
        handle = h
        try configure()
    }

    deinit { curl_easy_cleanup(handle) }

    private func set(_ option: CURLoption, _ value: Int) throws(TransportError) {
        let rc = doorbell_curl_setopt_long(handle, option, value)
        guard rc == CURLE_OK else { throw error(rc, context: "setting libcurl option \(option.rawValue)") }
    }

    private func set(_ option: CURLoption, string value: String) throws(TransportError) {
        // COPYPOSTFIELDS-style strings: libcurl copies string options since 7.17.
        let rc = value.withCString { doorbell_curl_setopt_ptr(handle, option, $0) }
        guard rc == CURLE_OK else { throw error(rc, context: "setting libcurl option \(option.rawValue)") }
    }

    private func configure() throws(TransportError) {
        try set(CURLOPT_URL, string: options.url)
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_FOLLOWLOCATION, 0)
        try set(CURLOPT_PROTOCOLS_STR, string: "https")
        try set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        try set(CURLOPT_SSL_VERIFYPEER, 1)
        try set(CURLOPT_SSL_VERIFYHOST, 2)
        try set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        try set(CURLOPT_TCP_KEEPALIVE, 1)
        try set(CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMs)
        try set(CURLOPT_TIMEOUT_MS, options.requestTimeoutMs)
        try set(CURLOPT_USERAGENT, string: options.userAgent)
        if let ca = options.caFile { try set(CURLOPT_CAINFO, string: ca) }
        if let pin = options.pinnedPublicKey { try set(CURLOPT_PINNEDPUBLICKEY, string: pin) }
        if let cert = options.clientCertFile, let key = options.clientKeyFile {
            try set(CURLOPT_SSLCERT, string: cert)
            try set(CURLOPT_SSLKEY, string: key)
        }
        // An explicit proxy, or none at all: an inherited https_proxy must not reroute a doorbell.
        try set(CURLOPT_PROXY, string: options.proxy ?? "")
        _ = errorBuffer.withUnsafeMutableBufferPointer { doorbell_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, $0.baseAddress) }
        let context = Unmanaged.passUnretained(sink).toOpaque()
        _ = doorbell_curl_setopt_ptr(handle, CURLOPT_WRITEDATA, context)
        _ = doorbell_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, context)
        _ = doorbell_curl_setopt_write(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            let n = size * count
            if sink.body.count < ResponseSink.maxBody {
                data.withMemoryRebound(to: UInt8.self, capacity: n) { sink.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: min(n, ResponseSink.maxBody - sink.body.count))) }
            }
            return n
        }
        _ = doorbell_curl_setopt_write(handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            let n = size * count
            let line = data.withMemoryRebound(to: UInt8.self, capacity: n) { String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self) }
            if line.hasPrefix("HTTP/") {
                sink.headers.removeAll() // a new response (e.g. after 100-continue): keep only the last
            } else if let colon = line.firstIndex(of: ":") {
                let name = String(line[..<colon])
                let value = String(line[line.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0.isWhitespace }).reversed())
                sink.headers.append((name, value))
            }
            return n
        }
    }

    /// One POST with `body` and `headers`. Blocks up to requestTimeoutMs.
    public func post(body: [UInt8], headers: [(String, String)]) -> Result<HTTPResponse, TransportError> {
        sink.body.removeAll(keepingCapacity: true)
        sink.headers.removeAll(keepingCapacity: true)
        errorBuffer[0] = 0
        var list: UnsafeMutablePointer<curl_slist>?
        // An empty Expect stops libcurl waiting a second for "100 Continue" on larger bodies.
        for (name, value) in headers + [("Expect", "")] {
            let line = value.isEmpty ? "\(name):" : "\(name): \(value)"
            list = curl_slist_append(list, line)
        }
        defer { curl_slist_free_all(list) }
        _ = doorbell_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, UnsafeRawPointer(list))
        _ = doorbell_curl_setopt_long(handle, CURLOPT_POST, 1)
        let rc: CURLcode = body.withUnsafeBytes { raw in
            _ = doorbell_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(raw.count))
            _ = doorbell_curl_setopt_ptr(handle, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
            return curl_easy_perform(handle)
        }
        _ = doorbell_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, nil)
        guard rc == CURLE_OK else { return .failure(error(rc, context: nil)) }
        var status = 0
        _ = doorbell_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headers: sink.headers, body: sink.body))
    }

    private func error(_ rc: CURLcode, context: String?) -> TransportError {
        let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(rc))
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
