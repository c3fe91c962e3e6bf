import DoorbellCore
import Glibc

// The control socket's commands (agentctl): one handler each.

extension Agent {
    func handleControl(_ json: JSONValue) -> ControlReply {
        let request: ControlRequest
        do throws(ControlRequestError) {
            request = try ControlRequest(json: json)
        } catch {
            return .single(.object([("ok", .bool(false)), ("error", .string(error.description))]))
        }
        switch request {
        case .status: return .single(.object([("ok", .bool(true)), ("status", statusJSON())]))
        case .pubkey:
            return .single(.object([("ok", .bool(true)), ("public_key", .string(DeviceKeyStore.publicKeyBase64(deviceKey.publicKey))),
                                    ("key_id", .string(DeviceKey.keyID(deviceKey.publicKey))), ("algorithm", .string("ed25519"))]))
        case .version: return .single(.object([("ok", .bool(true)), ("version", .string(AgentVersion.current))]))
        case let .inject(device): return .single(inject(deviceID: device))
        case let .queue(action): return .single(queueJSON(action))
        case .scan: return .single(scanJSON())
        case .capture:
            let raw = rawFeed
            return .stream { write in
                guard write(.object([("ok", .bool(true)), ("capturing", .bool(true))])) else { return }
                raw.follow(includeRecent: false, write)
            }
        case let .pair(seconds): return .single(pair(seconds: seconds))
        case .phones: return .single(phonesJSON())
        case let .forget(phone): return .single(forget(phone: phone))
        case .answer:
            guard let phones = bleRadio?.phones else { return .single(Self.noPhoneLink) }
            phones.send(.answered)
            return .single(.object([("ok", .bool(true)), ("dismissing", .number(Double(phones.status.snapshot.phonesConnected)))]))
        case let .events(follow):
            if follow {
                let feed = self.feed
                return .stream { write in
                    guard write(.object([("ok", .bool(true)), ("following", .bool(true))])) else { return }
                    feed.follow(write)
                }
            }
            return .single(.object([("ok", .bool(true)), ("events", .array(feed.recent))]))
        }
    }

    static let noPhoneLink: JSONValue = .object([("ok", .bool(false)), ("error", .string(
        "the phone link is off: set ancs = true (and ancs_app) in [radio.ble], then reload (systemctl reload doorbell-agent)"))])

    /// `agentctl pair`: phones may pair for `seconds` (Just Works: whoever connects in the window).
    func pair(seconds: Int) -> JSONValue {
        guard let phones = bleRadio?.phones else { return Self.noPhoneLink }
        let until = Clocks.wallMicros() + Int64(seconds) * 1_000_000
        phones.send(.pair(untilWallMicros: seconds == 0 ? 0 : until))
        log.notice("phone.pairing", [("seconds", String(seconds))])
        return .object([("ok", .bool(true)), ("pairing_until", seconds == 0 ? .null : .string(RFC3339.format(micros: until)))])
    }

    func phonesJSON() -> JSONValue {
        guard let phones = bleRadio?.phones else { return Self.noPhoneLink }
        let s = phones.status.snapshot
        let list = phones.bonds.snapshot.map { b -> JSONValue in
            .object([("id", .string(b.id)), ("name", .string(b.name)), ("bonded_at", .string(RFC3339.format(micros: b.bondedAtMicros))),
                     ("last_seen", b.lastSeenMicros.map { .string(RFC3339.format(micros: $0)) } ?? .null),
                     ("connected", .bool(s.connectedPhone == b.id)),
                     ("reading_notifications", .bool(s.connectedPhone == b.id && s.readingNotifications))])
        }
        return .object([("ok", .bool(true)), ("phones", .array(list)),
                        ("pairing_until", s.pairingOpenUntil.map { .string(RFC3339.format(micros: $0)) } ?? .null),
                        ("connected", .number(Double(s.phonesConnected))), ("notifications_read", .number(Double(s.notificationsRead))),
                        ("last_error", s.lastError.map(JSONValue.string) ?? .null)])
    }

