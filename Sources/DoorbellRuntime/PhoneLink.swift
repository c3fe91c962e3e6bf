import DoorbellCore
import Glibc

// The phone link's shell ([radio.ble] ancs): the BLE radio's thread hands it HCIHost's link
// actions and it does what the core's PhoneSession returns — host calls, the bond written to
// `BondStore` before the session relies on it, events for the outbox. The owner's commands
// (`agentctl pair`, `forget`, `answer`) and forwarded presses arrive from other threads; they
// are queued and the radio's poll loop is woken to apply them on its thread.

public enum PhoneCommand: Sendable {
    case pair(untilWallMicros: Int64)
    case forget(String)
    case pressForwarded(eventID: String, doorbellName: String)
    case answered
}

public final class PhoneLink: @unchecked Sendable {
    public let bondStore: BondStore
    let settings: PhoneSession.Settings
    let log: Logger
    let emit: @Sendable (String, JSONValue) -> Void
    private let commands = Locked<[PhoneCommand]>([])
    /// The radio's poll loop watches this; a queued command wakes it.
    let wake = PollableWake()
    /// What `agentctl phones` and the status show (the session's, published by the radio thread).
    public let status = Locked(PhoneSession.Status())
    public let bonds: Locked<[PhoneBond]>
    /// The pairing window outlives a controller restart (a new session is made per transport).
    private let pairingUntil = Locked<Int64?>(nil)
    /// Used on the radio thread only.
    private var session: PhoneSession?

    public init(bondStore: BondStore, settings: BLERadioSettings, log: Logger, emit: @escaping @Sendable (String, JSONValue) -> Void) {
        self.bondStore = bondStore
        var tracker = PhoneNotificationTracker.Settings(doorbellAppID: settings.ancsDoorbellApp)
        tracker.receiptWindowMicros = Int64(settings.ancsReceiptWindowSeconds) * 1_000_000
        tracker.triggerCategories = Set(settings.ancsNotify.filter { !$0.contains(".") })
        tracker.triggerApps = Set(settings.ancsNotify.filter { $0.contains(".") })
        tracker.includeText = settings.ancsShareText
        var session = PhoneSession.Settings(tracker: tracker)
        session.localTime = PhoneLink.localTime
        self.settings = session
        self.log = log
        self.emit = emit
        bonds = Locked(bondStore.bonds.bonds)
    }

    /// From any thread.
    public func send(_ command: PhoneCommand) {
        if case let .pair(until) = command { pairingUntil.withLock { $0 = until } }
        commands.withLock { $0.append(command) }
        wake.wake()
    }

    /// `agentctl forget`: the bond goes from disk now (the radio may be down); a connected phone's
    /// link is dropped by the session on its thread.
    public func forget(_ idOrName: String) throws(BondStoreError) -> PhoneBond? {
        let gone = try bondStore.update { $0.forget(idOrName) }
        bonds.withLock { $0 = bondStore.bonds.bonds }
        if gone != nil { send(.forget(idOrName)) }
        return gone
    }

    /// An ANCS Date (the phone's wall-clock reading) in the base station's zone (TZ, else
    /// /etc/localtime), as mktime reads it; the daylight-saving flag is mktime's guess.
    static let localTime: @Sendable (ANCSDate) -> Int64? = { d in
        var t = tm()
        t.tm_year = Int32(d.year - 1900)
        t.tm_mon = Int32(d.month - 1)
        t.tm_mday = Int32(d.day)
        t.tm_hour = Int32(d.hour)
        t.tm_min = Int32(d.minute)
        t.tm_sec = Int32(d.second)
        t.tm_isdst = -1
        let seconds = mktime(&t)
        return seconds == -1 ? nil : Int64(seconds)
    }

    /// Now on both clocks: deadlines on the monotonic one, what is stored on the wall one.
    static var now: PhoneTime { PhoneTime(monotonic: Clocks.monotonicMicros(), wall: Clocks.wallMicros()) }

    // MARK: The radio thread

    /// A new transport: a new session with the stored bonds and the open window, if any.
    func begin(host: inout HCIHost) -> [HCIHost.Action] {
        session = PhoneSession(settings: settings, bonds: bondStore.bonds, localAddress: nil)
        let now = Self.now
        guard let until = pairingUntil.snapshot, until > now.wall, var s = session else { publish(); return [] }
        let outputs = s.openPairing(until: until, at: now)
        session = s
        return apply(outputs, host: &host)
    }

