#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Testing

/// Golden files live in Fixtures/ beside the tests. They are re-recorded only on demand
/// (`RECORD_GOLDEN=1 swift test`) and reviewed as a diff.
enum Golden {
    static let fixtures: String = {
        let here = #filePath
        return String(here[..<(here.lastIndex(of: "/") ?? here.endIndex)]) + "/Fixtures"
    }()

    static func read(_ name: String) throws -> String {
        try String(contentsOfFile: fixtures + "/" + name, encoding: .utf8)
    }

    static func check(_ actual: String, against name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let path = fixtures + "/" + name
        if ProcessInfo.processInfo.environment["RECORD_GOLDEN"] == "1" {
            try actual.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        guard let expected = try? String(contentsOfFile: path, encoding: .utf8) else {
            Issue.record("missing golden file \(path); record it with RECORD_GOLDEN=1 swift test", sourceLocation: sourceLocation)
            return
        }
        #expect(actual == expected, "output differs from \(name); re-record with RECORD_GOLDEN=1 after review", sourceLocation: sourceLocation)
    }
}
