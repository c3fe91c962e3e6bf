import DoorbellCore
import Foundation
import XCTest

/// TOMLReader against Python's tomllib (Python 3.11+, the reference TOML 1.0 parser): the
/// committed corpus (Tests/DoorbellCoreTests/Fixtures/toml) and seeded mutations of it must give
/// the same value tree, key order and exact numbers included, or be refused by both. Every
/// disagreement must be one of the documented, intended ones.
final class TOMLDifferentialTests: XCTestCase {
    static let corpus = Paths.repoRoot + "/Tests/DoorbellCoreTests/Fixtures/toml"
    static let reference = Paths.repoRoot + "/Tests/helpers/toml_reference.py"

    /// Fixtures we refuse and tomllib accepts, on purpose.
    static let intended: [String: String] = [
        "integer-overflow.toml": "tomllib has unbounded integers; TOML 1.0 says an integer that cannot be represented losslessly is an error, ours are 64-bit",
        "integer-overflow-negative.toml": "the same, below Int64.min",
        "integer-overflow-hex.toml": "the same, in hex",
        "depth-arrays-100.toml": "nesting is bounded at 64 levels (hostile input must not blow the stack)",
        "depth-inline-100.toml": "the same, for inline tables",
    ]

    /// `.venv/bin/python` (scripts/venv.sh), else python3 from PATH; nil without tomllib.
    static func python() throws -> [String]? {
        let venv = Paths.repoRoot + "/.venv/bin/python"
        let command = FileManager.default.isExecutableFile(atPath: venv) ? [venv] : ["/usr/bin/env", "python3"]
        let r = try runCommand(command[0], Array(command.dropFirst()) + ["-c", "import tomllib"])
        return r.status == 0 ? command : nil
    }

    /// What tomllib made of one file.
    enum Reference {
        case records([JSONValue])
        case refused(String)
    }

    /// Runs the reference over files, one JSON line each.
    static func reference(_ files: [String]) throws -> [Reference?] {
        guard let python = try python() else { throw skip("SKIPPED: no python3 with tomllib (3.11+); make test creates .venv") }
        let r = try runCommand(python[0], Array(python.dropFirst()) + [reference] + files)
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdout.split(separator: "\n").map { line -> Reference? in
            switch try? JSONReader.parse(String(line)) {
            case let .object(o)?:
                if case let .array(records)? = o.first(where: { $0.0 == "records" })?.1 { return .records(records) }
                if case let .string(e)? = o.first(where: { $0.0 == "error" })?.1 { return .refused(e) }
                return nil
            default: return nil
            }
        }
    }

    /// Our tree as the reference's records (see toml_reference.py): one per node, in order.
    static func records(_ node: TOMLNode, _ path: [JSONValue] = [], into out: inout [JSONValue]) {
        let at = JSONValue.array(path)
        switch node {
        case let .table(members):
            out.append(.array([at, .string("table")]))
            for (k, v) in members { records(v, path + [.string(k)], into: &out) }
        case let .array(items):
            out.append(.array([at, .string("array")]))
            for (i, v) in items.enumerated() { records(v, path + [.number(Double(i))], into: &out) }
        case let .string(s): out.append(.array([at, .string("string"), .string(s)]))
        case let .int(i): out.append(.array([at, .string("integer"), .string(String(i))]))
        case let .double(d): out.append(.array([at, .string("float"), .string(d.isNaN ? "nan" : String(d.bitPattern))]))
        case let .bool(b): out.append(.array([at, .string("bool"), .bool(b)]))
        case let .other(kind): out.append(.array([at, .string(kind)]))
        }
    }

