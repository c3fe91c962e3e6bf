import DoorbellCore
import Glibc

// The phone bonds on disk: `phones.json` in the state directory, mode 0600 (it holds the LTKs
// and IRKs), replaced durably on every change. A damaged file is moved aside and reported (the
// phones pair again); it never stops the agent.

public struct BondStoreError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

public final class BondStore: @unchecked Sendable {
    public let path: String
    private let state: Locked<PhoneBonds>
    /// Set when the file found at start was damaged and moved aside: what status shows.
    public let problem: String?

    public init(stateDir: String, now: Int64) throws(BondStoreError) {
        path = stateDir + "/phones.json"
        var st = stat()
        guard stat(path, &st) == 0 else {
            guard errno == ENOENT else {
                throw BondStoreError(description: "cannot read \(path): \(errnoText()). The state directory must belong to the doorbell-agent user.")
            }
            state = Locked(PhoneBonds())
            problem = nil
            return
        }
        guard let bytes = readFile(path, maxBytes: 1 << 20) else {
            throw BondStoreError(description: "cannot read \(path): \(errnoText()). The state directory must belong to the doorbell-agent user.")
        }
        do {
            state = Locked(try PhoneBonds(json: try JSONReader.parse(bytes: bytes)))
            problem = nil
            if st.st_mode & 0o077 != 0 { chmod(path, 0o600) }
        } catch {
            let aside = path + ".broken-" + String(now / 1_000_000)
            rename(path, aside)
            state = Locked(PhoneBonds())
            problem = "the phone bonds in \(path) were damaged (\(error)) and moved to \(aside); pair the phones again (agentctl pair)"
        }
    }

    public var bonds: PhoneBonds { state.snapshot }

    /// Applies `change` and writes the result before returning: a bond the phone believes in is
    /// on disk before the pairing is reported done.
    @discardableResult
    public func update<T: Sendable>(_ change: (inout PhoneBonds) -> T) throws(BondStoreError) -> T {
        try state.withLock { (bonds) throws(BondStoreError) -> T in
            var copy = bonds
            let result = change(&copy)
            if let failure = DurableFile.replace(path, with: JSONWriter.encode(copy.json)) {
                throw BondStoreError(description: "cannot write the phone bonds to \(failure.path): \(failure.reason); free space or fix the permissions of the state directory")
            }
            bonds = copy
            return result
        }
    }
}
