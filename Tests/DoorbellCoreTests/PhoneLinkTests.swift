import DoorbellCore
import PropertyBased
import Testing

/// The phone link through HCIHost, byte for byte (PhoneLinkRig plays the controller and the iPhone):
/// connection, MTU exchange, ANCS discovery, CCCD writes behind encryption, fragmented
/// notifications, ACL credit flow, disconnection mid-request, malformed ACL.
@Suite struct PhoneLinkTests {
    static func opcodes(_ rig: PhoneLinkRig) -> [UInt8] { rig.attSent.map { $0[0] } }

    @Test func theBringUpReadsTheLEBuffersAndAdvertisesTheSolicitationConnectably() {
        var host = HCIHost(settings: PhoneLinkRig.settings(), transportName: "hci0")
        let legacy = HCIHostTests.bringUp(&host, extended: false)
        // An LE buffer size of 0 means shared buffers: Read Buffer Size follows.
        // Read BD_ADDR: the base station's identity address for pairing.
        #expect(legacy.opcodes == [0x0C03, 0x1001, 0x1002, 0x1009, 0x2060, 0x1005, 0x0C01, 0x2001, 0x2006, 0x2008, 0x200A, 0x200B, 0x200C])
        #expect(host.info?.publicAddress == [0xB8, 0x27, 0xEB, 0x12, 0x34, 0x56])
        let data = legacy.actions.compactMap { if case let .send(p) = $0, HCIHostTests.opcode(p) == 0x2008 { p } else { nil } }.first
        // Flags (general discoverable), then the Service Solicitation AD: 17 bytes, type 0x15, ANCS little-endian.
        #expect(data.map { Array($0[4..<26]) } == [21, 0x02, 0x01, 0x06, 17, 0x15, 0xD0, 0x00, 0x2D, 0x12, 0x1E, 0x4B, 0x0F, 0xA4,
                                                    0x99, 0x4E, 0xCE, 0xB5, 0x31, 0xF4, 0x05, 0x79])
        let params = legacy.actions.compactMap { if case let .send(p) = $0, HCIHostTests.opcode(p) == 0x2006 { p } else { nil } }.first
        #expect(params?[8] == 0x00, "ADV_IND: connectable")

        let own = OwnBeacon(beacon: IBeacon(uuid: [UInt8](repeating: 0xE2, count: 16), major: 1, minor: 2, measuredPower: -59))
        var both = HCIHost(settings: HCIHostTests.settings { $0.ancsLink = true; $0.beacon = own }, transportName: "hci0")
        let ext = HCIHostTests.bringUp(&both, extended: true)
        // Two extended sets (beacon 0, solicitation 1), both enabled at once, and the scan extended too.
        #expect(ext.opcodes.suffix(7) == [0x2036, 0x2037, 0x2036, 0x2037, 0x2039, 0x2041, 0x2042])
        let enable = ext.actions.compactMap { if case let .send(p) = $0, HCIHostTests.opcode(p) == 0x2039 { p } else { nil } }.first
        #expect(enable == [0x01, 0x39, 0x20, 0x0A, 0x01, 0x02, 0x00, 0, 0, 0, 0x01, 0, 0, 0])
        var legacyBoth = HCIHost(settings: HCIHostTests.settings { $0.ancsLink = true; $0.beacon = own }, transportName: "hci0")
        #expect(HCIHostTests.bringUp(&legacyBoth, extended: false).opcodes.suffix(6) == [0x2006, 0x2008, 0x2009, 0x200A, 0x200B, 0x200C],
                "one legacy set: the beacon as data, the solicitation as scan response")
    }

    @Test func aPhoneConnectsExchangesTheMTUAndANCSIsDiscoveredFromItsDatabase() {
        var rig = PhoneLinkRig()
        rig.connect()
        #expect(rig.host.connection?.role == .peripheral)
        #expect(rig.host.connection?.peerAddress == [0x7B, 0x11, 0x22, 0x33, 0x44, 0x5A])
        #expect(rig.host.attMTU == 185)
        #expect(rig.gattEvents.contains(.discoveredANCS(notificationSource: PhoneLinkRig.ns, controlPoint: PhoneLinkRig.cp, dataSource: PhoneLinkRig.ds)))
        // MTU; the GATT service, its characteristics (until Attribute Not Found), Service Changed's
        // CCCD; ANCS, its characteristics, the CCCDs of Notification and Data Source; Service
        // Changed indications on; the Device Name.
        #expect(rig.attSent.map { Hex.encode($0) } == ["02f700", "060100ffff00280118", "0806000f000328", "080d000f000328", "0409000900",
                                                       "060100ffff0028d0002d121e4b0fa4994eceb531f40579", "08300039000328", "08380039000328",
                                                       "0433003300", "0439003900", "1209000200", "080100ffff002a"])
        #expect(rig.gattEvents.last == .deviceName(PhoneLinkRig.deviceName))
    }

    @Test func theDeviceNameIsReadOnceMadePrintableAndCut() {
        func name(_ value: [UInt8]) -> [GATTClient.Action] {
            var rig = PhoneLinkRig()
            if let i = rig.database.firstIndex(where: { $0.type == .deviceName }) { rig.database[i].value = value }
            rig.connect()
            // A Service Changed runs discovery again, not the name read.
            rig.phoneSends([ATT.indication, 0x08, 0x00, 0x01, 0x00, 0xFF, 0xFF])
            #expect(rig.attSent.filter { $0 == [ATT.readByTypeRequest, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x2A] }.count == 1)
            return rig.gattEvents.filter { if case .deviceName = $0 { true } else { false } }
        }
        // Controls, bidi overrides and invalid UTF-8 go; a ZWJ emoji stays whole; spaces around trimmed.
        #expect(name(Array(" Bob\u{7}'s\u{202E} phone 👨‍👩‍👧 ".utf8) + [0xFF]) == [.deviceName("Bob's phone 👨‍👩‍👧 \u{FFFD}")])
        #expect(name(Array(repeating: 0x41, count: 200)) == [.deviceName(String(repeating: "A", count: GATTClient.maxNameLength))])
        #expect(name([]) == [], "no name: known by its address")
        #expect(name(Array("\n\t".utf8)) == [])
    }

    @Test func aPhoneWithoutADeviceNameIsKnownByItsAddressAndTheLinkCarriesOn() {
        var rig = PhoneLinkRig()
        rig.database.removeAll { $0.type == .deviceName }
        rig.connect()
        #expect(!rig.gattEvents.contains { if case .deviceName = $0 { true } else { false } })
        rig.perform(rig.host.subscribeCharacteristic(PhoneLinkRig.ns, at: 1))
        rig.encrypt()
        #expect(rig.written[0x0033] == [0x01, 0x00])
    }

    @Test func subscribingNeedsEncryptionAndGoesAgainOnceTheLinkIsEncrypted() {
        var rig = PhoneLinkRig()
        rig.connect()
        rig.events.removeAll()
        rig.perform(rig.host.subscribeCharacteristic(PhoneLinkRig.ns, at: 1))
        #expect(rig.gattEvents == [.securityRequired(error: 0x05)])
        #expect(rig.written[0x0033] == nil)
        rig.encrypt()
        #expect(rig.written[0x0033] == [0x01, 0x00])
        #expect(rig.gattEvents.suffix(1) == [.written(handle: PhoneLinkRig.ns)])
        #expect(rig.events.contains(.encryptionChanged(handle: 0x40, enabled: true, status: 0)))
    }

    @Test func controlPointWritesAreConfirmedOrRefusedWithTheirANCSError() {
        var rig = PhoneLinkRig()
        rig.connect()
        rig.events.removeAll()
        // GetNotificationAttributes for UID 1: AppIdentifier, Title (max 32).
        let get: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x00]
        rig.perform(rig.host.writeCharacteristic(PhoneLinkRig.cp, get, at: 1))
        rig.perform(rig.host.writeCharacteristic(PhoneLinkRig.cp, [0x07], at: 2))
        #expect(rig.gattEvents == [.written(handle: PhoneLinkRig.cp), .writeFailed(handle: PhoneLinkRig.cp, error: 0xA0)])
        #expect(rig.written[PhoneLinkRig.cp] == get)
        #expect(ATT.errorName(0xA0) == "ANCS Unknown Command")
    }

    @Test func aNotificationFragmentedOverManyACLPacketsArrivesWhole() {
        var rig = PhoneLinkRig()
        rig.connect()
        let value: [UInt8] = [0x00, 0x10, 0x01, 0x01] + Array(0..<176)
        rig.phoneSends([ATT.notification, 0x38, 0x00] + value, size: 9)
        #expect(rig.gattEvents.last == .notification(handle: PhoneLinkRig.ds, value))
        rig.phoneSends([ATT.indication, 0x32, 0x00, 0x01], size: 2)
        #expect(rig.gattEvents.last == .notification(handle: PhoneLinkRig.ns, [0x01]))
        #expect(rig.attSent.last == [ATT.confirmation], "an indication is confirmed")
        #expect(rig.host.linkCounters.droppedACL == 0)
    }

    @Test func neverMoreACLPacketsInFlightThanTheControllerHasBuffers() {
        var rig = PhoneLinkRig(buffers: 2, aclLength: 27)
        rig.connect()
        rig.completing = false
        // 100 bytes (104 with the L2CAP header) over 27-byte packets: 4 fragments of one PDU, twice.
        rig.perform(rig.host.send(smp: Array(repeating: 0xAB, count: 100), at: 1))
        rig.perform(rig.host.send(smp: Array(repeating: 0xCD, count: 100), at: 1))
        #expect(rig.inFlight == 2)
        #expect(rig.host.aclInFlight == 2)
        for _ in 0..<3 { rig.complete() }
        #expect(rig.maxInFlight <= 2)
        #expect(rig.host.aclInFlight == 2)
        rig.complete()
        #expect(rig.host.aclInFlight == 0, "all eight fragments went out")
    }

    @Test func aDisconnectionMidRequestAbandonsItAndAdvertisingResumes() {
        var rig = PhoneLinkRig()
        rig.phoneMTU = 23
        rig.completing = false
        rig.connect()
        #expect(rig.host.nextDeadline != nil, "a request waits for its answer: the controller holds the ACL buffers")
        var actions: [HCIHost.Action] = []
        let disconnection: [UInt8] = [0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x08]
        actions = rig.host.received(disconnection, at: 5)
        #expect(actions.first == .disconnected(handle: 0x40, reason: 0x08))
        #expect(HCIHostTests.sent(actions) == [0x200A], "the connectable advertising again")
        #expect(rig.host.connection == nil)
        #expect(rig.host.aclInFlight == 0, "a disconnection frees its buffers")
        _ = rig.host.received(HCIHostTests.complete(0x200A), at: 6)
        #expect(rig.host.tick(at: 60_000_000).isEmpty, "the abandoned request never times out")
        #expect(rig.host.writeCharacteristic(0x35, [0x00], at: 61_000_000).isEmpty, "nothing is written without a phone")
    }

    @Test func anUnansweredRequestDropsTheLinkAfterThirtySeconds() {
        var rig = PhoneLinkRig()
        rig.database = []
        rig.connect()
        rig.events.removeAll()
        rig.perform(rig.host.writeCharacteristic(0x35, [0x00, 0x01, 0x02, 0x03, 0x04], at: 1))
        // The fake phone answered; now a request the phone ignores:
        var host = rig.host
        let pending = host.writeCharacteristic(0x35, [0x09], at: 2)
        #expect(pending.contains { if case .send = $0 { true } else { false } })
        #expect(host.tick(at: 30_000_001).isEmpty)
        let late = host.tick(at: 30_000_002)
        #expect(late.first == .gatt(.timedOut))
        #expect(HCIHostTests.sent(late) == [0x0406], "Disconnect")
    }

    @Test func thePhonesRequestsToOurServerAreAnsweredNeverLeftHanging() {
        var rig = PhoneLinkRig()
        rig.connect()
        let before = rig.attSent.count
        rig.phoneSends([0x02, 0x00, 0x02])          // MTU 512
        rig.phoneSends([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])  // Read By Group Type: services
        rig.phoneSends([0x0A, 0x03, 0x00])          // Read
        rig.phoneSends([0x52, 0x03, 0x00, 0x01])    // Write Command: no answer
        rig.phoneSends([0x30, 0x00])                // unknown request
        #expect(Array(rig.attSent[before...]) == [[0x03, 0xF7, 0x00], [0x01, 0x10, 0x01, 0x00, 0x0A], [0x01, 0x0A, 0x03, 0x00, 0x01],
                                                  [0x01, 0x30, 0x00, 0x00, 0x06]])
        #expect(rig.host.attMTU == 185, "the lesser of both offers stays")
    }

    @Test func leSignallingRequestsAreRejectedAndOtherChannelsCounted() {
        var rig = PhoneLinkRig()
        rig.connect()
        // Connection Parameter Update Request sent by a central: not understood from one.
        var actions = rig.host.received(PhoneLinkRig.acl(L2CAP.frame(cid: 5, [0x12, 0x07, 0x08, 0x00, 6, 0, 6, 0, 0, 0, 0xF4, 1]), handle: 0x40, size: 27)[0], at: 1)
        #expect(actions == [.send([0x02, 0x40, 0x00, 0x0A, 0x00, 0x06, 0x00, 0x05, 0x00, 0x01, 0x07, 0x02, 0x00, 0x00, 0x00])])
        actions = rig.host.received(PhoneLinkRig.acl(L2CAP.frame(cid: 0x0041, [1, 2]), handle: 0x40, size: 27)[0], at: 1)
        #expect(actions.isEmpty)
        #expect(rig.host.linkCounters.unknownChannel == 1)
        let smp = rig.host.received(PhoneLinkRig.acl(L2CAP.frame(cid: 6, [0x01, 0x03, 0x00, 0x0D, 0x10, 0x03, 0x03]), handle: 0x40, size: 4)
            .flatMap { $0 }, at: 2)
        #expect(smp == [.smp(handle: 0x40, [0x01, 0x03, 0x00, 0x0D, 0x10, 0x03, 0x03])], "SMP goes to the pairing machine")
    }

    @Test func malformedACLIsCountedAndDroppedAndTheLinkCarriesOn() {
        var rig = PhoneLinkRig()
        rig.connect()
        let drops: [[UInt8]] = [
            [0x02, 0x40, 0x10, 0x02, 0x00, 0xAA, 0xBB],              // continuation without a first
            [0x02, 0x41, 0x20, 0x02, 0x00, 0xAA, 0xBB],              // another handle
            [0x02, 0x40, 0x30, 0x02, 0x00, 0xAA, 0xBB],              // reserved PB
            [0x02, 0x40, 0x20, 0x04, 0x00, 0xFF, 0x0F, 0x04, 0x00],  // a PDU of 4095 bytes
            [0x02, 0x40, 0x20, 0x07, 0x00, 0x01, 0x00, 0x04, 0x00, 0x1B, 0x00, 0x00],  // more than its length
        ]
        for d in drops { rig.feed(d) }
        #expect(rig.host.linkCounters.droppedACL == 5)
        rig.phoneSends([ATT.notification, 0x32, 0x00, 0x07])
        #expect(rig.gattEvents.last == .notification(handle: PhoneLinkRig.ns, [0x07]))
    }

    @Test func aQuietAirWhileAPhoneIsConnectedRearmsTheScanInsteadOfResettingAndDroppingThePhone() {
        for extended in [false, true] {
            var rig = PhoneLinkRig(extended: extended, stallSeconds: 60)
            rig.connect()
            rig.commands.removeAll()
            // No advertising report since the bring-up at 0: the stall limit passes with the phone on.
            rig.advance(to: 61_000_000)
            #expect(rig.events.contains(.scanRearmed) && !rig.events.contains(.stalled))
            let enable: UInt16 = extended ? 0x2042 : 0x200C
            #expect(rig.commands.compactMap(HCIHostTests.opcode) == [enable, enable], "scan off, scan on; no Reset, no Disconnect")
            #expect(rig.commands.map { $0[4] } == [0x00, 0x01])
            #expect(rig.host.connection != nil && rig.host.isScanning)
            // Again after another quiet stall time, not before.
            rig.events.removeAll()
            rig.advance(to: 100_000_000)
            #expect(!rig.events.contains(.scanRearmed))
            // The phone left: a quiet scan is reset as before.
            rig.disconnect()
            rig.commands.removeAll()
            rig.advance(to: 122_000_000)
            #expect(rig.events.contains(.stalled))
            #expect(rig.commands.compactMap(HCIHostTests.opcode).first == 0x0C03, "the bring-up again, from Reset")
        }
    }

    @Test func aServiceChangedIndicationRunsDiscoveryAgain() {
        var rig = PhoneLinkRig()
        rig.connect()
        rig.events.removeAll()
        rig.phoneSends([ATT.indication, 0x08, 0x00, 0x01, 0x00, 0xFF, 0xFF])
        #expect(rig.gattEvents.first == .servicesChanged)
        #expect(rig.gattEvents.last == .discoveredANCS(notificationSource: PhoneLinkRig.ns, controlPoint: PhoneLinkRig.cp, dataSource: PhoneLinkRig.ds))
    }

    @Test func anyFragmentationReassemblesToTheSamePDU() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...300), Gen.int(in: 1...40).array(of: 1...40)) { payload, cuts in
            let pdu = L2CAP.frame(cid: 4, payload.map(UInt8.init))
            var r = L2CAPReassembler(maxPDU: 400)
            var i = 0, k = 0
            var result: L2CAPReassembler.Result = .incomplete
            while i < pdu.count {
                let n = cuts[k % cuts.count]
                result = r.feed(first: i == 0, pdu[i..<min(pdu.count, i + n)])
                i += n
                k += 1
                if i < pdu.count { #expect(result == .incomplete) }
            }
            #expect(result == .pdu(cid: 4, payload.map(UInt8.init)))
            // And the host's own fragmenter, at any data length, gives the same back.
            var again = L2CAPReassembler(maxPDU: 400)
            let out = L2CAP.fragments(of: pdu, handle: 1, maxLength: cuts[0]).map { again.feed(first: $0[2] >> 4 == 0, $0[5...]) }
            #expect(out.last == .pdu(cid: 4, payload.map(UInt8.init)))
        }
    }
}

