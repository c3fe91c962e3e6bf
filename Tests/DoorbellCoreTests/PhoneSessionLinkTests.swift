import DoorbellCore
import Testing

/// Issue #26, the phone link in the core: what a link that never encrypted with the bond's key can
/// do, notifications whose read a link drop cut, one receipt per push and phone with the phone's
/// Date, every phone event tied to its notification, and deadlines on the monotonic clock.
@Suite struct PhoneSessionLinkTests {
    typealias Rig = PhoneSessionRig

    /// The owner's phone pairs in the window (on `s`'s settings).
    static func pair(_ s: inout Rig) throws {
        s.run(s.session.openPairing(until: s.time.wall + 60_000_000, at: s.time))
        s.connect(SMPResponderTests.phoneRPA)
        _ = try s.pair()
    }

    /// The bonded phone comes back (a new link): it encrypts with the bond.
    static func reconnect(_ s: inout Rig) {
        s.connect(SMPResponderTests.phoneRPA)
        s.longTermKeyRequest()
        s.encrypt()
    }

    /// The phone lists a notification on subscribing (flagged pre-existing) and answers its fetch.
    static func list(_ s: inout Rig, uid: UInt32, category: ANCSCategory, app: String, subtitle: String = "") {
        s.notify(Rig.ns, ANCSNotification(event: .added, flags: [.preExisting, .negativeAction], category: category, categoryCount: 1, uid: uid).bytes)
        answer(&s, uid: uid, app: app, subtitle: subtitle)
    }

    static func answer(_ s: inout Rig, uid: UInt32, app: String, subtitle: String) {
        let response = Rig.attributes(uid: uid, app: app, title: "Front door", subtitle: subtitle, message: "Ring")
        for start in stride(from: 0, to: response.count, by: 20) { s.notify(Rig.ds, Array(response[start..<min(response.count, start + 20)])) }
    }

    static func updates(_ s: Rig) -> [PhoneBond] { s.outputs.compactMap { if case let .updateBond(b) = $0 { b } else { nil } } }

    // MARK: 2. Nothing before the bond's key

    /// A central that uses the owner's identity address without the keys (its encryption fails
    /// with a MIC failure) reads nothing, renames nothing, is never "connected", and leaves the
    /// bond's last-seen time as it was.
    @Test func aDeviceWithThePhonesAddressButNotItsKeysTouchesNoBondAndReadsNothing() throws {
        var (owner, _) = try PhoneSessionTests.paired()
        owner.link.now = 90_000_000
        owner.disconnect()
        let stored = owner.store
        #expect(stored.bonds.first?.lastSeenMicros == 90_000_000)

        var s = Rig(bonds: stored)
        if let i = s.link.database.firstIndex(where: { $0.type == .deviceName }) { s.link.database[i].value = Array("Mallory".utf8) }
        s.link.now = 100_000_000
        s.connect(SMPResponderTests.phoneIdentity)
        #expect(s.session.status.phonesConnected == 1 && s.session.status.connectedPhone == nil)
        // Its own "ANCS" tells of a notification: nothing is asked about it.
        s.notify(Rig.ns, Rig.added(5))
        #expect(s.link.written[Rig.cp] == nil)
        // It asks to encrypt: the controller gets the bond's key (it cannot know who asks)…
        s.longTermKeyRequest()
        #expect(s.lastCommand?.prefix(3) == [0x01, 0x1A, 0x20])
        #expect(s.session.status.connectedPhone == nil)
        // …and the link fails: Encryption Change with MIC Failure, then the drop.
        s.link.feed([0x04, 0x08, 0x04, 0x3D, 0x40, 0x00, 0x00])
        s.settle()
        s.link.now = 101_000_000
        s.link.disconnect(reason: 0x3D)
        s.settle()
        #expect(s.store == stored, "name and last seen as the owner left them")
        #expect(s.session.bonds == stored)
        #expect(Self.updates(s).isEmpty && s.events.isEmpty)
        #expect(s.session.status.connectedPhone == nil)
        #expect(s.session.status.lastError?.contains("could not encrypt with its bond") == true, "\(s.session.status.lastError ?? "")")
    }

    // MARK: 1. A read cut by a link drop

