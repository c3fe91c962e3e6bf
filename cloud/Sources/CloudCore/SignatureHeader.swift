/// One `<version>,<base64>` entry of a `webhook-signature` header.
public struct SignatureEntry: Equatable, Sendable {
    public let version: String
    /// The decoded signature, or nil when the part after the comma is not valid base64.
    public let signature: [UInt8]?
}

/// Parses `webhook-signature`: entries separated by spaces, each `<version>,<base64>`.
public enum SignatureHeader {
    public static func parse(_ value: String) -> [SignatureEntry] {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { token in
            guard let comma = token.firstIndex(of: ",") else { return nil }
            let version = String(token[..<comma])
            let encoded = token[token.index(after: comma)...]
            return SignatureEntry(version: version, signature: Base64.decode(encoded))
        }
    }
}
