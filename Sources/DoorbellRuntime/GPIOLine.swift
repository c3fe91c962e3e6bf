import CGPIOD
import DoorbellCore
import Glibc

// The only file that touches GPIO, through CGPIOD's small C face, which is libgpiod 1.6 or 2.x
// depending on the system it was built for. Chips are found by label,
// because numbers move: a Pi 5's header is on the RP1 chip (`pinctrl-rp1`), earlier Pis have it
// on `pinctrl-bcm2835` / `pinctrl-bcm2711`, and gpiochip numbering changed between kernels.

public struct GPIOError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

public struct GPIOChipInfo: Sendable, Equatable {
    public var path: String
    public var name: String
    public var label: String
    public var lines: Int
}

public enum GPIO {
    public static let consumer = "doorbell-agent"

    /// Every GPIO chip this process can open, for error messages and `agentctl status`.
    public static func chips() -> [GPIOChipInfo] {
        nodes().compactMap { name in
            guard let (label, lines) = describe("/dev/" + name) else { return nil }
            return GPIOChipInfo(path: "/dev/" + name, name: name, label: label, lines: lines)
        }
    }

    /// The `gpiochipN` entries of /dev, sorted, whether this process may open them or not.
    static func nodes() -> [String] {
        guard let dir = opendir("/dev") else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix("gpiochip") { names.append(name) }
        }
        return names.sorted()
    }

    /// Chips that exist but this process may not open: their labels cannot be read, so a chip
    /// named by label is "not found" when the real fault is the device's permissions.
    static func deniedPaths() -> [String] {
        nodes().map { "/dev/" + $0 }.filter { path in
            describe(path) == nil && (errno == EACCES || errno == EPERM)
        }
    }

    static func describe(_ path: String) -> (label: String, lines: Int)? {
        var label = [CChar](repeating: 0, count: 64)
        var lines: UInt32 = 0
        guard doorbell_gpio_chip_describe(path, &label, label.count, &lines) == 0 else { return nil }
        return (String(decoding: label.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self), Int(lines))
    }

    /// By label first (what board configs use), then by name (`gpiochip0`) or path.
    static func chipPath(_ spec: String) throws(GPIOError) -> (path: String, lines: Int) {
        let all = chips()
        var path: String?
        if spec.hasPrefix("/") {
            path = spec
        } else if let byLabel = all.first(where: { $0.label == spec }) {
            path = byLabel.path
        } else if spec.hasPrefix("gpiochip") {
            path = "/dev/" + spec
        }
        let listing = all.isEmpty ? "no GPIO chips are visible to this user"
            : "chips here: " + all.map { "\($0.name) [\($0.label)]" }.joined(separator: ", ")
        guard let path else {
            let denied = deniedPaths()
            if !denied.isEmpty {
                // Plain Debian leaves /dev/gpiochip* to root (Raspberry Pi OS has the rule).
                throw GPIOError(description: "cannot look for GPIO chip \"\(spec)\": permission denied opening \(denied.joined(separator: ", ")). Install the udev rule (install -m 0644 /usr/share/doorbell-agent/board/common/99-doorbell-agent.rules /etc/udev/rules.d/ && udevadm control --reload && udevadm trigger), which gives group gpio (the service user's) access")
            }
            throw GPIOError(description: "no GPIO chip labelled \"\(spec)\" (\(listing)). Set chip to one of those labels; `gpiodetect` lists them too")
        }
        guard let (_, lines) = describe(path) else {
            let e = errno
            if e == EACCES || e == EPERM {
                throw GPIOError(description: "permission denied opening \(path): add the service user to group gpio (usermod -aG gpio doorbell-agent) or install board/common/99-doorbell-agent.rules")
            }
            throw GPIOError(description: "cannot open GPIO chip \(path): \(errnoText(e)) (\(listing))")
        }
        return (path, lines)
    }

    /// Finds the chip, checks the line exists and takes it with `request`; nothing stays open
    /// when anything fails, so a retry loop leaks no descriptors.
    static func request(_ ref: GPIOLineRef, _ request: (String, UInt32) -> OpaquePointer?) throws(GPIOError) -> OpaquePointer {
        let (path, count) = try chipPath(ref.chip)
        guard ref.line >= 0, ref.line < count else {
            throw GPIOError(description: "\(ref.chip) has lines 0-\(count - 1); line \(ref.line) does not exist")
        }
        guard let line = request(path, UInt32(ref.line)) else {
            throw requestFailed(path, ref, errno: errno)
        }
        return line
    }

    static func requestFailed(_ path: String, _ ref: GPIOLineRef, errno e: Int32) -> GPIOError {
        if e == EBUSY {
            var buf = [CChar](repeating: 0, count: 64)
            _ = doorbell_gpio_line_consumer(path, UInt32(ref.line), &buf, buf.count)
            let holder = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let user = holder.isEmpty ? "another program" : holder
            return GPIOError(description: "\(ref) is in use by \"\(user)\": stop that program or pick a free pin (see `gpioinfo`)")
        }
        if e == EACCES || e == EPERM {
            return GPIOError(description: "permission denied requesting \(ref): add the service user to group gpio")
        }
        return GPIOError(description: "cannot request \(ref): \(errnoText(e))")
    }
}

/// Both-edge events of one input line, with the kernel's timestamps.
public final class GPIOEdgeReader: @unchecked Sendable {
    private let line: OpaquePointer
    let ref: GPIOLineRef
    public let fd: Int32
    /// The level when the line was requested (true = carrier present after active_low).
    public let initialHigh: Bool
    private var buffer = [doorbell_gpio_edge](repeating: doorbell_gpio_edge(), count: 64)

    public init(_ ref: GPIOLineRef) throws(GPIOError) {
        self.ref = ref
        line = try GPIO.request(ref) { doorbell_gpio_request_edges($0, $1, GPIO.consumer) }
        fd = doorbell_gpio_fd(line)
        initialHigh = (doorbell_gpio_get(line) == 1) != ref.activeLow
    }

    deinit {
        doorbell_gpio_release(line)
    }

    /// Reads what is queued (call when `fd` is readable): (carrier on, monotonic µs) per edge.
    public func read() throws(GPIOError) -> [(high: Bool, micros: Int64)] {
        let n = buffer.withUnsafeMutableBufferPointer { doorbell_gpio_read_edges(line, $0.baseAddress, UInt32($0.count)) }
        guard n >= 0 else { throw GPIOError(description: "reading edges of \(ref): \(errnoText())") }
        var out: [(Bool, Int64)] = []
        out.reserveCapacity(Int(n))
        let now = Clocks.monotonicMicros()
        for e in buffer.prefix(Int(n)) {
            var micros = Int64(clamping: e.timestamp_ns / 1_000)
            // Kernels before 5.7 stamp edges with the wall clock: fall back to the read time.
            if abs(micros - now) > 10_000_000 { micros = now }
            out.append(((e.rising != 0) != ref.activeLow, micros))
        }
        return out
    }
}

/// One output line (chime relay, buzzer), inactive while idle.
public final class GPIOOutputLine: @unchecked Sendable {
    private let line: OpaquePointer
    let ref: GPIOLineRef

    public init(_ ref: GPIOLineRef) throws(GPIOError) {
        self.ref = ref
        line = try GPIO.request(ref) { doorbell_gpio_request_output($0, $1, GPIO.consumer, ref.activeLow ? 1 : 0) }
    }

    deinit {
        set(active: false)
        doorbell_gpio_release(line)
    }

    @discardableResult
    public func set(active: Bool) -> Bool {
        doorbell_gpio_set(line, active != ref.activeLow ? 1 : 0) == 0
    }
}
