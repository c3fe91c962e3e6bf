import Foundation
import XCTest

/// The ANCS fixtures and golden outputs, and a recorded SMP pairing, against independent
/// Python: Tests/helpers/ancs_reference.py (struct, Bumble's ANCS decoder) and smp_reference.py
/// (Bumble's SMP parser and crypto). The Swift side of both is in DoorbellCoreTests.
final class ANCSSMPReferenceTests: XCTestCase {
    static let python = Paths.repoRoot + "/.venv/bin/python"

    func referenceAgrees(_ script: String, _ arguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw skip("SKIPPED: .venv missing; make test creates it with bumble")
        }
        let r = try runCommand(Self.python, [Paths.repoRoot + "/Tests/helpers/" + script] + arguments)
        XCTAssertEqual(r.status, 0, "\(script) disagrees:\n\(r.stdout)\(r.stderr)")
    }

    func testANCSFixturesAndGoldenOutputsAgreeWithTheReference() throws {
        try referenceAgrees("ancs_reference.py", ["check"])
    }

    func testTheRecordedPairingVerifiesWithBumble() throws {
        try referenceAgrees("smp_reference.py", [])
    }
}
