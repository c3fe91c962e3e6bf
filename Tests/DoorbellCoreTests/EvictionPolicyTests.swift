import DoorbellCore
import Testing

/// One eviction rule for the outbox and the events held in memory, and reports that carry on
/// what the reports they evicted explained.
@Suite struct EvictionPolicyTests {
    @Test func tiersRankTelemetryThenPresenceThenReportsThenPresses() {
        let policy = EvictionPolicy()
        let ranked = ["phone.notification", "push.displayed", "beacon.entered", "gateway.evicted", "gateway.dead_letter", "doorbell.pressed", "door.answered"]
            .map { policy.tier(ofType: $0) }
        #expect(ranked == ranked.sorted())
        #expect(policy.tier(ofType: "beacon.exited") < policy.tier(ofType: "gateway.evicted"))
        #expect(policy.tier(ofType: "gateway.evicted") < policy.tier(ofType: "doorbell.held"))
    }

    @Test func theVictimIsTheOldestOfTheLowestTier() {
        let policy = EvictionPolicy()
        #expect(policy.victim(amongOldestFirst: ["doorbell.pressed", "gateway.evicted", "beacon.entered", "beacon.exited"]) == 2)
        #expect(policy.victim(amongOldestFirst: ["doorbell.pressed", "gateway.evicted"]) == 1)
        #expect(policy.victim(amongOldestFirst: ["doorbell.pressed", "doorbell.held"]) == 0)
        #expect(policy.victim(amongOldestFirst: [String]()) == nil)
    }

    @Test func aReportCarriesOnWhatAnEvictedReportExplained() {
        var first = EvictionReport()
        first.add(sequence: 2, type: "beacon.entered")
        let body = AgentEvent(type: .gatewayEvicted, device: DeviceRef(id: "gw", name: "gateway", radio: "none"), occurredAtMicros: 0,
                              clockSynced: true, data: first.data(reason: "bounds"))
            .body(id: "r7", sequence: 7, gatewayID: "gw", agentVersion: "test")
        var next = EvictionReport()
        next.add(sequence: 4, type: "beacon.exited")
        next.add(sequence: 7, type: "gateway.evicted")
        next.carry(reportBody: body)
        next.carry(reportBody: Array("not json".utf8))
        #expect(next.count == 3)
        #expect(next.data(reason: "bounds")["sequences"] == .array([.number(2), .number(4), .number(7)]))
        #expect(next.types == ["beacon.entered": 1, "beacon.exited": 1, "gateway.evicted": 1])
    }
}
