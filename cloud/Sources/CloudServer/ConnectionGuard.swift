import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

/// What a client may cost the server: how long it may take to send a request's headers (which
/// is also how long an idle keep-alive connection is kept), how long to send its body, how much
/// body it may declare, and how many connections may be open at once.
public struct ConnectionLimits: Sendable, Equatable {
    public var headerTimeoutMilliseconds: Int64 = 10_000
    public var bodyTimeoutMilliseconds: Int64 = 20_000
    /// A declared `content-length` above this is answered 413 before any of the body is read.
    public var maxBodyBytes: Int64 = Int64(BodyLimits.any)
    public var maxConnections = 1_000

    public init() {}
}

/// One connection's guard, as a value: what arrived, what is due next, and what to do. Pure:
/// the shell (`ConnectionGuardHandler`) runs the timer it asks for and performs its actions.
public struct ConnectionGuardState: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        /// Waiting for (the rest of) a request's headers: a new or idle keep-alive connection.
        case awaitingHead
        /// Headers read; the body is still arriving.
        case readingBody
        /// The request is complete; the application is answering it.
        case answering
        case closed
    }

    public enum Action: Sendable, Equatable {
        case none
        /// Run a timer for `milliseconds`; when it fires, call `timerFired(generation:)`.
        case arm(milliseconds: Int64, generation: Int)
        /// Stop the running timer (the request is complete).
        case disarm
        /// Answer 413 and close: the declared body is larger than any route accepts.
        case rejectTooLarge
        /// Close the connection: a client took too long.
        case close
    }

    let limits: ConnectionLimits
    public private(set) var phase = Phase.awaitingHead
    private var generation = 0
    /// Requests read but not yet answered (more than one only with pipelining).
    private var unanswered = 0

    public init(limits: ConnectionLimits) {
        self.limits = limits
    }

    private mutating func arm(_ milliseconds: Int64) -> Action {
        generation += 1
        return .arm(milliseconds: milliseconds, generation: generation)
    }

    /// The connection is open: its first request's headers are due within the header timeout.
    public mutating func opened() -> Action {
        arm(limits.headerTimeoutMilliseconds)
    }

    /// A request's headers arrived.
    public mutating func head(declaredLength: Int64?, hasBody: Bool) -> Action {
        guard phase != .closed else { return .none }
        if let declaredLength, declaredLength > limits.maxBodyBytes {
            phase = .closed
            return .rejectTooLarge
        }
        unanswered += 1
        guard hasBody else {
            phase = .answering
            generation += 1
            return .disarm
        }
        phase = .readingBody
        return arm(limits.bodyTimeoutMilliseconds)
    }

    /// The request's body is complete. If it was answered already (an early 401 or 413), the
    /// connection is idle now.
    public mutating func bodyEnded() -> Action {
        guard phase == .readingBody else { return .none }
        if unanswered == 0 {
            phase = .awaitingHead
            return arm(limits.headerTimeoutMilliseconds)
        }
        phase = .answering
        generation += 1
        return .disarm
    }

    /// An answer was written in full: with nothing else outstanding the connection is idle, and
    /// the next request's headers are due within the header timeout.
    public mutating func answered() -> Action {
        guard phase != .closed else { return .none }
        unanswered = max(unanswered - 1, 0)
        guard unanswered == 0, phase == .answering else { return .none }
        phase = .awaitingHead
        return arm(limits.headerTimeoutMilliseconds)
    }

    /// The timer of `generation` ran out.
    public mutating func timerFired(generation fired: Int) -> Action {
        guard fired == generation, phase == .awaitingHead || phase == .readingBody else { return .none }
        phase = .closed
        return .close
    }
}

/// Open connections, shared by every connection's guard.
final class ConnectionCount: Sendable {
    private let open = Atomic<Int>(0)

    /// Counts one more; whether it is within `limit`.
    func admit(limit: Int) -> Bool {
        open.add(1, ordering: .relaxed).newValue <= limit
    }

    func release() {
        open.subtract(1, ordering: .relaxed)
    }
}

/// The shell around `ConnectionGuardState`, placed after Hummingbird's HTTP/1 codec: runs its
/// timers on the event loop, answers an oversized declared body with 413 at once, and enforces
/// the connection cap (a connection over it is closed as soon as it is accepted).
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var state: ConnectionGuardState
    private let limits: ConnectionLimits
    private let count: ConnectionCount
    private var counted = false
    private var timer: Scheduled<Void>?

    init(limits: ConnectionLimits, count: ConnectionCount) {
        self.limits = limits
        self.count = count
        state = ConnectionGuardState(limits: limits)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        counted = true
        guard count.admit(limit: limits.maxConnections) else {
            context.close(promise: nil)
            return
        }
        perform(state.opened(), context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        if counted {
            counted = false
            count.release()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state.phase != .closed else { return }  // after a 413: the rest is not read
        switch unwrapInboundIn(data) {
        case .head(let request):
            let length = request.headerFields[.contentLength].flatMap { Int64($0) }
            let chunked = request.headerFields[.transferEncoding]?.lowercased().contains("chunked") ?? false
            let action = state.head(declaredLength: length, hasBody: chunked || (length ?? 0) > 0)
            if action == .rejectTooLarge {
                perform(action, context: context)
                return
            }
            perform(action, context: context)
        case .body:
            break
        case .end:
            perform(state.bodyEnded(), context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            perform(state.answered(), context: context)
        }
        context.write(data, promise: promise)
    }

    private func perform(_ action: ConnectionGuardState.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .arm(let milliseconds, let generation):
            timer?.cancel()
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: .milliseconds(milliseconds)) {
                let (handler, context) = loopBound.value
                handler.perform(handler.state.timerFired(generation: generation), context: context)
            }
        case .disarm:
            timer?.cancel()
            timer = nil
        case .rejectTooLarge:
            timer?.cancel()
            let head = HTTPResponse(status: .contentTooLarge, headerFields: [
                .contentType: "application/json", .connection: "close", .contentLength: String(Self.tooLarge.utf8.count),
            ])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(ByteBuffer(string: Self.tooLarge))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
        case .close:
            context.close(promise: nil)
        }
    }

    private static let tooLarge = BodyLimits.tooLargeJSON(limit: BodyLimits.any, what: "the declared content-length")
}
