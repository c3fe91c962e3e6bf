import DoorbellCore
import PropertyBased
import Testing

/// ANCS: the fixtures (bytes laid out from Apple's specification by Tests/helpers/ancs_reference.py,
/// which also checks the golden outputs against Bumble's decoder) through the Swift decoders,
/// the Control Point encoders against the same script's bytes, and the Data Source reassembly
/// under any fragmentation and any garbage.
struct ANCSTests {
    // MARK: fixtures

    static func hexLines(_ name: String) throws -> [(comment: String, data: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var comment = ""
        for line in try Golden.read(name).split(separator: "\n") {
            if line.hasPrefix("#") { comment = String(line.dropFirst(2)); continue }
            out.append((comment, hexBytes(line)))
        }
        return out
    }

    struct DataSourceCase {
        var comment: String
        var command: ANCSCommand
        var fragments: [[UInt8]]
    }

    /// `N uid attribute[:max]…` or `A app-id attribute…`, then `> hex` per GATT notification.
    static func dataSourceCases() throws -> [DataSourceCase] {
        var cases: [DataSourceCase] = []
        var comment = ""
        for line in try Golden.read("ancs-data-source.hex").split(separator: "\n") {
            if line.hasPrefix("# ") { comment = String(line.dropFirst(2)) }
            else if line.hasPrefix("> ") { cases[cases.count - 1].fragments.append(hexBytes(line.dropFirst(2))) }
            else if line.hasPrefix("command ") {
                let words = line.split(separator: " ").dropFirst()
                try #require(words.count >= 2, "bad command line \(line)")
                let (kind, subject) = (words[words.startIndex], words[words.startIndex + 1])
                let names = words.dropFirst(2)
                let command: ANCSCommand
                if kind == "A" {
                    command = .getAppAttributes(appIdentifier: String(subject), attributes: names.map { _ in .displayName })
                } else {
                    let uid = try #require(UInt32(subject))
                    command = .getNotificationAttributes(uid: uid, attributes: try names.map { try attribute($0) })
                }
                cases.append(DataSourceCase(comment: comment, command: command, fragments: []))
            }
        }
        return cases
    }

    static func attribute(_ word: Substring) throws -> ANCSNotificationAttribute {
        let parts = word.split(separator: ":")
        let max = parts.count > 1 ? UInt16(parts[1]) ?? 0 : 0
        switch parts[0] {
        case "app-identifier": return .appIdentifier
        case "title": return .title(maxLength: max)
        case "subtitle": return .subtitle(maxLength: max)
        case "message": return .message(maxLength: max)
        case "message-size": return .messageSize
        case "date": return .date
        case "positive-action-label": return .positiveActionLabel
        case "negative-action-label": return .negativeActionLabel
        default: throw ANCSError.appIdentifierContainsNul // unreachable for the checked-in fixture
        }
    }

    static func describe(_ n: ANCSNotification) -> String {
        "\(n.event) flags=\(n.flags) category=\(n.category) count=\(n.categoryCount) uid=\(n.uid)"
    }

    static func describe(_ outcome: ANCSDataSourceOutcome?) -> String {
        switch outcome {
        case nil: return "nothing"
        case let .abandoned(e)?: return "abandoned: \(e)"
        case let .appAttributes(a)?: return "app \(a.appIdentifier) display-name=\(a.displayName.map { "\"\($0)\"" } ?? "-")"
        case let .notificationAttributes(a)?:
            func q(_ s: String?) -> String { s.map { "\"\($0)\"" } ?? "-" }
            return "notification uid=\(a.uid) app=\(q(a.appIdentifier)) title=\(q(a.title)) subtitle=\(q(a.subtitle)) "
                + "message=\(q(a.message)) size=\(a.messageSize.map(String.init) ?? "-") date=\(a.date?.description ?? "-") "
                + "positive=\(q(a.positiveActionLabel)) negative=\(q(a.negativeActionLabel))"
        }
    }

    // MARK: Notification Source

    @Test func everyNotificationSourceFixtureMatchesTheGoldenOutput() throws {
        var source = ANCSNotificationSource()
        var lines: [String] = []
        for (comment, data) in try Self.hexLines("ancs-notification-source.hex") {
            lines.append("# " + comment)
            switch source.receive(data) {
            case let .success(n):
                lines.append(Self.describe(n))
                #expect(n.bytes == data, "\(comment): encodes back to its bytes")
            case let .failure(e): lines.append("error: \(e)")
            }
        }
        let c = source.counters
        lines.append("counted received=\(c.received) wrong-length=\(c.wrongLength) unknown-events=\(c.unknownEvents) unknown-categories=\(c.unknownCategories) reserved-flags=\(c.reservedFlags) last=\(c.lastUnknown ?? "-")")
        try Golden.check(lines.joined(separator: "\n") + "\n", against: "ancs-notification-source.golden.txt")
        #expect(c.wrongLength == 2 && c.unknownCategories == 1 && c.unknownEvents == 1 && c.reservedFlags == 1)
    }

    @Test func anyEightBytesParseAndEncodeBack() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...12)) { ints in
            let bytes = ints.map { UInt8($0) }
            switch Result(catching: { () throws(ANCSError) in try ANCSNotification(parsing: bytes) }) {
            case let .success(n): #expect(bytes.count == 8 && n.bytes == bytes)
            case let .failure(e): #expect(bytes.count != 8 && e == .notificationSourceLength(bytes.count))
            }
        }
    }

    @Test func categoriesAreNamedForTheConfig() {
        for raw in UInt8(0)...11 {
            let c = ANCSCategory(rawValue: raw)
            #expect(ANCSCategory(name: c.description) == c && c.rawValue == raw)
        }
        #expect(ANCSCategory(rawValue: 12) == .unknown(12) && ANCSCategory(name: "unknown-category-12") == nil)
    }

    // MARK: Control Point

    @Test func controlPointCommandsEncodeAsTheReferenceBytes() throws {
        let commands: [ANCSCommand] = [
            .getNotificationAttributes(uid: 7, attributes: [.appIdentifier, .title(maxLength: 32), .message(maxLength: 64), .date, .positiveActionLabel, .negativeActionLabel]),
            .getNotificationAttributes(uid: 0x0102_0304, attributes: [.appIdentifier, .title(maxLength: 64), .subtitle(maxLength: 0x0123), .message(maxLength: 256), .messageSize, .date, .positiveActionLabel, .negativeActionLabel]),
            .getAppAttributes(appIdentifier: "com.example.doorbell", attributes: [.displayName]),
            .performNotificationAction(uid: 7, action: .positive),
            .performNotificationAction(uid: 0xFFFF_FFFE, action: .negative),
        ]
        let reference = try Self.hexLines("ancs-control-point.hex")
        try #require(reference.count == commands.count)
        for (command, (comment, bytes)) in zip(commands, reference) {
            #expect(try command.encoded() == bytes, "\(comment)")
        }
        #expect(throws: ANCSError.appIdentifierContainsNul) { try ANCSCommand.getAppAttributes(appIdentifier: "a\u{0}b", attributes: [.displayName]).encoded() }
    }

    @Test func controlPointErrorsSayWhatTheyMeanAndWhatToDo() {
        #expect(ANCSControlPointError.allCases.map(\.rawValue) == [0xA0, 0xA1, 0xA2, 0xA3])
        for e in ANCSControlPointError.allCases {
            #expect(ANCSControlPointError(attErrorCode: e.rawValue) == e)
            let hex = "0x" + String(e.rawValue, radix: 16, uppercase: true)
            #expect(e.description.hasPrefix("ANCS \(hex) "), "\(e.description)")
        }
        #expect(ANCSControlPointError.invalidParameter.description.contains("removed"))
        #expect(ANCSControlPointError(attErrorCode: 0x0E) == nil, "a plain ATT error is not an ANCS one")
    }

    // MARK: Data Source

    /// Feeds a case's fragments 1 ms apart and gives the clock 10 s at the end.
    static func run(_ c: DataSourceCase, fragments: [[UInt8]]? = nil, into assembler: inout ANCSDataSourceAssembler) throws -> [ANCSDataSourceOutcome] {
        try assembler.sent(c.command, at: 0)
        var outcomes: [ANCSDataSourceOutcome] = []
        var t: Int64 = 0
        for f in fragments ?? c.fragments {
            t += 1_000
            if let o = assembler.receive(f, at: t) { outcomes.append(o) }
        }
        if let o = assembler.tick(at: t + 10_000_000) { outcomes.append(o) }
        return outcomes
    }

    @Test func everyDataSourceFixtureMatchesTheGoldenOutput() throws {
        var assembler = ANCSDataSourceAssembler()
        var lines: [String] = []
        for c in try Self.dataSourceCases() {
            lines.append("# " + c.comment)
            let before = assembler.counters
            let outcomes = try Self.run(c, into: &assembler)
            #expect(outcomes.count == 1, "\(c.comment): exactly one outcome")
            lines += outcomes.map { Self.describe($0) }
            let a = assembler.counters
            let delta = [("oversized", a.oversized - before.oversized), ("unknown-attribute-ids", a.unknownAttributeIDs - before.unknownAttributeIDs),
                         ("unrequested", a.unrequestedAttributes - before.unrequestedAttributes), ("unexpected-data", a.unexpectedData - before.unexpectedData),
                         ("unexpected-command", a.unexpectedCommand - before.unexpectedCommand), ("bad-dates", a.badDates - before.badDates),
                         ("truncated", a.truncated - before.truncated), ("timeouts", a.timeouts - before.timeouts)].filter { $0.1 != 0 }
            if !delta.isEmpty { lines.append("counted " + delta.map { "\($0.0)=\($0.1)" }.joined(separator: " ") + " last=\(a.lastProblem ?? "-")") }
        }
        try Golden.check(lines.joined(separator: "\n") + "\n", against: "ancs-data-source.golden.txt")
        #expect(assembler.counters.responses == 9 && assembler.counters.timeouts == 1)
    }

    @Test func anyFragmentationReassemblesToTheSameResponse() async throws {
        let cases = try Self.dataSourceCases()
        let expected = try cases.map { c -> [ANCSDataSourceOutcome] in
            var a = ANCSDataSourceAssembler()
            return try Self.run(c, into: &a)
        }
        // The whole-notification runs are pinned by the golden file; each gave exactly one outcome.
        #expect(expected.allSatisfy { $0.count == 1 })
        await propertyCheck(input: Gen.int(in: 0..<cases.count), Gen.int(in: 1...40).array(of: 1...60)) { index, cuts in
            let c = cases[index]
            let stream = c.fragments.flatMap { $0 }
            // The late answer for another UID only works as its own notification; keep its cut.
            let keepFirst = c.comment.hasPrefix("a late answer") ? c.fragments[0].count : 0
            var fragments: [[UInt8]] = keepFirst > 0 ? [Array(stream[..<keepFirst])] : []
            var i = keepFirst
            var k = 0
            while i < stream.count {
                let n = min(cuts[k % cuts.count], stream.count - i)
                fragments.append(Array(stream[i..<i + n]))
                i += n
                k += 1
            }
            var a = ANCSDataSourceAssembler()
            let got = try? Self.run(c, fragments: fragments, into: &a)
            #expect(got == expected[index], "\(c.comment) cut \(cuts)")
        }
    }

    @Test func garbageNeverCrashesAndNeverHoldsMoreThanTheBound() async throws {
        var settings = ANCSDataSourceAssembler.Settings()
        settings.maxResponseBytes = 512
        let settingsUsed = settings
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...64).array(of: 1...40), Gen.int(in: 0...2)) { fragments, which in
            var a = ANCSDataSourceAssembler(settings: settingsUsed)
            let commands: [ANCSCommand] = [
                .getNotificationAttributes(uid: 0, attributes: [.appIdentifier, .title(maxLength: 100), .message(maxLength: 300)]),
                .getAppAttributes(appIdentifier: "", attributes: [.displayName]),
                .getNotificationAttributes(uid: 0x0100_0000, attributes: []),
            ]
            try? a.sent(commands[which], at: 0)
            var t: Int64 = 0
            for f in fragments {
                t += 100_000
                let outcome = a.receive(f.map { UInt8($0) }, at: t)
                #expect(a.heldBytes <= settingsUsed.maxResponseBytes)
                if outcome != nil, a.outstanding == nil { try? a.sent(commands[which], at: t) }
            }
            _ = a.linkDropped()
            #expect(a.outstanding == nil && a.heldBytes == 0)
        }
    }

    @Test func aResponseLargerThanTheLimitIsAbandonedNotHeld() throws {
        var settings = ANCSDataSourceAssembler.Settings()
        settings.maxResponseBytes = 100
        var a = ANCSDataSourceAssembler(settings: settings)
        let command = ANCSCommand.getNotificationAttributes(uid: 1, attributes: [.message(maxLength: 1_000)])
        try a.sent(command, at: 0)
        // The length says 60,000: the bytes are skipped or kept to the cap, and the limit ends it.
        var outcome: ANCSDataSourceOutcome?
        outcome = a.receive([0, 1, 0, 0, 0, 3, 0x60, 0xEA], at: 1)
        for t in 2..<20 where outcome == nil {
            outcome = a.receive([UInt8](repeating: 0x41, count: 20), at: Int64(t))
        }
        #expect(outcome == .abandoned(.responseTooLarge(command, limit: 100)))
        #expect(a.heldBytes == 0 && a.outstanding == nil && a.counters.oversized == 2)
    }

    @Test func aLinkDropInTheMiddleAbandonsTheCommandAndTheNextOneStartsClean() throws {
        var a = ANCSDataSourceAssembler()
        let cases = try Self.dataSourceCases()
        let call = cases[0]
        try a.sent(call.command, at: 0)
        #expect(a.receive(call.fragments[0], at: 1_000) == nil)
        #expect(throws: ANCSError.commandOutstanding(call.command)) { try a.sent(call.command, at: 2_000) }
        #expect(a.linkDropped() == .abandoned(.linkDropped(call.command, receivedBytes: 20)))
        #expect(a.counters.truncated == 1 && a.counters.linkDrops == 1 && a.heldBytes == 0)
        // After reconnecting, the rest of the old response (if the phone still sends it) is not
        // taken for the new one; the whole new response is.
        #expect(a.receive(call.fragments[1], at: 3_000) == nil)
        #expect(a.counters.unexpectedData == 1)
        var again = ANCSDataSourceAssembler()
        let whole = try Self.run(call, into: &again)
        #expect(try Self.run(call, into: &a) == whole)
        #expect(throws: ANCSError.noDataSourceResponse(.performNotificationAction(uid: 7, action: .negative))) {
            try a.sent(.performNotificationAction(uid: 7, action: .negative), at: 0)
        }
    }

    @Test func aStrayNotificationThatBeganLikeOurHeaderDoesNotCostTheRealResponse() throws {
        let call = try Self.dataSourceCases()[0]
        var clean = ANCSDataSourceAssembler()
        let whole = try Self.run(call, into: &clean)
        var a = ANCSDataSourceAssembler()
        try a.sent(call.command, at: 0)
        // The command byte and the UID's first octet, then nothing more of it.
        #expect(a.receive(call.fragments[0].prefix(2), at: 1_000) == nil)
        var outcomes: [ANCSDataSourceOutcome] = []
        for f in call.fragments { if let o = a.receive(f, at: 2_000) { outcomes.append(o) } }
        #expect(outcomes == whole, "the real response, read whole")
        #expect(a.counters.unexpectedData == 1)
    }

    @Test func theTimeoutCountsFromTheLastByteOfTheResponse() throws {
        var a = ANCSDataSourceAssembler()
        let call = try Self.dataSourceCases()[0]
        try a.sent(call.command, at: 0)
        #expect(a.deadline == 5_000_000)
        _ = a.receive(call.fragments[0], at: 4_000_000)
        #expect(a.tick(at: 8_999_999) == nil && a.deadline == 9_000_000)
        #expect(a.tick(at: 9_000_000) == .abandoned(.timedOut(call.command, receivedBytes: 20)))
        #expect(a.counters.timeouts == 1 && a.counters.truncated == 1)
    }

    @Test func datesParseOnlyInTheSpecifiedForm() {
        #expect(ANCSDate(text: "20261126T154512")?.description == "2026-11-26T15:45:12")
        for bad in ["2026112T154512", "20261326T154512", "20261126 154512", "20261126T246000", "2026112xT154512", ""] {
            #expect(ANCSDate(text: bad) == nil, "\(bad)")
        }
    }
}
