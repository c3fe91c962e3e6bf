import CloudServer
import Testing

/// The connection guard's decisions, as values: no sockets, no timers, no sleeping.
@Suite struct ConnectionGuardTests {
    var limits: ConnectionLimits {
        var limits = ConnectionLimits()
        limits.headerTimeoutMilliseconds = 1_000
        limits.bodyTimeoutMilliseconds = 2_000
        limits.maxBodyBytes = 256 * 1024
        return limits
    }

    @Test func headersAreDueWithinTheHeaderTimeoutAndAnIdleConnectionIsClosed() {
        var state = ConnectionGuardState(limits: limits)
        #expect(state.opened() == .arm(milliseconds: 1_000, generation: 1))
        #expect(state.timerFired(generation: 1) == .close)
        #expect(state.phase == .closed)
    }

    @Test func aStalledBodyIsClosedAndACompleteOneDisarms() {
        var state = ConnectionGuardState(limits: limits)
        _ = state.opened()
        #expect(state.head(declaredLength: 100, hasBody: true) == .arm(milliseconds: 2_000, generation: 2))
        #expect(state.timerFired(generation: 1) == .none, "the header timer is stale")
        #expect(state.bodyEnded() == .disarm)
        #expect(state.timerFired(generation: 2) == .none, "the body arrived; the answer takes what it takes")
        #expect(state.answered() == .arm(milliseconds: 1_000, generation: 4), "idle: the next headers are due")
        #expect(state.head(declaredLength: 10, hasBody: true) == .arm(milliseconds: 2_000, generation: 5))
        #expect(state.timerFired(generation: 5) == .close)
    }

    @Test func anOversizedDeclaredLengthIsRefusedBeforeTheBody() {
        var state = ConnectionGuardState(limits: limits)
        _ = state.opened()
        #expect(state.head(declaredLength: 99_999_999_999, hasBody: true) == .rejectTooLarge)
        #expect(state.phase == .closed)
        #expect(state.bodyEnded() == .none)
        var fits = ConnectionGuardState(limits: limits)
        _ = fits.opened()
        #expect(fits.head(declaredLength: 256 * 1024, hasBody: true) == .arm(milliseconds: 2_000, generation: 2))
    }

    @Test func aRequestWithoutBodyIsAnsweredWithoutATimer() {
        var state = ConnectionGuardState(limits: limits)
        _ = state.opened()
        #expect(state.head(declaredLength: nil, hasBody: false) == .disarm)
        #expect(state.phase == .answering)
        #expect(state.timerFired(generation: 1) == .none)
        #expect(state.answered() == .arm(milliseconds: 1_000, generation: 3))
    }

    /// Answered before the body was read in full (an early 401): once the body is in, the
    /// connection is idle and the header timeout runs again.
    @Test func anEarlyAnswerLeavesTheConnectionIdleOnceTheBodyIsIn() {
        var state = ConnectionGuardState(limits: limits)
        _ = state.opened()
        _ = state.head(declaredLength: 100, hasBody: true)
        #expect(state.answered() == .none, "the body timer keeps running")
        #expect(state.bodyEnded() == .arm(milliseconds: 1_000, generation: 3))
        #expect(state.timerFired(generation: 3) == .close)
    }
}
