/// A beacon region a phone reports and a beacon message is set for, as the agent's `[[region]]`
/// tables name them: an iBeacon (uuid, major, minor) or an Eddystone-UID (namespace, and an
/// instance or every instance of the namespace). Pure.
public enum BeaconRegion: Sendable, Hashable {
    case iBeacon(uuid: String, major: Int64, minor: Int64)
    /// `instance` nil: the whole namespace.
    case eddystone(namespace: String, instance: String?)

    /// The fields as a body carries them (`uuid`, `major`, `minor` or `namespace`, `instance`);
    /// throws what to fix. Canonical spelling: upper-case UUID, lower-case Eddystone hex.
    public init(uuid: String?, major: Int64?, minor: Int64?, namespace: String?, instance: String?) throws(RegionError) {
        switch (uuid, namespace) {
        case (let uuid?, nil):
            guard instance == nil else { throw RegionError("instance is for Eddystone regions (with namespace); an iBeacon region has uuid, major and minor") }
            guard TextChecks.isCanonicalUUID(uuid) else { throw RegionError("uuid must be a UUID like E2C56DB5-DFFB-48D2-B060-D0F5A71096E0") }
            guard let major, let minor, (0...65535).contains(major), (0...65535).contains(minor) else {
                throw RegionError("an iBeacon region needs major and minor, each 0…65535")
            }
            self = .iBeacon(uuid: uuid.uppercased(), major: major, minor: minor)
        case (nil, let namespace?):
            guard major == nil, minor == nil else { throw RegionError("major and minor are for iBeacon regions (with uuid); an Eddystone region has namespace and instance") }
            guard TextChecks.isHex(namespace, lengths: 20...20) else { throw RegionError("namespace must be the Eddystone-UID namespace as 20 hex digits (10 bytes)") }
            if let instance, !TextChecks.isHex(instance, lengths: 12...12) {
                throw RegionError("instance must be the Eddystone-UID instance as 12 hex digits (6 bytes), or left out for the whole namespace")
            }
            self = .eddystone(namespace: namespace.lowercased(), instance: instance?.lowercased())
        default:
            throw RegionError("give a region: uuid, major and minor (iBeacon) or namespace and optionally instance (Eddystone-UID)")
        }
    }

    /// One text per region, what the store keys messages and rate limits by.
    public var key: String {
        switch self {
        case let .iBeacon(uuid, major, minor): return "ibeacon:\(uuid)/\(major)/\(minor)"
        case let .eddystone(namespace, instance): return "eddystone:\(namespace)" + (instance.map { "/" + $0 } ?? "")
        }
    }

    /// As the agent prints a region: "uuid/major/minor" or "namespace/instance".
    public var display: String {
        switch self {
        case let .iBeacon(uuid, major, minor): return "\(uuid)/\(major)/\(minor)"
        case let .eddystone(namespace, instance): return namespace + (instance.map { "/" + $0 } ?? "")
        }
    }

    /// The regions whose message answers a report of this one, most specific first: an
    /// Eddystone instance is also covered by a message for its whole namespace.
    public var matchingKeys: [String] {
        if case let .eddystone(namespace, instance?) = self {
            return [key, BeaconRegion.eddystone(namespace: namespace, instance: nil).key]
        }
        return [key]
    }

    /// The region a stored key names; nil for text that is not a key.
    public init?(key: String) {
        if key.hasPrefix("ibeacon:") {
            let parts = key.dropFirst("ibeacon:".count).split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 3, let major = Int64(parts[1]), let minor = Int64(parts[2]),
                  let region = try? BeaconRegion(uuid: String(parts[0]), major: major, minor: minor, namespace: nil, instance: nil)
            else { return nil }
            self = region
        } else if key.hasPrefix("eddystone:") {
            let parts = key.dropFirst("eddystone:".count).split(separator: "/", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count),
                  let region = try? BeaconRegion(uuid: nil, major: nil, minor: nil, namespace: String(parts[0]),
                                                 instance: parts.count == 2 ? String(parts[1]) : nil)
            else { return nil }
            self = region
        } else {
            return nil
        }
    }
}

public struct RegionError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
