@testable import DoorbellCore
import PropertyBased
import Testing

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// TOMLReader rule by rule: values, the table definition rules, and errors with their positions.
/// The differential test against Python's tomllib (Tests/DoorbellRuntimeTests) runs the same
/// fixture corpus through both parsers.
@Suite struct TOMLReaderTests {
    static func parse(_ text: String) throws(TOMLError) -> TOMLNode { try TOMLReader.parse(text) }

    static func error(_ bytes: [UInt8]) -> TOMLError? {
        do { _ = try TOMLReader.parse(bytes: bytes); return nil } catch { return error }
    }

    // MARK: Values

    struct ValueCase: Sendable, CustomStringConvertible {
        let toml: String
        let expected: TOMLNode
        var description: String { toml }
        init(_ toml: String, _ expected: TOMLNode) { self.toml = toml; self.expected = expected }
    }

    static let values: [ValueCase] = [
        // Keys: bare, quoted, dotted (blanks around dots), empty quoted, digits.
        ValueCase("a-b_C9 = 1", .table([("a-b_C9", .int(1))])),
        ValueCase("\"a b\" = 1\n'c\"d' = 2\n\"\" = 3", .table([("a b", .int(1)), ("c\"d", .int(2)), ("", .int(3))])),
        ValueCase("a . \"b.c\" . 'd' = 1", .table([("a", .table([("b.c", .table([("d", .int(1))]))]))])),
        ValueCase("3.14 = 'pi'", .table([("3", .table([("14", .string("pi"))]))])),
        ValueCase("\"\\u00e9\" = 1", .table([("é", .int(1))])),
        // Strings.
        ValueCase(#"s = "\b\t\n\f\r\"\\\u00E9\U0001F514""#, .table([("s", .string("\u{8}\t\n\u{C}\r\"\\é🔔"))])),
        ValueCase(#"s = 'C:\path\n'"#, .table([("s", .string(#"C:\path\n"#))])),
        ValueCase("s = \"\"\"\nfirst newline trimmed\n\"\"\"", .table([("s", .string("first newline trimmed\n"))])),
        ValueCase("s = \"\"\"a \\\n\n    b\\\n  \"\"\"", .table([("s", .string("a b"))])),
        ValueCase("s = \"\"\"a\\\\\nb\"\"\"", .table([("s", .string("a\\\nb"))])),
        ValueCase("s = \"\"\"\"a\" \"\"b\"\"\"\"\"", .table([("s", .string("\"a\" \"\"b\"\""))])),
        ValueCase("s = '''\n'a' ''b'''''", .table([("s", .string("'a' ''b''"))])),
        ValueCase("s = \"\"\"\r\na\r\nb\"\"\"", .table([("s", .string("a\nb"))])),
        ValueCase("s = \"tab\there\"", .table([("s", .string("tab\there"))])),
        // Integers.
        ValueCase("i = [+99, -17, 0, +0, -0, 1_000, 0xDEAD_beef, 0o755, 0b1101]",
                  .table([("i", .array([.int(99), .int(-17), .int(0), .int(0), .int(0), .int(1000), .int(0xDEADBEEF), .int(0o755), .int(0b1101)]))])),
        ValueCase("i = [9223372036854775807, -9223372036854775808, 0x7FFFFFFFFFFFFFFF]",
                  .table([("i", .array([.int(.max), .int(.min), .int(.max)]))])),
        // Floats.
        ValueCase("f = [1.5, -0.01, 5e+22, 1e06, -2E-2, 6.626e-34, 224_617.445_991, 1e1_0]",
                  .table([("f", .array([.double(1.5), .double(-0.01), .double(5e22), .double(1e6), .double(-0.02), .double(6.626e-34), .double(224_617.445_991), .double(1e10)]))])),
        ValueCase("f = [inf, +inf, -inf, nan, -nan, 1e400]",
                  .table([("f", .array([.double(.infinity), .double(.infinity), .double(-.infinity), .double(.nan), .double(.nan), .double(.infinity)]))])),
        // Booleans, dates and times (kept by kind).
        ValueCase("b = [true, false]", .table([("b", .array([.bool(true), .bool(false)]))])),
        ValueCase("d = [1979-05-27T07:32:00Z, 1979-05-27 07:32:00.5-07:00, 1979-05-27t07:32:00, 1979-05-27, 07:32:00.999, 2024-02-29]",
                  .table([("d", .array([.other("date-time"), .other("date-time"), .other("date-time"), .other("date"), .other("time"), .other("date")]))])),
        // Arrays: mixed types, trailing comma, newlines and comments inside.
        ValueCase("a = [\n  1, # one\n  'two',\n  [3.0],\n  { four = 4 },\n]", .table([("a", .array([.int(1), .string("two"), .array([.double(3)]), .table([("four", .int(4))])]))])),
        ValueCase("a = []\nb = [ ]\nc = [[], [[]]]", .table([("a", .array([])), ("b", .array([])), ("c", .array([.array([]), .array([.array([])])]))])),
        // Inline tables.
        ValueCase("t = { x = 1, y.z = 2, y.w = 3 }\ne = {}", .table([("t", .table([("x", .int(1)), ("y", .table([("z", .int(2)), ("w", .int(3))]))])), ("e", .table([]))])),
        // Tables, implicit parents, arrays of tables, document order.
        ValueCase("z = 1\n[b]\n[a.c]\nx = 1\n[a]\ny = 2", .table([("z", .int(1)), ("b", .table([])), ("a", .table([("c", .table([("x", .int(1))])), ("y", .int(2))]))])),
        ValueCase("[[d]]\nid = 1\n[d.m]\nk = 1\n[[d]]\nid = 2\n[[d.v]]\nn = 1",
                  .table([("d", .array([.table([("id", .int(1)), ("m", .table([("k", .int(1))]))]), .table([("id", .int(2)), ("v", .array([.table([("n", .int(1))])]))])]))])),
        ValueCase("[fruit]\napple.color = 'red'\n[fruit.apple.texture]\nsmooth = true",
                  .table([("fruit", .table([("apple", .table([("color", .string("red")), ("texture", .table([("smooth", .bool(true))]))]))]))])),
        ValueCase("[a.b.c]\n[a]\nb.d = 1", .table([("a", .table([("b", .table([("c", .table([])), ("d", .int(1))]))]))])),
        // Layout: CRLF, tabs, comments, a byte order mark, no final newline.
        ValueCase("\u{FEFF}a = 1\r\n\t[ t ]\t# c\r\nb = 2", .table([("a", .int(1)), ("t", .table([("b", .int(2))]))])),
        ValueCase("", .table([])),
        // On purpose unlike Python's tomllib (its datetime starts at year 1): RFC 3339 has year 0000.
        ValueCase("d = 0000-02-29", .table([("d", .other("date"))])),
    ]

    @Test(arguments: values)
    func parsesTo(c: ValueCase) throws {
        #expect(try Self.parse(c.toml) == c.expected)
    }

    // MARK: Errors: what, where, and what to write instead

    struct ErrorCase: Sendable, CustomStringConvertible {
        let bytes: [UInt8]
        let line: Int
        let column: Int
        let message: String // prefix of the message
        var description: String { String(decoding: bytes, as: UTF8.self) }
        init(_ toml: String, _ line: Int, _ column: Int, _ message: String) {
            self.init(Array(toml.utf8), line, column, message)
        }
        init(_ bytes: [UInt8], _ line: Int, _ column: Int, _ message: String) {
            self.bytes = bytes
            self.line = line
            self.column = column
            self.message = message
        }
    }

    static let errors: [ErrorCase] = [
        // Syntax of a line.
        ErrorCase("url \"https://x\"\n", 1, 5, "expected '=' after key `url`, found '\"'"),
        ErrorCase("url\n", 1, 4, "expected '=' after key `url`; write url = value"),
        ErrorCase("a =\n1\n", 1, 4, "expected a value for `a` on the same line"),
        ErrorCase("= 1\n", 1, 1, "expected a key, found '='"),
        ErrorCase("a. = 1\n", 1, 4, "expected a key after '.'"),
        ErrorCase("a = 1 # ok\nb = 2 c\n", 2, 7, "expected the end of the line after the value of `b`, found 'c'"),
        ErrorCase("key = value with spaces\n", 1, 7, "`value` is not a TOML value; strings need quotes, e.g. \"value with spaces\""),
        ErrorCase("a = True\n", 1, 5, "booleans are lowercase: write true"),
        ErrorCase("\"\"\"k\"\"\" = 1\n", 1, 1, "a multi-line string cannot be a key"),
        ErrorCase("a = 1\rb = 2\n", 1, 6, "a carriage return must be followed by a line feed"),
        ErrorCase("a = 1\n\u{0}\n", 2, 1, "expected a key, found control character U+0000"),
        // Keys outside quotes are ASCII; columns count characters, not bytes.
        ErrorCase("région = 1\n", 1, 2, "a non-ASCII character ('é') cannot be part of a bare key; bare keys are ASCII letters, digits, '-' and '_': quote the key (\"région\")"),
        ErrorCase("# é\n[é]\n", 2, 2, "a non-ASCII character ('é')"),
        ErrorCase("\ta = 1\n\t\tb = [ é ]\n", 2, 9, "expected a value for `b`, found 'é'; strings need quotes, e.g. \"é\""),
        // Bytes that are not UTF-8 (overlong, surrogate, cut short, stray).
        ErrorCase([0x61, 0x20, 0x3D, 0x20, 0x22, 0xFF, 0x22], 1, 6, "invalid UTF-8 (byte 0xFF)"),
        ErrorCase(Array("a = \"é".utf8) + [0xC0, 0x80, 0x22], 1, 7, "invalid UTF-8 (byte 0xC0)"),
        ErrorCase(Array("a = 1\n# ".utf8) + [0xED, 0xA0, 0x80], 2, 3, "invalid UTF-8 (byte 0xED)"),
        ErrorCase(Array("a = \"".utf8) + [0xE2, 0x82], 1, 6, "invalid UTF-8 (byte 0xE2)"),
        // Strings.
        ErrorCase("name = \"front door\n", 1, 8, "unterminated string; close it with \" before the end of the line"),
        ErrorCase("name = 'front door", 1, 8, "unterminated string; close it with ' before the end of the line"),
        ErrorCase("a = \"\"\"x\n\ny", 1, 5, "unterminated multi-line string; close it with \"\"\""),
        ErrorCase("a = '''x\n", 1, 5, "unterminated multi-line string; close it with '''"),
        ErrorCase("a = \"\\q\"\n", 1, 6, "invalid escape '\\q'; the escapes are \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX"),
        ErrorCase("a = \"\\x41\"\n", 1, 6, "invalid escape '\\x'"),
        ErrorCase("a = \"\\uDFFF\"\n", 1, 6, "\\uDFFF is a UTF-16 surrogate, not a character"),
        ErrorCase("a = \"\\U00110000\"\n", 1, 6, "\\U00110000 is beyond U+10FFFF"),
        ErrorCase("a = \"\\u00G1\"\n", 1, 6, "\\u needs exactly 4 hex digits"),
        ErrorCase("a = \"a\u{1}b\"\n", 1, 7, "control character U+0001 is not allowed in a string; write it as the escape \\u0001"),
        ErrorCase("a = \"\"\"a\\ b\"\"\"\n", 1, 9, "a backslash followed by a space is not an escape"),
        ErrorCase("a = \"\"\"a\"\"\"\"\"\"\n", 1, 14, "expected the end of the line after the value of `a`, found '\"'"),
        ErrorCase("s = 'it's'\n", 1, 8, "a 'literal string' ends at the next ' and cannot contain one"),
        ErrorCase("# a\u{7F}\n", 1, 4, "control character U+007F is not allowed in a comment"),
        // Integers.
        ErrorCase("a = 0777\n", 1, 5, "0777: leading zeros are not allowed in an integer (write 777, or 0o… for octal)"),
        ErrorCase("a = -01\n", 1, 5, "-01: leading zeros are not allowed in an integer (write -1"),
        ErrorCase("a = 1__000\n", 1, 5, "1__000: an underscore must sit between two digits"),
        ErrorCase("a = 1_\n", 1, 5, "1_: an underscore must sit between two digits"),
        ErrorCase("a = +0x10\n", 1, 5, "+0x10: hex, octal and binary integers cannot have a sign"),
        ErrorCase("a = 0B101\n", 1, 5, "0B101: the prefix is lowercase (0x, 0o, 0b)"),
        ErrorCase("a = 0o8\n", 1, 5, "0o8: '8' is not an octal digit"),
        ErrorCase("a = 0x\n", 1, 5, "0x: digits are missing"),
        ErrorCase("a = 9223372036854775808\n", 1, 5, "9223372036854775808 does not fit in a 64-bit integer (-9223372036854775808 to 9223372036854775807)"),
        ErrorCase("a = -9223372036854775809\n", 1, 5, "-9223372036854775809 does not fit in a 64-bit integer"),
        ErrorCase("a = 0x8000000000000000\n", 1, 5, "0x8000000000000000 does not fit in a 64-bit integer"),
        ErrorCase("a = +\n", 1, 5, "expected digits after '+'"),
        // Floats.
        ErrorCase("a = 1.\n", 1, 5, "1.: a float needs a digit after the decimal point (1.0)"),
        ErrorCase("a = .5\n", 1, 5, ".5: a float needs a digit before the decimal point (0.5)"),
        ErrorCase("a = 1e\n", 1, 5, "1e: the exponent needs digits"),
        ErrorCase("a = 03.14\n", 1, 5, "03.14: leading zeros are not allowed in a float"),
        ErrorCase("a = Inf\n", 1, 5, "write inf in lowercase"),
        // Dates and times.
        ErrorCase("a = 2023-02-29\n", 1, 5, "2023-02-29: day 29 does not exist in 2023-02"),
        ErrorCase("a = 1979-13-01\n", 1, 5, "1979-13-01: month 13 does not exist"),
        ErrorCase("a = 25:00:00\n", 1, 5, "25:00:00: a time of day runs from 00:00:00 to 23:59:59"),
        ErrorCase("a = 07:32\n", 1, 5, "07:32: TOML 1.0 times need seconds"),
        ErrorCase("a = 07:32:00Z\n", 1, 5, "07:32:00Z is not a valid time"),
        ErrorCase("a = 1979-05-27T07:32:00+0100\n", 1, 5, "1979-05-27T07:32:00+0100 is not a valid date or date-time"),
        ErrorCase("a = 1979-05-27T07:32:00+24:00\n", 1, 5, "1979-05-27T07:32:00+24:00: the offset must be between -23:59 and +23:59"),
        // Arrays and inline tables.
        ErrorCase("a = [1 2]\n", 1, 8, "expected ',' or ']' after an array element, found '2'"),
        ErrorCase("a = [1,,2]\n", 1, 8, "expected a value after ',' in the array"),
        ErrorCase("a = [1,\n2\n", 1, 5, "unterminated array; close it with ']'"),
        ErrorCase("a = { b = 1,\n  c = 2 }\n", 1, 5, "an inline table { } must be closed on the line where it starts"),
        ErrorCase("a = { b = 1, }\n", 1, 14, "a trailing comma is not allowed in an inline table"),
        ErrorCase("a = { b = 1 c = 2 }\n", 1, 13, "expected ',' or '}' in the inline table, found 'c'"),
        // Headers.
        ErrorCase("[a\n", 1, 3, "expected ']' to close the table header [a, found end of line"),
        ErrorCase("[[a]\n", 1, 4, "expected ']]' to close the header [[a, found ']'"),
        ErrorCase("[[a] ]\n", 1, 4, "expected ']]' to close the header [[a"),
        ErrorCase("[a] x = 1\n", 1, 5, "expected the end of the line after the table header [a], found 'x'"),
        ErrorCase("[[# devices]]\n", 1, 3, "a [table] name must start with a letter, digit, '-', '_' or a quote, e.g. [uplink] or [[device]]; found '#'"),
        ErrorCase("  [ =log]\n", 1, 5, "a [table] name must start with a letter, digit"),
        ErrorCase("[]\n", 1, 2, "a [table] name must start with a letter, digit"),
        // Definition rules: each points at the key that breaks them and names the first definition.
        ErrorCase("[uplink]\nurl = \"a\"\ntimeout = 5\nurl = \"b\"\n", 4, 1, "duplicate key `url` (first defined on line 2)"),
        ErrorCase("a = 1\n\"a\" = 2\n", 2, 1, "duplicate key `a` (first defined on line 1)"),
        ErrorCase("a.b.c = 1\na.b = 2\n", 2, 3, "duplicate key `a.b`: it is already a table (line 1)"),
        ErrorCase("[a.b]\n[a]\nb = 1\n", 3, 1, "duplicate key `b`: it is already a table (line 1)"),
        ErrorCase("a = { b = 1, b = 2 }\n", 1, 14, "duplicate key `b` (first defined on line 1)"),
        ErrorCase("[a]\nx = 1\n[b]\n[a]\n", 4, 2, "table [a] is defined twice (first on line 1); put all its keys under one header"),
        ErrorCase("a.b = 1\n[a]\n", 2, 2, "table [a] was already made by dotted keys on line 1"),
        ErrorCase("[fruit]\napple.color = 'red'\n[fruit.apple]\n", 3, 8, "table [fruit.apple] was already made by dotted keys on line 2"),
        ErrorCase("[a.b]\nz = 1\n[a]\nb.y = 2\n", 4, 1, "table `b` is defined by its [header] on line 1; write this key under that header"),
        ErrorCase("p = { x = 1 }\np.y = 2\n", 2, 1, "`p` is an inline table (line 1), which is complete as written; it cannot be extended: add the keys inside its { }"),
        ErrorCase("p = { x = 1 }\n[p.q]\n", 2, 2, "`p` is an inline table (line 1), which is complete as written; it cannot be extended for [p.q]"),
        ErrorCase("p = { x = 1 }\n[p]\n", 2, 2, "`p` is an inline table (line 1)"),
        ErrorCase("a = { b = { c = 1 }, b.d = 2 }\n", 1, 22, "`b` is an inline table (line 1)"),
        ErrorCase("list = [1]\n[[list]]\n", 2, 3, "[[list]] cannot add to `list`: it is an array written with [ ] on line 1"),
        ErrorCase("a = [{ b = 1 }]\n[a.c]\n", 2, 2, "`a` is an array (line 1), which is complete as written"),
        ErrorCase("[[dev]]\n[dev]\n", 2, 2, "[dev] is an array of tables (first [[dev]] on line 1); add an element with [[dev]]"),
        ErrorCase("[dev]\n[[dev]]\n", 2, 3, "[[dev]] cannot start an array of tables: `dev` is already a table (line 1)"),
        ErrorCase("[[a.b]]\n[a]\nb.c = 1\n", 3, 1, "`b` is an array of tables (line 1); add keys under its [[header]]"),
        ErrorCase("a = 1\n[a.b]\n", 2, 2, "`a` already holds an integer (line 1), so it cannot also be a table for [a.b]"),
        ErrorCase("a = 1\na.b = 2\n", 2, 1, "`a` already holds an integer (line 1), so it cannot also be a table"),
        ErrorCase("[[a]]\n[a.b]\n[a.b]\n", 3, 4, "table [a.b] is defined twice (first on line 2)"),
    ]

    @Test(arguments: errors)
    func refusesWithPositionAndAdvice(c: ErrorCase) {
        guard let e = Self.error(c.bytes) else {
            Issue.record("accepted: \(c)")
            return
        }
        #expect(e.line == c.line && e.column == c.column, "\(e)")
        #expect(e.message.hasPrefix(c.message), "\(e)")
    }

    @Test func errorDescriptionIsLineColonColumn() {
        #expect(Self.error(Array("a = 1\nb = ?\n".utf8))?.description == "2:5: expected a value for `b`, found '?'")
    }

    // MARK: Limits

    @Test func nestingIsBoundedAtMaxDepth() throws {
        let ok = "a = " + String(repeating: "[", count: 63) + String(repeating: "]", count: 63)
        #expect(throws: Never.self) { try Self.parse(ok) }
        for deep in [
            "a = " + String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
            "a = " + String(repeating: "{b=", count: 65) + "1" + String(repeating: "}", count: 65),
            "a = " + String(repeating: "[", count: 100_000),
            String(repeating: "a.", count: 100_000) + "a = 1",
            "[" + String(repeating: "a.", count: 100_000) + "a]",
            (0..<70).map { "[" + String(repeating: "t.", count: $0) + "t]" }.joined(separator: "\n"),
        ] {
            let e = Self.error(Array(deep.utf8))
            #expect(e?.message.hasPrefix("nested too deeply: more than 64 levels") == true, "\(String(describing: e))")
        }
    }

    @Test func largeDocumentsParse() throws {
        // Many headers and keys: hash lookups, no rescans (a quadratic reader would crawl here).
        let aot = String(repeating: "[[event]]\nid = 1\n[event.match]\ncode = 'x'\n", count: 20_000)
        guard case let .table(top) = try Self.parse(aot), case let .array(events)? = top.first?.1 else {
            Issue.record("expected [[event]] elements")
            return
        }
        #expect(events.count == 20_000)
        let keys = (0..<50_000).map { "k\($0) = \($0)" }.joined(separator: "\n")
        guard case let .table(members) = try Self.parse(keys) else { return }
        #expect(members.count == 50_000 && members.last?.0 == "k49999")
    }

    // MARK: The committed corpus (the differential test compares it with tomllib)

    static let corpus = Golden.fixtures + "/toml"

    static func fixtures(_ kind: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: corpus + "/" + kind)) ?? []).filter { $0.hasSuffix(".toml") }.sorted()
    }

    @Test func theCorpusIsThere() {
        #expect(Self.fixtures("valid").count >= 40)
        #expect(Self.fixtures("invalid").count >= 100)
    }

    @Test(arguments: fixtures("valid"))
    func validFixtureParses(name: String) throws {
        let bytes = try #require(FileManager.default.contents(atPath: Self.corpus + "/valid/" + name))
        #expect(throws: Never.self) { try TOMLReader.parse(bytes: Array(bytes)) }
    }

    @Test(arguments: fixtures("invalid"))
    func invalidFixtureIsRefusedInsideTheDocument(name: String) throws {
        let bytes = Array(try #require(FileManager.default.contents(atPath: Self.corpus + "/invalid/" + name)))
        let e = try #require(Self.error(bytes), "accepted \(name)")
        Self.expectInside(e, bytes)
    }

    /// An error's line and column name a place in the document (or just past its end).
    static func expectInside(_ e: TOMLError, _ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        #expect(e.line >= 1 && e.line <= lines.count, "\(e)", sourceLocation: sourceLocation)
        guard e.line >= 1, e.line <= lines.count else { return }
        let characters = lines[e.line - 1].filter { $0 & 0xC0 != 0x80 }.count
        #expect(e.column >= 1 && e.column <= characters + 1, "\(e)", sourceLocation: sourceLocation)
        #expect(!e.message.isEmpty, sourceLocation: sourceLocation)
    }

    // MARK: Properties

    /// Any bytes, mostly TOML punctuation: the reader returns a tree or an error that points
    /// into the document; it never traps or hangs.
    @Test func anyBytesGiveATreeOrAnErrorInsideTheDocument() async {
        let alphabet = Array("[]{}=.,\"'#\\ \t\nabeE0179+-_:xoTZ".utf8) + [0x0D, 0x00, 0x7F, 0xC3, 0xA9, 0xFF, 0xED, 0xA0]
        await propertyCheck(count: 500, input: Gen.int(in: 0...(alphabet.count - 1)).array(of: 0...120)) { picks in
            let bytes = picks.map { alphabet[$0] }
            if let e = Self.error(bytes) { Self.expectInside(e, bytes) }
        }
    }

    /// A random value tree, written as TOML in a randomly chosen style (headers, dotted keys,
    /// inline tables, [[arrays of tables]], every string form), reads back as the same tree.
    @Test func writtenTreesReadBackTheSame() async throws {
        await propertyCheck(count: 300, input: Gen.uint8(in: 0...255).array(of: 0...160)) { choices in
            var source = Choices(choices)
            let tree = TreeGenerator.table(&source, depth: 0)
            var writer = TOMLWriter(choices: Choices(choices.reversed()))
            let text = writer.document(tree)
            do {
                let back = try TOMLReader.parse(text)
                #expect(back == .table(tree), "\(text)")
            } catch {
                Issue.record("\(error) in:\n\(text)")
            }
        }
    }
}

