#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Standard-alphabet base64 with padding, as Standard Webhooks uses everywhere.
enum Base64 {
    /// The decoded bytes, or nil when `text` is not valid base64.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard let data = Data(base64Encoded: String(text)) else { return nil }
        return Array(data)
    }

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
    }
}

/// base64url without padding (RFC 7515), as JWTs use.
public enum Base64URL {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text = Base64.encode(bytes)
        while text.last == "=" { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }
}
