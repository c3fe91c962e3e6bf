import DoorbellCore
import PropertyBased
import Testing

/// PhoneSession with a real HCIHost: PhoneLinkRig plays the controller and the iPhone's GATT
/// server, the test plays the phone's SMP initiator (SMPResponderTests.Phone), and the shell's
/// part (execute the outputs, store bonds) is `run` here, on a fake clock.
struct PhoneSessionRig {
    static let app = "com.example.doorbell"
    static let ns = PhoneLinkRig.ns, cp = PhoneLinkRig.cp, ds = PhoneLinkRig.ds
    static let phoneID = "3C:22:FB:00:11:22"

    var link = PhoneLinkRig()
    var session: PhoneSession
    /// The durable bonds, as BondStore would hold them.
    var store: PhoneBonds
    var outputs: [PhoneSession.Output] = []
    var storeFailure: String?
    private var seen = 0

    init(bonds: PhoneBonds = PhoneBonds(), triggerCategories: Set<String> = ["incoming_call"], wallOffset: Int64 = 0) {
        store = bonds
        self.wallOffset = wallOffset
        var tracker = PhoneNotificationTracker.Settings(doorbellAppID: Self.app)
        tracker.triggerCategories = triggerCategories
        session = PhoneSession(settings: PhoneSession.Settings(tracker: tracker), bonds: bonds, localAddress: nil)
        // The host's bring-up read the controller's address (B8:27:EB:12:34:56, as the test phone expects).
        if let info = link.host.info { run(session.handle(.scanning(info, extended: false), at: time)) }
    }

    var now: Int64 { link.now }
    /// The wall clock's distance from the monotonic one (a step changes it).
    var wallOffset: Int64 = 0
    var time: PhoneTime { PhoneTime(monotonic: now, wall: now + wallOffset) }

    /// The shell: host calls on the host, bonds to the store (then `bondStored`), events kept.
    mutating func run(_ outs: [PhoneSession.Output]) {
        for o in outs {
            outputs.append(o)
            switch o {
            case let .storeBond(bond):
                if let failure = storeFailure {
                    run(session.bondStoreFailed(failure, at: time))
                } else {
                    store.add(bond)
                    run(session.bondStored(at: time))
                }
            case let .forgetBond(id):
                _ = store.forget(id)
            case let .updateBond(bond):
                store.replace(bond)
            default:
                if let actions = o.perform(on: &link.host, at: now) { link.perform(actions) }
            }
        }
        settle()
    }

    /// Forwards the host's actions not yet seen to the session.
    mutating func settle() {
        while seen < link.events.count {
            let a = link.events[seen]
            seen += 1
            run(session.handle(a, at: time))
        }
    }

    mutating func connect(_ peer: BLEIdentityAddress) { link.connect(peer: peer.address, peerType: peer.type); settle() }
    mutating func disconnect() { link.disconnect(); settle() }
    mutating func smp(_ pdu: SMPPDU) { link.phoneSendsSMP(pdu.bytes); settle() }
    mutating func longTermKeyRequest() { link.longTermKeyRequest(); settle() }
    mutating func encrypt() { link.encrypt(); settle() }
    mutating func notify(_ handle: UInt16, _ value: [UInt8]) { link.phoneSends([ATT.notification, UInt8(handle & 0xFF), UInt8(handle >> 8)] + value); settle() }
    mutating func advance(to t: Int64) { link.advance(to: t); settle(); run(session.tick(at: time)) }

    var lastSMP: SMPPDU? { link.smpSent.last.flatMap { try? SMPPDU(parsing: $0) } }
    var events: [(type: String, data: JSONValue)] { outputs.compactMap { if case let .event(t, d) = $0 { (t, d) } else { nil } } }
    var storedBonds: [PhoneBond] { outputs.compactMap { if case let .storeBond(b) = $0 { b } else { nil } } }
    var lastCommand: [UInt8]? { link.commands.last }

