import DoorbellCore
import DoorbellRuntime
import Glibc
import XCTest

/// What the agent believes about the clock and the boot under systemd's sandbox (issue #15: the
/// field rig showed ProtectClock= turning adjtimex into EPERM and ProcSubset=pid hiding boot_id).
final class ClockSourceTests: XCTestCase {
    let flag = "/run/systemd/timesync/synchronized"

    func testADeniedAdjtimexIsUnknownNotSynchronized() {
        let s = ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: true, kernelState: -EPERM)
        XCTAssertFalse(s.synchronized)
        XCTAssertTrue(s.reason.contains("adjtimex: Operation not permitted"), s.reason)
        XCTAssertTrue(s.reason.contains(flag), s.reason)
    }

    func testTheFlagFileWinsAndTheKernelIsBelievedWhenItAnswers() {
        XCTAssertTrue(ClockState.decide(flagFile: flag, flagPresent: true, kernelCheck: true, kernelState: -EPERM).synchronized)
        XCTAssertTrue(ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: true, kernelState: 0).synchronized)
        XCTAssertFalse(ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: true, kernelState: 1).synchronized)
        XCTAssertFalse(ClockState.decide(flagFile: flag, flagPresent: false, kernelCheck: false, kernelState: 0).synchronized)
    }

    func testBootIDFromProcThenFromSystemdsSpecifierElseUnknown() {
        let proc = Array("6a1f0e2c-31d4-4f5e-9a7b-0c1d2e3f4a5b\n".utf8)
        XCTAssertEqual(BootID.resolve(procFile: proc, environment: "ffffffffffffffffffffffffffffffff"), "6a1f0e2c-31d4-4f5e-9a7b-0c1d2e3f4a5b")
        // ProcSubset=pid: no /proc/sys; the unit passes %b (32 hex digits), written like the kernel's.
        XCTAssertEqual(BootID.resolve(procFile: nil, environment: "6A1F0E2C31D44F5E9A7B0C1D2E3F4A5B"), "6a1f0e2c-31d4-4f5e-9a7b-0c1d2e3f4a5b")
        XCTAssertEqual(BootID.resolve(procFile: nil, environment: "%b"), "unknown")
        XCTAssertEqual(BootID.resolve(procFile: nil, environment: nil), "unknown")
    }
}
