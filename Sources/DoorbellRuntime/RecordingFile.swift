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

/// A file read in fixed chunks into one reused buffer: how `doorbell-agent replay` streams a
/// capture (its memory is the chunk, not the file).
public struct ChunkedFile: ~Copyable {
    private let fd: Int32
    private var buffer: [UInt8]

    /// Nil when the file cannot be opened (errno says why).
    public init?(path: String, chunkBytes: Int = 1 << 16) {
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        self.fd = fd
        buffer = [UInt8](repeating: 0, count: max(chunkBytes, 1))
    }

    deinit { close(fd) }

    /// The next bytes (valid until the next call), empty at the end, nil on a read error.
    public mutating func read() -> ArraySlice<UInt8>? {
        let fd = self.fd
        let n = buffer.withUnsafeMutableBytes { buf in retryingEINTR { Glibc.read(fd, buf.baseAddress, buf.count) } }
        return n < 0 ? nil : buffer[0..<n]
    }
}

/// Standard output through one reused buffer, written when it holds `flushBytes`: replay's events
/// cost one write(2) per many lines instead of one print each.
public struct BufferedOutput {
    public var bytes: [UInt8] = []
    private let fd: Int32
    private let flushBytes: Int

    public init(fd: Int32 = 1, flushBytes: Int = 1 << 16) {
        self.fd = fd
        self.flushBytes = flushBytes
        bytes.reserveCapacity(flushBytes + 4096)
    }

    /// Writes out what is held once it reaches `flushBytes`.
    public mutating func lineEnded() {
        bytes.append(0x0A)
        if bytes.count >= flushBytes { flush() }
    }

    /// Writes out everything held; a failed write drops it (a reader that went away: SIGPIPE ends
    /// the process first, as it did with print).
    public mutating func flush() {
        var done = 0
        let fd = self.fd
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { buf in retryingEINTR { write(fd, buf.baseAddress! + done, buf.count - done) } }
            if n <= 0 { break }
            done += n
        }
        bytes.removeAll(keepingCapacity: true)
    }
}
