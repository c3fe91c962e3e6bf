import DoorbellCore
import Foundation
import Glibc
import XCTest

/// `doorbell-agent replay` streams a btsnoop capture: its peak RSS must not grow with the
/// capture's length (it held the whole parsed capture, ≈ 400 B an advert, before). Two captures
/// of the same 256 buttons, one ten times as long, replayed by the real binary; the kernel's
/// peak RSS of each (wait4's ru_maxrss) is compared, and every press must come out once.
final class ReplayMemoryTests: XCTestCase {
    /// `adverts` reports 1 ms apart, in tens: a press of one of 256 BTHome buttons sent 4 times
    /// with one packet id (a button presses again every 2.56 s, within the default cooldown, so
    /// the test's config sets none), 3 iBeacons and 3 other manufacturer adverts from addresses
    /// that change every time (a busy street).
    static func writeCapture(_ path: String, adverts: Int) throws {
        FileManager.default.createFile(atPath: path, contents: nil)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? file.close() }
        let uuid: [UInt8] = [0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0]
        var out = BTSnoop.header
        for i in 0..<adverts {
            let press = i / 10
            var address: [UInt8] = [0xC0, 0x11, 0x22, 0x33, UInt8(truncatingIfNeeded: i >> 8), UInt8(truncatingIfNeeded: i)]
            let data: [UInt8]
            switch i % 10 {
            case 0..<4:
                address = [0xC0, 0x11, 0x22, 0x00, 0x00, UInt8(press & 0xFF)]
                let sd = BTHomeDecoder.encode(objects: [0x00, UInt8(press >> 8 & 0xFF), 0x3A, 0x01], triggerBased: true, address: address, bindkey: nil)
                data = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
            case 4..<7:
                data = [0x02, 0x01, 0x06, 26, 0xFF] + IBeacon(uuid: uuid, major: 1, minor: UInt16(i % 3), measuredPower: -59).manufacturerData
            default:
                data = [0x02, 0x01, 0x06, 0x05, 0xFF, 0x4C, 0x00, UInt8(i & 0xFF), UInt8(i >> 8 & 0xFF)]
            }
            var params: [UInt8] = [0x02, 0x01, 0x03, 0x01]
            params += address.reversed()
            params.append(UInt8(data.count))
            params += data
            params.append(0xC4)
            out += BTSnoop.record(BTSnoopRecord(timeMicros: 1_795_000_000_000_000 + Int64(i) * 1_000, received: true,
                                                packet: [0x04, 0x3E, UInt8(params.count)] + params))
            if out.count > 1 << 16 { file.write(Data(out)); out.removeAll(keepingCapacity: true) }
        }
        file.write(Data(out))
    }

    /// Runs the agent with stdout and stderr to files; its exit status and peak RSS in KiB.
    static func run(_ arguments: [String], stdout: String, stderr: String) throws -> (status: Int32, maxRSSKiB: Int) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([Paths.agentBinary] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, Paths.agentBinary, &actions, nil, argv, environ)
        guard rc == 0 else { throw NSError(domain: "spawn", code: Int(rc)) }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        return (status, usage.ru_maxrss)
    }

    func testPeakMemoryOfAReplayDoesNotGrowWithTheCapturesLength() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        var peaks: [Int] = []
        for adverts in [10_000, 100_000] {
            let capture = dir.file("busy-\(adverts).btsnoop")
            try Self.writeCapture(capture, adverts: adverts)
            // Without cooldown every press of a button is its own event, wherever it falls.
            let config = try dir.write("agent.toml", "gateway_id = \"gw-replay\"\n[radio.ble]\ntransport = \"replay\"\nreplay = [\"\(capture)\"]\n"
                + "[tracker.button]\ncooldown_ms = 0\n"
                + (0..<256).map { "[[device]]\nid = \"b\($0)\"\nradio = \"ble\"\nmatch = { address = \"C0:11:22:00:00:\(String(format: "%02X", $0))\" }\n" }.joined())
            let (status, peak) = try Self.run(["replay", "--config", config, capture], stdout: dir.file("out.jsonl"), stderr: dir.file("err.txt"))
            let err = (try? String(contentsOfFile: dir.file("err.txt"), encoding: .utf8)) ?? ""
            XCTAssertEqual(status, 0, err)
            // Every press once, in order, whole lines (the output is buffered and written in chunks).
            let lines = try String(contentsOfFile: dir.file("out.jsonl"), encoding: .utf8).split(separator: "\n")
            XCTAssertEqual(lines.count, adverts / 10, err)
            XCTAssertEqual(try lines.last.map { try JSONReader.parse(String($0))["sequence"]?.intValue }, Int64(adverts / 10))
            XCTAssertEqual(try lines.last.map { try JSONReader.parse(String($0))["device"]?["id"]?.stringValue }, "b\((adverts / 10 - 1) & 0xFF)")
            peaks.append(peak)
        }
        // Ten times the capture (90,000 more adverts: 34 MiB more at the old 400 B an advert)
        // may cost allocator noise, not memory per advert.
        XCTAssertLessThan(peaks[1], peaks[0] + 4 * 1024, "peak RSS \(peaks[0]) KiB for 10,000 adverts, \(peaks[1]) KiB for 100,000")
    }
}
