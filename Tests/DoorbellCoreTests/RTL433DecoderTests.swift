import DoorbellCore
import Testing

@Suite struct RTL433DecoderTests {
    /// Lines as rtl_433 22.11 prints them for our sim board recording and for the default
    /// decoders' mislabel of the same kind of bell (see Fixtures/rtl433-lines.jsonl).
    @Test func fixtureLinesDecodeToGolden() throws {
        let lines = try Golden.read("rtl433-lines.jsonl").split(separator: "\n")
        var out = ""
        for line in lines {
            switch RTL433Decoder.decode(line: line) {
            case let .frame(f):
                out += "frame model=\(f.model) identity=\(f.identity) code=\(f.code ?? "-") rssi=\(f.rssi.map { String($0) } ?? "-") time=\(f.timeMicros.map { String($0) } ?? "-")\n"
            case .notAMessage: out += "not-a-message\n"
            case let .malformed(reason): out += "malformed \(reason)\n"
            }
        }
        try Golden.check(out, against: "rtl433-lines.golden.txt")
    }

    @Test func codeMatchesWhetherPrintedAsIntegerOrHex() throws {
        let directory = DeviceDirectory(devices: [DeviceConfig(id: "bell", name: "Bell", match: RTL433Match(fields: [("code", .integer(0x91568F))]))])
        for line in [#"{"model":"EV1527-flex","code":9524879}"#, #"{"model":"X","code":"91568F"}"#, #"{"model":"X","code":"0x91568f"}"#] {
            guard case let .frame(f) = RTL433Decoder.decode(line: line) else { Issue.record("no frame for \(line)"); continue }
            #expect(directory.match(f, radio: "rtl433")?.id == "bell")
        }
        guard case let .frame(other) = RTL433Decoder.decode(line: #"{"model":"EV1527-flex","code":9524878}"#) else { return }
        #expect(directory.match(other, radio: "rtl433") == nil)
    }

    @Test func pipelineTurnsABurstIntoOnePressAndCountsStrangers() {
        let directory = DeviceDirectory(devices: [DeviceConfig(id: "bell", name: "Bell", match: RTL433Match(fields: [("code", .integer(0x5A3C91))]))])
        var pipeline = RFPipeline(directory: directory, settings: ButtonTracker.Settings())
        var events: [AgentEvent] = []
        for i in 0..<20 {
            let t = ReceiveTime(monoMicros: Int64(i) * 46_000, wallMicros: 1_000 + Int64(i) * 46_000, clockSynced: true)
            events += pipeline.handle(line: #"{"time" : "1.0", "model" : "EV1527-flex", "code" : 5913745}"#, at: t)
            events += pipeline.handle(line: #"{"model" : "Neighbour", "id" : 77}"#, at: t)
            events += pipeline.handle(line: "garbage{", at: t)
        }
        #expect(events.count == 1)
        #expect(events.first?.type == .doorbellPressed)
        #expect(events.first?.device.id == "bell")
        #expect(events.first?.data["code"]?.stringValue == "5a3c91")
        #expect(pipeline.counters.malformed == 20)
        #expect(pipeline.unknown["id=77"]?.frames == 20)
    }
}
