import CDescriptors
import CLinux
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

/// What a request gets back: one line, or a stream of lines on a thread of its own until the
/// client goes away (`agentctl events --follow`). The stream's writer returns false once the
/// client has disconnected.
public enum ControlReply: Sendable {
    case single(JSONValue)
    case stream(@Sendable (_ write: (JSONValue) -> Bool) -> Void)
}

/// Who may talk to the agent: root, the agent's own user, and members of its group.
public struct PeerPolicy: Sendable {
    public var allowedGroup: gid_t?
    public init(allowedGroup: gid_t?) { self.allowedGroup = allowedGroup }

    /// The group the socket file belongs to: `doorbell-agent` when it exists, else our own.
    public static func forThisProcess() -> PeerPolicy {
        PeerPolicy(allowedGroup: getgrnam("doorbell-agent")?.pointee.gr_gid ?? getegid())
    }

    func allows(uid: uid_t, gid: gid_t) -> Bool {
        if uid == 0 || uid == geteuid() { return true }
        guard let group = allowedGroup else { return false }
        if gid == group { return true }
        // Supplementary groups of the peer's user.
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        guard getgrouplist(name, pw.pointee.pw_gid, &groups, &count) >= 0 else { return false }
        return groups.prefix(Int(count)).contains(group)
    }
}

public final class ControlServer: @unchecked Sendable {
    public typealias Handler = @Sendable (JSONValue) -> ControlReply
    let path: String
    let log: Logger
    let handler: Handler
    let policy: PeerPolicy
    /// How often the accept loop wakes (and beats) when nobody connects.
    static let wakeMicros: Int64 = 5_000_000
    public let heartbeat: Heartbeat
    private let admission: Locked<ControlAdmission>
    private let stopSignal = PollableStop()
    private var fd: Int32 = -1
    private let done = WakeSignal()

    public init(path: String, log: Logger, policy: PeerPolicy = .forThisProcess(), admission: ControlAdmission = ControlAdmission(),
                heartbeat: Heartbeat? = nil, handler: @escaping Handler) {
        self.path = path
        self.log = log
        self.policy = policy
        self.admission = Locked(admission)
        self.heartbeat = heartbeat ?? .unmonitored("control", periodMicros: Self.wakeMicros)
        self.handler = handler
    }

