import DoorbellCore
import PropertyBased
import Testing

/// The correction from the row's stamp splices the stored bytes; it must give exactly what the
/// former correction gave by parsing the body and writing it again.
@Suite struct ClockStampCorrectionTests {
    /// The correction as it was before the stamp had columns: parse, change, encode.
    static func reference(_ body: [UInt8], nowWallMicros: Int64, nowMonoMicros: Int64, bootID: String) -> [UInt8]? {
        guard case var .object(members) = (try? JSONReader.parse(bytes: body)) ?? .null else { return nil }
        let value = JSONValue.object(members)
        var corrected = false
        if bootID != "unknown", !bootID.isEmpty, value["boot_id"]?.stringValue == bootID, let mono = value["monotonic_us"]?.intValue, mono <= nowMonoMicros,
           let i = members.firstIndex(where: { $0.0 == "occurred_at" }) {
            members[i].1 = .string(RFC3339.format(micros: nowWallMicros - (nowMonoMicros - mono)))
            corrected = true
        }
        let at = (members.firstIndex(where: { $0.0 == "clock_synced" }) ?? members.count - 1) + 1
        members.insert(("clock_corrected", .bool(corrected)), at: min(at, members.count))
        return JSONWriter.encode(.object(members))
    }

    @Test func theSpliceGivesTheSameBytesAsParsingDid() async {
        let boots = ["boot-a", "boot-b", "unknown", ""]
        await propertyCheck(input: Gen.int(in: 0...3), Gen.int(in: 0...3), Gen.int(in: 0...100_000_000), Gen.int(in: 0...100_000_000),
                            Gen.int(in: 0...2_000_000_000), Gen.int(in: 0...2)) { recordedBoot, nowBoot, mono, nowMono, occurredSeconds, dataKind in
            var e = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "d", name: "n", radio: "rtl433"),
                               occurredAtMicros: Int64(occurredSeconds) * 1_000_000, clockSynced: false,
                               data: dataKind == 0 ? .object([]) : .object([("occurred_at", .string("nested")), ("battery_pct", .number(Double(dataKind)))]))
            e.bootID = recordedBoot == 3 ? nil : boots[recordedBoot]
            e.monotonicMicros = mono % 7 == 0 ? nil : Int64(mono)
            // A gateway id (written before occurred_at) that holds the key's text, quotes and all.
            let body = e.body(id: "e", sequence: 9, gatewayID: "gw\"occurred_at\":\"x", agentVersion: "0")
            guard let stamp = e.clockStamp else { Issue.record("no stamp"); return }
            let now = (wall: Int64(1_795_348_810_000_000), mono: Int64(nowMono))
            let spliced = ClockCorrection.correct(body, recordedBy: stamp, nowWallMicros: now.wall, nowMonoMicros: now.mono, bootID: boots[nowBoot])
            #expect(spliced == Self.reference(body, nowWallMicros: now.wall, nowMonoMicros: now.mono, bootID: boots[nowBoot]))
            #expect(spliced.map(ClockCorrection.needsCorrection) == false, "corrected once")
        }
    }

    @Test func aSynchronizedEventHasNoStampAndABodyNotOursIsLeftAlone() {
        let e = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "d", name: "d", radio: "rtl433"), occurredAtMicros: 0, clockSynced: true)
        #expect(e.clockStamp == nil)
        let stamp = ClockStamp(monotonicMicros: 1, bootID: "b")
        #expect(ClockCorrection.correct(Array("raw".utf8), recordedBy: stamp, nowWallMicros: 10, nowMonoMicros: 10, bootID: "b") == nil)
        // occurred_at after clock_synced is not the agent's layout.
        let other = Array(#"{"clock_synced":false,"occurred_at":"1970-01-01T00:00:00.000000Z"}"#.utf8)
        #expect(ClockCorrection.correct(other, recordedBy: stamp, nowWallMicros: 10, nowMonoMicros: 10, bootID: "b") == nil)
    }
}