    static func ours(_ bytes: [UInt8]) -> Result<[JSONValue], TOMLError> {
        do {
            var out: [JSONValue] = []
            records(try TOMLReader.parse(bytes: bytes), into: &out)
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    /// The first record where two trees part, for the message.
    static func firstDifference(_ a: [JSONValue], _ b: [JSONValue]) -> String {
        for (x, y) in zip(a, b) where x != y { return "ours \(JSONWriter.string(x)), theirs \(JSONWriter.string(y))" }
        return "ours has \(a.count) nodes, theirs \(b.count)"
    }

    static func files(_ kind: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: corpus + "/" + kind)) ?? [])
            .filter { $0.hasSuffix(".toml") }.sorted().map { corpus + "/" + kind + "/" + $0 }
    }

    static func read(_ path: String) -> [UInt8] { FileManager.default.contents(atPath: path).map(Array.init) ?? [] }

    func testTheCorpusReadsAsTomllibReadsIt() throws {
        let valid = Self.files("valid"), invalid = Self.files("invalid")
        XCTAssertGreaterThanOrEqual(valid.count + invalid.count, 60)
        let theirs = try Self.reference(valid + invalid)
        XCTAssertEqual(theirs.count, valid.count + invalid.count)
        var mismatches: [String] = []
        for (path, t) in zip(valid + invalid, theirs) {
            let name = String(path.split(separator: "/").suffix(2).joined(separator: "/"))
            let file = String(path.split(separator: "/").last ?? "")
            guard let t else { mismatches.append("\(name): unreadable reference output"); continue }
            let refused: Bool
            if case .refused = t { refused = true } else { refused = false }
            switch (Self.ours(Self.read(path)), path.contains("/valid/")) {
            case let (.success(tree), true):
                switch t {
                case let .refused(e): mismatches.append("\(name): tomllib refuses a valid fixture: \(e)")
                case let .records(theirs) where theirs != tree: mismatches.append("\(name): trees differ: \(Self.firstDifference(tree, theirs))")
                case .records: break
                }
            case let (.failure(e), true):
                mismatches.append("\(name): we refuse a valid fixture: \(e)")
            case (.success, false):
                mismatches.append("\(name): we accept an invalid fixture")
            case (.failure, false):
                if Self.intended[file] != nil {
                    if refused { mismatches.append("\(name): listed as an intended difference, but tomllib refuses it too") }
                } else if !refused {
                    mismatches.append("\(name): tomllib accepts it")
                }
            }
        }
        print("TOML differential: \(valid.count) valid and \(invalid.count) invalid documents, \(Self.intended.count) intended differences, \(mismatches.count) mismatches")
        XCTAssertTrue(mismatches.isEmpty, mismatches.joined(separator: "\n"))
    }

    /// Seeded byte-level mutations of the corpus (deletions, insertions of TOML punctuation,
    /// repeated lines, pieces of other documents): same acceptance, same trees.
    func testMutatedDocumentsReadAsTomllibReadsThem() throws {
        let seeds = (Self.files("valid") + Self.files("invalid")).map(Self.read).filter { $0.count < 4000 }
        XCTAssertFalse(seeds.isEmpty)
        let alphabet = Array("[]{}=.,\"'#\n \t\\abcxyzeE0123456789+-_:TZ".utf8) + [0xC3, 0xA9, 0x0D, 0x00, 0x7F]
        var rng = SeededRandom(seed: 1027)
        var documents: [[UInt8]] = []
        for _ in 0..<2000 {
            var d = seeds.randomElement(using: &rng) ?? []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let i = Int.random(in: 0...d.count, using: &rng)
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where i < d.count: d.remove(at: i)
                case 1: d.insert(alphabet.randomElement(using: &rng) ?? 0x20, at: i)
                case 2 where i < d.count: d[i] = alphabet.randomElement(using: &rng) ?? 0x20
                case 3:
                    var lines = d.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
                    if let line = lines.randomElement(using: &rng) { lines.insert(line, at: Int.random(in: 0...lines.count, using: &rng)) }
                    d = Array(lines.joined(separator: [0x0A]))
                default:
                    let other = seeds.randomElement(using: &rng) ?? []
                    let from = Int.random(in: 0...other.count, using: &rng)
                    d.insert(contentsOf: other[from..<min(other.count, from + Int.random(in: 1...40, using: &rng))], at: i)
                }
            }
            documents.append(d)
        }
        let dir = try TempDir()
        let paths = documents.indices.map { dir.file("m\($0).toml") }
        for (p, d) in zip(paths, documents) { FileManager.default.createFile(atPath: p, contents: Data(d)) }
        let theirs = try Self.reference(paths)
        XCTAssertEqual(theirs.count, documents.count)

        var accepted = 0
        var intended: [String: Int] = [:]
        var mismatches: [String] = []
        for (d, t) in zip(documents, theirs) {
            guard let t else { mismatches.append("unreadable reference output"); continue }
            let text = String(decoding: d, as: UTF8.self)
            switch (Self.ours(d), t) {
            case (.failure, .refused): break
            case let (.success(tree), .records(theirs)):
                accepted += 1
                if tree != theirs { mismatches.append("trees differ (\(Self.firstDifference(tree, theirs))) for:\n\(text)") }
            case let (.failure(e), .records):
                if e.message.contains("does not fit in a 64-bit integer") { intended["64-bit integers", default: 0] += 1 }
                else if e.message.hasPrefix("nested too deeply") { intended["depth bound", default: 0] += 1 }
                else { mismatches.append("only we refuse (\(e)):\n\(text)") }
            case let (.success, .refused(e)):
                // RFC 3339 allows year 0000; Python's datetime starts at year 1.
                if text.contains("0000-") { intended["year 0000", default: 0] += 1 }
                else { mismatches.append("only tomllib refuses (\(e)):\n\(text)") }
            }
        }
        print("TOML mutations: \(documents.count) documents, \(accepted) accepted by both, intended differences \(intended), \(mismatches.count) mismatches")
        XCTAssertTrue(mismatches.isEmpty, mismatches.prefix(10).joined(separator: "\n\n"))
        XCTAssertGreaterThan(accepted, 100, "the mutations should leave many documents valid")
    }
}