    /// The phone pairs (LE Secure Connections, Just Works) and distributes its IRK and identity;
    /// returns the LTK both sides derived (MSB first).
    mutating func pair() throws -> [UInt8] {
        var phone = try SMPResponderTests.Phone()
        smp(.pairingRequest(phone.request))
        guard case let .pairingResponse(response)? = lastSMP else { throw Failure("no Pairing Response: \(String(describing: lastSMP))") }
        phone.response = response
        smp(phone.publicKeyPDU)
        let keys = link.smpSent.suffix(2).compactMap { try? SMPPDU(parsing: $0) }
        guard keys.count == 2, case let .pairingPublicKey(x, y) = keys[0] else { throw Failure("no public key: \(keys)") }
        phone.responderKey = x + y
        smp(.pairingRandom(phone.nonce))
        guard case let .pairingRandom(nb)? = lastSMP else { throw Failure("no Pairing Random") }
        let (ea, eb, ltk) = try phone.dhKeyCheck(responderNonce: nb)
        smp(.pairingDHKeyCheck(ea))
        #expect(lastSMP == .pairingDHKeyCheck(eb))
        longTermKeyRequest()
        #expect(lastCommand == [0x01, 0x1A, 0x20, 18, 0x40, 0x00] + ltk.reversed(), "the LTK in HCI order")
        encrypt()
        smp(.identityInformation(irk: SMPResponderTests.phoneIRK))
        smp(.identityAddressInformation(SMPResponderTests.phoneIdentity))
        return ltk
    }

    /// A GetNotificationAttributes response as the iPhone sends it (attribute id, length, value).
    static func attributes(uid: UInt32, app: String, title: String, subtitle: String, message: String) -> [UInt8] {
        let values: [(UInt8, String)] = [(0, app), (1, title), (2, subtitle), (3, message), (5, "20261126T162000")]
        var out: [UInt8] = [0x00] + le32(uid)
        for (id, v) in values {
            let bytes = Array(v.utf8)
            out += [id, UInt8(bytes.count & 0xFF), UInt8(bytes.count >> 8)] + bytes
        }
        return out
    }

    static func le32(_ v: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 24)]
    }

    static func getAttributes(uid: UInt32) -> [UInt8] {
        [0x00] + le32(uid) + [0x00, 0x01, 64, 0, 0x02, 64, 0, 0x03, 0x00, 0x01, 0x05]
    }

    static func added(_ uid: UInt32, flags: ANCSEventFlags = [.negativeAction]) -> [UInt8] {
        ANCSNotification(event: .added, flags: flags, category: .social, categoryCount: 1, uid: uid).bytes
    }

    /// The doorbell app's push for a press, in Data Source fragments of 20 bytes.
    mutating func doorbellPush(uid: UInt32) {
        notify(Self.ns, Self.added(uid))
        let response = Self.attributes(uid: uid, app: Self.app, title: "Front door", subtitle: "Someone is at the door #K3QF7", message: "Ring")
        for start in stride(from: 0, to: response.count, by: 20) { notify(Self.ds, Array(response[start..<min(response.count, start + 20)])) }
    }

    struct Failure: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }
}

@Suite struct PhoneSessionTests {
    typealias Rig = PhoneSessionRig

    /// A paired, reading session (the first test's path, for the others).
    static func paired() throws -> (Rig, ltk: [UInt8]) {
        var s = Rig()
        s.run(s.session.openPairing(until: 60_000_000, at: s.time))
        s.connect(SMPResponderTests.phoneRPA)
        let ltk = try s.pair()
        return (s, ltk)
    }

