// What the agent believes about the wall clock and the boot, decided from what the OS says
// (the runtime reads the facts: the timesyncd flag file, adjtimex, /proc or systemd's %b).

/// What adjtimex said about NTP synchronization.
public enum KernelNTPState: Sendable, Equatable {
    case synchronized, unsynchronized
    /// The call failed (a unit with ProtectClock=yes makes it EPERM): why, for the operator.
    case unreadable(String)
}

/// The clock's state and the reason, decided from the three facts the OS gives.
public struct ClockState: Sendable, Equatable {
    public let synchronized: Bool
    public let reason: String

    public static func decide(flagFile: String, flagPresent: Bool, kernelCheck: Bool, kernel: KernelNTPState) -> ClockState {
        if flagPresent { return ClockState(synchronized: true, reason: "\(flagFile) exists (systemd-timesyncd synchronized)") }
        guard kernelCheck else { return ClockState(synchronized: false, reason: "waiting for \(flagFile) (kernel_check = false)") }
        switch kernel {
        case .synchronized: return ClockState(synchronized: true, reason: "the kernel reports NTP synchronization (adjtimex)")
        case .unsynchronized: return ClockState(synchronized: false, reason: "the kernel reports no NTP synchronization and \(flagFile) is absent")
        case let .unreadable(why):
            return ClockState(synchronized: false, reason: "the kernel's NTP state is unreadable (adjtimex: \(why); a unit with ProtectClock=yes or without adjtimex in SystemCallFilter= denies it) and \(flagFile) is absent: waiting for systemd-timesyncd")
        }
    }
}

public enum BootID {
    /// The kernel's boot_id (8-4-4-4-12 hex), from /proc or from systemd's `%b` (32 hex digits).
    public static func resolve(procFile: [UInt8]?, environment: String?) -> String {
        if let bytes = procFile, let id = normalize(String(decoding: bytes, as: UTF8.self)) { return id }
        if let env = environment, let id = normalize(env) { return id }
        return "unknown"
    }

    static func normalize(_ text: String) -> String? {
        let hex = text.lowercased().filter { !$0.isWhitespace && $0 != "-" }
        guard hex.count == 32, hex.allSatisfy(\.isHexDigit) else { return nil }
        let c = Array(hex)
        return [c[0..<8], c[8..<12], c[12..<16], c[16..<20], c[20..<32]].map { String($0) }.joined(separator: "-")
    }
}