// MARK: - Test helpers: random trees and a TOML writer with style choices

/// Bytes from the property generator read as choices; 0 once used up, so trees stay finite
/// and a shrunk input gives a smaller tree.
struct Choices {
    var bytes: [UInt8]
    var i = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    mutating func next(_ n: Int) -> Int {
        guard i < bytes.count else { return 0 }
        defer { i += 1 }
        return Int(bytes[i]) % n
    }
}

enum TreeGenerator {
    static let keys = ["a", "b-c", "_", "1", "", "a b", "é", "q\"uote", "back\\slash", "dot.ted", "tab\t", "new\nline", "it's", "x"]
    static let strings = ["", "plain", "it's", "say \"hi\"", "C:\\path", "line\nbreak", "tab\there", "é 🔔", "\u{1}\u{7F}", "'''", "\"\"\"", "ends with '", "ends with \"", "\r\n", "\n leading newline"]
    static let doubles: [Double] = [0, -0.0, 0.1, -2.5, 1e300, .leastNonzeroMagnitude, 6.626e-34, .infinity, -.infinity, .nan, 123_456_789.125, 1e16]
    static let ints: [Int64] = [0, 1, -1, 42, .max, .min, 1_000_000, -9_007_199_254_740_993]

    static func table(_ c: inout Choices, depth: Int) -> [(String, TOMLNode)] {
        var members: [(String, TOMLNode)] = []
        for _ in 0..<c.next(depth == 0 ? 6 : 4) {
            var key = keys[c.next(keys.count)]
            if members.contains(where: { $0.0 == key }) { key += "\(members.count)" }
            members.append((key, value(&c, depth: depth + 1)))
        }
        return members
    }

