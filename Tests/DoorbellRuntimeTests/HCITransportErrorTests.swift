import DoorbellCore
import DoorbellRuntime
import XCTest

/// The BLE supervisor tells "nothing to talk to yet" (status `missing`) from a failure (status
/// `restarting`) by the error's code, never by matching its sentence, so rewording a message for
/// the operator cannot change what the radio reports.
final class HCITransportErrorTests: XCTestCase {
    func code(_ kind: HCITransportKind) -> HCIError? {
        do throws(HCIError) {
            _ = try HCITransport.open(kind)
            return nil
        } catch {
            return error
        }
    }

    func testAnAbsentDongleOrBridgeIsMissing() throws {
        let serial = code(.serial(path: "/dev/ttyDOESNOTEXIST9", baud: 1_000_000, flowControl: true))
        XCTAssertEqual(serial?.code, .noSuchDevice)
        XCTAssertEqual(serial?.meansAbsent, true)
        XCTAssertTrue(serial?.description.contains("/dev/ttyDOESNOTEXIST9") ?? false, "\(String(describing: serial))")

        let port = try freeLoopbackPort() // nothing listens there
        let tcp = code(.tcp(host: "127.0.0.1", port: port))
        XCTAssertEqual(tcp?.code, .connectionRefused)
        XCTAssertEqual(tcp?.meansAbsent, true)

        // hci99: no such controller, or (this machine) no Bluetooth in the kernel at all.
        let kernel = code(.kernel(device: 99, exclusive: true))
        XCTAssertEqual(kernel?.meansAbsent, true, "\(String(describing: kernel))")
    }

    func testAMisconfigurationIsNotMissing() {
        let bad = code(.tcp(host: "bridge.example", port: 1))
        XCTAssertEqual(bad?.code, .badAddress)
        XCTAssertEqual(bad?.meansAbsent, false)
        let notADevice = code(.serial(path: "/dev/null", baud: 115_200, flowControl: false))
        XCTAssertEqual(notADevice?.code, .io, "\(String(describing: notADevice))")
        XCTAssertEqual(notADevice?.meansAbsent, false)
    }
}
