import Foundation

/// The receiver's clock, injectable so tests can be "in the future".
public struct WallClock: Sendable {
    public let millisecondsSinceEpoch: @Sendable () -> Int64

    public init(millisecondsSinceEpoch: @escaping @Sendable () -> Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    public static let system = WallClock {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// A clock stopped at `seconds` since the epoch.
    public static func fixed(seconds: Int64) -> WallClock {
        WallClock { seconds * 1000 }
    }
}
