import DoorbellCore
import Glibc

// The gateway's Ed25519 device key: generated on first start, kept in the state directory with
// mode 0600, written atomically (temp file, fsync, rename) so a power cut never leaves half a key.

public struct KeyStoreError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

public enum DeviceKeyStore {
    public static func loadOrCreate(path: String, log: Logger) throws(KeyStoreError) -> Ed25519SigningKey {
        if let key = try load(path: path) { return key }
        let key = Ed25519SigningKey()
        try write(key.seed, to: path)
        log.notice("device_key.created", [("path", path), ("key_id", DeviceKey.keyID(key.publicKey))])
        return key
    }

    public static func load(path: String) throws(KeyStoreError) -> Ed25519SigningKey? {
        var st = stat()
        if stat(path, &st) != 0 {
            if errno == ENOENT { return nil }
            throw KeyStoreError(description: "cannot read device key \(path): \(errnoText()). The state directory must belong to the doorbell-agent user.")
        }
        guard let bytes = readFile(path, maxBytes: 64) else {
            throw KeyStoreError(description: "cannot read device key \(path): \(errnoText()). The state directory must belong to the doorbell-agent user.")
        }
        guard bytes.count == 32, let key = try? Ed25519SigningKey(seed: bytes) else {
            throw KeyStoreError(description: "device key \(path) is damaged (\(bytes.count) bytes, expected 32). Move it aside to make a new one, then enroll the new public key (agentctl pubkey).")
        }
        if st.st_mode & 0o077 != 0 { chmod(path, 0o600) }
        return key
    }

    static func write(_ bytes: [UInt8], to path: String) throws(KeyStoreError) {
        if let failure = DurableFile.replace(path, with: bytes) {
            throw KeyStoreError(description: "cannot write device key \(failure.path): \(failure.reason). Check that the state directory exists and is writable by the doorbell-agent user.")
        }
    }

    public static func publicKeyBase64(_ publicKey: [UInt8]) -> String {
        Base64.encode(publicKey)
    }
}
