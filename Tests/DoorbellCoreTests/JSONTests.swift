import DoorbellCore
import Testing

@Suite struct JSONTests {
    @Test func parsesRtl433Spacing() throws {
        let v = try JSONReader.parse(#"{"time" : "@0.257012s", "model" : "EV1527-flex", "code" : 9524879, "rssi" : -0.081, "ok" : true, "n" : null}"#)
        #expect(v["model"]?.stringValue == "EV1527-flex")
        #expect(v["code"]?.intValue == 9_524_879)
        #expect(v["rssi"]?.doubleValue == -0.081)
        #expect(v["ok"]?.boolValue == true)
        #expect(v["n"] == .null)
    }

    @Test func roundTripsEscapesAndUnicode() throws {
        let original = JSONValue.object([("s", .string("a\"b\\c\n\t\u{1}é😀")), ("a", .array([.number(1), .number(-2.5), .bool(false)]))])
        let text = JSONWriter.string(original)
        #expect(try JSONReader.parse(text) == original)
        #expect(try JSONReader.parse(#""\ud83d\ude00""#) == .string("😀"))
    }

    @Test(arguments: ["", "{", "{\"a\":}", "[1,]", "tru", "\"\\x\"", "1 2", "{\"a\" 1}", "\"\\ud800\"", "01x", "-", "1e999"])
    func malformedInputIsAnErrorNotACrash(text: String) {
        #expect(throws: JSONParseError.self) { try JSONReader.parse(text) }
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONReader.parse(deep) }
    }
}
