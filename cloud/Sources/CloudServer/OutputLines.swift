import CloudCore
import Foundation
import Synchronization

/// The receiver's machine-readable lines, all on standard output, one line per outcome, written
/// and flushed at once (logs go to standard error):
///
///     LISTENING https://<host>:<port>
///     EVENT <compact JSON>                       an event was accepted and stored
///     DUPLICATE <id>                             an already stored event arrived again
///     HEARTBEAT <gateway> <version> <slot|->     a gateway's heartbeat was accepted and recorded
///     REJECTED <code> id=<webhook-id|-> <reason> a delivery was refused (401/400)
///     UNAVAILABLE <n>/<N>                        --fail-first answered 503
///     PUSH <event-id> <token…> <state> <status|-> <reason|->[ pruned]  one APNs attempt recorded
public struct OutputLines: Sendable {
    private let sink: @Sendable (String) -> Void

    /// `sink` receives each line without its newline.
    public init(sink: @escaping @Sendable (String) -> Void) {
        self.sink = sink
    }

    /// Standard output through a `LineQueue`: a request thread never waits on a slow or
    /// stalled reader of our stdout (a full pipe, a stopped pager); see `LineQueue` for what
    /// happens when the reader falls `LineQueue.defaultCapacity` lines behind.
    public static let standardOutput = OutputLines(queue: standardOutputQueue)
    public static let standardOutputQueue = LineQueue(fileDescriptor: 1)

    /// Lines handed to `queue` (which writes them on its own thread).
    public init(queue: LineQueue) {
        self.init { line in queue.enqueue(line) }
    }

    public func listening(url: String) {
        emit("LISTENING \(url)")
    }

    public func accepted(_ event: VerifiedEvent) {
        emit("EVENT " + EventLine.json(event.envelope, verified: event.verified))
    }

    public func heartbeat(_ heartbeat: GatewayHeartbeat) {
        emit("HEARTBEAT \(Self.token(heartbeat.gatewayID)) \(Self.token(heartbeat.agentVersion)) \(heartbeat.bootSlot.map(Self.token) ?? "-")")
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

/// Lines for a file descriptor, written by one thread of their own: `enqueue` never blocks
/// (beyond a short lock), whatever the reader does. At most `capacity` lines wait; when the
/// reader falls that far behind, new lines are dropped and counted (`dropped`), and once the
/// writer catches up it writes `DROPPED <n>` so the reader sees the gap. Dropping beats the
/// alternatives: blocking would stall ingest (a gateway's retries, the fan-out's outcomes)
/// behind a stdout nobody reads, and an unbounded queue would grow until the process dies.
public final class LineQueue: Sendable {
    public static let defaultCapacity = 10_000

    private struct State {
        var lines: [String] = []
        var droppedSinceReport = 0
        var droppedTotal = 0
        /// Lines handed to the writer that it has not finished writing.
        var writing = 0
    }

    private let state = Mutex(State())
    private let ready = DispatchSemaphore(value: 0)
    private let capacity: Int
    private let fileDescriptor: Int32

    public init(fileDescriptor: Int32, capacity: Int = LineQueue.defaultCapacity) {
        self.fileDescriptor = fileDescriptor
        self.capacity = max(capacity, 1)
        let thread = Thread { [self] in writeLoop() }
        thread.name = "stdout"
        thread.start()
    }

    /// Lines dropped since start because the queue was full.
    public var dropped: Int { state.withLock { $0.droppedTotal } }

    /// Lines the writer has taken off the queue and not finished writing (a blocked stdout
    /// keeps them there); the queue holds up to `capacity` more.
    public var inFlight: Int { state.withLock { $0.writing } }

    /// Queues `line` (without its newline); drops it if `capacity` lines are waiting.
    public func enqueue(_ line: String) {
        let queued = state.withLock { state -> Bool in
            guard state.lines.count < capacity else {
                state.droppedSinceReport += 1
                state.droppedTotal += 1
                return false
            }
            state.lines.append(line)
            return true
        }
        if queued { ready.signal() }
    }

    /// Runs for the life of the process (the queue is the process's stdout): takes everything
    /// queued, writes it, waits for more.
    private func writeLoop() {
        while true {
            ready.wait()
            let (lines, dropped) = state.withLock { state -> ([String], Int) in
                defer {
                    state.lines.removeAll(keepingCapacity: true)
                    state.droppedSinceReport = 0
                }
                state.writing = state.lines.count
                return (state.lines, state.droppedSinceReport)
            }
            guard !lines.isEmpty || dropped > 0 else { continue }
            var text = lines.map { $0 + "\n" }.joined()
            if dropped > 0 { text += "DROPPED \(dropped)\n" }
            write(Array(text.utf8))
            state.withLock { $0.writing = 0 }
        }
    }

    /// Waits (at most `milliseconds`, polling) until every queued line is written: at exit,
    /// so the last lines are not lost with the process. Whether it got there.
    @discardableResult
    public func drain(withinMilliseconds milliseconds: Int) -> Bool {
        for _ in 0..<max(milliseconds / 10, 1) {
            if state.withLock({ $0.lines.isEmpty && $0.writing == 0 }) { return true }
            usleep(10_000)
        }
        return state.withLock { $0.lines.isEmpty && $0.writing == 0 }
    }

    /// The whole buffer, however many `write` calls it takes; gives up on an error (a closed
    /// stdout: nothing to do but go on serving).
    private func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Foundation.write(fileDescriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