    @Test func aPhonePairsInTheWindowIsBondedAndItsDoorbellPushBecomesAReceipt() throws {
        var s = Rig()
        s.run(s.session.openPairing(until: 60_000_000, at: s.time))
        s.run(s.session.pressForwarded(eventID: "evt-1", doorbellName: "Front door", at: s.time))
        s.connect(SMPResponderTests.phoneRPA)
        // ANCS found on a link not yet encrypted: the base station asks the phone to pair.
        #expect(s.link.smpSent == [SMPResponder.securityRequest.bytes])
        #expect(s.session.status.phonesConnected == 1 && s.session.status.connectedPhone == nil)
        let ltk = try s.pair()

        let bond = try #require(s.store.bonds.first)
        #expect(s.store.bonds.count == 1 && bond.id == Rig.phoneID && bond.ltk == ltk.reversed())
        #expect(bond.irk == SMPResponderTests.phoneIRK.reversed())
        // Durable first: nothing is subscribed before the store has the bond.
        let stored = try #require(s.outputs.firstIndex { if case .storeBond = $0 { true } else { false } })
        let subscribed = try #require(s.outputs.firstIndex { if case .subscribe = $0 { true } else { false } })
        #expect(stored < subscribed)
        #expect(s.events.first?.type == "phone.paired")
        // Data Source's CCCD before Notification Source's.
        let cccdWrites = s.link.attSent.filter { $0.first == 0x12 }.map { UInt16($0[1]) | UInt16($0[2]) << 8 }
        #expect(cccdWrites.suffix(2) == [0x0039, 0x0033])
        #expect(s.session.status.readingNotifications && s.session.status.connectedPhone == Rig.phoneID)

        s.doorbellPush(uid: 7)
        #expect(s.link.written[Rig.cp] == Rig.getAttributes(uid: 7))
        let receipt = try #require(s.events.last)
        #expect(receipt.type == "push.displayed")
        #expect(receipt.data["reference"]?.stringValue == "K3QF7")
        #expect(receipt.data["press_event_id"]?.stringValue == "evt-1")
        #expect(receipt.data["phone"]?["id"]?.stringValue == Rig.phoneID)
        #expect(s.session.status.notificationsRead == 1 && s.session.status.lastError == nil)
    }

    @Test func aPairingRequestWithTheWindowClosedIsRefusedAndNothingIsBonded() throws {
        var s = Rig()
        s.run(s.session.openPairing(until: 10_000_000, at: s.time))
        s.advance(to: 10_000_000)
        #expect(s.session.status.pairingOpenUntil == nil)
        s.connect(SMPResponderTests.phoneRPA)
        #expect(s.link.smpSent.isEmpty, "no Security Request to a phone that may not pair")
        let phone = try SMPResponderTests.Phone()
        s.smp(.pairingRequest(phone.request))
        #expect(s.link.smpSent == [SMPResponder.windowClosed.bytes])
        #expect(s.storedBonds.isEmpty && s.store.bonds.isEmpty)
        #expect(s.session.status.lastError?.contains("agentctl pair") == true)
        // An LTK request from it is refused.
        s.longTermKeyRequest()
        #expect(s.lastCommand == [0x01, 0x1B, 0x20, 2, 0x40, 0x00])
    }

    @Test func aBondTheStoreCouldNotKeepIsNeverUsedAndTheLinkDrops() throws {
        var s = Rig()
        s.storeFailure = "disk full"
        s.run(s.session.openPairing(until: 60_000_000, at: s.time))
        s.connect(SMPResponderTests.phoneRPA)
        _ = try s.pair()
        #expect(s.session.bonds.bonds.isEmpty && s.store.bonds.isEmpty)
        #expect(!s.outputs.contains { if case .subscribe = $0 { true } else { false } })
        #expect(s.outputs.last == .disconnect)
        #expect(s.session.status.lastError?.contains("disk full") == true)
    }

