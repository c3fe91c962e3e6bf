import DoorbellCore
import Glibc

// Ingest: radio input through the pipelines, group commit into the outbox (with the BTHome packet
// ids of the same reports), ringing first. Storage that is full hands events to AgentSpill.

extension Agent {
    /// One rtl_433 line from the radio thread.
    func ingest(line: String) {
        if rawFeed.hasFollowers { rawFeed.publish(CaptureRecord.rtl433(line: line).json) }
        let time = ReceiveTime(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros(),
                               clockSynced: Clocks.isWallClockSynchronized(config.clock))
        let (events, malformed) = pipeline.withLock { p -> ([AgentEvent], String?) in
            let before = p.counters.malformed
            let events = p.handle(line: line, at: time)
            return (events, p.counters.malformed > before ? p.lastMalformed : nil)
        }
        if let malformed {
            log.warning("rtl433.bad_line", [("error", malformed), ("line", String(line.prefix(200)))])
        }
        for event in events { accept(event) }
    }

    /// Edges or pulses from the OOK radio's thread.
    func ingest(ook input: OOKRadioInput) {
        let now = Clocks.monotonicMicros()
        let wall = Clocks.wallMicros()
        let synced = Clocks.isWallClockSynchronized(config.clock)
        let capturing = rawFeed.hasFollowers
        var captured: [Pulse] = []
        let events = ookPipeline.withLock { p -> [AgentEvent] in
            p.recordPulses = capturing
            defer { if capturing { captured = p.recorded; p.recorded.removeAll(keepingCapacity: true) } }
            switch input {
            case let .edge(high, micros):
                return p.edge(high: high, atMicros: micros, time: ReceiveTime(monoMicros: micros, wallMicros: wall, clockSynced: synced))
            case let .idle(micros):
                return p.idle(atMicros: micros, time: ReceiveTime(monoMicros: micros, wallMicros: wall, clockSynced: synced))
            case let .pulse(pulse, rssi):
                return p.handle(pulse: pulse, time: ReceiveTime(monoMicros: now, wallMicros: wall, clockSynced: synced), rssi: rssi)
            }
        }
        for p in captured {
            rawFeed.publish(CaptureRecord.ookPulse(p).json)
        }
        for var event in events {
            // The tracker ran on the edges' clock (a replay's is virtual); latency counts from now.
            event.monotonicMicros = now
            accept(event)
        }
    }

    /// Reports and ticks from the BLE radio's thread.
    func ingest(ble input: BLERadioInput) {
        let time = ReceiveTime(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros(),
                               clockSynced: Clocks.isWallClockSynchronized(config.clock))
        let healthy = !(bleRadio?.degraded.snapshot ?? false)
        var memory: [String: BTHomeButtonTracker.DeviceMemory] = [:]
        let (events, problem) = blePipeline.withLock { p -> ([AgentEvent], String?) in
            let before = p.lastProblem
            var events: [AgentEvent] = []
            switch input {
            case let .reports(reports):
                for r in reports { events += p.handle(report: r, at: time, radioHealthy: healthy) }
            case let .replayed(r, mono):
                var t = time
                t.monoMicros = mono
                events = p.handle(report: r, at: t, radioHealthy: true)
                for i in events.indices { events[i].monotonicMicros = time.monoMicros }
            case .tick: events = p.tick(at: time, radioHealthy: healthy)
            case let .health(ok): if ok { p.radioRecovered(at: time) }
            case let .phoneEvent(type, data):
                if let event = Self.phoneEvent(type: type, data: data, at: time) { events = [event] }
            }
            memory = p.takeButtonMemoryChanges()
            return (events, p.lastProblem != before ? p.lastProblem : nil)
        }
        if let problem { log.warning("ble.refused", [("problem", problem)]) }
        // The packet ids go into the transaction that stores the events they produced, so a
        // press is forwarded only once its packet id is durable (and a stored id has its press).
        if !memory.isEmpty { counters.withLock { $0.unsavedButtonMemory.merge(memory) { _, new in new } } }
        if events.isEmpty {
            if !memory.isEmpty { storeButtonMemory() }
        } else {
            acceptAll(events)
        }
    }

    /// A phone link event as an agent event: the phone is its device (`push.*` events carry the
    /// press they are about in their data).
    static func phoneEvent(type: String, data: JSONValue, at time: ReceiveTime) -> AgentEvent? {
        guard let eventType = EventType(rawValue: type) else { return nil }
        let id = data["phone"]?["id"]?.stringValue ?? "phone"
        var event = AgentEvent(type: eventType, device: DeviceRef(id: id, name: data["phone"]?["name"]?.stringValue ?? id, radio: "ble"),
                               occurredAtMicros: time.wallMicros, clockSynced: time.clockSynced, data: data)
        event.monotonicMicros = time.monoMicros
        return event
    }

