// The owner's phone as the base station sees it, over the one LE link HCIHost keeps: pairing
// (only while the owner's window is open), the bonds that let a phone come back under a new
// private address, and the ANCS client that reads its notifications (PhoneSession+ANCS). A value:
// HCIHost's link actions, the owner's commands and the time in; the host calls to make, bonds to
// store or forget, events to record out. The shell (BLERadio) forwards and executes, nothing more.
//
// Two clocks (`PhoneTime`): deadlines (SMP's 30 s, ANCS fetches, the pairing window, receipt
// windows) run on the monotonic one, so a wall clock step during a pairing neither cuts nor
// stretches it; the wall time is only for what is stored (bonds' dates, events' times).
//
// Security: a link is the bonded phone only once it is encrypted with that bond's key (or the
// phone paired on it). Before that, the address it connected from picks the key to ask for and
// nothing else: its Device Name, its presence (last seen, connected) and its notifications touch
// no bond. A device that uses a phone's identity address without its keys fails to encrypt and
// leaves the bond as it was.
//
// Durability: a new bond goes out as `.storeBond`; the session does not treat the phone as bonded
// (answer its LTK requests, read its notifications) until the shell calls `bondStored`, which it
// does only once the bond is on disk. `bondStoreFailed` drops the link: the phone believes in a
// bond the base station could not keep, so it must forget it and pair again.

/// The time of an input on both clocks, microseconds.
public struct PhoneTime: Sendable, Equatable {
    /// CLOCK_MONOTONIC: what deadlines are measured on.
    public var monotonic: Int64
    /// Unix time: what is stored and reported.
    public var wall: Int64
    public init(monotonic: Int64, wall: Int64) {
        self.monotonic = monotonic
        self.wall = wall
    }
}

public struct PhoneSession: Sendable {
    public struct Settings: Sendable {
        public var tracker: PhoneNotificationTracker.Settings
        public var assembler = ANCSDataSourceAssembler.Settings()
        /// Notification Source events waiting for their attributes; past it, the oldest go.
        public var maxQueuedCommands = 32
        /// Categories (`ANCSCategory` names) whose notifications are fetched; nil: every one (the
        /// doorbell app's category is not known before its attributes are read).
        public var fetchCategories: Set<String>? = nil
        public var titleMax: UInt16 = 64
        public var subtitleMax: UInt16 = 64
        public var messageMax: UInt16 = 256
        /// The Unix time (seconds) of a wall-clock reading in the base station's time zone: how an
        /// ANCS Date (the phone's local time, no zone) becomes an instant. Default UTC; the agent
        /// gives the system's zone (mktime).
        public var localTime: @Sendable (ANCSDate) -> Int64? = { $0.unixSecondsIfUTC }
        public init(tracker: PhoneNotificationTracker.Settings) { self.tracker = tracker }
    }

    public enum Output: Sendable, Equatable {
        /// `host.send(smp:at:)`.
        case sendSMP([UInt8])
        /// `host.replyLongTermKey(_:at:)`: the key in HCI order (least significant octet first), nil refuses.
        case replyLongTermKey([UInt8]?)
        /// `host.subscribeCharacteristic(_:at:)`.
        case subscribe(UInt16)
        /// `host.writeCharacteristic(_:_:at:)` (the ANCS Control Point).
        case write(handle: UInt16, [UInt8])
        /// `host.disconnect(at:)`.
        case disconnect
        /// Write this bond durably (`BondStore.update { $0.add(bond) }`), then call `bondStored`
        /// (or `bondStoreFailed` with the store's error).
        case storeBond(PhoneBond)
        /// Remove this phone's bond from the store (`BondStore.update { $0.forget(id) }`).
        case forgetBond(id: String)
        /// The bond's name or last-seen time changed: write it if the store still has it
        /// (`BondStore.update { $0.replace(bond) }`). A failure costs only that change.
        case updateBond(PhoneBond)
        /// An event to record.
        case event(type: String, data: JSONValue)
        /// The door was answered: these doorbell notifications are being dismissed (none: none
        /// was ringing). For the log.
        case answered(dismissing: [PhoneDismissal])
    }

