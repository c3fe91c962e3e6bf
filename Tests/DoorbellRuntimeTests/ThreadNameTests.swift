import DoorbellRuntime
import Glibc
import XCTest

/// Every thread the agent starts carries its name in the kernel, so `top -H`, `ps -L` and perf
/// tell the radio from the uplink (the kernel keeps 15 bytes of it).
final class ThreadNameTests: XCTestCase {
    private func kernelName(ofThreadNamed name: String) -> String? {
        let seen = Locked<String?>(nil)
        let done = WakeSignal()
        XCTAssertTrue(startThread(name: name) {
            let fd = open("/proc/thread-self/comm", O_RDONLY)
            var buf = [UInt8](repeating: 0, count: 64)
            let n = fd >= 0 ? read(fd, &buf, buf.count) : -1
            if fd >= 0 { close(fd) }
            let bytes = n > 0 ? buf[0..<n].filter { $0 != UInt8(ascii: "\n") } : []
            seen.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
            done.signal()
        })
        for _ in 0..<50 where seen.snapshot == nil { _ = done.wait(timeoutMicros: 100_000) }
        return seen.snapshot
    }

    func testAThreadHasItsNameInTheKernel() {
        XCTAssertEqual(kernelName(ofThreadNamed: "uplink"), "uplink")
    }

    func testALongNameIsCutToWhatTheKernelKeeps() {
        XCTAssertEqual(kernelName(ofThreadNamed: "control-client-0123456789"), "control-client-")
    }
}
