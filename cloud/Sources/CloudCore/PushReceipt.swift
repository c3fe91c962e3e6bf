import Crypto
import Foundation

/// Delivery receipts from the base station: the gateway reads the owner's iPhones' notifications
/// (ANCS) and reports when the doorbell app's notification for a press appeared, or that a
/// phone connected to it never showed it. Each push carries a short reference in its subtitle
/// ("#K3QF7"), made from the event id and the device token: the gateway cannot know tokens, but
/// it can read the reference off the phone, and the cloud finds the one push it belongs to.
/// The alert stays readable: a five-character code where a subtitle would be.
public enum PushReference {
    /// Crockford's base32: no I, L, O, U — nothing to misread if someone does read it.
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    public static let length = 5

    /// "K3QF7": 25 bits of SHA-256 over the event id and the token (lowercased, as APNs treats it).
    public static func make(eventID: String, token: String) -> String {
        let digest = Array(SHA256.hash(data: Array(("push-ref\n" + eventID + "\n" + token.lowercased()).utf8)))
        var bits = UInt64(digest[0]) << 24 | UInt64(digest[1]) << 16 | UInt64(digest[2]) << 8 | UInt64(digest[3])
        var out: [Character] = []
        for _ in 0..<length {
            out.append(alphabet[Int(bits & 31)])
            bits >>= 5
        }
        return String(out)
    }

    /// The reference a gateway read from a subtitle: "#K3QF7" anywhere in it (the app may add to
    /// the subtitle); case and Crockford's look-alikes (O→0, I/L→1) forgiven.
    public static func find(in text: String) -> String? {
        let chars = Array(text.uppercased())
        for (i, c) in chars.enumerated() where c == "#" && i + length < chars.count {
            let candidate = chars[(i + 1)...(i + length)].map { c -> Character in
                switch c { case "O": return "0"; case "I", "L": return "1"; default: return c }
            }
            let after = i + 1 + length
            let ends = after == chars.count || !(chars[after].isLetter || chars[after].isNumber)
            if ends, candidate.allSatisfy({ alphabet.contains($0) }) { return String(candidate) }
        }
        return nil
    }
}

extension PushPayload {
    /// Stands for the reference in a stored payload until the push is sent to one token: one
    /// payload is stored per event and fanned out to every phone, each gets its own reference.
    /// Same length as a reference, so the size check of the stored payload holds for every push.
    static let subtitlePlaceholder = "#" + String(repeating: "?", count: PushReference.length)

    /// The payload as sent to `token`: the subtitle placeholder replaced by the push's reference.
    /// Only the subtitle member matches: free text (a doorbell's name) is escaped JSON, where a
    /// quote is `\"`, so it cannot contain `"subtitle":"#?????"`.
    public static func personalized(_ payload: String, eventID: String, token: String) -> String {
        let key = "\"subtitle\":\"" + subtitlePlaceholder + "\""
        guard let range = payload.range(of: key) else { return payload }
        return payload.replacingCharacters(in: range, with: "\"subtitle\":\"#" + PushReference.make(eventID: eventID, token: token) + "\"")
    }
}

/// A gateway's `push.displayed` / `push.not_displayed` event, as far as the receipts need it.
public struct PushReceiptReport: Sendable, Equatable {
    public enum Kind: String, Sendable { case displayed = "push.displayed", notDisplayed = "push.not_displayed" }
    public let kind: Kind
    /// The gateway's own press event the notification was for, when it knows it.
    public let pressEventID: String?
    /// `displayed` only: the reference read from the notification's subtitle.
    public let reference: String?
    /// The bonded phone, as the gateway names it (its identity address or bond id) and a label.
    public let phoneID: String
    public let phoneName: String?
    /// When the notification appeared on the phone (the gateway's clock), Unix milliseconds.
    public let displayedAtMilliseconds: Int64?

    public init(kind: Kind, pressEventID: String?, reference: String?, phoneID: String, phoneName: String?, displayedAtMilliseconds: Int64?) {
        self.kind = kind
        self.pressEventID = pressEventID
        self.reference = reference
        self.phoneID = phoneID
        self.phoneName = phoneName
        self.displayedAtMilliseconds = displayedAtMilliseconds
    }

    /// RFC 3339 with or without fractional seconds, as the agent writes times.
    public static func milliseconds(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = formatter.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text).map { Int64($0.timeIntervalSince1970 * 1000) }
    }

    public static func isReceipt(type: String) -> Bool { Kind(rawValue: type) != nil }

    /// nil when the body is not a receipt the cloud can use (it is stored all the same).
    public static func parse(type: String, body: [UInt8]) -> PushReceiptReport? {
        guard let kind = Kind(rawValue: type), (try? StrictJSON.check(body)) != nil,
              let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let data = object["data"] as? [String: Any],
              let phone = data["phone"] as? [String: Any], let phoneID = phone["id"] as? String, !phoneID.isEmpty, phoneID.utf8.count <= 128
        else { return nil }
        let press = (data["press_event_id"] as? String).flatMap { $0.isEmpty || $0.utf8.count > 128 ? nil : $0 }
        // "K3QF7" or "#K3QF7" as the gateway quotes it, or found in the subtitle it read.
        let quoted = (data["reference"] as? String).map { $0.hasPrefix("#") ? $0 : "#" + $0 }
        let reference = quoted.flatMap(PushReference.find(in:)) ?? (data["subtitle"] as? String).flatMap(PushReference.find(in:))
        if kind == .displayed, reference == nil { return nil }
        if kind == .notDisplayed, press == nil { return nil }
        let name = (phone["name"] as? String).map { String($0.prefix(64)) }
        let at = (data["displayed_at"] as? String).flatMap(Self.milliseconds)
        return PushReceiptReport(kind: kind, pressEventID: press, reference: reference, phoneID: phoneID, phoneName: name,
                                 displayedAtMilliseconds: at)
    }
}