/// The link's events that need no phone: the LTK request and its answers, a second central,
/// extended advertising resuming, refusals that race a disconnection.
@Suite struct PhoneLinkEventTests {
    @Test func aLongTermKeyRequestIsHandedUpAndAnsweredWithTheKeyOrRefused() {
        var rig = PhoneLinkRig()
        rig.connect()
        rig.events.removeAll()
        let random: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        rig.feed([0x04, 0x3E, 0x0D, 0x05, 0x40, 0x00] + random + [0x34, 0x12])
        #expect(rig.events == [.longTermKeyRequested(handle: 0x40, random: random, ediv: 0x1234)])
        let key = [UInt8](repeating: 0x5C, count: 16)
        let reply = rig.host.replyLongTermKey(key, at: 1)
        #expect(reply == [.send([0x01, 0x1A, 0x20, 18, 0x40, 0x00] + key)])
        _ = rig.host.received(HCIHostTests.complete(0x201A, [0x40, 0x00]), at: 2)
        #expect(rig.host.replyLongTermKey(nil, at: 3) == [.send([0x01, 0x1B, 0x20, 2, 0x40, 0x00])])
        // The phone went meanwhile: "Unknown Connection Identifier" is no reason to drop the controller.
        #expect(rig.host.received(HCIHostTests.complete(0x201B, status: 0x02), at: 4).isEmpty)
        rig.feed([0x04, 0x30, 0x03, 0x00, 0x40, 0x00])
        #expect(rig.events.last == .encryptionChanged(handle: 0x40, enabled: true, status: 0))
    }

