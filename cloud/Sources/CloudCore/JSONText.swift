/// Compact JSON text with keys in the order given (JSONEncoder does not promise an order).
/// Used for the `EVENT` lines and `doorbell-cloud events` output.
public enum JSONText {
    /// A JSON value, already serialized.
    public struct Value: Sendable, Equatable {
        public let text: String

        /// Inserts `text` verbatim; the caller guarantees it is valid JSON.
        public init(raw text: String) {
            self.text = text
        }

        public static let null = Value(raw: "null")

        public static func string(_ value: String?) -> Value {
            guard let value else { return .null }
            return Value(raw: JSONText.quote(value))
        }

        public static func int(_ value: Int64) -> Value {
            Value(raw: String(value))
        }

        public static func array(_ values: [Value]) -> Value {
            Value(raw: "[" + values.map(\.text).joined(separator: ",") + "]")
        }

        public static func bool(_ value: Bool) -> Value {
            Value(raw: value ? "true" : "false")
        }

        public static func object(_ pairs: KeyValuePairs<String, Value>) -> Value {
            Value(raw: JSONText.object(pairs))
        }

        /// An object whose keys are only known at run time, in the order given.
        public static func object(_ pairs: [(String, Value)]) -> Value {
            Value(raw: "{" + pairs.map { quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}")
        }
    }

    public static func object(_ pairs: KeyValuePairs<String, Value>) -> String {
        "{" + pairs.map { quote($0.key) + ":" + $0.value.text }.joined(separator: ",") + "}"
    }

    static func quote(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