    /// What `agentctl phones` and the status show.
    public struct Status: Sendable, Equatable {
        public var phonesConnected = 0
        /// The connected phone's id when it is bonded.
        public var connectedPhone: String?
        public var encrypted = false
        /// Notification Source subscribed: the phone's notifications are being read.
        public var readingNotifications = false
        public var bonded = 0
        public var pairingOpenUntil: Int64?
        public var lastError: String?
        public var notificationsRead = 0
        /// Notification Source events dropped because the queue was full.
        public var fetchesDropped = 0
        /// Attribute fetches that timed out, were refused or were cut by a link drop.
        public var fetchesAbandoned = 0
        public init() {}
    }

    /// One connection's state: everything here goes when the link does.
    struct Link: Sendable {
        var connection: LEConnection
        /// The bond the connecting address resolves to: only the key to answer an LTK request
        /// with, until the link is encrypted with it (`authenticated`).
        var bond: PhoneBond?
        /// Encrypted with `bond`'s key, or paired on this link and the bond stored.
        var authenticated = false
        /// The LTK request was answered with `bond`'s key (not a fresh pairing's).
        var bondKeyGiven = false
        /// Notifications announced live whose attributes are not read yet: UID → CategoryID.
        var live: [UInt32: Int] = [:]
        /// The phone's Device Name, read before it paired (the bond takes it).
        var name: String?
        var responder: SMPResponder?
        /// The key SMP derived on this link (MSB first): the answer to the next LTK request.
        var pairingKey: [UInt8]?
        var encrypted = false
        var securityRequested = false
        var ancs: (notificationSource: UInt16, controlPoint: UInt16, dataSource: UInt16)?
        var subscribing = false
        var reading = false
        var queue: [QueuedCommand] = []
        var outstanding: Outstanding?

        /// The bonded phone, once the link proved it holds the bond's key.
        var phone: PhoneBond? { authenticated ? bond : nil }
    }

    /// The Control Point command in flight: acknowledged by the Write Response, answered (for a
    /// fetch) on the Data Source. The next goes only when both are in.
    struct Outstanding: Sendable {
        var command: ANCSCommand
        var notification: ANCSNotification?
        var acknowledged = false
        var answered: Bool
    }

    public let settings: Settings
    /// The base station's own address (the controller's public address): SMP's f5/f6 need it.
    /// Set from HCIHost's `.scanning` (Read BD_ADDR) when it is not given.
    public var localAddress: BLEIdentityAddress?
    public internal(set) var bonds: PhoneBonds
    public internal(set) var status = Status()
    var tracker: PhoneNotificationTracker
    var notificationSource = ANCSNotificationSource()
    var assembler: ANCSDataSourceAssembler
    var link: Link?
    /// Monotonic end of the pairing window (the status shows it in wall time).
    var pairingUntil: Int64?
    /// A bond handed to the shell to store, with the connection handle it was made on.
    var pendingBond: (bond: PhoneBond, handle: UInt16)?
    /// Fresh pairing keys: an ephemeral P-256 key pair and a 16-octet nonce.
    let pairingKeys: @Sendable () throws(SMPCryptoError) -> (P256KeyPair, [UInt8])

    public init(settings: Settings, bonds: PhoneBonds, localAddress: BLEIdentityAddress?,
                pairingKeys: @escaping @Sendable () throws(SMPCryptoError) -> (P256KeyPair, [UInt8]) = { (try P256KeyPair(), SecureRandom.bytes(16)) }) {
        self.settings = settings
        self.bonds = bonds
        self.localAddress = localAddress
        self.pairingKeys = pairingKeys
        tracker = PhoneNotificationTracker(settings: settings.tracker)
        assembler = ANCSDataSourceAssembler(settings: settings.assembler)
        status.bonded = bonds.bonds.count
    }

    /// When `tick` has something to do.
    public var nextDeadline: Int64? {
        [pairingUntil, link?.responder?.deadline, assembler.deadline, tracker.nextDeadline].compactMap { $0 }.min()
    }

    // MARK: The owner

    /// `agentctl pair`: a Pairing Request is accepted until `until`.
    /// `until` is wall time (what the owner was told); the window runs on the monotonic clock.
    public mutating func openPairing(until: Int64, at now: PhoneTime) -> [Output] {
        pairingUntil = until > now.wall ? now.monotonic + (until - now.wall) : nil
        status.pairingOpenUntil = pairingUntil == nil ? nil : until
        // A phone already connected and waiting: ask it to pair now.
        return requestSecurity(at: now)
    }