    @Test func aSecondCentralIsDisconnectedAndTheFirstKept() {
        var rig = PhoneLinkRig()
        rig.connect()
        var p: [UInt8] = [0x01, 0x00, 0x41, 0x00, 0x01, 0x00, 1, 2, 3, 4, 5, 6, 0x18, 0x00, 0, 0, 0xF4, 0x01, 0x00]
        let actions = rig.host.received([0x04, 0x3E, UInt8(p.count)] + p, at: 1)
        #expect(actions == [.send([0x01, 0x06, 0x04, 3, 0x41, 0x00, 0x0D])], "Disconnect, limited resources")
        #expect(rig.host.connection?.handle == 0x40)
        p[1] = 0x3C // a failed connection (advertising timeout) changes nothing
        #expect(rig.host.received([0x04, 0x3E, UInt8(p.count)] + p, at: 2).isEmpty)
    }

    @Test func extendedAdvertisingResumesTheSetTheConnectionStopped() {
        var rig = PhoneLinkRig(extended: true)
        rig.connect()
        let actions = rig.host.received([0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x13], at: 1)
        #expect(actions.first == .disconnected(handle: 0x40, reason: 0x13))
        #expect(actions.last == .send([0x01, 0x39, 0x20, 6, 0x01, 0x01, 0x01, 0, 0, 0]))
        // A controller that says which set it stopped (Bumble's stops the first set with the
        // address, the beacon's): that one comes back.
        _ = rig.host.received(HCIHostTests.complete(0x2039), at: 2)
        rig.connect()
        rig.feed([0x04, 0x3E, 0x06, 0x12, 0x00, 0x00, 0x40, 0x00, 0x00])
        let again = rig.host.received([0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x13], at: 3)
        #expect(again.last == .send([0x01, 0x39, 0x20, 6, 0x01, 0x01, 0x00, 0, 0, 0]))
    }

