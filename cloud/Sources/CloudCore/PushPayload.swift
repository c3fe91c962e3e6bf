import Crypto

/// The APNs payload for a doorbell event or a beacon message. Built by hand (JSONText) so key
/// order is fixed and the size check is exact. Pure.
public enum PushPayload {
    /// APNs refuses larger payloads (413 PayloadTooLarge).
    public static let maximumBytes = 4096

    /// The alert for an event type, as localization keys the app resolves (with the doorbell's
    /// name as the argument) plus English text for an app without them. nil: not pushed.
    public static func alert(forEventType type: String) -> (key: String, english: String)? {
        switch type {
        case "doorbell.pressed": return ("DOORBELL_PRESSED", "Someone is at the door")
        case "doorbell.held": return ("DOORBELL_HELD", "The doorbell button is being held")
        case "doorbell.double_pressed": return ("DOORBELL_DOUBLE_PRESSED", "The doorbell was pressed twice")
        case "doorbell.triple_pressed": return ("DOORBELL_TRIPLE_PRESSED", "The doorbell was pressed three times")
        case "doorbell.long_pressed": return ("DOORBELL_LONG_PRESSED", "The doorbell was pressed long")
        case "doorbell.long_double_pressed": return ("DOORBELL_LONG_DOUBLE_PRESSED", "The doorbell was pressed long twice")
        case "doorbell.long_triple_pressed": return ("DOORBELL_LONG_TRIPLE_PRESSED", "The doorbell was pressed long three times")
        default: return nil
        }
    }

    public struct Doorbell: Sendable, Equatable {
        public var id: String
        public var name: String
        public var gatewayID: String

        public init(id: String, name: String, gatewayID: String) {
            self.id = id
            self.name = name
            self.gatewayID = gatewayID
        }
    }

    /// The push for `event` at `doorbell`; nil when the event type does not ring phones.
    public static func forEvent(_ event: EventEnvelope, doorbell: Doorbell) -> String? {
        guard !event.isTest, let alert = alert(forEventType: event.type) else { return nil }
        return fitted(name: doorbell.name) { name in
            JSONText.object([
                "aps": .object([
                    "alert": .object([
                        "title": .string(name),
                        "subtitle": .string(subtitlePlaceholder),
                        "body": .string(alert.english),
                        "title-loc-key": .string("DOORBELL_TITLE"),
                        "title-loc-args": .array([.string(name)]),
                        "loc-key": .string(alert.key),
                        "loc-args": .array([.string(name)]),
                    ]),
                    "sound": .string("doorbell.caf"),
                    "thread-id": .string("doorbell-" + doorbell.id),
                    "interruption-level": .string("time-sensitive"),
                ]),
                "doorbell": .object([
                    "id": .string(doorbell.id),
                    "name": .string(name),
                    "gateway_id": .string(doorbell.gatewayID),
                    "event_id": .string(event.id),
                    "type": .string(event.type),
                    "occurred_at": .string(event.occurredAt),
                ]),
            ])
        }
    }

    /// The push answering a phone's beacon report: the message its owner configured, whole.
    /// nil when it is larger than APNs takes; the store refuses such a message when it is set
    /// (`beaconPayloadBytes`), so a report never spends the phone's rate-limit slot on a push that
    /// cannot be sent.
    public static func forBeacon(title: String, body: String, region: String, reportID: String) -> String? {
        let payload = beaconPayload(title: title, body: body, region: region, reportID: reportID)
        return payload.utf8.count <= maximumBytes ? payload : nil
    }

    /// The size of the push a message would make, built as `forBeacon` builds it, with a report
    /// id as long as every real one (`beaconReportID`).
    public static func beaconPayloadBytes(title: String, body: String, region: String) -> Int {
        beaconPayload(title: title, body: body, region: region,
                      reportID: "beacon-" + String(repeating: "0", count: beaconReportIDDigits)).utf8.count
    }

    private static func beaconPayload(title: String, body: String, region: String, reportID: String) -> String {
        JSONText.object([
            "aps": .object([
                "alert": .object(["title": .string(title), "body": .string(body)]),
                "sound": .string("default"),
                "thread-id": .string("beacon-" + region),
            ]),
            "beacon": .object(["region": .string(region), "report_id": .string(reportID)]),
        ])
    }

    static let beaconReportIDDigits = 32

    /// A beacon push's id (its delivery's event id): `beacon-` and 32 random hex digits, always
    /// this long, so `beaconPayloadBytes` measures exactly.
    public static func beaconReportID() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = (0..<beaconReportIDDigits).map { _ in String(UInt8.random(in: 0..<16, using: &generator), radix: 16) }
        return "beacon-" + digits.joined()
    }

    /// Builds with `name`, shortening it (the only free text, which may appear several times)
    /// to the longest prefix that fits.
    private static func fitted(name: String, _ build: (String) -> String) -> String? {
        let whole = build(name)
        if whole.utf8.count <= maximumBytes { return whole }
        let characters = Array(name)
        var low = 0
        var high = characters.count - 1
        var best: String?
        while low <= high {
            let middle = (low + high) / 2
            let payload = build(String(characters[..<middle]) + "…")
            if payload.utf8.count <= maximumBytes {
                best = payload
                low = middle + 1
            } else {
                high = middle - 1
            }
        }
        return best
    }

    /// `apns-id` must be a UUID, and each request its own: a UUID (version 8) made from a hash of
    /// the event id and the device token. Every push of a press carries a different one, and a
    /// retry of the same push carries the same one (it is the same notification).
    public static func apnsID(eventID: String, token: String) -> String {
        var bytes = Array(SHA256.hash(data: Array((eventID + "\n" + token.lowercased()).utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8: custom
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        let hex = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let chars = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(chars[$0]) }.joined(separator: "-")
    }
}
