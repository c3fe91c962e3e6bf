@testable import CloudCore
import Testing

/// The rules behind the app API's accounts (#30), as values: who may register a phone token,
/// strict JSON, free-text limits, beacon regions and the beacon push's real size.
struct PhoneClaimTests {
    let alice = "acct_alice"
    let carol = "acct_carol"
    let aliceApp = PhoneClaim.installationHash("alice-installation-secret-0123456789abcdefghij")
    let carolApp = PhoneClaim.installationHash("carol-installation-secret-0123456789abcdefghij")

    @Test func onlyTheInstallationOrItsAccountMayTouchARegistration() {
        let held = PhoneClaim.Holder(accountID: alice, installationHash: aliceApp)
        #expect(PhoneClaim.decide(existing: nil, caller: carol, presentedHash: carolApp) == .register)
        #expect(PhoneClaim.decide(existing: held, caller: alice, presentedHash: aliceApp) == .refresh)
        // The phone itself signs into Carol's account: it holds the secret, so it moves.
        #expect(PhoneClaim.decide(existing: held, caller: carol, presentedHash: aliceApp) == .move(from: alice))
        // Carol with Alice's token and her own installation: the attack of #30.
        #expect(PhoneClaim.decide(existing: held, caller: carol, presentedHash: carolApp) == .refuse)
        // Alice reinstalled the app (a new secret): her own registration, so it is bound anew.
        #expect(PhoneClaim.decide(existing: held, caller: alice, presentedHash: carolApp) == .rebind)
        // A registration from before secrets: its account binds it, nobody else takes it.
        let legacy = PhoneClaim.Holder(accountID: alice, installationHash: nil)
        #expect(PhoneClaim.decide(existing: legacy, caller: alice, presentedHash: aliceApp) == .rebind)
        #expect(PhoneClaim.decide(existing: legacy, caller: carol, presentedHash: carolApp) == .refuse)
    }

    /// Over every combination of holder, caller and secret: a registration changes account only
    /// with the secret it was bound to.
    @Test func noMoveWithoutTheSecret() {
        let accounts = [alice, carol, "acct_bob"]
        let hashes: [String?] = [aliceApp, carolApp, nil]
        for holder in accounts {
            for stored in hashes {
                for caller in accounts {
                    for presented in hashes.compactMap({ $0 }) {
                        let decision = PhoneClaim.decide(existing: .init(accountID: holder, installationHash: stored),
                                                         caller: caller, presentedHash: presented)
                        let changesAccount = decision != .refuse && caller != holder
                        #expect(!changesAccount || stored == presented, "\(holder) \(String(describing: stored)) \(caller) \(presented)")
                        #expect(decision != .refuse || caller != holder)
                    }
                }
            }
        }
    }

    @Test func secretsAndPhoneIDs() {
        #expect(PhoneClaim.isSecret(String(repeating: "a", count: 43)))
        #expect(PhoneClaim.isSecret(String(repeating: "Z9-_", count: 32)))
        #expect(!PhoneClaim.isSecret(String(repeating: "a", count: 42)), "fewer than 32 bytes' worth")
        #expect(!PhoneClaim.isSecret(String(repeating: "a", count: 129)))
        #expect(!PhoneClaim.isSecret(String(repeating: "a", count: 42) + "="))
        let token = String(repeating: "ab", count: 32)
        let id = PhoneClaim.phoneID(token: token)
        #expect(id == PhoneClaim.phoneID(token: token.uppercased()), "stable whatever the case")
        #expect(id.hasPrefix("ph_") && id.utf8.count == 19)
        #expect(!id.contains("abab"), "nothing of the token shows")
        #expect(id != PhoneClaim.phoneID(token: String(repeating: "ab", count: 31) + "ac"))
    }
}

struct StrictJSONTests {
    func refused(_ text: String) -> String? {
        do {
            try StrictJSON.check(Array(text.utf8))
            return nil
        } catch {
            return error.description
        }
    }

    @Test func wellFormedJSONPasses() {
        for text in [#"{}"#, #"[]"#, #" {"a":1,"b":[true,false,null,-0.5e+3,"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"],"c":{"a":2}} "#,
                     #""plain""#, "0", #"[{"a":1},{"a":1}]"#] {
            #expect(refused(text) == nil, "\(text)")
        }
    }

    @Test func duplicateKeysAreRefusedHoweverSpelled() {
        #expect(refused(#"{"gateway_id":"gw-a","gateway_id":"gw-b"}"#)?.contains("\"gateway_id\" appears twice") == true)
        #expect(refused(#"{"gateway_id":"gw-a","gateway\u005fid":"gw-b"}"#)?.contains("appears twice") == true)
        #expect(refused(#"{"data":{"phone":{"id":"a","id":"b"}}}"#)?.contains("\"id\" appears twice") == true)
    }

    @Test func malformedOrDeepJSONIsRefused() {
        for text in ["", "{", #"{"a"}"#, #"{"a":1,}"#, "[1,]", "01", "1.", "-", #""\x""#, #""\ud800""#, "tru", "{} {}",
                     "\"a\u{1}b\"", #"{"a":1 "b":2}"#] {
            #expect(refused(text) != nil, "\(text)")
        }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        #expect(refused(deep)?.contains("deeper than") == true)
        #expect(refused(String(repeating: "[", count: 32) + String(repeating: "]", count: 32)) == nil)
    }

