import CLinux
import Glibc

// systemd's notify protocol, spoken directly: one datagram per state change to $NOTIFY_SOCKET
// (a path, or an abstract socket when it starts with '@'). Without the variable it does nothing,
// so the same binary runs under systemd, in a container, or by hand.

public final class SystemdNotifier: @unchecked Sendable {
    private let fd: Int32
    private var address = sockaddr_un()
    private var addressLength: socklen_t = 0

    public init?(environment socketPath: String? = getenv("NOTIFY_SOCKET").map { String(cString: $0) }) {
        guard let socketPath, !socketPath.isEmpty else { return nil }
        var bytes = Array(socketPath.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
    }

    deinit { close(fd) }

    /// Sends e.g. "READY=1\nSTATUS=...". Returns false if the manager could not be reached.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { addr in
            addr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, addressLength) }
            }
        }
        return sent == bytes.count
    }

    /// The watchdog interval systemd expects pings within ($WATCHDOG_USEC), if it is for us.
    public static func watchdogMicros() -> Int64? {
        guard let usec = getenv("WATCHDOG_USEC").flatMap({ Int64(String(cString: $0)) }), usec > 0 else { return nil }
        if let pid = getenv("WATCHDOG_PID").flatMap({ Int32(String(cString: $0)) }), pid != getpid() { return nil }
        return usec
    }
}