    /// `agentctl forget`: the bond goes from memory and the store; a connected phone is dropped.
    public mutating func forget(_ idOrName: String, at now: PhoneTime) -> [Output] {
        guard let gone = bonds.forget(idOrName) else { return [] }
        status.bonded = bonds.bonds.count
        var out: [Output] = [.forgetBond(id: gone.id), .event(type: "phone.forgotten", data: .object([("phone", phoneJSON(gone))]))]
        if link?.bond?.id == gone.id { out.append(.disconnect) }
        return out
    }

    /// The shell wrote the bond of `.storeBond` durably: the phone is bonded from now on.
    public mutating func bondStored(at now: PhoneTime) -> [Output] {
        guard let (bond, handle) = pendingBond else { return [] }
        pendingBond = nil
        bonds.add(bond)
        status.bonded = bonds.bonds.count
        var out: [Output] = [.event(type: "phone.paired", data: .object([("phone", phoneJSON(bond))]))]
        if link?.connection.handle == handle {
            // Paired on this link, which is encrypted with the key just made: the phone is here.
            link?.bond = bond
            link?.authenticated = true
            status.connectedPhone = bond.id
            out += startANCS(at: now)
        }
        return out
    }

    /// The bond could not be written: forgotten here too, and the phone dropped (it must pair again).
    public mutating func bondStoreFailed(_ reason: String, at now: PhoneTime) -> [Output] {
        guard let (_, handle) = pendingBond else { return [] }
        pendingBond = nil
        status.lastError = "pairing worked but the bond could not be saved (\(reason)); forget the base station in the phone's Bluetooth settings and pair again"
        return link?.connection.handle == handle ? [.disconnect] : []
    }

    /// Time passed: the pairing window closes, SMP and ANCS fetches time out, receipts expire.
    public mutating func tick(at now: PhoneTime) -> [Output] {
        if let until = pairingUntil, now.monotonic >= until {
            pairingUntil = nil
            status.pairingOpenUntil = nil
        }
        var out: [Output] = []
        if var r = link?.responder {
            let step = r.tick(at: now.monotonic)
            link?.responder = r
            out += pairingStep(step, at: now)
        }
        if let outcome = assembler.tick(at: now.monotonic) { out += dataSourceOutcome(outcome, at: now) }
        return out + forward(tracker.expire(at: now.monotonic))
    }

    // MARK: The link

    /// One of HCIHost's actions (the shell forwards every one; those not about the link are ignored).
    public mutating func handle(_ action: HCIHost.Action, at now: PhoneTime) -> [Output] {
        switch action {
        case let .connected(c):
            return connected(c, at: now)
        case let .disconnected(handle, _):
            guard link?.connection.handle == handle else { return [] }
            return linkDropped(at: now)
        case let .smp(handle, bytes):
            guard link?.connection.handle == handle else { return [] }
            return smp(bytes, at: now)
        case let .longTermKeyRequested(handle, random, ediv):
            guard link?.connection.handle == handle else { return [] }
            return longTermKeyRequested(random: random, ediv: ediv)
        case let .encryptionChanged(handle, enabled, code):
            guard link?.connection.handle == handle else { return [] }
            return encryptionChanged(enabled: enabled, status: code, at: now)
        case let .gatt(event):
            guard link != nil else { return [] }
            return gatt(event, at: now)
        case let .scanning(info, _):
            if let a = info.publicAddress { localAddress = BLEIdentityAddress(type: 0, address: a) }
            return []
        case .send, .received, .reports, .stalled, .scanRearmed, .failed:
            return []
        }
    }

    mutating func connected(_ c: LEConnection, at now: PhoneTime) -> [Output] {
        let out = link != nil ? linkDropped(at: now) : []
        // Types 2 and 3: the controller resolved the address to the identity (public or random).
        // An address is no proof: anyone can send a phone's identity address. The bond it names is
        // the key to ask for; the phone counts as here once the link is encrypted with it.
        let bond = bonds.resolve(address: c.peerAddress, isRandom: c.peerAddressType & 1 == 1)
        link = Link(connection: c, bond: bond)
        status.phonesConnected = 1
        status.connectedPhone = nil
        return out
    }

