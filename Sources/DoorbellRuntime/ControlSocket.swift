import DoorbellCore
import Glibc

// The control socket: newline-delimited JSON over a Unix stream socket. One request line, one
// response line. `{"command":"status"}` → `{"ok":true,"status":{...}}`; errors are
// `{"ok":false,"error":"..."}`. Documented in docs/control.md.

public struct ControlError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

func makeUnixAddress(_ path: String) throws(ControlError) -> sockaddr_un {
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: addr.sun_path)
    guard bytes.count < capacity else {
        throw ControlError(description: "control socket path is too long (\(bytes.count) bytes, max \(capacity - 1)): \(path)")
    }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
        raw[bytes.count] = 0
    }
    return addr
}

public final class ControlServer: @unchecked Sendable {
    public typealias Handler = @Sendable (JSONValue) -> JSONValue
    let path: String
    let log: Logger
    let handler: Handler
    private var fd: Int32 = -1
    private let done = WakeSignal()

    public init(path: String, log: Logger, handler: @escaping Handler) {
        self.path = path
        self.log = log
        self.handler = handler
    }

    public func start() throws(ControlError) {
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !dir.isEmpty { mkdir(dir, 0o750) }
        // A socket file left by a killed agent would make bind fail; only remove sockets.
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                throw ControlError(description: "\(path) exists and is not a socket; remove it or set paths.control_socket elsewhere")
            }
            unlink(path)
        }
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw ControlError(description: "cannot create control socket: \(errnoText())") }
        var addr = try makeUnixAddress(path)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let message = errnoText()
            close(s)
            throw ControlError(description: "cannot bind control socket \(path): \(message). Its folder must exist and be writable (RuntimeDirectory= in the unit).")
        }
        chmod(path, 0o660)
        guard listen(s, 16) == 0 else {
            let message = errnoText()
            close(s)
            throw ControlError(description: "cannot listen on control socket \(path): \(message)")
        }
        fd = s
        startThread(name: "control") { [self] in
            acceptLoop(s)
            done.signal()
        }
    }

    public func stop() {
        guard fd >= 0 else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        done.wait(timeoutMicros: 1_000_000)
        close(fd)
        fd = -1
        unlink(path)
    }

    private func acceptLoop(_ listener: Int32) {
        while true {
            let client = retryingEINTR { accept(listener, nil, nil) }
            if client < 0 {
                if errno == ECONNABORTED || errno == EMFILE || errno == ENFILE { continue }
                return
            }
            setCloseOnExec(client)
            serve(client)
            close(client)
        }
    }

    private func serve(_ client: Int32) {
        // A client that connects and says nothing must not wedge the socket for everyone else.
        var tv = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var request: [UInt8] = []
        var byte: UInt8 = 0
        while request.count < 64 * 1024 {
            let n = retryingEINTR { read(client, &byte, 1) }
            if n <= 0 || byte == 0x0A { break }
            request.append(byte)
        }
        let response: JSONValue
        do {
            response = handler(try JSONReader.parse(bytes: request))
        } catch {
            response = .object([("ok", .bool(false)), ("error", .string("bad request: \(error.description); send one JSON object per line, e.g. {\"command\":\"status\"}"))])
        }
        var out = JSONWriter.encode(response)
        out.append(0x0A)
        _ = out.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}

public enum ControlClient {
    /// Sends one request and returns the parsed response.
    public static func request(path: String, _ request: JSONValue, timeoutSeconds: Int = 5) throws(ControlError) -> JSONValue {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw ControlError(description: "cannot create socket: \(errnoText())") }
        defer { close(s) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = try makeUnixAddress(path)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            let hint: String
            switch e {
            case ENOENT, ECONNREFUSED: hint = "is doorbell-agent running? (systemctl status doorbell-agent)"
            case EACCES: hint = "permission denied: run as root or as a member of the doorbell-agent group"
            default: hint = errnoText(e)
            }
            throw ControlError(description: "cannot reach the agent at \(path): \(hint)")
        }
        var line = JSONWriter.encode(request)
        line.append(0x0A)
        _ = line.withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while response.count < 16 << 20 {
            let n = chunk.withUnsafeMutableBytes { buf in retryingEINTR { read(s, buf.baseAddress, buf.count) } }
            if n <= 0 { break }
            response.append(contentsOf: chunk[0..<n])
            if chunk[n - 1] == 0x0A { break }
        }
        if response.last == 0x0A { response.removeLast() }
        guard !response.isEmpty else { throw ControlError(description: "the agent closed the connection without answering (\(path))") }
        do {
            return try JSONReader.parse(bytes: response)
        } catch {
            throw ControlError(description: "the agent sent an unreadable answer: \(error.description)")
        }
    }
}
