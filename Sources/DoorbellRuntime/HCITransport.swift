import CBluetooth
import CLinux
import DoorbellCore
import Glibc

// One byte stream to an HCI controller, whatever carries it: the kernel's HCI socket (packets
// arrive with their H4 type byte, as on a UART), an H4 UART, or H4 over TCP. The radio above it
// neither knows nor cares which.

public struct HCIError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, for the supervisor to act on; `description` is for the operator.
    public enum Code: Sendable, Equatable {
        case noBluetoothSupport, noSuchController, noSuchDevice, connectionRefused
        case notPermitted, busy, io, timeout, commandRefused, hardwareError, badAddress
    }
    public let code: Code
    public let description: String
    public init(_ code: Code, _ description: String) { self.code = code; self.description = description }

    /// Nothing to talk to (yet): the radio shows `missing`, not `restarting`.
    public var meansAbsent: Bool {
        switch code {
        case .noBluetoothSupport, .noSuchController, .noSuchDevice, .connectionRefused: true
        default: false
        }
    }
}

public final class HCITransport: @unchecked Sendable {
    public let fd: Int32
    public let name: String

    private init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
    }

    deinit { close(fd) }

    public static func open(_ kind: HCITransportKind) throws(HCIError) -> HCITransport {
        switch kind {
        case let .kernel(dev, exclusive):
            let fd = doorbell_hci_open(Int32(dev), exclusive ? 1 : 0)
            if fd >= 0 { return HCITransport(fd: fd, name: "hci\(dev)") }
            switch -fd {
            case EAFNOSUPPORT, EPROTONOSUPPORT:
                throw HCIError(.noBluetoothSupport, "this kernel has no Bluetooth support (AF_BLUETOOTH): load the bluetooth module, or use transport = \"serial\" / \"tcp\"")
            case EPERM, EACCES:
                throw HCIError(.notPermitted, "hci\(dev): the kernel HCI socket needs CAP_NET_RAW and CAP_NET_ADMIN (the systemd unit grants them; by hand, run as root)")
            case EBUSY where exclusive:
                throw HCIError(.busy, "hci\(dev): busy: another program holds its user channel, or bluetoothd keeps powering it up (set AutoEnable=false in /etc/bluetooth/main.conf, or channel = \"raw\" to share it)")
            case ENODEV:
                throw HCIError(.noSuchController, "hci\(dev): no such controller (btmgmt info / hciconfig list them); is the dongle plugged in and powered (rfkill list)?")
            default:
                throw HCIError(.io, "hci\(dev): \(errnoText(-fd))")
            }
        case let .serial(path, baud, flow):
            let fd = Glibc.open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else {
                let e = errno
                if e == EACCES { throw HCIError(.notPermitted, "\(path): permission denied; add the service user to group dialout") }
                // Under systemd's DevicePolicy=closed the device cgroup refuses what DeviceAllow= does not list.
                if e == EPERM { throw HCIError(.notPermitted, "\(path): the service's device policy refuses it; the unit needs \(HCITransportKind.serialDeviceGroups.map { "DeviceAllow=char-\($0) rw" }.joined(separator: ", ")) (the shipped unit has them; ttyUSB since issue #27)") }
                throw HCIError(e == ENOENT || e == ENODEV || e == ENXIO ? .noSuchDevice : .io, "\(path): \(errnoText(e)) (is the HCI dongle plugged in?)")
            }
            let rc = doorbell_serial_configure(fd, Int32(baud), flow ? 1 : 0)
            guard rc == 0 else {
                close(fd)
                throw HCIError(.io, "\(path): cannot set \(baud) baud\(flow ? " with RTS/CTS" : ""): \(errnoText(-rc))")
            }
            return HCITransport(fd: fd, name: path)
        case let .tcp(host, port):
            return try connectTCP(host: host, port: port)
        case .replay:
            throw HCIError(.badAddress, "a btsnoop replay has no transport")
        }
    }

    /// Numeric IPv4/IPv6 or `localhost`: an HCI bridge is configured by address, and a resolver
    /// that hangs must not stall the radio.
    static func connectTCP(host: String, port: Int) throws(HCIError) -> HCITransport {
        let name = "\(host):\(port)"
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        let h = host == "localhost" ? "127.0.0.1" : host
        let family: Int32
        if inet_pton(AF_INET, h, &v4.sin_addr) == 1 {
            family = AF_INET
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
        } else if inet_pton(AF_INET6, h, &v6.sin6_addr) == 1 {
            family = AF_INET6
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
        } else {
            throw HCIError(.badAddress, "\(name): the host must be a numeric IPv4/IPv6 address or localhost")
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw HCIError(.io, "\(name): socket: \(errnoText())") }
        let rc: Int32 = family == AF_INET
            ? withUnsafePointer(to: &v4) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            : withUnsafePointer(to: &v6) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        if rc != 0 && errno != EINPROGRESS {
            let e = errno
            close(fd)
            throw HCIError(e == ECONNREFUSED ? .connectionRefused : .io, "\(name): connect: \(errnoText(e))")
        }
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        if poll(&p, 1, 5_000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0 {
            close(fd)
            throw HCIError(err == ECONNREFUSED ? .connectionRefused : err == 0 ? .timeout : .io, "\(name): connect: \(err != 0 ? errnoText(err) : "timed out after 5 s")")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return HCITransport(fd: fd, name: name)
    }

    public func write(_ bytes: [UInt8]) throws(HCIError) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    guard poll(&p, 1, 2_000) == 1 else { throw HCIError(.timeout, "\(name): write stalled for 2 s") }
                    continue
                }
                throw HCIError(.io, "\(name): write: \(errnoText())")
            }
            off += n
        }
    }

    /// What is available now (call when poll says readable). Throws when the stream ended.
    public func read() throws(HCIError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 { return Array(buffer.prefix(n)) }
            if n == 0 { throw HCIError(.io, "\(name): the controller closed the connection") }
            if errno == EINTR { continue }
            if errno == EAGAIN { return [] }
            throw HCIError(.io, "\(name): read: \(errnoText())")
        }
    }
}