    static func value(_ c: inout Choices, depth: Int) -> TOMLNode {
        switch c.next(depth < 4 ? 10 : 6) {
        case 0: return .string(strings[c.next(strings.count)])
        case 1: return .int(ints[c.next(ints.count)])
        case 2: return .double(doubles[c.next(doubles.count)])
        case 3: return .bool(c.next(2) == 0)
        case 4: return .other(["date", "time", "date-time"][c.next(3)])
        case 5: return .int(Int64(c.next(256)) - 128)
        case 6, 7: return .table(table(&c, depth: depth))
        case 8: return .array((0..<c.next(4)).map { _ in value(&c, depth: depth + 1) })
        default: return .array((0..<(1 + c.next(3))).map { _ in .table(table(&c, depth: depth + 1)) })
        }
    }
}

struct TOMLWriter {
    var choices: Choices

    mutating func document(_ members: [(String, TOMLNode)]) -> String {
        var out = ""
        section(members, path: [], into: &out)
        return out
    }

    /// Plain key = value lines first, then sub-tables as headers. A member may become a header
    /// only if every member after it does too, so the document keeps the tree's key order.
    /// `headersOnly`: the table has no header line of its own, so nothing may sit above its sub-headers.
    mutating func section(_ members: [(String, TOMLNode)], path: [String], headersOnly: Bool = false, into out: inout String) {
        var firstHeader = members.count
        while firstHeader > 0, Self.canBeHeader(members[firstHeader - 1].1) { firstHeader -= 1 }
        if !headersOnly { firstHeader += choices.next(max(1, members.count - firstHeader + 1)) }
        for (key, value) in members[..<min(firstHeader, members.count)] {
            if case let .table(sub) = value, !sub.isEmpty, choices.next(2) == 0 {
                dotted(sub, prefix: [key], into: &out)
            } else {
                out += Self.key(key) + " = " + inline(value) + "\n"
            }
        }
        for (key, value) in members[min(firstHeader, members.count)...] {
            let full = path + [key]
            let name = full.map(Self.key).joined(separator: ".")
            switch value {
            case let .table(sub):
                // A table holding only tables may be left implicit: its sub-headers create it.
                let implicit = !sub.isEmpty && sub.allSatisfy { Self.canBeHeader($0.1) } && choices.next(2) == 0
                if !implicit { out += "[\(choices.next(2) == 0 ? name : " " + name + " ")]\n" }
                section(sub, path: full, headersOnly: implicit, into: &out)
            case let .array(elements):
                for case let .table(sub) in elements {
                    out += "[[\(name)]]\n"
                    section(sub, path: full, into: &out)
                }
            default: break
            }
        }
    }

