import Crypto
import Foundation
import Testing

/// Tests/helpers/apns_test_server.py started for real: TLS, HTTP/2, JWT checks, scripted answers.
/// Owns a temporary directory with a test PKI, an ES256 key pair, the script and the request log.
final class APNsTestServer: @unchecked Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.doorbell"

    let directory: URL
    let process: Process
    let port: Int
    let keyPEM: String
    var url: String { "https://127.0.0.1:\(port)" }
    var caFile: String { directory.appendingPathComponent("pki/ca.pem").path }
    var scriptFile: URL { directory.appendingPathComponent("script.json") }
    var logFile: URL { directory.appendingPathComponent("requests.jsonl") }

    /// The repository root (the cloud package is its `cloud/` folder).
    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }

    static var python: String? {
        if let explicit = ProcessInfo.processInfo.environment["DOORBELL_TEST_PYTHON"] { return explicit }
        let venv = repository.appendingPathComponent(".venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
    }

    init(script: [String: Any]) throws {
        guard let python = Self.python else {
            throw TestSetupError("no Python venv: run scripts/venv.sh from the repository root (make test does)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Self.run("/bin/bash", [Self.repository.appendingPathComponent("scripts/make-test-pki.sh").path,
                                   directory.appendingPathComponent("pki").path])
        let key = P256.Signing.PrivateKey()
        keyPEM = key.pemRepresentation
        let publicKeyFile = directory.appendingPathComponent("key.pub.pem")
        try key.publicKey.pemRepresentation.write(to: publicKeyFile, atomically: true, encoding: .utf8)
        try Self.writeJSON(script, to: directory.appendingPathComponent("script.json"))
        let ready = directory.appendingPathComponent("ready.json")

        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            Self.repository.appendingPathComponent("Tests/helpers/apns_test_server.py").path,
            "--cert", directory.appendingPathComponent("pki/server.pem").path,
            "--key", directory.appendingPathComponent("pki/server.key").path,
            "--port", "0", "--ready-file", ready.path,
            "--team-id", Self.teamID, "--key-id", Self.keyID,
            "--public-key", publicKeyFile.path, "--topic", Self.topic,
            "--script", directory.appendingPathComponent("script.json").path,
            "--log", directory.appendingPathComponent("requests.jsonl").path,
            "--max-concurrent-streams", "100",
        ]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        guard let found = readyPort(ready, of: process) else {
            process.terminate()
            throw TestSetupError("apns_test_server.py did not become ready within 30 s")
        }
        port = found
    }

    deinit {
        if process.isRunning {
            process.terminate()
            // Bounded: SIGKILL if it has not gone within 5 s.
            for _ in 0..<50 where process.isRunning { Thread.sleep(forTimeInterval: 0.1) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    func setScript(_ script: [String: Any]) throws {
        try Self.writeJSON(script, to: scriptFile)
    }

    /// Every line of the request log, parsed.
    func log() throws -> [[String: Any]] {
        guard let text = try? String(contentsOf: logFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Requests the server processed (answered), optionally only for one token.
    func processed() throws -> [[String: Any]] {
        try log().filter { ($0["event"] as? String) == "request" }
    }

    static func writeJSON(_ object: [String: Any], to url: URL) throws {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        let temporary = url.appendingPathExtension("tmp")
        try data.write(to: temporary)
        guard rename(temporary.path, url.path) == 0 else { throw TestSetupError("cannot rename \(temporary.path)") }
    }

    static func run(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSetupError("\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The port a child wrote to its `--ready-file` (`{"port": N}`), waiting at most 30 s; nil if
/// it exited or never wrote it.
func readyPort(_ file: URL, of process: Process) -> Int? {
    for _ in 0..<600 {
        if let data = try? Data(contentsOf: file),
           let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
           let port = object["port"] as? Int {
            return port
        }
        guard process.isRunning else { return nil }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return nil
}

/// A random 64-hex-digit device token.
func randomDeviceToken() -> String {
    (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}
