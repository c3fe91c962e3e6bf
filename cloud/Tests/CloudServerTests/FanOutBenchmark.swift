import CloudCore
import CloudPush
import CloudStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// `make bench` runs this with DOORBELL_FANOUT_BENCH=N: one event to N phones through the real
/// fan-out and the APNs test server, once with the default concurrency and once one push at a
/// time (the naive sender, without its 400 ms sleeps). It checks every push arrived exactly once
/// and writes the rates as TSV rows; it asserts nothing about speed.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["DOORBELL_FANOUT_BENCH"] != nil,
                             "a benchmark: scripts/bench.sh sets DOORBELL_FANOUT_BENCH"))
final class FanOutBenchmark: Sendable {
    func rate(pushes: Int, concurrency: Int) async throws -> Double {
        let outer = try await FanOutTests()
        let tokens = (0..<pushes).map { _ in randomDeviceToken() }
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await outer.cloud(apns, concurrency: concurrency)
        let eventID = "019ab2c4-5d6e-7f80-9a1b-\(String(format: "%012x", concurrency))"
        let seconds = try await cloud.app.test(.router) { client -> Double in
            let owner = try await outer.household(client, guests: 0)[0]
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for token in tokens {
                try await cloud.store.registerPhone(token: token, accountID: owner.id, installationSecret: String(repeating: "s", count: 43), environment: .sandbox,
                                                    bundleID: APNsTestServer.topic, now: now)
            }
            #expect(try await outer.press(client, id: eventID).1["pushes"] as? Int == pushes)
            let start = ContinuousClock.now
            let runner = Task { await cloud.fanOut.run() }
            let rows = try await outer.settled(eventID, cloud.store)
            let elapsed = (ContinuousClock.now - start) / .seconds(1)
            runner.cancel()
            await runner.value
            #expect(rows.filter { $0.state == .delivered }.count == pushes)
            return elapsed
        }
        await cloud.client.shutdown()
        let ok = try apns.processed().filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        #expect(ok.count == pushes && Set(ok).count == pushes, "each phone exactly once")
        return Double(pushes) / seconds
    }

    @Test func fanOutThroughput() async throws {
        let pushes = Int(ProcessInfo.processInfo.environment["DOORBELL_FANOUT_BENCH"] ?? "") ?? 2000
        let concurrent = try await rate(pushes: pushes, concurrency: 100)
        let serial = try await rate(pushes: min(pushes, 500), concurrency: 1)
        let rows = [
            "fanout_pushes_per_s\t\(Int(concurrent))\tpushes/s\tone event to \(pushes) phones: doorbell-cloud (debug build) → APNs test server (Python h2) over one TLS HTTP/2 connection, 100 streams in flight, until every delivery is recorded",
            "fanout_one_at_a_time_per_s\t\(Int(serial))\tpushes/s\tsame, one push at a time (the naive sender without its 400 ms sleeps): concurrency is \(String(format: "%.1f", concurrent / serial))× faster",
        ]
        let text = rows.joined(separator: "\n") + "\n"
        print(text, terminator: "")
        if let path = ProcessInfo.processInfo.environment["DOORBELL_FANOUT_BENCH_OUT"] {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }
}