    func end() {
        // Only bond updates come out of a link's end; written like any other.
        for case let .updateBond(bond) in session?.transportEnded(at: Self.now) ?? [] { write(bond) }
        session = nil
        status.withLock { $0.phonesConnected = 0; $0.connectedPhone = nil; $0.encrypted = false; $0.readingNotifications = false }
    }

    /// A link action of the host (connection, SMP, LTK request, encryption, GATT).
    func handle(_ action: HCIHost.Action, host: inout HCIHost) -> [HCIHost.Action] {
        guard var s = session else { return [] }
        let outputs = s.handle(action, at: Self.now)
        session = s
        return apply(outputs, host: &host)
    }

    /// Queued commands and due timers.
    func service(host: inout HCIHost) -> [HCIHost.Action] {
        wake.drain()
        guard var s = session else { return [] }
        let now = Self.now
        var outputs: [PhoneSession.Output] = []
        for command in commands.withLock({ q -> [PhoneCommand] in defer { q = [] }; return q }) {
            switch command {
            case let .pair(until): outputs += s.openPairing(until: until, at: now)
            case let .forget(phone): outputs += s.forget(phone, at: now)
            case let .pressForwarded(id, name): outputs += s.pressForwarded(eventID: id, doorbellName: name, at: now)
            case .answered: outputs += s.answered(at: now)
            }
        }
        if let due = s.nextDeadline, due <= now.monotonic { outputs += s.tick(at: now) }
        session = s
        return apply(outputs, host: &host)
    }

    /// Microseconds until the session's next deadline (monotonic), for the poll timeout.
    var untilDeadline: Int64? { session?.nextDeadline.map { max(0, $0 - Clocks.monotonicMicros()) } }

    private func apply(_ outputs: [PhoneSession.Output], host: inout HCIHost) -> [HCIHost.Action] {
        var actions: [HCIHost.Action] = []
        var pending = outputs
        while !pending.isEmpty {
            let output = pending.removeFirst()
            if let more = output.perform(on: &host, at: Clocks.monotonicMicros()) {
                actions += more
                continue
            }
            switch output {
            case let .storeBond(bond):
                do {
                    try bondStore.update { $0.add(bond) }
                    log.notice("phone.bonded", [("phone", bond.id)])
                    pending += session?.bondStored(at: Self.now) ?? []
                } catch {
                    log.error("phone.bond_not_stored", [("phone", bond.id), ("error", error.description)])
                    pending += session?.bondStoreFailed(error.description, at: Self.now) ?? []
                }
            case let .forgetBond(id):
                do { try bondStore.update { _ = $0.forget(id) } } catch { log.error("phone.forget_failed", [("phone", id), ("error", error.description)]) }
            case let .updateBond(bond):
                write(bond)
            case let .event(type, data):
                emit(type, data)
            case let .answered(dismissing):
                logAnswer(dismissing)
            default: break
            }
        }
        publish()
        return actions
    }

    /// A bond's change (name, last seen, what it remembers); a failure costs only that change.
    private func write(_ bond: PhoneBond) {
        do { _ = try bondStore.update { $0.replace(bond) } } catch { log.warning("phone.bond_update_failed", [("phone", bond.id), ("error", error.description)]) }
    }

    /// What answering the door did: the notifications dismissed and on how many phones.
    private func logAnswer(_ dismissing: [PhoneDismissal]) {
        guard !dismissing.isEmpty else {
            log.notice("phone.answered", [("dismissed", "nothing: no doorbell notification was ringing on a connected phone")])
            return
        }
        let titles = Set(dismissing.map(\.title)).sorted().joined(separator: ", ")
        log.notice("phone.answered", [("dismissed", titles), ("phones", String(Set(dismissing.map(\.phoneID)).count)),
                                      ("uids", dismissing.map { String($0.uid) }.joined(separator: ","))])
    }

    private func publish() {
        guard let s = session else { return }
        status.withLock { $0 = s.status }
        bonds.withLock { $0 = s.bonds.bonds }
    }
}

/// A pipe a poll loop watches: `wake` from any thread, `drain` on the loop's.
final class PollableWake: @unchecked Sendable {
    let fd: Int32
    private let writeFD: Int32

    init() {
        let fds = makePipe(nonblocking: true)
        fd = fds?.read ?? -1
        writeFD = fds?.write ?? -1
    }

    deinit {
        if fd >= 0 { close(fd) }
        if writeFD >= 0 { close(writeFD) }
    }

    func wake() { if writeFD >= 0 { var b: UInt8 = 1; _ = write(writeFD, &b, 1) } }

    func drain() {
        var buf = [UInt8](repeating: 0, count: 64)
        while fd >= 0, read(fd, &buf, buf.count) > 0 {}
    }
}
