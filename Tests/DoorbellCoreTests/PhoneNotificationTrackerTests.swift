import DoorbellCore
import PropertyBased
import Testing

/// Receipts, triggers and the dismiss from the door, driven by given times.
@Suite struct PhoneNotificationTrackerTests {
    static let app = "com.example.doorbell"
    static func tracker() -> PhoneNotificationTracker {
        var t = PhoneNotificationTracker(settings: .init(doorbellAppID: app))
        t.phoneConnected("anna", name: "Anna's iPhone")
        t.phoneConnected("ben", name: "Ben's iPhone")
        return t
    }
    static func doorbell(_ phone: String, uid: UInt32, reference: String = "#K3QF7", title: String = "Front door",
                         preExisting: Bool = false, posted: Int64? = nil) -> PhoneNotification {
        PhoneNotification(phoneID: phone, uid: uid, category: 0, preExisting: preExisting, hasNegativeAction: true, appID: app,
                          title: title, subtitle: reference, message: "Someone is at the door", postedAtMicros: posted)
    }
    static func types(_ out: [PhoneNotificationTracker.Output]) -> [String] {
        out.compactMap { if case let .event(type, _) = $0 { return type } else { return nil } }
    }

    @Test func aShownPushIsAReceiptAndAPhoneThatStayedAndShowedNothingIsReported() {
        var t = Self.tracker()
        #expect(t.pressForwarded(eventID: "e1", doorbellName: "Front door", at: 0) == [])
        let shown = t.notification(Self.doorbell("anna", uid: 7, posted: 1_300_000), at: .at(1_500_000))
        guard case let .event("push.displayed", data)? = shown.first else { Issue.record("\(shown)"); return }
        #expect(data["reference"]?.stringValue == "K3QF7")
        #expect(data["press_event_id"]?.stringValue == "e1")
        #expect(data["phone"]?["name"]?.stringValue == "Anna's iPhone")
        #expect(data["displayed_at"]?.stringValue == "1970-01-01T00:00:01.300000Z", "the phone's own time of the notification")
        #expect(t.nextDeadline == 120_000_000)
        #expect(t.expire(at: 119_999_999) == [])
        let late = t.expire(at: 120_000_000)
        #expect(Self.types(late) == ["push.not_displayed"])
        if case let .event(_, data)? = late.first {
            #expect(data["press_event_id"]?.stringValue == "e1")
            #expect(data["phone"]?["id"]?.stringValue == "ben")
        }
        #expect(t.nextDeadline == nil)
    }

    @Test func aPhoneThatLeftDuringTheWindowSaysNothingEitherWay() {
        var t = Self.tracker()
        _ = t.pressForwarded(eventID: "e1", doorbellName: "Front door", at: 0)
        t.phoneDisconnected("ben")
        t.phoneConnected("ben", name: "Ben's iPhone")
        _ = t.notification(Self.doorbell("anna", uid: 1), at: .at(10))
        #expect(t.expire(at: 200_000_000) == [])
    }

    @Test func aNotificationFoundOnReconnectIsAReceiptMarkedPreExisting() {
        var t = PhoneNotificationTracker(settings: .init(doorbellAppID: Self.app))
        _ = t.pressForwarded(eventID: "e1", doorbellName: "Front door", at: 0)
        t.phoneConnected("anna", name: "Anna's iPhone")
        let out = t.notification(Self.doorbell("anna", uid: 3, preExisting: true, posted: 5_000_000), at: .at(60_000_000))
        guard case let .event("push.displayed", data)? = out.first else { Issue.record("\(out)"); return }
        #expect(data["pre_existing"]?.boolValue == true)
        #expect(data["press_event_id"]?.stringValue == "e1")
    }

    @Test func anAppNotificationWithoutAReferenceIsNoReceipt() {
        var t = Self.tracker()
        _ = t.pressForwarded(eventID: "e1", doorbellName: "Front door", at: 0)
        #expect(t.notification(Self.doorbell("anna", uid: 1, reference: "Front door"), at: .at(10)) == [])
        #expect(t.notification(Self.doorbell("anna", uid: 1, reference: "#K3QF77"), at: .at(10)) == [])
    }

    @Test func withoutADoorbellAppThereAreNoReceipts() {
        var t = PhoneNotificationTracker(settings: .init(doorbellAppID: ""))
        t.phoneConnected("anna", name: "Anna's iPhone")
        _ = t.pressForwarded(eventID: "e1", doorbellName: "Front door", at: 0)
        var unknownApp = Self.doorbell("anna", uid: 1)
        unknownApp.appID = ""
        #expect(t.notification(unknownApp, at: .at(10)) == [], "a notification whose app id was not read is not a receipt")
        #expect(t.expire(at: 200_000_000) == [], "and no phone is reported as not showing a push")
    }

    @Test func callsBecomeLocalEventsWithoutTheirTextUnlessAsked() {
        var t = Self.tracker()
        let call = PhoneNotification(phoneID: "anna", uid: 9, category: 1, appID: "com.apple.mobilephone", title: "Mum", message: "Incoming call")
        let out = t.notification(call, at: .at(0))
        guard case let .event("phone.notification", data)? = out.first else { Issue.record("\(out)"); return }
        #expect(data["category"]?.stringValue == "incoming_call")
        #expect(data["app_id"]?.stringValue == "com.apple.mobilephone")
        #expect(data["title"] == nil && data["message"] == nil, "titles never leave the base station by default")
        #expect(data["flags"] == .array([]))
        var flagged = call
        flagged.uid = 11
        flagged.flags = [.important, .positiveAction, .negativeAction, ANCSEventFlags(rawValue: 0x80)]
        guard case let .event(_, flaggedData)? = t.notification(flagged, at: .at(0)).first else { Issue.record("no event"); return }
        #expect(flaggedData["flags"] == .array([.string("important"), .string("positive_action"), .string("negative_action")]),
                "the known flags by name, in bit order; a reserved bit is not one")
        var old = call
        old.preExisting = true
        #expect(t.notification(old, at: .at(0)) == [], "a call from before the connection is not ringing now")
        #expect(t.notification(PhoneNotification(phoneID: "anna", uid: 10, category: 6, appID: "com.apple.mail"), at: .at(0)) == [])

