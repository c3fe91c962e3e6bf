import DoorbellCore
import Glibc

// The control socket's commands (agentctl): one handler each.

extension Agent {
    func handleControl(_ json: JSONValue) -> ControlReply {
        let request: ControlRequest
        do throws(ControlRequestError) {
            request = try ControlRequest(json: json)
        } catch {
            return .single(ControlResponse.failure(error.description))
        }
        switch request {
        case .status: return .single(StatusReply(status: statusJSON()).json)
        case .pubkey:
            return .single(PubkeyReply(publicKey: DeviceKeyStore.publicKeyBase64(deviceKey.publicKey), keyID: DeviceKey.keyID(deviceKey.publicKey)).json)
        case .version: return .single(VersionReply(version: AgentVersion.current).json)
        case let .inject(device): return .single(inject(deviceID: device))
        case let .queue(action): return .single(queueJSON(action))
        case .scan: return .single(scanJSON())
        case .capture:
            let raw = rawFeed
            return .stream { write in
                guard write(ControlStreamLine.capturing.json) else { return }
                raw.follow(includeRecent: false, write)
            }
        case let .pair(seconds): return .single(pair(seconds: seconds))
        case .phones: return .single(phonesJSON())
        case let .forget(phone): return .single(forget(phone: phone))
        case .answer:
            guard let phones = bleRadio?.phones else { return .single(Self.noPhoneLink) }
            phones.send(.answered)
            return .single(AnswerReply(dismissing: phones.status.snapshot.phonesConnected).json)
        case let .events(follow):
            if follow {
                let feed = self.feed
                return .stream { write in
                    guard write(ControlStreamLine.following.json) else { return }
                    feed.follow(write)
                }
            }
            return .single(EventsReply(events: feed.recent).json)
        }
    }

    static let noPhoneLink = ControlResponse.failure(
        "the phone link is off: set ancs = true (and ancs_app) in [radio.ble], then reload (systemctl reload doorbell-agent)")

    /// `agentctl pair`: phones may pair for `seconds` (Just Works: whoever connects in the window).
    func pair(seconds: Int) -> JSONValue {
        guard let phones = bleRadio?.phones else { return Self.noPhoneLink }
        let until = Clocks.wallMicros() + Int64(seconds) * 1_000_000
        phones.send(.pair(untilWallMicros: seconds == 0 ? 0 : until))
        log.notice("phone.pairing", [("seconds", String(seconds))])
        return PairReply(pairingUntil: seconds == 0 ? nil : RFC3339.format(micros: until)).json
    }

    func phonesJSON() -> JSONValue {
        guard let phones = bleRadio?.phones else { return Self.noPhoneLink }
        let s = phones.status.snapshot
        let list = phones.bonds.snapshot.map { b in
            PhonesReply.Phone(id: b.id, name: b.name, bondedAt: RFC3339.format(micros: b.bondedAtMicros),
                              lastSeen: b.lastSeenMicros.map { RFC3339.format(micros: $0) }, connected: s.connectedPhone == b.id,
                              readingNotifications: s.connectedPhone == b.id && s.readingNotifications)
        }
        return PhonesReply(phones: list, pairingUntil: s.pairingOpenUntil.map { RFC3339.format(micros: $0) }, connected: s.phonesConnected,
                           notificationsRead: s.notificationsRead, lastError: s.lastError).json
    }

    func forget(phone: String) -> JSONValue {
        guard let phones = bleRadio?.phones else { return Self.noPhoneLink }
        do {
            guard let gone = try phones.forget(phone) else {
                let ids = phones.bonds.snapshot.map(\.id)
                return ControlResponse.failure("no bonded phone \"\(phone)\"; bonded: \(ids.isEmpty ? "none" : ids.joined(separator: ", "))")
            }
            log.notice("phone.forgotten", [("phone", gone.id)])
            return ForgetReply(forgotten: gone.id).json
        } catch {
            return ControlResponse.failure(error.description)
        }
    }

