import DoorbellCore
import PropertyBased
import Testing

/// Replay streams a capture through BTSnoopReader: the records must be those of the whole file
/// however its bytes are cut into chunks, and what the reader holds must stay one record plus one
/// chunk, whatever the capture's length (the peak-RSS rule of `doorbell-agent replay`).
@Suite struct BTSnoopReaderTests {
    /// A capture of `count` received advertising reports (sizes vary) and a sent command between.
    static func capture(_ count: Int) -> (file: [UInt8], records: [BTSnoopRecord]) {
        var records: [BTSnoopRecord] = []
        for i in 0..<count {
            let data: [UInt8] = [0x02, 0x01, 0x06, UInt8(2 + i % 20), 0xFF] + [UInt8](repeating: UInt8(i & 0xFF), count: 1 + i % 20)
            var params: [UInt8] = [0x02, 0x01, 0x03, 0x01, UInt8(i & 0xFF), 0x44, 0x33, 0x22, 0x11, 0xC0, UInt8(data.count)]
            params += data
            params.append(0xC4)
            records.append(BTSnoopRecord(timeMicros: 1_795_000_000_000_000 + Int64(i) * 1_000, received: true, packet: [0x04, 0x3E, UInt8(params.count)] + params))
            if i % 7 == 0 { records.append(BTSnoopRecord(timeMicros: 1_795_000_000_000_000 + Int64(i) * 1_000, received: false, packet: [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00])) }
        }
        var file = BTSnoop.header
        for r in records { file += BTSnoop.record(r) }
        return (file, records)
    }

    @Test func chunksOfAnySizeGiveTheRecordsOfTheWholeFileHoldingOneRecordAndOneChunk() async {
        let (file, records) = Self.capture(300)
        let largestRecord = records.map { 24 + $0.packet.count }.max() ?? 0
        await propertyCheck(input: Gen.int(in: 1...700).array(of: 1...40)) { sizes in
            var reader = BTSnoopReader()
            var got: [BTSnoopRecord] = []
            var at = 0, turn = 0, held = 0
            while at < file.count {
                let size = sizes[turn % sizes.count]
                turn += 1
                let end = min(at + size, file.count)
                reader.feed(file[at..<end])
                at = end
                do {
                    while let r = try reader.next() { got.append(r) }
                } catch {
                    Issue.record("a whole capture refused: \(error)")
                    return
                }
                held = max(held, reader.bufferedBytes)
            }
            #expect(throws: Never.self) { try reader.finish() }
            #expect(got == records)
            #expect(held < largestRecord + (sizes.max() ?? 0), "the reader held \(held) bytes")
        }
    }

    @Test func theWholeFileReadsAsItsRecordsAndGoldenRecordingsStayAsTheyWere() throws {
        let (file, records) = Self.capture(50)
        #expect(try BTSnoop.read(file) == records)
    }

    @Test func aCaptureCutInsideARecordOrTheHeaderIsAnErrorThatSaysWhere() {
        let (file, _) = Self.capture(3)
        func message(_ bytes: [UInt8]) -> String? {
            do { _ = try BTSnoop.read(bytes); return nil } catch { return error.description }
        }
        // Records: 21-byte advert, 6-byte command, 22- and 23-byte adverts.
        #expect(message(Array(file.dropLast(3))) == "record at byte \(16 + 45 + 30 + 46) claims 23 bytes, more than the file holds")
        #expect(message(Array(file.prefix(16 + 30))) == "record at byte 16 claims 21 bytes, more than the file holds")
        #expect(message(Array(file.prefix(16 + 10))) == "record at byte 16 is cut off (the capture was interrupted?)")
        #expect(message(Array(file.prefix(12))) == "not a btsnoop file (no \"btsnoop\" header)")
        #expect(message(Array("btsnooq".utf8) + [0] + Array(file.dropFirst(8))) == "not a btsnoop file (no \"btsnoop\" header)")
        var monitor = file
        monitor[14] = 0x07 // datalink 2001
        monitor[15] = 0xD1
        #expect(message(monitor)?.hasPrefix("btsnoop datalink 2001 is not supported") == true)
    }

    /// The capture's clock is outside input: a record far before or after the first one is
    /// clamped, never an arithmetic trap.
    @Test func recordsFromAnyTimeReplayWithoutTrapping() throws {
        var (file, records) = Self.capture(2)
        // The first record near the largest time, the others near the smallest.
        var at = 16
        for (k, r) in records.enumerated() {
            for i in 0..<8 { file[at + 16 + i] = k == 0 ? 0x7F : 0x81 }
            at += 24 + r.packet.count
        }
        var reader = BLECaptureReader(fileName: "far.btsnoop")
        reader.feed(file[...])
        var offsets: [Int64] = []
        while let e = try reader.next() { offsets.append(e.atMicros) }
        try reader.finish()
        #expect(offsets.count == 2)
        #expect(offsets.first == 0)
        #expect((offsets.last ?? 0) < 0)
    }
}