    /// Everything about the link goes; a response in progress is dropped whole, never half-delivered.
    /// The bond keeps when the phone was last here, on disk too (`agentctl phones` after a restart).
    /// Notifications announced live and not read yet are remembered with the bond (item of the
    /// same write): reported when a later read completes.
    mutating func linkDropped(at now: PhoneTime) -> [Output] {
        var out: [Output] = []
        if let l = link, let id = l.phone?.id {
            tracker.phoneDisconnected(id)
            let cut = l.live.sorted { $0.key < $1.key }.map { PhoneBond.Unfinished(uid: $0.key, category: $0.value, announcedAtMicros: now.wall) }
            _ = bonds.update(id) { $0.remember(unfinished: cut, at: now.wall) }
            if let bond = bonds.seen(id, at: now.wall) { out.append(.updateBond(bond)) }
        } else if let l = link, let bond = l.bond, l.bondKeyGiven, !l.encrypted {
            // It asked for the bond's key and never encrypted with it (a MIC failure drops the link).
            status.lastError = "a device using the address of \(bond.id) (\(bond.name)) could not encrypt with its bond: not that phone, or the phone lost the bond (then forget the base station on it and pair again); the bond was not touched"
        }
        if assembler.linkDropped() != nil { status.fetchesAbandoned += 1 }
        link = nil
        status.phonesConnected = 0
        status.connectedPhone = nil
        status.encrypted = false
        status.readingNotifications = false
        return out
    }

    /// The transport ended (the agent stops, the controller restarts): the link is gone as if the
    /// phone had left, so what the bond remembers (last seen, reads cut) is written.
    public mutating func transportEnded(at now: PhoneTime) -> [Output] {
        link == nil ? [] : linkDropped(at: now)
    }

    /// The phone's Device Name: kept for the bond pairing will make, or the bond renamed.
    /// Read unencrypted (GAP allows it): applied to the bond only once the link is authenticated.
    mutating func named(_ name: String) -> [Output] {
        link?.name = name
        guard let id = link?.phone?.id, let bond = bonds.name(id, name) else { return [] }
        link?.bond = bond
        return [.updateBond(bond)]
    }

    func pairingOpen(at now: PhoneTime) -> Bool { pairingUntil.map { now.monotonic < $0 } ?? false }

    mutating func smp(_ bytes: [UInt8], at now: PhoneTime) -> [Output] {
        guard let l = link else { return [] }
        if var r = l.responder {
            let step = r.received(bytes, at: now.monotonic)
            link?.responder = r
            return pairingStep(step, at: now)
        }
        guard case .pairingRequest? = try? SMPPDU(parsing: bytes) else { return [] }
        guard pairingOpen(at: now) else {
            status.lastError = "a phone asked to pair while the pairing window was closed; run agentctl pair, then pair from the phone"
            return [.sendSMP(SMPResponder.windowClosed.bytes)]
        }
        guard let local = localAddress else {
            status.lastError = "pairing refused: the controller's own address is not known yet; wait for the radio to start and pair again"
            return [.sendSMP(SMPPDU.pairingFailed(.unspecifiedReason).bytes)]
        }
        let keys: (P256KeyPair, [UInt8])
        do { keys = try pairingKeys() } catch {
            status.lastError = "pairing refused: \(error)"
            return [.sendSMP(SMPPDU.pairingFailed(.unspecifiedReason).bytes)]
        }
        let peer = BLEIdentityAddress(type: l.connection.peerAddressType & 1, address: l.connection.peerAddress)
        var r = SMPResponder(local: local, peer: peer, keyPair: keys.0, nonce: keys.1)
        let step = r.received(bytes, at: now.monotonic)
        link?.responder = r
        return pairingStep(step, at: now)
    }

    mutating func pairingStep(_ step: SMPResponder.Step, at now: PhoneTime) -> [Output] {
        var out = step.send.map { Output.sendSMP($0.bytes) }
        switch step.outcome {
        case nil:
            break
        case let .encryptionKey(key):
            link?.pairingKey = key
        case let .paired(b):
            guard let irk = b.peerIRK, let handle = link?.connection.handle else {
                status.lastError = "the phone paired without giving its identity key, so it could not be recognised again; pairing refused"
                return out + [.disconnect]
            }
            // PhoneBond keeps keys in air order (least significant octet first), SMP in the spec's.
            let bond = PhoneBond(address: b.peerIdentity.address, addressIsRandom: b.peerIdentity.type == 1,
                                 irk: irk.reversed(), ltk: b.ltk.reversed(), name: link?.name ?? "", bondedAtMicros: now.wall, lastSeenMicros: now.wall)
            pendingBond = (bond, handle)
            out.append(.storeBond(bond))
        case let .failed(f):
            status.lastError = f.description
            out.append(.event(type: "phone.pairing_failed", data: .object([("reason", .string(f.description))])))
        }
        return out
    }