    @Test func aBondedPhoneReturningUnderANewPrivateAddressGetsItsLTKWithoutPairing() throws {
        let (first, ltk) = try Self.paired()
        // The agent restarted: a new session and host from the stored bonds.
        var s = Rig(bonds: first.store)
        let prand: [UInt8] = [0x55, 0x66, 0x77]
        let rpa = prand + SMPCrypto.ah(irk: SMPResponderTests.phoneIRK, prand: prand)
        s.connect(BLEIdentityAddress(type: 1, address: rpa))
        #expect(s.session.status.connectedPhone == nil, "an address proves nothing: not the phone before it encrypts with the bond")
        #expect(s.link.smpSent == [SMPResponder.securityRequest.bytes], "asked to encrypt, with the window closed")
        s.longTermKeyRequest()
        #expect(s.lastCommand == [0x01, 0x1A, 0x20, 18, 0x40, 0x00] + ltk.reversed())
        s.encrypt()
        #expect(s.session.status.connectedPhone == Rig.phoneID)
        #expect(s.storedBonds.isEmpty && s.link.smpSent.count == 1, "no new pairing")
        #expect(s.session.status.readingNotifications)
        s.doorbellPush(uid: 9)
        #expect(s.events.last?.type == "push.displayed")

        // Another phone's private address is not this bond: its LTK request is refused.
        var other = Rig(bonds: first.store)
        other.connect(BLEIdentityAddress(type: 1, address: prand + [0, 0, 1]))
        other.longTermKeyRequest()
        #expect(other.session.status.connectedPhone == nil && other.lastCommand == [0x01, 0x1B, 0x20, 2, 0x40, 0x00])
    }

    @Test func theBondCarriesThePhonesNameAndWhenItWasLastHereOnDiskToo() throws {
        var (s, _) = try Self.paired()
        // Discovery read the Device Name before the phone paired: the bond was stored with it.
        #expect(s.storedBonds.map(\.name) == [PhoneLinkRig.deviceName])
        #expect(s.store.bonds.first?.name == PhoneLinkRig.deviceName)
        // The phone leaves at 90 s: the store learns when it was last here (agentctl phones after a restart).
        s.link.now = 90_000_000
        s.disconnect()
        #expect(s.store.bonds.first?.lastSeenMicros == 90_000_000)
        #expect(s.session.bonds.bonds.first?.lastSeenMicros == 90_000_000)

        // The owner renamed the phone; it comes back under a new private address with the new name.
        var next = Rig(bonds: s.store)
        if let i = next.link.database.firstIndex(where: { $0.type == .deviceName }) { next.link.database[i].value = Array("Anna’s work phone".utf8) }
        next.link.now = 120_000_000
        let prand: [UInt8] = [0x55, 0x66, 0x77]
        next.connect(BLEIdentityAddress(type: 1, address: prand + SMPCrypto.ah(irk: SMPResponderTests.phoneIRK, prand: prand)))
        #expect(next.store.bonds.first?.name == PhoneLinkRig.deviceName, "the name read unencrypted waits for the bond's key")
        next.longTermKeyRequest()
        next.encrypt()
        #expect(next.store.bonds.first?.name == "Anna’s work phone")
        #expect(next.session.bonds.bonds.first?.name == "Anna’s work phone")
        #expect(next.storedBonds.isEmpty, "a rename is no new bond")

        // Forgotten while connected: the drop that follows must not write the bond back.
        next.run(next.session.forget("Anna’s work phone", at: next.time))
        next.disconnect()
        #expect(next.store.bonds.isEmpty && next.session.bonds.bonds.isEmpty)
    }

    @Test func aLinkDropInTheMiddleOfAResponseDeliversNothingAndTheNextConnectionWorks() throws {
        var (s, ltk) = try Self.paired()
        s.notify(Rig.ns, Rig.added(3))
        let response = Rig.attributes(uid: 3, app: Rig.app, title: "Front door", subtitle: "#K3QF7", message: "Ring")
        s.notify(Rig.ds, Array(response[..<20]))
        let before = s.events.count
        s.disconnect()
        #expect(s.events.count == before, "nothing half-delivered")
        #expect(s.session.status.phonesConnected == 0 && s.session.status.fetchesAbandoned == 1 && s.session.queuedCommands == 0)

        s.connect(SMPResponderTests.phoneRPA)
        s.longTermKeyRequest()
        #expect(s.lastCommand == [0x01, 0x1A, 0x20, 18, 0x40, 0x00] + ltk.reversed())
        s.encrypt()
        // The rest of the old response arrives late: it is no answer to anything.
        s.notify(Rig.ds, Array(response[20...]))
        #expect(s.events.count == before)
        s.doorbellPush(uid: 4)
        #expect(s.events.last?.type == "push.displayed" && s.events.count == before + 1)
    }