    static func canBeHeader(_ v: TOMLNode) -> Bool {
        switch v {
        case .table: return true
        case let .array(items): return !items.isEmpty && items.allSatisfy { if case .table = $0 { true } else { false } }
        default: return false
        }
    }

    /// `a.b.c = 1` lines for a table written through dotted keys (empty sub-tables inline).
    mutating func dotted(_ members: [(String, TOMLNode)], prefix: [String], into out: inout String) {
        for (key, value) in members {
            if case let .table(sub) = value, !sub.isEmpty, choices.next(2) == 0 {
                dotted(sub, prefix: prefix + [key], into: &out)
            } else {
                out += (prefix + [key]).map(Self.key).joined(separator: choices.next(2) == 0 ? "." : " . ") + " = " + inline(value) + "\n"
            }
        }
    }

    mutating func inline(_ v: TOMLNode) -> String {
        switch v {
        case let .table(members):
            return "{" + members.map { Self.key($0.0) + " = " + inline($0.1) }.joined(separator: ", ") + "}"
        case let .array(items):
            let multiline = choices.next(2) == 0
            let sep = multiline ? ",\n  # note\n  " : ", "
            return "[" + (multiline ? "\n  " : "") + items.map { inline($0) }.joined(separator: sep) + (multiline && !items.isEmpty ? ",\n" : "") + "]"
        case let .string(s): return string(s)
        case let .int(i):
            switch choices.next(3) {
            case 0 where i >= 0: return "0x" + String(i, radix: 16)
            case 1 where i > 999: return Self.underscored(String(i))
            default: return String(i)
            }
        case let .double(d):
            if d.isNaN { return "nan" }
            if d.isInfinite { return d < 0 ? "-inf" : "+inf" }
            return d.description
        case let .bool(b): return b ? "true" : "false"
        case let .other(kind):
            switch kind {
            case "date": return "1979-05-27"
            case "time": return "07:32:00.999"
            default: return choices.next(2) == 0 ? "1979-05-27T07:32:00Z" : "1979-05-27 07:32:00"
            }
        }
    }