        var settings = PhoneNotificationTracker.Settings(doorbellAppID: Self.app)
        settings.includeText = true
        settings.triggerApps = ["com.apple.mail"]
        var chatty = PhoneNotificationTracker(settings: settings)
        let mail = chatty.notification(PhoneNotification(phoneID: "anna", uid: 10, category: 6, appID: "com.apple.mail", title: "Hi"), at: .at(0))
        if case let .event(_, data)? = mail.first { #expect(data["title"]?.stringValue == "Hi") } else { Issue.record("\(mail)") }
    }

    /// Every trigger carries the UID and the phone; its later changes and its removal are reported
    /// with the same UID (the house stops flashing when the call stops ringing), others' are not.
    @Test func aTriggersChangesAndRemovalCarryItsUIDAndTheSubtitleWhenTextIsShared() {
        var settings = PhoneNotificationTracker.Settings(doorbellAppID: Self.app)
        settings.includeText = true
        var t = PhoneNotificationTracker(settings: settings)
        t.phoneConnected("anna", name: "Anna's iPhone")
        let call = PhoneNotification(phoneID: "anna", uid: 12, category: 1, appID: "com.apple.mobilephone", title: "Mum", subtitle: "mobile", message: "Incoming call")
        let first = t.notification(call, at: .at(0))
        guard case let .event("phone.notification", data)? = first.first else { Issue.record("\(first)"); return }
        #expect(data["uid"]?.intValue == 12 && data["phone"]?["id"]?.stringValue == "anna" && data["subtitle"]?.stringValue == "mobile")
        var changed = call
        changed.change = .modified
        changed.message = "On hold"
        let modified = t.notification(changed, at: .at(1))
        #expect(Self.types(modified) == ["phone.notification_modified"])
        if case let .event(_, m)? = modified.first { #expect(m["uid"]?.intValue == 12 && m["message"]?.stringValue == "On hold") }
        var other = changed
        other.uid = 13
        #expect(t.notification(other, at: .at(1)) == [], "a change of one never reported is no event")
        let removed = t.notification(PhoneNotification(phoneID: "anna", uid: 12, change: .removed, category: 1, appID: ""), at: .at(2))
        guard case let .event("phone.notification_removed", r)? = removed.first else { Issue.record("\(removed)"); return }
        #expect(r["uid"]?.intValue == 12 && r["category"]?.stringValue == "incoming_call" && r["app_id"]?.stringValue == "com.apple.mobilephone")
        #expect(r["phone"]?["name"]?.stringValue == "Anna's iPhone")
        #expect(t.notification(PhoneNotification(phoneID: "anna", uid: 12, change: .removed, category: 1, appID: ""), at: .at(3)) == [], "once")
    }

    @Test func answeringTheDoorDismissesTheRingingNotificationOnEveryConnectedPhone() {
        var t = Self.tracker()
        _ = t.notification(Self.doorbell("anna", uid: 7), at: .at(0))
        _ = t.notification(Self.doorbell("ben", uid: 8), at: .at(0))
        var gone = Self.doorbell("ben", uid: 8)
        gone.change = .removed
        _ = t.notification(gone, at: .at(1))
        #expect(t.answered() == [PhoneDismissal(phoneID: "anna", uid: 7, title: "Front door")], "Ben's was already gone")
        #expect(t.answered() == [], "once")
    }

    /// Whatever happens, a phone's receipt for a press is one verdict at most: never both shown
    /// and not shown, never two of a kind.
    @Test func eachPhoneGetsOneVerdictPerPressAtMost() async {
        await propertyCheck(input: Gen.int(in: 0...5).array(of: 1...80), Gen.int(in: 1...40_000).array(of: 80...80)) { script, gaps in
            var t = PhoneNotificationTracker(settings: .init(doorbellAppID: Self.app))
            var now: Int64 = 0
            var verdicts: [String: Int] = [:]
            var presses = 0
            func note(_ out: [PhoneNotificationTracker.Output]) {
                for case let .event(type, data) in out where type.hasPrefix("push.") {
                    guard let press = data["press_event_id"]?.stringValue, let phone = data["phone"]?["id"]?.stringValue else { continue }
                    verdicts[press + "/" + phone, default: 0] += 1
                }
            }
            for (i, step) in script.enumerated() {
                now += Int64(gaps[i % gaps.count]) * 1_000
                let phone = i % 2 == 0 ? "anna" : "ben"
                switch step {
                case 0: presses += 1; note(t.pressForwarded(eventID: "e\(presses)", doorbellName: "Front door", at: now))
                case 1: t.phoneConnected(phone, name: phone)
                case 2: t.phoneDisconnected(phone)
                case 3, 4: note(t.notification(Self.doorbell(phone, uid: UInt32(i)), at: .at(now)))
                default: note(t.expire(at: now))
                }
            }
            note(t.expire(at: now + 200_000_000))
            #expect(verdicts.values.allSatisfy { $0 == 1 }, "\(verdicts)")
        }
    }
}

extension PhoneTime {
    /// Both clocks at `t` (no step between them).
    static func at(_ t: Int64) -> PhoneTime { PhoneTime(monotonic: t, wall: t) }
}