    /// The last packet id and counter per BTHome button, so a re-broadcast or a replay after a
    /// reboot is still not a press. They live in the outbox; an agent before schema v4 kept them in
    /// `ble-buttons.json`, which is taken over once (into the outbox, then removed).
    static func loadButtonMemory(_ outbox: Outbox, legacyFile: String, log: Logger) -> [String: BTHomeButtonTracker.DeviceMemory] {
        var memory: [String: BTHomeButtonTracker.DeviceMemory] = [:]
        do throws(OutboxError) {
            memory = try outbox.buttonMemory()
        } catch {
            log.error("ble.memory_unreadable", [("error", error.description), ("hint", "starting without the last packet ids")])
        }
        guard let bytes = readFile(legacyFile, maxBytes: 1 << 20) else { return memory }
        guard case let .object(members)? = try? JSONReader.parse(bytes: bytes) else {
            log.warning("ble.memory_unreadable", [("file", legacyFile), ("hint", "a damaged file from an older agent; removed")])
            unlink(legacyFile)
            return memory
        }
        var legacy: [String: BTHomeButtonTracker.DeviceMemory] = [:]
        for (address, v) in members where memory[address] == nil {
            legacy[address] = BTHomeButtonTracker.DeviceMemory(packetID: v["packet_id"]?.intValue.flatMap { UInt8(exactly: $0) },
                                                               counter: v["counter"]?.intValue.flatMap { UInt32(exactly: $0) })
        }
        do throws(OutboxError) {
            _ = try outbox.append([], memory: legacy, bounds: nil, report: nil)
            unlink(legacyFile)
            log.notice("ble.memory_migrated", [("file", legacyFile), ("buttons", String(legacy.count))])
        } catch {
            log.error("ble.memory_not_migrated", [("file", legacyFile), ("error", error.description), ("hint", "kept; tried again at the next start")])
        }
        return memory.merging(legacy) { kept, _ in kept }
    }

    /// Packet ids without an event (a re-sent press with a newer counter): stored alone, unless
    /// events wait for storage, which then take them along.
    func storeButtonMemory() {
        let memory = counters.withLock { c in c.spilled.isEmpty ? c.unsavedButtonMemory : [:] }
        guard !memory.isEmpty else { return }
        do throws(OutboxError) {
            _ = try outbox.append([], memory: memory, bounds: nil, report: nil)
            counters.withLock { c in Self.forget(saved: memory, in: &c) }
        } catch {
            log.error("ble.memory_not_saved", [("error", error.description), ("hint", "kept and stored with the next event")])
        }
    }

    static func forget(saved: [String: BTHomeButtonTracker.DeviceMemory], in c: inout AgentCounters) {
        for (address, m) in saved where c.unsavedButtonMemory[address] == m { c.unsavedButtonMemory[address] = nil }
    }

    /// Makes an event durable (one transaction, one fsync), handing it to the uplink before the
    /// fsync; `waitForStorage`: returns once it is stored (the fsync returned), as `agentctl
    /// inject` answers.
    @discardableResult
    func accept(_ incoming: AgentEvent, waitForStorage: Bool = false) -> OutboxEntry? {
        acceptAll([incoming], waitForStorage: waitForStorage).first
    }

    /// Group commit: the events of one radio read go into the outbox together, in one
    /// transaction (one set of page writes for the burst, one fsync shared with whatever else
    /// was committed meanwhile). Returns them once committed (`waitForStorage`: once stored).
    @discardableResult
    func acceptAll(_ incoming: [AgentEvent], waitForStorage: Bool = false) -> [OutboxEntry] {
        guard !incoming.isEmpty else { return [] }
        let devices = config.devices
        let events = incoming.map { e -> AgentEvent in
            var event = AnswerButton.retype(e, devices: devices)
            event.bootID = Clocks.bootID
            return event
        }
        // Ring first: local actions never wait for storage or the network.
        if let runner = actions.snapshot {
            for event in events { runner.trigger(event, json: event.json(id: "", sequence: 0, gatewayID: config.gatewayID, agentVersion: AgentVersion.current)) }
        }
        // Keep creation order: while anything waits in memory, new events queue behind it.
        let queued = counters.withLock { c -> Bool in
            guard !c.spilled.isEmpty else { return false }
            c.spilled.append(contentsOf: events)
            return true
        }
        if queued {
            spillInMemory([])
            return []
        }
        switch store(events, waitForStorage: waitForStorage) {
        case let .stored(entries), let .committed(entries):
            return entries
        case .full:
            counters.withLock { $0.storageFull = true }
            spillInMemory(events)
            return []
        case .failed: return []
        }
    }

    /// `committed`: in the outbox and handed to the uplink, its fsync still running (what
    /// follows "stored" runs when it returns, `stored(_:memory:result:)`).
    enum StoreOutcome { case stored([OutboxEntry]), committed([OutboxEntry]), full, failed }

