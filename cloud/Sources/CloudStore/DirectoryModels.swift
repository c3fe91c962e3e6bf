import CloudCore

/// An account: the owner of doorbells, or someone a doorbell is shared with.
public struct Account: Sendable, Equatable {
    public let id: String
    public let name: String
}

/// A gateway enrolled by an account, with the keys its events must be signed with.
public struct Gateway: Sendable, Equatable {
    public let id: String
    public let accountID: String
    /// base64 of the raw Ed25519 key, as `agentctl pubkey` prints it.
    public let publicKey: String?
    /// `whsec_…`.
    public let secret: String?
}

public struct Doorbell: Sendable, Equatable {
    /// `<gateway id>:<device id>`.
    public let id: String
    public let gatewayID: String
    public let deviceID: String
    public let accountID: String
    public let name: String
    public let site: String?

    public static func id(gatewayID: String, deviceID: String) -> String { gatewayID + ":" + deviceID }
}

public enum APNsEnvironment: String, Sendable, CaseIterable {
    case sandbox
    case production
}

/// An app install's APNs device token, registered by a signed-in account.
public struct Phone: Sendable, Equatable {
    public let token: String
    public let accountID: String
    public let environment: APNsEnvironment
    public let bundleID: String
    public let registeredAtMilliseconds: Int64
    /// 400 BadDeviceToken answers since it was last registered.
    public let badTokenCount: Int64
    /// What the phone's user calls it ("Bob's iPhone"), if the app sent it.
    public var name: String? = nil
    /// Whether owners of doorbells shared with this account may see `name` in their delivery views.
    public var nameShared: Bool = false
}

public enum DeliveryState: String, Sendable, CaseIterable {
    /// Waiting for its (next) attempt.
    case pending
    /// APNs answered 200.
    case delivered
    /// APNs answered 410: the app is gone from that phone.
    case unregistered
    /// A permanent refusal (BadDeviceToken, PayloadTooLarge, DeviceTokenNotForTopic, …).
    case failed
    /// Still failing when `apns-expiration` passed: a late ring is worse than none.
    case expired
}

/// One push of one event (or beacon message) to one phone token.
public struct Delivery: Sendable, Equatable {
    public let eventID: String
    public let token: String
    public let accountID: String
    public let environment: APNsEnvironment
    public let bundleID: String
    public let doorbellID: String?
    public let payload: String
    public let apnsID: String
    public let collapseID: String?
    public let expiresAtMilliseconds: Int64
    public let state: DeliveryState
    public let attempts: Int64
    public let nextAttemptAtMilliseconds: Int64
    public let lastStatus: Int64?
    public let lastReason: String?
    public let updatedAtMilliseconds: Int64
    /// A base station saw the notification appear on a phone (its clock), and which phone.
    public var displayedAtMilliseconds: Int64? = nil
    public var displayedOn: String? = nil
    /// A base station reported that the phone, connected to it, never showed this push.
    public var notDisplayedAtMilliseconds: Int64? = nil
}

/// The message pushed to a phone that reports entering (or leaving) a beacon region.
public struct BeaconMessage: Sendable, Equatable {
    public let id: String
    public let accountID: String
    public let region: BeaconRegion
    /// Scope: one doorbell (who may see it may get the message) …
    public let doorbellID: String?
    /// … or every doorbell of the owner at this site.
    public let site: String?
    /// `entered` or `exited`.
    public let event: String
    public let title: String
    public let body: String
}

/// Refusals the API turns into 4xx answers; the message says what to do.
public enum DirectoryError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    case forbidden(String)
    case conflict(String)
    case invalid(String)

    public var description: String {
        switch self {
        case .notFound(let message), .forbidden(let message), .conflict(let message), .invalid(let message):
            return message
        }
    }
}