    mutating func longTermKeyRequested(random: [UInt8], ediv: UInt16) -> [Output] {
        if let key = link?.pairingKey {
            link?.pairingKey = nil
            return [.replyLongTermKey(key.reversed())]
        }
        // Secure Connections keys have EDIV 0 and Rand 0; anything else is a legacy bond we never made.
        if let bond = link?.bond, ediv == 0, random.allSatisfy({ $0 == 0 }) {
            link?.bondKeyGiven = true
            return [.replyLongTermKey(bond.ltk)]
        }
        status.lastError = "a phone that is not paired tried to encrypt; if it is yours, forget the base station in its Bluetooth settings and pair again (agentctl pair)"
        return [.replyLongTermKey(nil)]
    }

    mutating func encryptionChanged(enabled: Bool, status code: UInt8, at now: PhoneTime) -> [Output] {
        link?.encrypted = enabled
        status.encrypted = enabled
        guard enabled else {
            // 0x06 PIN or Key Missing: the phone no longer has the bond (or we gave it none);
            // 0x3D MIC failure: the other side had another key (or none).
            status.lastError = "encryption with the phone failed (HCI status 0x\(String(code, radix: 16))); forget the base station on the phone and pair again"
            return []
        }
        var out: [Output] = []
        if let l = link, l.bondKeyGiven, !l.authenticated, let id = l.bond?.id {
            // Encrypted with the bond's key: this is the phone. Now it counts as here.
            link?.authenticated = true
            status.connectedPhone = id
            // Written now only when renamed; the drop writes when it was last here (one write a visit).
            let renamed = l.name.flatMap { bonds.name(id, $0) } != nil
            if let bond = bonds.seen(id, at: now.wall) {
                link?.bond = bond
                if renamed { out.append(.updateBond(bond)) }
            }
        }
        if var r = link?.responder {
            let step = r.encrypted(at: now.monotonic)
            link?.responder = r
            out += pairingStep(step, at: now)
        }
        return out + startANCS(at: now)
    }

    /// Asks the phone to encrypt (a bonded phone) or pair (while the window is open), once per link.
    mutating func requestSecurity(at now: PhoneTime) -> [Output] {
        guard let l = link, !l.encrypted, !l.securityRequested, l.responder == nil else { return [] }
        guard l.bond != nil || pairingOpen(at: now) else {
            status.lastError = "a phone that is not paired connected; to pair it, run agentctl pair and connect again"
            return []
        }
        link?.securityRequested = true
        return [.sendSMP(SMPResponder.securityRequest.bytes)]
    }

    func phoneJSON(_ bond: PhoneBond) -> JSONValue {
        .object([("id", .string(bond.id))] + (bond.name.isEmpty ? [] : [("name", .string(bond.name))]))
    }
}

extension PhoneSession {
    /// Control Point commands waiting (the bound `maxQueuedCommands` keeps).
    public var queuedCommands: Int { link?.queue.count ?? 0 }
}

extension PhoneSession.Output {
    /// Makes the host call this output stands for; nil for those the shell carries out itself
    /// (`storeBond`, `forgetBond`, `updateBond`, `event`, `answered`). The actions returned go back through the shell's
    /// dispatch like any other (link actions to `PhoneSession.handle`).
    /// `now` is the host's (monotonic) time.
    public func perform(on host: inout HCIHost, at now: Int64) -> [HCIHost.Action]? {
        switch self {
        case let .sendSMP(pdu): host.send(smp: pdu, at: now)
        case let .replyLongTermKey(key): host.replyLongTermKey(key, at: now)
        case let .subscribe(handle): host.subscribeCharacteristic(handle, at: now)
        case let .write(handle, value): host.writeCharacteristic(handle, value, at: now)
        case .disconnect: host.disconnect(at: now)
        case .storeBond, .forgetBond, .updateBond, .event, .answered: nil
        }
    }
}