    @Test func aLiveNotificationWhoseReadALinkDropCutIsReportedOnceWhenALaterReadCompletes() throws {
        var s = Rig(triggerCategories: ["email"])
        try Self.pair(&s)
        s.notify(Rig.ns, ANCSNotification(event: .added, flags: [], category: .email, categoryCount: 1, uid: 5).bytes)
        #expect(s.link.written[Rig.cp] == Rig.getAttributes(uid: 5))
        let response = Rig.attributes(uid: 5, app: "com.apple.mobilemail", title: "Invoice", subtitle: "", message: "Due")
        s.notify(Rig.ds, Array(response[..<20]))
        s.disconnect()
        #expect(s.events.filter { $0.type == "phone.notification" }.isEmpty)
        #expect(s.store.bonds.first?.unfinished.map(\.uid) == [5], "remembered beside the bond, on disk")

        // The agent restarts; the phone comes back and lists the mail as pre-existing.
        var next = Rig(bonds: s.store, triggerCategories: ["email"])
        Self.reconnect(&next)
        Self.list(&next, uid: 5, category: .email, app: "com.apple.mobilemail")
        let reported = next.events.filter { $0.type == "phone.notification" }
        #expect(reported.count == 1)
        #expect(reported.first?.data["uid"]?.intValue == 5 && reported.first?.data["phone"]?["id"]?.stringValue == Rig.phoneID)
        #expect(next.store.bonds.first?.unfinished == [], "reported: forgotten")

        // Listed again on the next link: read, and not reported again.
        next.disconnect()
        Self.reconnect(&next)
        Self.list(&next, uid: 5, category: .email, app: "com.apple.mobilemail")
        #expect(next.events.filter { $0.type == "phone.notification" }.count == 1)
        // A pre-existing notification never announced live stays unreported.
        Self.list(&next, uid: 6, category: .email, app: "com.apple.mobilemail")
        #expect(next.events.filter { $0.type == "phone.notification" }.count == 1)
    }

    /// The agent stops with the phone connected and a read in flight: the bond keeps both.
    @Test func theTransportsEndWritesWhatTheBondRemembers() throws {
        var (s, _) = try PhoneSessionTests.paired()
        s.notify(Rig.ns, Rig.added(9))
        s.link.now = 70_000_000
        s.run(s.session.transportEnded(at: s.time))
        #expect(s.store.bonds.first?.unfinished.map(\.uid) == [9] && s.store.bonds.first?.lastSeenMicros == 70_000_000)
        #expect(s.session.status.phonesConnected == 0)
    }

    /// The memory is bounded and a removal forgets; the bond's file keeps it.
    @Test func theUnfinishedMemoryIsBoundedAndSurvivesTheBondsFile() throws {
        var bond = PhoneBond(address: [1, 2, 3, 4, 5, 6], addressIsRandom: false, irk: Array(1...16), ltk: Array(1...16), name: "", bondedAtMicros: 0)
        let many = (0..<40).map { PhoneBond.Unfinished(uid: UInt32($0), category: 6, announcedAtMicros: 10) }
        let remembered = bond.remember(unfinished: many, at: 10)
        #expect(remembered)
        #expect(bond.unfinished.count == PhoneBond.maximumUnfinished && bond.unfinished.first?.uid == 8)
        let once = bond.finished(uid: 39), twice = bond.finished(uid: 39)
        #expect(once && !twice)
        for i in 0..<70 { _ = bond.receiptReported("R\(i)") }
        let again = bond.receiptReported("R69")
        #expect(bond.receipts.count == PhoneBond.maximumReceipts && !again)
        let back = try PhoneBonds(json: PhoneBonds([bond]).json)
        #expect(back.bonds == [bond])
        // A day later the old ones are forgotten when something new is remembered.
        let later = bond.remember(unfinished: [PhoneBond.Unfinished(uid: 99, category: 1, announcedAtMicros: PhoneBond.unfinishedLifetimeMicros + 10)],
                                  at: PhoneBond.unfinishedLifetimeMicros + 10)
        #expect(later)
        #expect(bond.unfinished.map(\.uid) == [99])
    }

    // MARK: 3. One receipt per push and phone, with the phone's Date

