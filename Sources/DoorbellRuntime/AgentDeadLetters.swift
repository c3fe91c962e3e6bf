import DoorbellCore

// A dead letter is reported like an eviction: a `gateway.dead_letter` event through the outbox,
// to the cloud and the broker, so the receiver learns why an event it never got is missing and
// an operator sees it without a shell on the box.

extension Agent {
    func reportDeadLetters(_ parked: [ParkedEvent]) {
        let gateway = config.gatewayID
        let events = parked.compactMap { p -> AgentEvent? in
            // A report that is itself refused is logged, not reported again (no loop).
            guard !p.type.hasPrefix("gateway.") else { return nil }
            var data: [(String, JSONValue)] = [("event_id", .string(p.id)), ("sequence", .number(Double(p.sequence))), ("type", .string(p.type)),
                                               ("reason", .string(p.reason)), ("attempts", .number(Double(p.attempts))), ("error", .string(p.error))]
            if let status = p.status { data.append(("status", .number(Double(status)))) }
            data.append(("hint", .string("kept on the gateway: agentctl queue --dead lists it, agentctl queue retry sends it again, agentctl queue purge --dead drops it")))
            return AgentEvent(type: .gatewayDeadLetter, device: DeviceRef(id: gateway, name: "gateway", radio: "none"),
                              occurredAtMicros: Clocks.wallMicros(), clockSynced: Clocks.isWallClockSynchronized(config.clock), data: .object(data))
        }
        acceptAll(events)
    }
}