    func forget(phone: String) -> JSONValue {
        guard let phones = bleRadio?.phones else { return Self.noPhoneLink }
        do {
            guard let gone = try phones.forget(phone) else {
                let ids = phones.bonds.snapshot.map(\.id)
                return .object([("ok", .bool(false)), ("error", .string("no bonded phone \"\(phone)\"; bonded: \(ids.isEmpty ? "none" : ids.joined(separator: ", "))"))])
            }
            log.notice("phone.forgotten", [("phone", gone.id)])
            return .object([("ok", .bool(true)), ("forgotten", .string(gone.id))])
        } catch {
            return .object([("ok", .bool(false)), ("error", .string(error.description))])
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
        let heard = all.sorted { $0.1.lastSeenWallMicros > $1.1.lastSeenWallMicros }.map { radio, h -> JSONValue in
            .object([("radio", .string(radio)), ("identity", .string(h.identity)), ("model", .string(h.model)),
                     ("frames", .number(Double(h.frames))), ("rssi_db", h.rssi.map(JSONValue.number) ?? .null),
                     ("last_seen", .string(RFC3339.format(micros: h.lastSeenWallMicros))),
                     ("device", h.deviceID.map(JSONValue.string) ?? .null), ("match", .string(h.match))])
        }
        return .object([("ok", .bool(true)), ("transmitters", .array(heard))])
    }

    /// `agentctl inject press`: a synthetic press of a configured device through the tracker,
    /// the outbox and signed delivery, marked test so the cloud does not ring phones for it.
    func inject(deviceID: String) -> JSONValue {
        guard let device = config.devices.first(where: { $0.id == deviceID }) else {
            let known = config.devices.map(\.id).joined(separator: ", ")
            return .object([("ok", .bool(false)), ("error", .string("no device \"\(deviceID)\" in the config; configured: \(known.isEmpty ? "none" : known)"))])
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
            return .object([("ok", .bool(false)), ("error", .string(why))])
        }
        var ids: [JSONValue] = []
        for event in events { if let entry = accept(event) { ids.append(.string(entry.id)) } }
        guard !ids.isEmpty else {
            return .object([("ok", .bool(false)), ("error", .string("the outbox refused the event: \(counters.snapshot.outboxError ?? "unknown error")"))])
        }
        return .object([("ok", .bool(true)), ("event_ids", .array(ids))])
    }

    func queueJSON(_ action: ControlRequest.QueueAction) -> JSONValue {
        do {
            switch action {
            case let .list(dead, limit):
                let now = Clocks.wallMicros() / 1000
                let entries = try (dead ? outbox.deadLetters(limit: limit) : outbox.pending(limit: limit)).map { e -> JSONValue in
                    .object([("id", .string(e.id)), ("sequence", .number(Double(e.sequence))), ("type", .string(e.type)),
                             ("age_s", .number(Double(max(0, now - e.createdAtMs) / 1000))), ("attempts", .number(Double(e.attempts))),
                             ("dead", .bool(e.dead)), ("last_error", e.lastError.map(JSONValue.string) ?? .null)])
                }
                let stats = try outbox.stats()
                return .object([("ok", .bool(true)), ("depth", .number(Double(stats.depth))), ("dead", .number(Double(stats.dead))),
                                ("events", .array(entries))])
            case .retry:
                let n = try outbox.retryDead()
                log.notice("queue.retry", [("events", String(n))])
                deliverer?.notify()
                return .object([("ok", .bool(true)), ("requeued", .number(Double(n)))])
            case .purgeDead:
                let n = try outbox.purgeDead()
                log.warning("queue.purged_dead_letters", [("events", String(n))])
                return .object([("ok", .bool(true)), ("purged", .number(Double(n)))])
            }
        } catch {
            return .object([("ok", .bool(false)), ("error", .string(error.description))])
        }
    }
}
