import Glibc

// A whole-file replace that a power cut cannot tear: written to a temporary file (created with
// the final mode, so a secret is never readable by others), synced, renamed over the old file,
// directory synced. After a crash there is the old file or the new one. The device key, the
// last good config and the phone bonds are written this way.

public enum DurableFile {
    public struct Failure: Error, Sendable {
        public let path: String
        public let code: Int32
        public var reason: String { errnoText(code) }
    }

    /// nil on success, else the path that failed and the OS's error (ENOSPC for a short write).
    public static func replace(_ path: String, with bytes: [UInt8], mode: mode_t = 0o600) -> Failure? {
        let tmp = path + ".tmp"
        unlink(tmp)
        let fd = retryingEINTR { open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        guard fd >= 0 else { return Failure(path: tmp, code: errno) }
        let written = bytes.withUnsafeBytes { buf in retryingEINTR { write(fd, buf.baseAddress, buf.count) } }
        let code = written < 0 ? errno : written < bytes.count ? ENOSPC : 0
        let synced = code == 0 && fsync(fd) == 0
        let syncCode = errno
        close(fd)
        guard code == 0, synced else { unlink(tmp); return Failure(path: tmp, code: code != 0 ? code : syncCode) }
        guard rename(tmp, path) == 0 else { let failure = Failure(path: path, code: errno); unlink(tmp); return failure }
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let dfd = retryingEINTR { open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if dfd >= 0 { _ = fsync(dfd); close(dfd) }
        return nil
    }
}
