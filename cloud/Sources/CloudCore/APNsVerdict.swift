#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the fan-out does with one APNs answer (Apple: "Handling notification responses from
/// APNs"). Pure: status, body and `retry-after` in, decision out.
public enum APNsVerdict: Sendable, Equatable {
    /// 200: the push is with Apple.
    case delivered
    /// 410 Unregistered/ExpiredToken: the app is gone from that phone since `timestampMs`; delete
    /// the token unless the phone registered it again after that time.
    case unregistered(reason: String, timestampMs: Int64?)
    /// 400 BadDeviceToken: perhaps a sandbox token sent to production or the reverse; flag it and
    /// delete it only when it happens again.
    case badDeviceToken
    /// 403 about our provider token: sign a new JWT and retry; an operator should look if it repeats.
    case providerTokenRejected(reason: String)
    /// 429, 5xx, 403 TooManyProviderTokenUpdates, stream/connection failures: try again later.
    case retry(reason: String, afterSeconds: Int64?)
    /// Anything else (413 PayloadTooLarge, 400 DeviceTokenNotForTopic, TopicDisallowed, …):
    /// sending the same request again cannot succeed.
    case permanent(reason: String)

    public static func classify(status: Int, body: [UInt8], retryAfter: String? = nil) -> APNsVerdict {
        // The common case, once per push: a 200 has no body to decode.
        if status == 200 { return .delivered }
        let answer = Answer(body)
        let reason = answer.reason ?? "HTTP \(status)"
        switch status {
        case 410:
            return .unregistered(reason: reason, timestampMs: answer.timestamp)
        case 400 where answer.reason == "BadDeviceToken":
            return .badDeviceToken
        case 403 where answer.reason == "TooManyProviderTokenUpdates":
            return .retry(reason: reason, afterSeconds: retryAfter.flatMap { Int64($0) })
        case 403 where ["ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken"]
            .contains(answer.reason ?? ""):
            return .providerTokenRejected(reason: reason)
        case 429, 500...599:
            return .retry(reason: reason, afterSeconds: retryAfter.flatMap { Int64($0) })
        default:
            return .permanent(reason: reason)
        }
    }

    /// APNs error bodies: `{"reason": "...", "timestamp": <ms>}` (timestamp only with 410).
    private struct Answer: Decodable {
        var reason: String?
        var timestamp: Int64?

        init(_ body: [UInt8]) {
            // A body with a key twice is read as no body: which reason counts would be a guess.
            let strict = (try? StrictJSON.check(body)) != nil
            self = (strict ? try? JSONDecoder().decode(Answer.self, from: Data(body)) : nil) ?? Answer(reason: nil, timestamp: nil)
        }

        init(reason: String?, timestamp: Int64?) {
            self.reason = reason
            self.timestamp = timestamp
        }
    }
}

/// When to try a failed push again: exponential from 1 s, capped at 5 min, with full jitter
/// (so hundreds of tokens rejected by one 429 don't come back in one burst), never sooner than
/// a `retry-after`. Pure: the random draw is a parameter in [0, 1).
public enum PushBackoff {
    public static func delayMilliseconds(attempt: Int, retryAfterSeconds: Int64?, random: Double) -> Int64 {
        let ceiling = min(300_000, 1_000 << min(max(attempt - 1, 0), 9))
        let jittered = Int64(Double(ceiling) * min(max(random, 0), 1))
        return max(jittered, 250, (retryAfterSeconds ?? 0) * 1000)
    }
}
