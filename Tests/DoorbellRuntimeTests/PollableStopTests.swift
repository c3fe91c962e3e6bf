import DoorbellRuntime
import Foundation
import XCTest

/// The MQTT sink sleeps through its backoff with `pause(micros: until - now)`; a thread that runs
/// late asks for a negative pause. That once meant poll(-1): the sink slept until the agent
/// stopped and never reconnected after a broker restart (seen under load in HomeAssistantTests).
final class PollableStopTests: XCTestCase {
    func testAPauseWhoseDeadlineHasPassedReturnsAtOnce() {
        let stop = PollableStop()
        let returned = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = stop.pause(micros: -5_000)
            returned.signal()
        }
        let inTime = returned.wait(timeout: .now() + 10) == .success
        if !inTime { stop.set() } // release the thread still waiting
        XCTAssertTrue(inTime, "pause(micros: -5000) did not return")
        XCTAssertFalse(stop.pause(micros: 1_000), "not set: false after the wait")
    }
}
