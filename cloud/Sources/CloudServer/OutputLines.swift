import CloudCore
import Foundation
import Synchronization

/// The receiver's machine-readable lines, all on standard output, one line per outcome, written
/// and flushed at once (logs go to standard error):
///
///     LISTENING https://<host>:<port>
///     EVENT <compact JSON>                       an event was accepted and stored
///     DUPLICATE <id>                             an already stored event arrived again
///     REJECTED <code> id=<webhook-id|-> <reason> a delivery was refused (401/400)
///     UNAVAILABLE <n>/<N>                        --fail-first answered 503
///     PUSH <event-id> <token…> <state> <status|-> <reason|->[ pruned]  one APNs attempt recorded
public struct OutputLines: Sendable {
    private let sink: @Sendable (String) -> Void

    /// `sink` receives each line without its newline.
    public init(sink: @escaping @Sendable (String) -> Void) {
        self.sink = sink
    }

    /// Writes to file descriptor 1 unbuffered; whole lines, serialized across threads.
    public static let standardOutput: OutputLines = {
        let lock = Mutex(())
        return OutputLines { line in
            lock.withLock { _ in
                try? FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8))
            }
        }
    }()

    public func listening(url: String) {
        emit("LISTENING \(url)")
    }

    public func accepted(_ event: VerifiedEvent) {
        emit("EVENT " + EventLine.json(event.envelope, verified: event.verified))
    }

    public func duplicate(id: String) {
        emit("DUPLICATE \(Self.token(id))")
    }

    public func rejected(_ rejection: Rejection, webhookID: String?) {
        let id = webhookID.map(Self.token) ?? "-"
        emit("REJECTED \(rejection.code) id=\(id.isEmpty ? "-" : id) \(rejection.message)")
    }

    /// One push attempt: the token is shortened to its first 8 hex digits (enough to find it,
    /// not enough to push to it).
    public func pushed(eventID: String, token: String, state: String, status: Int64?, reason: String?, pruned: Bool) {
        emit("PUSH \(Self.token(eventID)) \(token.prefix(8))… \(state) \(status.map(String.init) ?? "-") "
             + "\(reason.map(Self.token) ?? "-")" + (pruned ? " pruned" : ""))
    }

    /// A base station's receipt: the push of `eventID` to `token` appeared on (or was missed by)
    /// a phone connected to it; `unmatched` when no push of its doorbells was found for it.
    public func receipt(id: String, kind: String, eventID: String?, token: String?) {
        emit("RECEIPT \(Self.token(id)) \(kind) " + (eventID.map { "\(Self.token($0)) \(token.map { String($0.prefix(8)) + "…" } ?? "-")" } ?? "unmatched"))
    }

    public func unavailable(attempt: Int, of total: Int) {
        emit("UNAVAILABLE \(attempt)/\(total)")
    }

    private func emit(_ line: String) {
        // Header values end up in some lines: keep every line a single line.
        sink(String(line.map { $0.isNewline || $0 == "\0" ? " " : $0 }))
    }

    /// A header value as one printable token (at most 100 characters, no spaces).
    private static func token(_ value: String) -> String {
        String(value.prefix(100).map { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } == true ? "_" : $0 })
    }
}
