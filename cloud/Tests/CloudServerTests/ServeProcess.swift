import CloudCore
import CloudStore
import Foundation
import Testing

/// `doorbell-cloud serve` started for real (the binary `swift build` made beside this test
/// bundle), over TLS with the APNs stand-in's test PKI, its output in files.
final class ServeProcess: @unchecked Sendable {
    let process = Process()
    let port: Int
    let stdoutFile: URL
    let stderrFile: URL
    let caFile: String

    /// The built binary: `DOORBELL_CLOUD_BIN`, else beside the test bundle, else cloud/.build/debug.
    static var binary: String {
        if let explicit = ProcessInfo.processInfo.environment["DOORBELL_CLOUD_BIN"] { return explicit }
        let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("doorbell-cloud").path
        if FileManager.default.isExecutableFile(atPath: besideTests) { return besideTests }
        return APNsTestServer.repository.appendingPathComponent("cloud/.build/debug/doorbell-cloud").path
    }

    init(apns: APNsTestServer, db: String, in directory: URL, name: String, arguments: [String] = []) throws {
        let pki = apns.directory.appendingPathComponent("pki")
        let keyFile = directory.appendingPathComponent("apns-key.p8")
        try apns.keyPEM.write(to: keyFile, atomically: true, encoding: .utf8)
        let ready = directory.appendingPathComponent("\(name).ready.json")
        stdoutFile = directory.appendingPathComponent("\(name).out")
        stderrFile = directory.appendingPathComponent("\(name).err")
        caFile = pki.appendingPathComponent("ca.pem").path
        FileManager.default.createFile(atPath: stdoutFile.path, contents: nil)
        FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw TestSetupError("no doorbell-cloud binary at \(Self.binary): run `swift build` first (make test does)")
        }
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = [
            "serve", "--tls-cert", pki.appendingPathComponent("server.pem").path,
            "--tls-key", pki.appendingPathComponent("server.key").path, "--db", db,
            "--port", "0", "--ready-file", ready.path,
            "--apns-key", keyFile.path, "--apns-key-id", APNsTestServer.keyID, "--apns-team-id", APNsTestServer.teamID,
            "--apns-topic", APNsTestServer.topic, "--apns-ca", apns.caFile,
            "--apns-production-url", apns.url, "--apns-sandbox-url", apns.url,
        ] + arguments
        process.standardOutput = try FileHandle(forWritingTo: stdoutFile)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        guard let found = readyPort(ready, of: process) else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            throw TestSetupError("doorbell-cloud serve did not become ready within 30 s: \(Self.read(stderrFile).suffix(2000))")
        }
        port = found
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    var stdout: String { Self.read(stdoutFile) }
    var stderr: String { Self.read(stderrFile) }

    static func read(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits (at most `seconds`) for the exit; nil if it is still running.
    func stop(_ signal: Int32 = SIGTERM, within seconds: Double = 40) -> Int32? {
        if process.isRunning { kill(process.processIdentifier, signal) }
        for _ in 0..<Int(seconds * 20) where process.isRunning { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { return nil }
        return process.terminationStatus
    }

    /// POSTs a v1-signed doorbell.pressed event with curl, as the agent would; the HTTP status.
    func press(id: String, secret: String, gateway: String = "gw-0001") throws -> Int {
        let body = #"{"id":"\#(id)","sequence":1,"type":"doorbell.pressed","gateway_id":"\#(gateway)","occurred_at":"2026-11-23T18:00:00.000000Z","device":{"id":"front-door","name":"Front door"}}"#
        let timestamp = String(Int64(Date().timeIntervalSince1970))
        let signature = SignatureVerifier.v1Signature(
            secret: try WebhookSecret(parsing: secret), id: id, timestamp: timestamp, body: Array(body.utf8))
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = [
            "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30", "--cacert", caFile,
            "-H", "webhook-id: \(id)", "-H", "webhook-timestamp: \(timestamp)", "-H", "webhook-signature: \(signature)",
            "-H", "doorbell-gateway-id: \(gateway)", "-H", "content-type: application/json",
            "--data-binary", body, "https://127.0.0.1:\(port)/events",
        ]
        let output = Pipe()
        curl.standardOutput = output
        try curl.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        curl.waitUntilExit()
        return Int(text) ?? 0
    }
}

/// Polls `condition` every 50 ms until it holds or `seconds` pass; whether it held.
func eventually(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    for _ in 0..<Int(seconds * 20) {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return try condition()
}

/// `eventually` for a condition that awaits (the store's calls).
func eventually(_ seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    for _ in 0..<Int(seconds * 20) {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}