    @Test func answeringDismissesTheRingingNotificationWithTheNegativeAction() throws {
        var (s, _) = try Self.paired()
        // Nothing ringing yet: the answer says so (the log does) and writes nothing.
        var writes = s.link.attSent.count
        #expect(s.session.answered(at: s.time) == [.answered(dismissing: [])])
        #expect(s.link.attSent.count == writes)
        s.doorbellPush(uid: 0x0102_0304)
        let answer = s.session.answered(at: s.time)
        #expect(answer.first == .answered(dismissing: [PhoneDismissal(phoneID: Rig.phoneID, uid: 0x0102_0304, title: "Front door")]))
        s.run(answer)
        #expect(s.link.written[Rig.cp] == [0x02, 0x04, 0x03, 0x02, 0x01, 0x01])
        #expect(s.session.queuedCommands == 0)
        // Answered again: nothing is ringing any more.
        writes = s.link.attSent.count
        #expect(s.session.answered(at: s.time) == [.answered(dismissing: [])])
        #expect(s.link.attSent.count == writes)
    }

    @Test func forgettingAPhoneDropsItsLinkAndItsBondAndItIsAStrangerAfter() throws {
        var (s, _) = try Self.paired()
        s.run(s.session.forget(Rig.phoneID, at: s.time))
        #expect(s.outputs.suffix(3).map { if case .event = $0 { "event" } else { "\($0)" } } == ["forgetBond(id: \"\(Rig.phoneID)\")", "event", "disconnect"])
        #expect(s.lastCommand == [0x01, 0x06, 0x04, 3, 0x40, 0x00, 0x13])
        #expect(s.store.bonds.isEmpty && s.session.status.bonded == 0)
        s.disconnect()
        s.connect(SMPResponderTests.phoneRPA)
        s.longTermKeyRequest()
        #expect(s.lastCommand == [0x01, 0x1B, 0x20, 2, 0x40, 0x00])
    }

    @Test func pairingThatStallsIsAbandonedAfterSMPsTimeout() throws {
        var s = Rig()
        s.run(s.session.openPairing(until: 120_000_000, at: s.time))
        s.connect(SMPResponderTests.phoneRPA)
        s.smp(.pairingRequest(try SMPResponderTests.Phone().request))
        #expect(s.session.nextDeadline == SMPResponder.timeoutMicros)
        s.advance(to: SMPResponder.timeoutMicros)
        #expect(s.events.map(\.type) == ["phone.pairing_failed"])
        #expect(s.session.status.lastError?.contains("30 s") == true && s.storedBonds.isEmpty)
    }

