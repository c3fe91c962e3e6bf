import CloudPush
import ServiceLifecycle

/// Runs the fan-out beside the HTTP server. On SIGTERM/SIGINT the fan-out stops claiming, lets
/// the pushes already on the wire finish (bounded by its drain time) and records their outcomes
/// before the process exits: a push APNs accepted is never sent again by the next run.
public struct FanOutService: Service {
    let fanOut: FanOut

    public init(fanOut: FanOut) {
        self.fanOut = fanOut
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await fanOut.run()
        } onGracefulShutdown: {
            fanOut.stop()
        }
    }
}
