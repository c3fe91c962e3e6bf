import DoorbellCore
import Glibc

// The last config that loaded, kept durably in the state directory. The field rig showed why: an
// installer's edit without a sync, then a power cut, left NUL bytes in agent.toml, and the agent
// refused to start for good — a dead doorbell until someone came. Now the agent starts on the last
// good copy instead, and says so loudly (a `problems` line in status, an error in the log) until
// the file is fixed and reloaded.

public enum LastGoodConfig {
    public static func path(stateDir: String) -> String { stateDir + "/agent.toml.last-good" }

    /// The state directory before the config is known: systemd's StateDirectory= (the shipped unit
    /// sets it). Outside systemd there is no fallback: a hand-started agent with a bad config exits
    /// 78 as it always did, rather than picking up some other installation's copy.
    public static func stateDirBeforeConfig() -> String? {
        guard let env = getenv("STATE_DIRECTORY").map({ String(cString: $0) }), let first = env.split(separator: ":").first else { return nil }
        return String(first)
    }

    public static func load(stateDir: String) -> [UInt8]? { readFile(path(stateDir: stateDir)) }

    /// Written to a temporary file, synced, renamed over the old copy, directory synced: a power
    /// cut leaves the old copy or the new one, never a torn one.
    public static func save(_ bytes: [UInt8], stateDir: String) throws(SpawnError) {
        if let failure = DurableFile.replace(path(stateDir: stateDir), with: bytes) {
            throw SpawnError(program: failure.path, code: failure.code)
        }
    }
}