    @Test func linkEventsParseAndTruncatedOnesDoNot() {
        let legacy: [UInt8] = [0x3E, 0x13, 0x01, 0x00, 0x40, 0x00, 0x01, 0x01, 0x5A, 0x44, 0x33, 0x22, 0x11, 0x7B, 0x18, 0x00, 0, 0, 0xF4, 0x01, 0x00]
        #expect(HCIEvent.parse(legacy) == .connectionComplete(status: 0, LEConnection(handle: 0x40, role: .peripheral,
                                                                                          peerAddress: [0x7B, 0x11, 0x22, 0x33, 0x44, 0x5A],
                                                                                          peerAddressType: 1, intervalUnits: 24)))
        #expect(HCIEvent.parse([0x13, 0x09, 0x02, 0x40, 0x00, 0x02, 0x00, 0x40, 0x00, 0x01, 0x00]) == .completedPackets([0x40: 3]))
        for truncated: [UInt8] in [[0x3E, 0x12] + legacy[2..<20], [0x13, 0x04, 0x02, 0x40, 0x00, 0x02], [0x05, 0x03, 0x00, 0x40, 0x00],
                                    [0x3E, 0x0C, 0x05, 0x40, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 0x34]] {
            #expect(HCIEvent.parse(truncated) == nil)
        }
    }
}
