@testable import DoorbellCore
import Foundation
import Testing

/// The README's configuration table, the reference in the code and the loader say the same:
/// a key added, renamed or dropped in one of them fails here.
@Suite struct ConfigReferenceTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Documents that, together, enter every section and every branch that reads keys of its own
    /// (each OOK source, each BLE transport).
    static let documents: [String] = [
        """
        gateway_id = "gw"
        [paths]
        state_dir = "/tmp/s"
        [log]
        level = "info"
        [radio.rtl433]
        replay = ["a.cu8"]
        [tracker.button]
        cooldown_ms = 0
        [[device]]
        id = "front"
        match = { model = "Generic-Remote", id = 1 }
        [[device]]
        id = "side"
        radio = "ble"
        match = { address = "C0:11:22:33:44:02" }
        bindkey = "231d39c1d7cc1ab1aee224cd096db932"
        [radio.ble]
        transport = "hci"
        [beacon]
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 1
        minor = 2
        [[region]]
        id = "path"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        [[region]]
        id = "android"
        namespace = "00112233445566778899"
        instance = "aabbccddeeff"
        [uplink]
        url = "https://example.com/events"
        hmac_secret_file = "g.whsec"
        [mqtt]
        host = "127.0.0.1"
        [outbox]
        max_events = 100
        [clock]
        require_sync = false
        [memory]
        release_clean_pages = false
        [[action]]
        name = "chime"
        exec = ["/bin/true"]
        [[action]]
        name = "relay"
        gpio_pulse = { chip = "gpiochip0", line = 17, ms = 200 }
        [metrics]
        file = "/tmp/m.prom"
        [update]
        url = "https://updates.example.com/doorbell-raspberrypi-4.raucb"
        """,
        """
        gateway_id = "gw"
        [radio.ook]
        source = "gpio"
        chip = "gpiochip0"
        line = 27
        [radio.ble]
        transport = "serial"
        device = "/dev/ttyACM0"
        """,
        """
        gateway_id = "gw"
        [radio.ook]
        source = "rtl433"
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:9000"
        """,
        """
        gateway_id = "gw"
        [radio.ook]
        source = "replay"
        replay = ["a.ook"]
        [radio.ble]
        transport = "replay"
        replay = ["a.btsnoop"]
        """,
    ]

    static func readmeTable() throws -> String {
        let readme = try String(contentsOfFile: repoRoot + "/README.md", encoding: .utf8)
        let lines = readme.components(separatedBy: "\n")
        guard let start = lines.firstIndex(of: "| key | type | default | meaning |") else { return "" }
        return lines[start...].prefix { $0.hasPrefix("|") }.joined(separator: "\n")
    }

    @Test func theReadmeTableIsTheReference() throws {
        let table = try Self.readmeTable()
        let expected = ConfigReference.markdown
        if table != expected {
            let have = Set(table.components(separatedBy: "\n")), want = Set(expected.components(separatedBy: "\n"))
            Issue.record("README.md's configuration table differs from ConfigReference.rows (Sources/DoorbellCore/ConfigReference.swift); change both. Only in README: \(have.subtracting(want).sorted()); only in the code: \(want.subtracting(have).sorted())")
        }
    }

    @Test func everyKeyTheLoaderReadsIsDocumentedAndEveryDocumentedKeyIsRead() {
        let documented = ConfigReference.keyPaths
        var asked: Set<String> = []
        for doc in Self.documents { asked.formUnion(ConfigLoader.keysRead(text: doc)) }
        // Sections are not keys; the keys of a free-form table are the user's.
        let read = asked.filter { path in
            documented.contains(path) || !(asked.contains { $0.hasPrefix(path + ".") })
        }.filter { path in !ConfigReference.freeForm.contains { path.hasPrefix($0 + ".") } }
        #expect(read.subtracting(documented).sorted() == [], "read by the loader, missing from ConfigReference/README")
        #expect(documented.subtracting(read).sorted() == [], "documented, but the loader never reads them (or the test's documents do not reach them)")
    }
}