    /// Every transmitter heard lately, on every radio, newest first.
    func scanJSON() -> JSONValue {
        let ble = blePipeline.snapshot.heard.values.map { h -> (String, HeardTransmitter) in
            ("ble", HeardTransmitter(identity: h.identity, model: h.kind, frames: h.adverts,
                                     lastSeenWallMicros: h.lastSeenWallMicros, rssi: h.rssi.map(Double.init), deviceID: h.deviceID, match: h.snippet))
        }
        var all: [(String, HeardTransmitter)] = pipeline.snapshot.heard.values.map { ("rtl433", $0) }
        all += ookPipeline.snapshot.rf.heard.values.map { ("ook", $0) }
        all += ble
        let heard = all.sorted { $0.1.lastSeenWallMicros > $1.1.lastSeenWallMicros }.map { radio, h in
            ScanReply.Transmitter(radio: radio, identity: h.identity, model: h.model, frames: h.frames, rssiDB: h.rssi,
                                  lastSeen: RFC3339.format(micros: h.lastSeenWallMicros), device: h.deviceID, match: h.match)
        }
        return ScanReply(transmitters: heard).json
    }

    /// `agentctl inject press`: a synthetic press of a configured device through the tracker,
    /// the outbox and signed delivery, marked test so the cloud does not ring phones for it.
    func inject(deviceID: String) -> JSONValue {
        guard let device = config.devices.first(where: { $0.id == deviceID }) else {
            let known = config.devices.map(\.id).joined(separator: ", ")
            return ControlResponse.failure("no device \"\(deviceID)\" in the config; configured: \(known.isEmpty ? "none" : known)")
        }
        let time = ReceiveTime(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros(),
                               clockSynced: Clocks.isWallClockSynchronized(config.clock))
        let events: [AgentEvent]
        let swallowed: ButtonTracker.Swallowed?
        if device.radio == "ble" {
            (events, swallowed) = blePipeline.withLock { ($0.inject(device: device, at: time), $0.tracker.lastSwallowed) }
        } else if device.radio == "ook" {
            (events, swallowed) = ookPipeline.withLock { ($0.inject(device: device, at: time), $0.rf.tracker.lastSwallowed) }
        } else {
            (events, swallowed) = pipeline.withLock { ($0.inject(device: device, at: time), $0.tracker.lastSwallowed) }
        }
        guard !events.isEmpty else {
            let why = swallowed == .samePress
                ? "it was merged into the previous press of \(deviceID): it came within repeat_gap_ms (\(config.button.repeatGapMicros / 1000) ms) of it, so it counts as the same press still going; wait longer than that between presses"
                : "the press was counted but not forwarded: it fell within the cooldown (\(config.button.cooldownMicros / 1000) ms) of the last press of \(deviceID); try again in a few seconds"
            return ControlResponse.failure(why)
        }
        var ids: [String] = []
        for event in events { if let entry = accept(event, waitForStorage: true) { ids.append(entry.id) } }
        guard !ids.isEmpty else {
            return ControlResponse.failure("the outbox refused the event: \(counters.snapshot.outboxError ?? "unknown error")")
        }
        return InjectReply(eventIDs: ids).json
    }

    func queueJSON(_ action: ControlRequest.QueueAction) -> JSONValue {
        do {
            switch action {
            case let .list(dead, limit):
                let now = Clocks.wallMicros() / 1000
                let entries = try (dead ? outbox.deadLetters(limit: limit) : outbox.pending(limit: limit)).map { e in
                    QueueListReply.Entry(id: e.id, sequence: Int(e.sequence), type: e.type, ageSeconds: Int(max(0, now - e.createdAtMs) / 1000),
                                         attempts: e.attempts, dead: e.dead, lastError: e.lastError)
                }
                let stats = try outbox.stats()
                return QueueListReply(depth: stats.depth, dead: stats.dead, events: entries).json
            case .retry:
                let n = try outbox.retryDead()
                log.notice("queue.retry", [("events", String(n))])
                deliverer?.notify()
                return QueueRetryReply(requeued: n).json
            case .purgeDead:
                let n = try outbox.purgeDead()
                log.warning("queue.purged_dead_letters", [("events", String(n))])
                return QueuePurgeReply(purged: n).json
            }
        } catch {
            return ControlResponse.failure(error.description)
        }
    }
}
