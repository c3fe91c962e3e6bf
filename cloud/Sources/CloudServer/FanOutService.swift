import CloudPush
import ServiceLifecycle

/// Runs the fan-out beside the HTTP server; stops it on SIGTERM/SIGINT with the server.
public struct FanOutService: Service {
    let fanOut: FanOut

    public init(fanOut: FanOut) {
        self.fanOut = fanOut
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await fanOut.run()
        }
    }
}
