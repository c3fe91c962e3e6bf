import DoorbellCore
import Glibc

// Reading a recording for a radio's replay (the sim board): the file, then the core's reader.

extension Recording {
    /// A recording of the kind this radio replays, or nil with the reason in status and the log.
    static func load(_ file: String, kind: Recording.Kind, status: Locked<RadioStatus>, log: Logger, radio: String) -> Recording? {
        var message: String
        if let bytes = readFile(file, maxBytes: 256 << 20) {
            do throws(Recording.Error) {
                let recording = try Recording.read(fileName: file, bytes: bytes)
                if recording.kind == kind { return recording }
                message = "\(file): a \(recording.kind.rawValue) recording, not \(kind.rawValue); give it to [radio.\(recording.kind.rawValue)]"
            } catch {
                message = error.description
            }
        } else {
            message = "\(file): cannot read: \(errnoText())"
        }
        status.withLock { $0.lastError = message }
        log.error("radio.replay_failed", [("radio", radio), ("error", message)])
        return nil
    }
}
