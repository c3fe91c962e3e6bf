import CSQLite
import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// #29 first boot, with the real binaries: `doorbell-agent provision` against `doorbell-cloud
/// serve` over HTTPS on 127.0.0.1, a temporary boot directory standing for the FAT partition.
final class ProvisionIntegrationTests: XCTestCase {
    var dir: TempDir!
    var cloud: CloudFixture!
    let adminToken = "admin-" + UUID().uuidString

    override func setUpWithError() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
        cloud = try CloudFixture(dir: dir)
        let adminFile = try dir.write("admin.token", adminToken + "\n")
        // No fallback keys: an event verifies only if its gateway really enrolled.
        try cloud.start(fallbackKeys: false, extra: ["--admin-token-file", adminFile])
    }

    override func tearDown() {
        cloud?.stop()
    }

    func post(_ path: String, bearer: String?, _ body: String) throws -> (Int, JSONValue?) {
        let client = try HTTPSClient(options: HTTPSClientOptions(url: "https://127.0.0.1:\(cloud.port)\(path)", caFile: cloud.caFile))
        var headers = [("Content-Type", "application/json")]
        if let bearer { headers.append(("Authorization", "Bearer " + bearer)) }
        let response = try client.post(body: Array(body.utf8), headers: headers).get()
        return (response.status, try? JSONReader.parse(bytes: response.body))
    }

    /// An account and an enrolment token from it, as the owner's app would make them.
    func account() throws -> String {
        let (status, json) = try post("/accounts", bearer: adminToken, #"{"name":"Alice"}"#)
        XCTAssertEqual(status, 201)
        return try XCTUnwrap(json?["token"]?.stringValue)
    }

    func enrolmentToken(_ account: String) throws -> String {
        let (status, json) = try post("/enrolment-tokens", bearer: account, "{}")
        XCTAssertEqual(status, 201, "\(String(describing: json))")
        return try XCTUnwrap(json?["token"]?.stringValue)
    }

    struct Box {
        let boot: String
        let etc: String
        let state: String
        let socket: String
        var bootFile: String { boot + "/doorbell.toml" }
        var status: ProvisionStatus? {
            (try? Data(contentsOf: URL(fileURLWithPath: state + "/provisioning.json"))).flatMap { ProvisionStatus(json: Array($0)) }
        }
    }

    /// A boot partition for gateway `gateway` with `token`, and the box's directories.
    func box(_ name: String, gateway: String, token: String, agentExtra: String = "") throws -> Box {
        let root = dir.file(name)
        let box = Box(boot: root + "/boot", etc: root + "/etc", state: root + "/state", socket: root + "/control.sock")
        try FileManager.default.createDirectory(atPath: box.boot, withIntermediateDirectories: true)
        let radio = "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"\n"
        var agent = agentConfig(gateway: gateway, stateDir: box.state, socket: box.socket, radio: radio,
                                devices: [("front-door", #"{ code = "0x91568F" }"#)], url: cloud.url, caFile: cloud.caFile,
                                secretFile: cloud.secretFile)
        // Enrolled by its device key alone, as the image's gateways are.
        agent = agent.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("hmac_secret_file") }
            .joined(separator: "\n")
        let text = agent + agentExtra + """

            [provision]
            enrolment_token = "\(token)"
            ssh_authorized_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBOOT installer@laptop"
            wifi_ssid = "doorbell-test"
            wifi_psk = "correct horse battery"
            wifi_country = "DE"

            """
        try text.write(toFile: box.bootFile, atomically: true, encoding: .utf8)
        return box
    }

    func provision(_ box: Box) throws -> (status: Int32, stdout: String, stderr: String) {
        try runCommand(Paths.agentBinary, [
            "provision", "--boot-dir", box.boot, "--config-dir", box.etc, "--state-dir", box.state,
            "--authorized-keys", box.boot + "/../root/.ssh/authorized_keys", "--wifi-dir", box.boot + "/../wpa",
            "--network-dir", box.boot + "/../networkd",
        ])
    }

    func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    func bytes(_ path: String) -> Data { FileManager.default.contents(atPath: path) ?? Data() }

    func testFirstBootEnrolsOnceRemovesTheTokenAndTheGatewayDelivers() throws {
        let token = try enrolmentToken(try account())
        let box = try box("gw1", gateway: "gw-prov-1", token: token)

        var run = try provision(box)
        XCTAssertEqual(run.status, 0, run.stderr)
        let boot = read(box.bootFile)
        XCTAssertFalse(boot.contains(token), "the token is gone from the boot partition")
        XCTAssertFalse(boot.contains("correct horse battery"), "and so is the Wi-Fi passphrase")
        XCTAssertTrue(boot.contains("wifi_ssid = \"doorbell-test\""), "the rest stays for the installer to see")
        XCTAssertEqual(box.status?.state, .provisioned)
        let installed = read(box.etc + "/agent.toml")
        XCTAssertFalse(installed.contains(token) || installed.contains("[provision]\n"))
        XCTAssertEqual(try runCommand(Paths.agentBinary, ["check-config", box.etc + "/agent.toml"]).status, 0)
        XCTAssertTrue(read(box.boot + "/../root/.ssh/authorized_keys").contains("installer@laptop"))
        let wifi = read(box.boot + "/../wpa/wpa_supplicant-wlan0.conf")
        XCTAssertTrue(wifi.contains("psk=\"correct horse battery\""), wifi)
        XCTAssertTrue(read(box.boot + "/../networkd/25-doorbell-wlan0.network").contains("Name=wlan0"))
        let key = bytes(box.state + "/device.key")
        XCTAssertEqual(key.count, 32)

        // Again (the unit runs on every boot, or after a power cut): nothing changes.
        let statusBefore = read(box.state + "/provisioning.json")
        run = try provision(box)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(read(box.state + "/provisioning.json"), statusBefore)
        XCTAssertEqual(bytes(box.state + "/device.key"), key, "the key is never replaced")

        // The proof that the cloud holds this gateway's key: a press is delivered and verified,
        // with no fallback key on the server.
        let agent = try startAgent(dir, config: box.etc + "/agent.toml", socket: box.socket)
        defer { agent.stop() }
        XCTAssertEqual(try injectPress(box.socket), 0)
        eventually(30, "the press reaches the cloud") { !self.cloud.events.isEmpty }
        XCTAssertEqual(cloud.events.first?["gateway_id"]?.stringValue, "gw-prov-1")
        XCTAssertEqual(cloud.events.first?["verified"]?.arrayValues?.compactMap(\.stringValue), ["v1a"])
    }

    func testUsedExpiredAndBadFilesAreRefusedWithWhatToDo() throws {
        let alice = try account()
        let token = try enrolmentToken(alice)
        let first = try box("first", gateway: "gw-a", token: token)
        XCTAssertEqual(try provision(first).status, 0)

        // The same token on another box (a copied card): refused, the file left for the installer.
        let copy = try box("copy", gateway: "gw-b", token: token)
        var run = try provision(copy)
        XCTAssertEqual(run.status, 65, run.stderr)
        XCTAssertTrue(run.stderr.contains("enrolment_token_used") && run.stderr.contains("new enrolment_token"), run.stderr)
        XCTAssertEqual(copy.status?.state, .problem)
        XCTAssertTrue(read(copy.bootFile).contains(token))

        // An expired token, written into the real store as the cloud would have made it a day ago.
        let expired = "dbe_" + String(repeating: "E", count: 43)
        try insertToken(expired, account: alice, expiresAtMs: 1)
        run = try provision(try box("late", gateway: "gw-c", token: expired))
        XCTAssertEqual(run.status, 65, run.stderr)
        XCTAssertTrue(run.stderr.contains("enrolment_token_expired"), run.stderr)

        // A bad agent part: exit 78, the line of the boot file, status and cloud told; Wi-Fi and
        // SSH in place so the box stays reachable.
        let fresh = try enrolmentToken(alice)
        let bad = try box("bad", gateway: "gw-d", token: fresh, agentExtra: "\n[outbox]\nmax_events = -1\n")
        run = try provision(bad)
        XCTAssertEqual(run.status, 78, run.stderr)
        XCTAssertTrue(run.stderr.contains(bad.bootFile + ":"), run.stderr)
        XCTAssertEqual(bad.status?.state, .problem)
        XCTAssertFalse(FileManager.default.fileExists(atPath: bad.etc + "/agent.toml"))
        XCTAssertTrue(read(bad.boot + "/../root/.ssh/authorized_keys").contains("installer@laptop"))
        let problems = try query("SELECT gateway_id, problem FROM provisioning_reports")
        XCTAssertEqual(problems.first?.first ?? nil, "gw-d")
        XCTAssertTrue((problems.first?.last ?? nil)?.contains("outbox.max_events") == true, "\(problems)")
        // agentctl status names the problem though no agent runs.
        let status = try runCommand(Paths.agentctlBinary, ["status", "--socket", bad.socket, "--state-dir", bad.state])
        XCTAssertEqual(status.status, 69)
        XCTAssertTrue(status.stderr.contains("PROBLEM"), status.stderr)
    }

    func testCloudDownExitsTempfailAndLosesNothing() throws {
        let token = try enrolmentToken(try account())
        let box = try box("down", gateway: "gw-down", token: token)
        let port = cloud.port
        cloud.stop()
        var run = try provision(box)
        XCTAssertEqual(run.status, 75, run.stderr)
        XCTAssertEqual(box.status?.state, .waiting)
        XCTAssertTrue(read(box.bootFile).contains(token), "the token stays until it is used")
        let key = bytes(box.state + "/device.key")
        XCTAssertEqual(key.count, 32, "what could be done is done")
        try cloud.start(port: port, fallbackKeys: false, extra: ["--admin-token-file", dir.file("admin.token")])
        run = try provision(box)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(box.status?.state, .provisioned)
        XCTAssertEqual(bytes(box.state + "/device.key"), key)
        XCTAssertEqual(try query("SELECT id FROM gateways").map(\.first), ["gw-down"])
    }

    // MARK: The cloud's SQLite file, read and written beside the running server (WAL).

    func query(_ sql: String) throws -> [[String?]] {
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(dir.file("cloud.sqlite"), &db), SQLITE_OK)
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5_000)
        var stmt: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, sql, -1, &stmt, nil), SQLITE_OK)
        defer { sqlite3_finalize(stmt) }
        var rows: [[String?]] = []
        while sqlite3_step(stmt) == SQLITE_ROW, rows.count < 1_000 {
            rows.append((0..<sqlite3_column_count(stmt)).map { sqlite3_column_text(stmt, $0).map { String(cString: $0) } })
        }
        return rows
    }

    func insertToken(_ token: String, account: String, expiresAtMs: Int64) throws {
        let accountID = try XCTUnwrap(try query("SELECT id FROM accounts").first?.first ?? nil)
        let hash = Hex.encode(SHA256.hash(Array(token.utf8)))
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(dir.file("cloud.sqlite"), &db), SQLITE_OK)
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5_000)
        XCTAssertEqual(sqlite3_exec(db, """
            INSERT INTO enrolment_tokens (token_sha256, account_id, created_at_ms, expires_at_ms)
            VALUES ('\(hash)', '\(accountID)', 0, \(expiresAtMs))
            """, nil, nil, nil), SQLITE_OK)
    }
}
