import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The phone bonds on disk: 0600, read back after a restart, a damaged file set aside.
final class BondStoreTests: XCTestCase {
    func bond(_ last: UInt8) -> PhoneBond {
        PhoneBond(address: [0xC4, 0x11, 0x22, 0x33, 0x44, last], addressIsRandom: true, irk: Array(repeating: last, count: 16),
                  ltk: Array(repeating: last &+ 1, count: 16), name: "phone \(last)", bondedAtMicros: 1_000_000)
    }

    func testBondsSurviveARestartAndTheFileIsTheAgentsAlone() throws {
        let dir = try TempDir()
        let store = try BondStore(stateDir: dir.path, now: 0)
        XCTAssertNil(store.problem)
        try store.update { $0.add(bond(1)) }
        try store.update { $0.add(bond(2)) }
        var st = stat()
        XCTAssertEqual(stat(store.path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "the LTKs and IRKs are secrets")
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.path + ".tmp"))
        let again = try BondStore(stateDir: dir.path, now: 0)
        XCTAssertEqual(again.bonds.bonds.map(\.name), ["phone 1", "phone 2"])
        XCTAssertEqual(again.bonds.bonds.first?.ltk, Array(repeating: 2, count: 16))
        XCTAssertEqual(try again.update { $0.forget("C4:11:22:33:44:01")?.name }, "phone 1")
        XCTAssertEqual(try BondStore(stateDir: dir.path, now: 0).bonds.bonds.map(\.name), ["phone 2"])
    }

    func testADamagedFileIsSetAsideAndSaysWhatToDo() throws {
        let dir = try TempDir()
        _ = try dir.write("phones.json", "{\"version\":1,\"phones\":[{\"address\":\"zz\"}]}")
        let store = try BondStore(stateDir: dir.path, now: 1_795_000_000_000_000)
        XCTAssertEqual(store.bonds.bonds, [])
        XCTAssertTrue(store.problem?.contains("moved to \(dir.path)/phones.json.broken-1795000000; pair the phones again") ?? false, store.problem ?? "")
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.file("phones.json.broken-1795000000")))
        try store.update { $0.add(bond(3)) }
        XCTAssertEqual(try BondStore(stateDir: dir.path, now: 0).bonds.bonds.count, 1)
    }

    func testAWriteThatFailsChangesNothing() throws {
        let dir = try TempDir()
        let store = try BondStore(stateDir: dir.path, now: 0)
        try store.update { $0.add(bond(1)) }
        // A directory where the temporary file goes: the write cannot happen.
        try FileManager.default.createDirectory(atPath: store.path + ".tmp", withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: store.path + ".tmp/x", withIntermediateDirectories: false)
        XCTAssertThrowsError(try store.update { $0.add(bond(2)) }) { error in
            XCTAssertTrue("\(error)".contains("cannot write the phone bonds"), "\(error)")
        }
        XCTAssertEqual(store.bonds.bonds.map(\.name), ["phone 1"], "memory and disk agree: the bond was not taken")
    }
}