    /// Requests being served and followers connected, for tests and status.
    public var connections: ControlAdmission { admission.snapshot }

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
        if let group = policy.allowedGroup { _ = chown(path, geteuid(), group) }
        guard listen(s, 16) == 0 else {
            let message = errnoText()
            close(s)
            throw ControlError(description: "cannot listen on control socket \(path): \(message)")
        }
        fd = s
        do {
            try startLoop(heartbeat, thread: "control") { [self] in
                acceptLoop(s)
                done.signal()
            }
        } catch {
            close(s)
            fd = -1
            unlink(path)
            throw ControlError(description: error.description)
        }
    }

    public func stop() {
        guard fd >= 0 else { return }
        heartbeat.stopped()
        stopSignal.set()
        done.wait(timeoutMicros: 1_000_000)
        close(fd)
        fd = -1
        unlink(path)
    }

    /// Errors after which accept may work again: the process or system is short of descriptors
    /// or memory for a moment, or one connection went away before it was taken.
    static func isTransient(_ code: Int32) -> Bool {
        [ECONNABORTED, EINTR, EAGAIN, EMFILE, ENFILE, ENOBUFS, ENOMEM, EPROTO, EPERM].contains(code)
    }

    /// Takes connections and hands each to a thread of its own; never serves one itself while
    /// it can get a thread, so a slow client cannot hold `agentctl status` up.
    private func acceptLoop(_ listener: Int32) {
        var failing: Int32 = 0
        while !stopSignal.isSet {
            heartbeat.beat()
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stopSignal.fd, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 2, Int32(clamping: heartbeat.periodMicros / 1000))
            if stopSignal.isSet { return }
            guard fds[0].revents != 0 else { continue }
            let client = doorbell_accept_cloexec(listener)
            if client < 0 {
                let code = -client
                if code == EAGAIN || code == ECONNABORTED || code == EINTR { continue }
                if Self.isTransient(code) {
                    // The connection waits in the backlog; retrying at once would spin a core
                    // until a descriptor frees up. Say so once, then look again every 100 ms.
                    if failing != code {
                        if code == EMFILE || code == ENFILE {
                            log.error("control.out_of_descriptors", [("error", errnoText(code)), ("hint", "too many open files: agentctl followers or a descriptor leak; see ls /proc/<pid>/fd")])
                        } else {
                            log.error("control.accept_failed", [("error", errnoText(code)), ("hint", "retrying every 100 ms")])
                        }
                    }
                    failing = code
                    usleep(100_000)
                    continue
                }
                // The listener itself is broken: the heartbeat says so, the watchdog is withheld
                // and systemd restarts the agent with a fresh socket.
                let reason = "accept on \(path) failed: \(errnoText(code))"
                log.error("control.stopped", [("error", reason), ("hint", "agentctl cannot reach the agent; systemd restarts it when its watchdog is withheld")])
                heartbeat.ended(reason)
                return
            }
            failing = 0
            if let refusal = admission.withLock({ $0.admit(.request) }) {
                log.warning("control.busy", [("error", refusal)])
                reply(client, ControlResponse.failure(refusal), wait: false)
                close(client)
                continue
            }
            let started = startThread(name: "control-client") { [self] in
                serve(client)
            }
            // No thread to give: answer this one here (status is how anyone finds out why).
            if !started { serve(client, onAcceptThread: true) }
        }
    }

    /// Serves one connection and closes it; releases its slot.
    private func serve(_ client: Int32, onAcceptThread: Bool = false) {
        var slot: ControlAdmission.Slot? = .request
        defer {
            close(client)
            if let slot { admission.withLock { $0.release(slot) } }
        }
        // A client that connects and says nothing is dropped after 2 s.
        var tv = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var cred = doorbell_peer()
        if doorbell_peer_credentials(client, &cred) != 0 || !policy.allows(uid: cred.uid, gid: cred.gid) {
            log.warning("control.refused", [("uid", String(cred.uid)), ("pid", String(cred.pid))])
            reply(client, ControlResponse.failure(
                "permission denied for uid \(cred.uid): run agentctl as root or as a member of the doorbell-agent group (usermod -aG doorbell-agent USER)"))
            return
        }
        var request: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        reading: while request.count < 64 * 1024 {
            let n = chunk.withUnsafeMutableBytes { buf in retryingEINTR { read(client, buf.baseAddress, buf.count) } }
            if n <= 0 { break }
            for b in chunk[0..<n] {
                if b == 0x0A { break reading }
                request.append(b)
            }
        }
        let response: ControlReply
        do {
            response = handler(try JSONReader.parse(bytes: request))
        } catch {
            response = .single(ControlResponse.failure("bad request: \(error.description); send one JSON object per line, e.g. {\"command\":\"status\"}"))
        }
        switch response {
        case let .single(value):
            reply(client, value)
        case let .stream(body):
            if onAcceptThread {
                reply(client, ControlResponse.failure("the agent cannot start a thread for this stream right now (out of memory or at its task limit); try again"))
                return
            }
            if let refusal = admission.withLock({ $0.promote() }) {
                slot = nil // promote() released the request slot and took none
                log.warning("control.followers_full", [("error", refusal)])
                reply(client, ControlResponse.failure(refusal))
                return
            }
            slot = .follower
            // A follower that stops reading is dropped once its socket buffer has been full for
            // 30 s: its thread and descriptor come back (agentctl reads as fast as it prints).
            var patient = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &patient, socklen_t(MemoryLayout<timeval>.size))
            body { value in reply(client, value) }
        }
    }

    @discardableResult
    private func reply(_ client: Int32, _ value: JSONValue, wait: Bool = true) -> Bool {
        var out = JSONWriter.encode(value)
        out.append(0x0A)
        let flags = Int32(MSG_NOSIGNAL) | (wait ? 0 : Int32(MSG_DONTWAIT))
        let sent = out.withUnsafeBytes { send(client, $0.baseAddress, $0.count, flags) }
        return sent == out.count
    }
}

public enum ControlClient {
    /// Sends one request and calls `onLine` for every response line until the agent closes the
    /// stream or `onLine` returns false.
    /// With `idleSeconds`, `onIdle` is asked every that many quiet seconds whether to go on.
    public static func stream(path: String, _ request: JSONValue, idleSeconds: Int = 0, onIdle: () -> Bool = { true },
                              onLine: (JSONValue) -> Bool) throws(ControlError) {
        let s = try connectSocket(path: path, timeoutSeconds: idleSeconds)
        defer { close(s) }
        var line = JSONWriter.encode(request)
        line.append(0x0A)
        _ = line.withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var splitter = LineSplitter(maxLine: 1 << 20)
        var chunk = [UInt8](repeating: 0, count: 8192)
        var keepGoing = true
        while keepGoing {
            let n = chunk.withUnsafeMutableBytes { buf in retryingEINTR { read(s, buf.baseAddress, buf.count) } }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                keepGoing = onIdle()
                continue
            }
            if n <= 0 { break }
            chunk.withUnsafeBytes { raw in
                splitter.feed(UnsafeRawBufferPointer(rebasing: raw[0..<n])) { text in
                    guard keepGoing, let value = try? JSONReader.parse(text) else { return }
                    keepGoing = onLine(value)
                }
            }
        }
    }

    static func connectSocket(path: String, timeoutSeconds: Int) throws(ControlError) -> Int32 {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw ControlError(description: "cannot create socket: \(errnoText())") }
        if timeoutSeconds > 0 {
            var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        var addr = try makeUnixAddress(path)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            close(s)
            let hint: String
            switch e {
            case ENOENT, ECONNREFUSED: hint = "is doorbell-agent running? (systemctl status doorbell-agent)"
            case EACCES: hint = "permission denied: run as root or as a member of the doorbell-agent group"
            default: hint = errnoText(e)
            }
            throw ControlError(description: "cannot reach the agent at \(path): \(hint)")
        }
        return s
    }

    /// Sends one request and returns the parsed response.
    public static func request(path: String, _ request: JSONValue, timeoutSeconds: Int = 5) throws(ControlError) -> JSONValue {
        let s = try connectSocket(path: path, timeoutSeconds: timeoutSeconds)
        defer { close(s) }
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