    /// The stored signed body and the indexed fields cannot disagree: a second gateway_id is refused.
    @Test func anEventBodyWithAKeyTwiceIsRefused() {
        let body = #"{"id":"e1","sequence":1,"type":"doorbell.pressed","gateway_id":"gw-a","occurred_at":"2026-11-23T18:00:00Z","gateway_id":"gw-b"}"#
        #expect(throws: Rejection.self) { try EventEnvelope.parse(Array(body.utf8)) }
        let receipt = #"{"data":{"reference":"K3QF7","phone":{"id":"a","id":"b"}}}"#
        #expect(PushReceiptReport.parse(type: "push.displayed", body: Array(receipt.utf8)) == nil)
    }
}

struct FreeTextTests {
    func problem(_ text: String, newlines: Bool = false) -> String? {
        TextChecks.freeTextProblem(text, field: "name", characters: 100, bytes: 400, newlines: newlines)
    }

    @Test func controlCharactersAreRefused() {
        #expect(problem("Eve\u{0}Admin")?.contains("U+0000") == true)
        #expect(problem("Eve\u{1B}[31m") != nil)
        #expect(problem("Eve\u{7F}") != nil)
        #expect(problem("Eve\u{85}") != nil, "C1")
        #expect(problem("Eve\u{2028}") != nil)
        #expect(problem("line\nbreak") != nil)
        #expect(problem("line\nbreak", newlines: true) == nil)
        #expect(problem("Zoë's door 🚪") == nil)
    }

    @Test func bytesAreLimitedAsWellAsCharacters() {
        let zalgo = "Z" + String(repeating: "\u{301}", count: 15_000)
        #expect(zalgo.count == 1, "one grapheme cluster")
        #expect(problem(zalgo)?.contains("400 bytes") == true)
        #expect(problem(String(repeating: "a", count: 100)) == nil)
        #expect(problem(String(repeating: "a", count: 101)) != nil)
        #expect(problem("") != nil)
        #expect(problem(String(repeating: "é", count: 100)) == nil, "200 bytes")
    }
}

struct BeaconRegionTests {
    let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

    @Test func regionsParseToOneKeyAndBack() throws {
        let iBeacon = try BeaconRegion(uuid: uuid.lowercased(), major: 1, minor: 2, namespace: nil, instance: nil)
        #expect(iBeacon.key == "ibeacon:\(uuid)/1/2")
        #expect(iBeacon.display == "\(uuid)/1/2", "as the agent prints it")
        let eddystone = try BeaconRegion(uuid: nil, major: nil, minor: nil, namespace: "EDD1EBEAC04E5DEFA017", instance: "0BDB87539B67")
        #expect(eddystone.key == "eddystone:edd1ebeac04e5defa017/0bdb87539b67")
        #expect(eddystone.matchingKeys == [eddystone.key, "eddystone:edd1ebeac04e5defa017"])
        for region in [iBeacon, eddystone, .eddystone(namespace: "edd1ebeac04e5defa017", instance: nil)] {
            #expect(BeaconRegion(key: region.key) == region)
        }
        #expect(BeaconRegion(key: "ibeacon:x/1/2") == nil)
    }

    @Test func badRegionsSayWhatToFix() {
        let cases: [(String?, Int64?, Int64?, String?, String?, String)] = [
            (uuid, 1, nil, nil, nil, "major and minor"),
            (uuid, 1, 70_000, nil, nil, "0…65535"),
            ("x", 1, 2, nil, nil, "UUID"),
            (nil, nil, nil, "edd1", nil, "20 hex"),
            (nil, nil, nil, "edd1ebeac04e5defa017", "xyz", "12 hex"),
            (uuid, 1, 2, "edd1ebeac04e5defa017", nil, "give a region"),
            (nil, 1, nil, "edd1ebeac04e5defa017", nil, "iBeacon"),
            (nil, nil, nil, nil, nil, "give a region"),
        ]
        for (uuid, major, minor, namespace, instance, hint) in cases {
            #expect(throws: RegionError.self) { try BeaconRegion(uuid: uuid, major: major, minor: minor, namespace: namespace, instance: instance) }
            do {
                _ = try BeaconRegion(uuid: uuid, major: major, minor: minor, namespace: namespace, instance: instance)
            } catch {
                #expect(error.description.contains(hint), "\(error)")
            }
        }
    }

    /// The size measured when a message is set is the size of the push a report makes.
    @Test func theMeasuredSizeIsTheRealPayloadsAndTooLargeIsNotBuilt() throws {
        let region = "\(uuid)/65535/65535"
        for (title, body) in [("Welcome", "Hi"), ("Tür \"Ost\"", String(repeating: "é\u{1}\n", count: 300)), ("🚪", "")] {
            let payload = try #require(PushPayload.forBeacon(title: title, body: body, region: region,
                                                             reportID: PushPayload.beaconReportID()))
            #expect(payload.utf8.count == PushPayload.beaconPayloadBytes(title: title, body: body, region: region))
        }
        // 1000 characters may be far more than 4 KB: escaped control characters, emoji.
        let body = String(repeating: "\u{1}", count: 1000)
        #expect(PushPayload.beaconPayloadBytes(title: "t", body: body, region: region) > PushPayload.maximumBytes)
        #expect(PushPayload.forBeacon(title: "t", body: body, region: region, reportID: PushPayload.beaconReportID()) == nil)
        #expect(PushPayload.beaconReportID() != PushPayload.beaconReportID())
        #expect(PushPayload.beaconReportID().utf8.count == "beacon-".utf8.count + 32)
    }
}
