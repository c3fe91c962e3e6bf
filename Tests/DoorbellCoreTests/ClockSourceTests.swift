import DoorbellCore
import Testing

/// What the agent believes about the clock and the boot under systemd's sandbox (issue #15: the
/// field rig showed ProtectClock= turning adjtimex into EPERM and ProcSubset=pid hiding boot_id).
@Suite struct ClockSourceTests {
    let flag = "/run/systemd/timesync/synchronized"

    @Test func aDeniedAdjtimexIsUnknownNotSynchronized() {
        let s = ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: true, kernel: .unreadable("Operation not permitted"))
        #expect(!s.synchronized)
        #expect(s.reason.contains("adjtimex: Operation not permitted"), "\(s.reason)")
        #expect(s.reason.contains(flag), "\(s.reason)")
    }

    @Test func theFlagFileWinsAndTheKernelIsBelievedWhenItAnswers() {
        #expect(ClockState.decide(flagFile: flag, flagPresent: true, kernelCheck: true, kernel: .unreadable("x")).synchronized)
        #expect(ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: true, kernel: .synchronized).synchronized)
        #expect(!ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: true, kernel: .unsynchronized).synchronized)
        #expect(!ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: false, kernel: .synchronized).synchronized)
    }

    @Test func bootIDFromProcThenFromSystemdsSpecifierElseUnknown() {
        let proc = Array("6a1f0e2c-31d4-4f5e-9a7b-0c1d2e3f4a5b\n".utf8)
        #expect(BootID.resolve(procFile: proc, environment: "ffffffffffffffffffffffffffffffff") == "6a1f0e2c-31d4-4f5e-9a7b-0c1d2e3f4a5b")
        // ProcSubset=pid: no /proc/sys; the unit passes %b (32 hex digits), written like the kernel's.
        #expect(BootID.resolve(procFile: nil, environment: "6A1F0E2C31D44F5E9A7B0C1D2E3F4A5B") == "6a1f0e2c-31d4-4f5e-9a7b-0c1d2e3f4a5b")
        #expect(BootID.resolve(procFile: nil, environment: "%b") == "unknown")
        #expect(BootID.resolve(procFile: nil, environment: nil) == "unknown")
    }
}
