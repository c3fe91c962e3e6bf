import DoorbellCore
import Foundation
import Testing

/// The one reader of recordings (what the sim board's radios and `doorbell-agent replay` play):
/// real files of each kind, summarized against a golden file.
@Suite struct RecordingTests {
    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: Golden.fixtures + "/" + name)))
    }

    static func summary(_ name: String) throws -> String {
        let r = try Recording.read(fileName: name, bytes: try bytes(name))
        var lines = ["\(name): \(r.kind.rawValue), \(r.inputs.count) inputs, \(r.durationMicros) µs"]
        for input in r.inputs.prefix(4) + (r.inputs.count > 4 ? [r.inputs[r.inputs.count - 1]] : []) {
            switch input {
            case let .rtl433(line, at, unix): lines.append("  rtl433 @\(at) unix=\(unix.map(String.init) ?? "-") \(line.prefix(40))")
            case let .edge(high, at): lines.append("  edge \(high ? "high" : "low") @\(at)")
            case let .quiet(at): lines.append("  quiet @\(at)")
            case let .ble(reports, at, unix): lines.append("  ble @\(at) unix=\(unix) \(reports.map(\.addressString).joined(separator: ","))")
            }
        }
        return lines.joined(separator: "\n")
    }

    @Test func eachKindReadsToItsTimedInputs() throws {
        let text = try ["rtl433-lines.jsonl", "front-door.ook", "garden.btsnoop"].map(Self.summary).joined(separator: "\n") + "\n"
        try Golden.check(text, against: "recordings.golden.txt")
    }

    @Test func aBrokenCaptureIsAnErrorThatNamesTheFile() throws {
        let broken = Array(try Self.bytes("garden.btsnoop").prefix(30))
        #expect(throws: Recording.Error.self) { try Recording.read(fileName: "cut.btsnoop", bytes: broken) }
        do throws(Recording.Error) {
            _ = try Recording.read(fileName: "cut.btsnoop", bytes: broken)
        } catch {
            #expect(error.description.hasPrefix("cut.btsnoop: "), "\(error)")
        }
    }

    @Test func rtl433LinesKeepTheirSpacingAndTimeNeverGoesBack() throws {
        let text = """
        {"time" : "@1.000000s", "model" : "EV1527", "code" : 1}
        {"time" : "@1.250000s", "model" : "EV1527", "code" : 1}
        {"time" : "@1.100000s", "model" : "EV1527", "code" : 1}
        not json
        """
        let r = try Recording.read(fileName: "press.jsonl", bytes: Array(text.utf8))
        let times = r.inputs.compactMap { if case let .rtl433(_, at, _) = $0 { at } else { nil } }
        #expect(times == [0, 250_000, 250_000, 250_000])
        #expect(r.durationMicros == 250_000)
    }

    @Test func recordingsFollowEachOtherAMinuteApart() throws {
        let ook = try Recording.read(fileName: "front-door.ook", bytes: try Self.bytes("front-door.ook"))
        var timeline = RecordingTimeline(start: 5_000_000)
        #expect(timeline.place(ook) == 5_000_000)
        #expect(timeline.place(ook) == 5_000_000 + ook.durationMicros + 60_000_000)
        #expect(ook.inputs.last.map { if case .quiet = $0 { true } else { false } } == true, "a timeline ends quiet, so its last pulse completes")
    }
}
