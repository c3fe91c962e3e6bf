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