    /// Any interleaving of Notification Source events, Data Source bytes, Write Responses, refusals,
    /// answers and time: a Control Point command is written only when the one before completed
    /// (acknowledged and answered), was refused, or timed out; the queue stays within its bound.
    @Test func oneControlPointCommandAtATimeAndABoundedQueue() async {
        await propertyCheck(input: Gen.int(in: 0...7).array(of: 1...80), Gen.int(in: 0...15).array(of: 80...80)) { ops, uids in
            var settings = PhoneSession.Settings(tracker: .init(doorbellAppID: Rig.app))
            settings.maxQueuedCommands = 4
            let bond = PhoneBond(address: [0x3C, 0x22, 0xFB, 0, 0x11, 0x22], addressIsRandom: false, irk: Array(1...16),
                                 ltk: Array(1...16), name: "", bondedAtMicros: 0)
            var session = PhoneSession(settings: settings, bonds: PhoneBonds([bond]), localAddress: SMPResponderTests.baseStation)
            var now: Int64 = 0
            var out: [PhoneSession.Output] = []
            out += session.handle(.connected(LEConnection(handle: 0x40, role: .peripheral, peerAddress: bond.address, peerAddressType: 0, intervalUnits: 24)), at: .at(now))
            out += session.handle(.longTermKeyRequested(handle: 0x40, random: Array(repeating: 0, count: 8), ediv: 0), at: .at(now))
            out += session.handle(.encryptionChanged(handle: 0x40, enabled: true, status: 0), at: .at(now))
            out += session.handle(.gatt(.discoveredANCS(notificationSource: Rig.ns, controlPoint: Rig.cp, dataSource: Rig.ds)), at: .at(now))
            out += session.handle(.gatt(.written(handle: Rig.ns)), at: .at(now))
            // The phone's view of the command in flight.
            var inFlight: (bytes: [UInt8], acked: Bool, answered: Bool, lastActivity: Int64)?
            func absorb(_ outputs: [PhoneSession.Output]) {
                for case let .write(handle, bytes) in outputs where handle == Rig.cp {
                    if let f = inFlight {
                        let done = f.acked && f.answered
                        let timedOut = now - f.lastActivity >= settings.assembler.timeoutMicros
                        #expect(done || timedOut, "a second command while \(f.bytes) is in flight")
                    }
                    inFlight = (bytes, false, bytes[0] == 0x02, now)
                }
            }
            absorb(out)
            for (i, op) in ops.enumerated() {
                let uid = UInt32(uids[i % uids.count])
                var o: [PhoneSession.Output] = []
                switch op {
                case 0: o = session.handle(.gatt(.notification(handle: Rig.ns, Rig.added(uid, flags: uid % 3 == 0 ? [.preExisting] : [.negativeAction]))), at: .at(now))
                case 1: o = session.handle(.gatt(.notification(handle: Rig.ns, ANCSNotification(event: .removed, flags: [], category: .social, categoryCount: 0, uid: uid).bytes)), at: .at(now))
                case 2:
                    guard inFlight?.acked == false else { continue }
                    inFlight?.acked = true
                    o = session.handle(.gatt(.written(handle: Rig.cp)), at: .at(now))
                case 3:
                    guard let f = inFlight, f.bytes[0] == 0x00, !f.answered else { continue }
                    inFlight?.answered = true
                    inFlight?.lastActivity = now
                    let u = UInt32(f.bytes[1]) | UInt32(f.bytes[2]) << 8 | UInt32(f.bytes[3]) << 16 | UInt32(f.bytes[4]) << 24
                    o = session.handle(.gatt(.notification(handle: Rig.ds, Rig.attributes(uid: u, app: Rig.app, title: "Front door", subtitle: "#K3QF7", message: ""))), at: .at(now))
                case 4:
                    guard inFlight?.acked == false else { continue }
                    inFlight = nil
                    o = session.handle(.gatt(.writeFailed(handle: Rig.cp, error: 0xA2)), at: .at(now))
                case 5:
                    now += Int64(uid) * 700_000
                    // A fetch unanswered for the assembler's timeout is given up (an action is not:
                    // its Write Response comes, or the ATT timeout drops the link).
                    if let f = inFlight, f.bytes[0] == 0x00, !f.answered, now - f.lastActivity >= settings.assembler.timeoutMicros { inFlight = nil }
                    o = session.tick(at: .at(now))
                case 6: o = session.answered(at: .at(now))
                default: o = session.handle(.gatt(.notification(handle: Rig.ds, [0x00, UInt8(uid)])), at: .at(now))
                }
                absorb(o)
                #expect(session.queuedCommands <= settings.maxQueuedCommands)
            }
        }
    }
}