    /// One transaction: the events, any evictions their arrival forces, and the report. The
    /// uplink is woken right after COMMIT, so a press's request overlaps its fsync, which the
    /// outbox's syncer makes while this thread reads the next radio line (why that is safe:
    /// Outbox+Sync.swift); everything that needs it stored sees it only once it is.
    func store(_ events: [AgentEvent], waitForStorage: Bool = false) -> StoreOutcome {
        let wallMillis = Clocks.wallMicros() / 1000
        let ids = rng.withLock { r in events.map { _ in UUIDv7.make(unixMillis: wallMillis, random: &r) } }
        let config = self.config
        let gateway = config.gatewayID
        let reportID = rng.withLock { UUIDv7.make(unixMillis: wallMillis, random: &$0) }
        let clockSynced = events[events.count - 1].clockSynced
        let newEvents = zip(ids, events).map { id, event in
            OutboxNewEvent(id: id, type: event.type.rawValue, createdAtMs: wallMillis, clock: event.clockStamp) { sequence in
                event.body(id: id, sequence: sequence, gatewayID: gateway, agentVersion: AgentVersion.current)
            }
        }
        let memory = counters.snapshot.unsavedButtonMemory
        let bounds = OutboxBounds(maxEvents: config.outbox.maxEvents, maxBytes: config.outbox.maxBytes)
        let report = { (sequence: Int64, evicted: [EvictedEvent]) -> (id: String, type: String, body: [UInt8]) in
            var explained = EvictionReport()
            for e in evicted {
                explained.add(sequence: e.sequence, type: e.type)
                if let body = e.reportBody { explained.carry(reportBody: body) }
            }
            let report = AgentEvent(
                type: .gatewayEvicted, device: DeviceRef(id: gateway, name: "gateway", radio: "none"),
                occurredAtMicros: Clocks.wallMicros(), clockSynced: clockSynced,
                data: explained.data(reason: "outbox bounds: max_events \(config.outbox.maxEvents), max_bytes \(config.outbox.maxBytes)"))
            return (reportID, report.type.rawValue, report.body(id: reportID, sequence: sequence, gatewayID: gateway, agentVersion: AgentVersion.current))
        }
        do {
            if waitForStorage {
                let result = try outbox.append(newEvents, memory: memory, bounds: bounds, report: report, whileSyncing: { deliverer?.notify() })
                stored(events, memory: memory, result: result)
                return .stored(result.entries)
            }
            let uplink = deliverer
            let result = try outbox.append(newEvents, memory: memory, bounds: bounds, report: report, handOff: { uplink?.handOff($0) },
                                           beforeCommit: { uplink?.signAhead($0) }) {
                [self] result, error in
                if let error { notStored(events, error) } else { stored(events, memory: memory, result: result) }
            }
            return .committed(result.entries)
        } catch where error.code == .full {
            counters.withLock { $0.outboxError = error.description }
            for event in events {
                log.error("outbox.full", [("type", event.type.rawValue), ("device", event.device.id), ("error", error.description),
                                          ("hint", "kept in memory and retried; free space on the state directory's filesystem")])
            }
            return .full
        } catch {
            notStored(events, error)
            return .failed
        }
    }

    /// The fsync covering `events` returned: they are stored. Counted, logged, and handed to
    /// what must only see stored events (the MQTT sink, the event feed, the phone's receipts).
    func stored(_ events: [AgentEvent], memory: [String: BTHomeButtonTracker.DeviceMemory], result: OutboxBatchResult) {
        let gateway = config.gatewayID
        counters.withLock {
            Self.forget(saved: memory, in: &$0)
            for event in events { $0.eventsByType[event.type.rawValue, default: 0] += 1 }
            $0.outboxError = nil
            $0.storageFull = false
            if let last = events.last { $0.lastEvent = "\(last.type.rawValue) \(last.device.id)" }
            $0.evicted += result.evicted.count
            if let r = result.report { $0.eventsByType[r.type, default: 0] += 1 }
        }
        for (entry, event) in zip(result.entries, events) {
            log.notice("event.created", [("event.id", entry.id), ("sequence", String(entry.sequence)), ("type", event.type.rawValue),
                                         ("device", event.device.id)] + (event.test ? [("test", "true")] : []))
        }
        if !result.evicted.isEmpty {
            log.warning("outbox.evicted", [("count", String(result.evicted.count)),
                                           ("sequences", result.evicted.prefix(20).map { String($0.sequence) }.joined(separator: ",")),
                                           ("hint", "the outbox is at its bounds ([outbox] max_events/max_bytes): is the uplink down?")])
        }
        mqttSink?.notify()
        for (entry, event) in zip(result.entries, events) {
            feed.publish(event.json(id: entry.id, sequence: entry.sequence, gatewayID: gateway, agentVersion: AgentVersion.current))
        }
        // The phones get to tell whether each press's push appeared (receipts).
        if let phones = bleRadio?.phones {
            for (event, entry) in zip(events, result.entries) where event.type.rawValue.hasPrefix("doorbell.") && !event.test {
                phones.send(.pressForwarded(eventID: entry.id, doorbellName: event.device.name))
            }
        }
    }

    /// The outbox refused the events, or their fsync failed (then they are in the table and
    /// delivered, but may not survive a power cut).
    func notStored(_ events: [AgentEvent], _ error: OutboxError) {
        counters.withLock { $0.outboxError = error.description }
        for event in events {
            log.error("outbox.append_failed", [("type", event.type.rawValue), ("device", event.device.id), ("error", error.description)])
        }
    }
}