    @Test func aPushIsReportedDisplayedOncePerPhoneEverAtThePhonesDate() throws {
        var (s, _) = try PhoneSessionTests.paired()
        // The clock got synchronized since (a step: nothing of the link minds): an hour after the
        // Date the phone gives (20261126T162000, read in the base station's zone, UTC here).
        let date: Int64 = 1_795_710_000_000_000
        s.wallOffset = date + 3_600_000_000
        let receipts = { (r: Rig) in r.events.filter { $0.type == "push.displayed" } }
        s.doorbellPush(uid: 7)
        #expect(receipts(s).count == 1)
        let data = try #require(receipts(s).first?.data)
        #expect(data["displayed_at"]?.stringValue == RFC3339.format(micros: date))
        #expect(data["displayed_at_source"]?.stringValue == "phone" && data["phone_time"]?.stringValue == "2026-11-26T16:20:00")
        #expect(data["uid"]?.intValue == 7 && data["phone"]?["id"]?.stringValue == Rig.phoneID)
        #expect(s.store.bonds.first?.receipts == ["K3QF7"])

        // The phone goes and comes back, listing the push: read, dismissable, no second receipt.
        s.disconnect()
        Self.reconnect(&s)
        Self.list(&s, uid: 7, category: .social, app: Rig.app, subtitle: "Someone is at the door #K3QF7")
        #expect(receipts(s).count == 1)
        #expect(s.session.answered(at: s.time).first == .answered(dismissing: [PhoneDismissal(phoneID: Rig.phoneID, uid: 7, title: "Front door")]))

        // Nor after a restart of the agent.
        var next = Rig(bonds: s.store, wallOffset: s.wallOffset)
        Self.reconnect(&next)
        Self.list(&next, uid: 7, category: .social, app: Rig.app, subtitle: "Someone is at the door #K3QF7")
        #expect(receipts(next).isEmpty)
        // Another push is another receipt.
        Self.list(&next, uid: 8, category: .social, app: Rig.app, subtitle: "#M4X2P")
        #expect(receipts(next).map { $0.data["reference"]?.stringValue } == ["M4X2P"])
    }

    /// The phone's Date read in the base station's zone lies after the base station read it: the
    /// zones differ, and the read time stands in.
    @Test func aDateAfterTheReadIsNotTakenAndTheReadTimeStandsIn() throws {
        var (s, _) = try PhoneSessionTests.paired()
        s.wallOffset = 1_795_710_000_000_000 - 3_600_000_000
        s.doorbellPush(uid: 7)
        let data = try #require(s.events.last { $0.type == "push.displayed" }?.data)
        #expect(data["displayed_at"]?.stringValue == RFC3339.format(micros: s.time.wall))
        #expect(data["displayed_at_source"]?.stringValue == "read" && data["phone_time"]?.stringValue == "2026-11-26T16:20:00")
    }

    // MARK: 4. Changes and removals of what was reported

    @Test func aReportedCallsRemovalIsReportedWithItsUIDAndPhone() throws {
        var s = Rig()
        try Self.pair(&s)
        s.notify(Rig.ns, ANCSNotification(event: .added, flags: [.positiveAction, .negativeAction], category: .incomingCall, categoryCount: 1, uid: 21).bytes)
        Self.answer(&s, uid: 21, app: "com.apple.mobilephone", subtitle: "")
        s.notify(Rig.ns, ANCSNotification(event: .removed, flags: [], category: .incomingCall, categoryCount: 0, uid: 21).bytes)
        #expect(s.events.map(\.type).suffix(2) == ["phone.notification", "phone.notification_removed"])
        let gone = try #require(s.events.last?.data)
        #expect(gone["uid"]?.intValue == 21 && gone["category"]?.stringValue == "incoming_call")
        #expect(gone["app_id"]?.stringValue == "com.apple.mobilephone" && gone["phone"]?["id"]?.stringValue == Rig.phoneID)
    }

    // MARK: 6. Deadlines on the monotonic clock

    /// A wall clock step of an hour either way during a pairing: SMP's 30 s still end at 30 s of
    /// monotonic time (not cut by a step forward, not stretched by one back), the window stays
    /// open, and what is stored carries the wall time.
    @Test func aWallClockStepDuringPairingNeitherCutsNorStretchesIt() throws {
        for step: Int64 in [3_600_000_000, -3_600_000_000] {
            var s = Rig(wallOffset: 1_795_000_000_000_000)
            s.run(s.session.openPairing(until: s.time.wall + 60_000_000, at: s.time))
            s.connect(SMPResponderTests.phoneRPA)
            s.smp(.pairingRequest(try SMPResponderTests.Phone().request))
            s.advance(to: 10_000_000)
            s.wallOffset += step
            s.advance(to: SMPResponder.timeoutMicros - 1)
            #expect(s.events.isEmpty, "cut by a step of \(step)")
            #expect(s.session.status.pairingOpenUntil != nil, "window closed by a step of \(step)")
            s.advance(to: SMPResponder.timeoutMicros)
            #expect(s.events.map(\.type) == ["phone.pairing_failed"], "stretched by a step of \(step)")
        }
        // A step forward before the phone pairs: the window (60 s of monotonic time) still takes it.
        var s = Rig(wallOffset: 1_795_000_000_000_000)
        s.run(s.session.openPairing(until: s.time.wall + 60_000_000, at: s.time))
        s.wallOffset += 3_600_000_000
        s.advance(to: 5_000_000)
        s.connect(SMPResponderTests.phoneRPA)
        _ = try s.pair()
        #expect(s.store.bonds.first?.bondedAtMicros == s.time.wall, "stored in wall time")
    }
}