    static func underscored(_ digits: String) -> String {
        var out = ""
        for (n, c) in digits.reversed().enumerated() { if n > 0, n % 3 == 0 { out.append("_") }; out.append(c) }
        return String(out.reversed())
    }

    static func key(_ k: String) -> String {
        if !k.isEmpty, k.utf8.allSatisfy({ TOMLReader.Parser.isBareKeyByte($0) }) { return k }
        return basic(k)
    }

    static func basic(_ s: String, multiline: Bool = false) -> String {
        var out = ""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += multiline ? "\n" : "\\n"
            case "\t": out += "\t"
            default:
                if u.value < 0x20 || u.value == 0x7F { out += "\\u" + TOMLReader.hex(UInt8(u.value), width: 4) } else { out.unicodeScalars.append(u) }
            }
        }
        return multiline ? "\"\"\"\n" + out + "\"\"\"" : "\"" + out + "\""
    }

    mutating func string(_ s: String) -> String {
        let printable = s.unicodeScalars.allSatisfy { ($0.value >= 0x20 && $0.value != 0x7F) || $0 == "\t" || $0 == "\n" }
        switch choices.next(4) {
        case 0 where printable && !s.contains("'") && !s.contains("\n"): return "'" + s + "'"
        case 1 where printable && !s.contains("'''") && !s.hasSuffix("'''"): return "'''\n" + s + "'''"
        case 2: return Self.basic(s, multiline: true)
        default: return Self.basic(s)
        }
    }
}
