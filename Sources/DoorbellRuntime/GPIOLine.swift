import CGPIOD
import DoorbellCore
import Glibc

// The only file that calls libgpiod (1.6, the character-device API). Chips are found by label,
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
        guard let dir = opendir("/dev") else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix("gpiochip") { names.append(name) }
        }
        return names.sorted().compactMap { name in
            guard let chip = gpiod_chip_open("/dev/" + name) else { return nil }
            defer { gpiod_chip_close(chip) }
            return GPIOChipInfo(path: "/dev/" + name, name: name, label: String(cString: gpiod_chip_label(chip)),
                                lines: Int(gpiod_chip_num_lines(chip)))
        }
    }

    /// By label first (what board configs use), then by name (`gpiochip0`) or path.
    static func openChip(_ spec: String) throws(GPIOError) -> OpaquePointer {
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
            throw GPIOError(description: "no GPIO chip labelled \"\(spec)\" (\(listing)). Set chip to one of those labels; `gpiodetect` lists them too")
        }
        guard let chip = gpiod_chip_open(path) else {
            let e = errno
            if e == EACCES || e == EPERM {
                throw GPIOError(description: "permission denied opening \(path): add the service user to group gpio (usermod -aG gpio doorbell-agent) or install board/common/99-doorbell-agent.rules")
            }
            throw GPIOError(description: "cannot open GPIO chip \(path): \(errnoText(e)) (\(listing))")
        }
        return chip
    }

    static func line(_ chip: OpaquePointer, _ ref: GPIOLineRef) throws(GPIOError) -> OpaquePointer {
        let count = Int(gpiod_chip_num_lines(chip))
        guard ref.line >= 0, ref.line < count, let line = gpiod_chip_get_line(chip, UInt32(ref.line)) else {
            throw GPIOError(description: "\(ref.chip) has lines 0-\(count - 1); line \(ref.line) does not exist")
        }
        return line
    }

    /// Opens the chip, takes the line with `request` (a libgpiod request call), and closes the
    /// chip again when anything fails, so a retry loop leaks no descriptors.
    static func request(_ ref: GPIOLineRef, _ request: (OpaquePointer) -> Int32) throws(GPIOError) -> (OpaquePointer, OpaquePointer) {
        let chip = try openChip(ref.chip)
        do throws(GPIOError) {
            let line = try line(chip, ref)
            guard request(line) == 0 else { throw requestFailed(line, ref, errno: errno) }
            return (chip, line)
        } catch {
            gpiod_chip_close(chip)
            throw error
        }
    }

    static func requestFailed(_ line: OpaquePointer, _ ref: GPIOLineRef, errno e: Int32) -> GPIOError {
        if e == EBUSY {
            _ = gpiod_line_update(line)
            let user = gpiod_line_consumer(line).map { String(cString: $0) } ?? "another program"
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
    private let chip: OpaquePointer
    private let line: OpaquePointer
    let ref: GPIOLineRef
    public let fd: Int32
    /// The level when the line was requested (true = carrier present after active_low).
    public let initialHigh: Bool
    private var buffer = [gpiod_line_event](repeating: gpiod_line_event(), count: 64)

    public init(_ ref: GPIOLineRef) throws(GPIOError) {
        self.ref = ref
        (chip, line) = try GPIO.request(ref) { gpiod_line_request_both_edges_events($0, GPIO.consumer) }
        fd = gpiod_line_event_get_fd(line)
        initialHigh = (gpiod_line_get_value(line) == 1) != ref.activeLow
    }

    deinit {
        gpiod_line_release(line)
        gpiod_chip_close(chip)
    }

    /// Reads what is queued (call when `fd` is readable): (carrier on, monotonic µs) per edge.
    public func read() throws(GPIOError) -> [(high: Bool, micros: Int64)] {
        let n = buffer.withUnsafeMutableBufferPointer { gpiod_line_event_read_multiple(line, $0.baseAddress, UInt32($0.count)) }
        guard n >= 0 else { throw GPIOError(description: "reading edges of \(ref): \(errnoText())") }
        var out: [(Bool, Int64)] = []
        out.reserveCapacity(Int(n))
        let now = Clocks.monotonicMicros()
        for e in buffer.prefix(Int(n)) {
            var micros = Int64(e.ts.tv_sec) * 1_000_000 + Int64(e.ts.tv_nsec) / 1_000
            // Kernels before 5.7 stamp edges with the wall clock: fall back to the read time.
            if abs(micros - now) > 10_000_000 { micros = now }
            out.append(((e.event_type == Int32(GPIOD_LINE_EVENT_RISING_EDGE)) != ref.activeLow, micros))
        }
        return out
    }
}

/// One output line (chime relay, buzzer), inactive while idle.
public final class GPIOOutputLine: @unchecked Sendable {
    private let chip: OpaquePointer
    private let line: OpaquePointer
    let ref: GPIOLineRef

    public init(_ ref: GPIOLineRef) throws(GPIOError) {
        self.ref = ref
        (chip, line) = try GPIO.request(ref) { gpiod_line_request_output($0, GPIO.consumer, ref.activeLow ? 1 : 0) }
    }

    deinit {
        set(active: false)
        gpiod_line_release(line)
        gpiod_chip_close(chip)
    }

    @discardableResult
    public func set(active: Bool) -> Bool {
        gpiod_line_set_value(line, active != ref.activeLow ? 1 : 0) == 0
    }
}
