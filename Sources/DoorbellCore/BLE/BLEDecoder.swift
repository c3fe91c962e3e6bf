// The BLE decoder plug-in model. A decoder reads the AD structures of one advertising report and
// answers for itself: not mine (another format), corrupt (its format, broken: a wrong length, an
// invalid encoding), implausible (well formed, but something no device following the format
// sends), or an observation. BLEPipeline asks the decoders of `BLEDecoderRegistry.all` in order
// and takes the first observation; every answer but "not mine" is counted per decoder, so status
// and metrics tell a busy street (not mine) from a broken beacon (corrupt).
// Adding a decoder: one file with a type conforming to `BLEAdvertDecoder`, one registry line.

/// What a decoder declares about itself.
public struct BLEDecoderDescriptor: Sendable {
    /// Its name in `agentctl status` and the metrics' `decoder` label.
    public var name: String
    public var summary: String
    /// The `[[region]]` keys it adds, for the config loader's hints and the README's table.
    public var regionKeys: [(key: String, help: String)]

    public init(name: String, summary: String, regionKeys: [(key: String, help: String)] = []) {
        self.name = name
        self.summary = summary
        self.regionKeys = regionKeys
    }

    /// The declared help of a region key ("" for a key it does not declare).
    public func help(for key: String) -> String { regionKeys.first { $0.key == key }?.help ?? "" }
}

/// What a decoder makes of an advert that is its own.
public enum BLEObservation: Sendable, Equatable {
    case iBeacon(IBeacon)
    /// BTHome service data without the UUID, a view into the report's bytes: decoded later, with
    /// the configured device's bindkey.
    case bthome(serviceData: ArraySlice<UInt8>)
    case eddystone(EddystoneFrame)

    public var kind: BLEObservationKind {
        switch self {
        case .iBeacon: .iBeacon
        case .bthome: .bthome
        case .eddystone(.uid): .eddystoneUID
        case .eddystone(.eid): .eddystoneEID
        case .eddystone(.telemetry): .eddystoneTLM
        case .eddystone(.encryptedTelemetry): .eddystoneEncryptedTLM
        case .eddystone(.url): .eddystoneURL
        }
    }
}

/// Observations are counted by kind in a fixed array: no hashing per report.
public enum BLEObservationKind: Int, CaseIterable, Sendable {
    case iBeacon, bthome, eddystoneUID, eddystoneEID, eddystoneTLM, eddystoneEncryptedTLM, eddystoneURL

    public var name: String {
        switch self {
        case .iBeacon: "ibeacon"
        case .bthome: "bthome"
        case .eddystoneUID: "eddystone_uid"
        case .eddystoneEID: "eddystone_eid"
        case .eddystoneTLM: "eddystone_tlm"
        case .eddystoneEncryptedTLM: "eddystone_etlm"
        case .eddystoneURL: "eddystone_url"
        }
    }
}

public enum BLEVerdict: Sendable, Equatable {
    case notMine
    case corrupt(String)
    case implausible(String)
    case observation(BLEObservation)
}

public protocol BLEAdvertDecoder: Sendable {
    static var descriptor: BLEDecoderDescriptor { get }
    /// Total on any structures: never traps, whatever the bytes.
    static func verdict(_ structures: [ADStructure]) -> BLEVerdict
}

public enum BLEDecoderRegistry {
    /// In order of precedence: the first observation wins (an iBeacon that also carries BTHome
    /// service data is an iBeacon, as before the registry).
    public static let all: [any BLEAdvertDecoder.Type] = [
        IBeaconDecoder.self,
        BTHomeDecoder.self,
        EddystoneDecoder.self,
    ]

    public static let names: [String] = all.map { $0.descriptor.name }
}

/// One decoder's answers: `seen` observations, and the adverts it recognised but refused.
public struct BLEDecoderCounts: Sendable, Equatable {
    public var seen = 0
    public var corrupt = 0
    public var implausible = 0
    public init() {}
}
