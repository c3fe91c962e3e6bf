import DoorbellCore
import PropertyBased
import Testing

/// Which mappings hold only clean file pages (ProcessMappings, from the agent's own smaps at
/// idle) and when they are given back (PageReleaseSchedule).
@Suite struct CleanPagesTests {
    static let s: Int64 = 1_000_000

    /// A real /proc/PID/smaps of the release agent idle (28 of its 252 records: the binary,
    /// libc, libcrypto, ld.so, heap, stack, anonymous and guard mappings, the outbox's shared
    /// memory, vvar, vdso), parsed and judged, against the golden listing.
    @Test func theAgentsIdleSmapsParsesAndOnlyReadOnlyFileMappingsWithoutWrittenPagesAreReleasable() throws {
        let text = try Golden.read("agent-idle.smaps")
        let mappings = ProcessMappings.parse(smaps: Array(text.utf8))
        #expect(mappings.count == 28)
        let released = Set(ProcessMappings.releasable(mappings).map(\.start))
        var listing = ""
        for m in mappings {
            let name = m.path.split(separator: "/").last.map(String.init) ?? ""
            listing += "\(String(m.start, radix: 16))-\(String(m.end, radix: 16)) \(m.permissions) \(name) rss=\(m.rssKiB.map(String.init) ?? "-") anon=\(m.anonymousKiB.map(String.init) ?? "-") flags=\(m.vmFlags.joined(separator: ",")) \(released.contains(m.start) ? "RELEASE" : "keep")\n"
        }
        try Golden.check(listing, against: "agent-idle.smaps.golden.txt")
        // What the rule must keep whatever the golden says: the relocated read-only data (anonymous
        // pages in an r--p mapping), everything writable or shared, and the kernel's own.
        for m in mappings where released.contains(m.start) {
            #expect(m.permissions == "r--p" || m.permissions == "r-xp")
            #expect(m.anonymousKiB == 0 && m.path.hasPrefix("/"))
        }
        #expect(mappings.contains { $0.permissions == "r--p" && ($0.anonymousKiB ?? 0) > 0 && !released.contains($0.start) },
                "the fixture holds a relocated (RELRO) mapping, and it is kept")
    }

    @Test func aRecordWithAnUnreadableHeaderOrCounterIsNeverReleasedAndDoesNotLendItsCountersToAnother() {
        let clean = """
        7f0000000000-7f0000002000 r-xp 00000000 fe:00 1 /usr/lib/libx.so
        Rss:                   8 kB
        Private_Dirty:         0 kB
        Shared_Dirty:          0 kB
        Anonymous:             0 kB
        Swap:                  0 kB
        Locked:                0 kB
        VmFlags: rd ex mr mw me
        """
        #expect(ProcessMappings.releasable(ProcessMappings.parse(smaps: Array(clean.utf8))).count == 1)
        for broken in [clean.replacingFirst("Anonymous:             0 kB", with: "Anonymous:             x kB"),
                       clean.replacingFirst("Swap:                  0 kB\n", with: ""),
                       clean.replacingFirst("Locked:                0 kB", with: "Locked:                8 kB"),
                       clean.replacingFirst("rd ex mr", with: "rd ex lo mr"),
                       clean.replacingFirst("r-xp", with: "rwxp"),
                       clean.replacingFirst("r-xp", with: "r-xs"),
                       clean.replacingFirst("/usr/lib/libx.so", with: "/usr/lib/libx.so (deleted)"),
                       clean.replacingFirst("/usr/lib/libx.so", with: "[vdso]"),
                       clean.replacingFirst("7f0000000000-", with: "7f000000000g-")] {
            #expect(ProcessMappings.releasable(ProcessMappings.parse(smaps: Array(broken.utf8))).isEmpty, "\(broken)")
        }
        // A dirty mapping followed by an unreadable header: the second's counters are not the first's.
        let two = clean.replacingFirst("Anonymous:             0 kB", with: "Anonymous:             4 kB")
            + "\n7f00000zz000-7f0000004000 r-xp 00000000 fe:00 1 /usr/lib/liby.so\nAnonymous: 0 kB\n"
        #expect(ProcessMappings.parse(smaps: Array(two.utf8)).count == 1)
        #expect(ProcessMappings.releasable(ProcessMappings.parse(smaps: Array(two.utf8))).isEmpty)
    }

    /// Any smaps listing: a released mapping is private, not writable, a file, and has no page
    /// that is anonymous, swapped, locked or dirty — whatever the order and the other records.
    @Test func whateverTheListingNothingWrittenSharedOrAnonymousIsEverReleased() async {
        let perms = ["r--p", "r-xp", "rw-p", "rwxp", "r--s", "rw-s", "---p"]
        let paths = ["/usr/lib/libc.so.6", "", "[heap]", "[vdso]", "/usr/bin/doorbell-agent (deleted)", "/x y/lib z.so"]
        // One int per record, read as (permissions, path, anonymous, swap, dirty, flags) picks.
        let kinds = [7, 6, 4, 4, 4, 4]
        await propertyCheck(input: Gen.int(in: 0...(kinds.reduce(1, *) - 1)).array(of: 1...12)) { picks in
            let records = picks.map { pick -> (Int, Int, Int, Int, Int, Int) in
                var rest = pick
                let d = kinds.map { k -> Int in defer { rest /= k }; return rest % k }
                return (d[0], d[1], d[2], d[3], d[4], d[5])
            }
            var text = ""
            var base: UInt64 = 0x7f00_0000_0000
            for (p, path, anon, swap, dirty, flags) in records {
                let counts = [anon, swap, dirty]
                text += "\(String(base, radix: 16))-\(String(base + 0x3000, radix: 16)) \(perms[p]) 00000000 fe:00 7 \(paths[path])\n"
                text += "Rss: 12 kB\nPrivate_Dirty: \(counts[2] == 1 ? 4 : 0) kB\nShared_Dirty: 0 kB\n"
                if counts[0] != 3 { text += "Anonymous: \(counts[0] == 1 ? 4 : 0) kB\n" }
                if counts[1] != 3 { text += "Swap: \(counts[1] == 1 ? 8 : 0) kB\n" }
                text += "Locked: 0 kB\nVmFlags: rd \(["ex", "lo", "io", "mr"][flags]) me\n"
                base += 0x10000
            }
            let parsed = ProcessMappings.parse(smaps: Array(text.utf8))
            #expect(parsed.count == records.count)
            for m in ProcessMappings.releasable(parsed) {
                #expect(!m.permissions.contains("w") && m.permissions.hasSuffix("p"))
                #expect(m.path.hasPrefix("/") && !m.path.hasSuffix("(deleted)"))
                #expect(m.anonymousKiB == 0 && m.swapKiB == 0 && m.privateDirtyKiB == 0)
                #expect(!m.vmFlags.contains("lo") && !m.vmFlags.contains("io"))
            }
            // And every mapping that qualifies is released (the rule is not merely timid).
            let expected = records.filter { p, path, anon, swap, dirty, flags in
                // anonymous and swap: 0 and 2 write "0 kB", 1 a count, 3 no line at all.
                [0, 1].contains(p) && [0, 5].contains(path) && [0, 2].contains(anon) && [0, 2].contains(swap) && dirty != 1 && [0, 3].contains(flags)
            }.count
            #expect(ProcessMappings.releasable(parsed).count == expected)
        }
    }

    @Test func theFirstReleaseIsASecondAfterStartThenOnlyAfterABurstOfWorkThatHasBeenQuietForAMinute() {
        var p = PageReleaseSchedule(startedAtMicros: 100 * Self.s)
        func look(_ seconds: Int64, _ work: Int) -> Bool { p.look(nowMicros: seconds * Self.s, work: work) }
        #expect(p.nextLookMicros(nowMicros: 100 * Self.s) == 101 * Self.s)
        let early = p.look(nowMicros: 100 * Self.s + 500_000, work: 0)
        #expect(!early)
        #expect(look(101, 0))
        p.released(nowMicros: 101 * Self.s, work: 0)
        #expect(p.nextLookMicros(nowMicros: 101 * Self.s) == 116 * Self.s)
        // Idle for an hour, a few presses: never again (what the idle loops touch comes back).
        #expect(!look(3_600, 0))
        #expect(!look(3_700, 3))
        #expect(!look(9_000, 3))
        // A drain of 500 events: once it has been quiet for a minute.
        #expect(!look(9_015, 250))
        #expect(!look(9_030, 503))
        #expect(p.nextLookMicros(nowMicros: 9_030 * Self.s) == 9_090 * Self.s)
        #expect(!look(9_089, 503))
        #expect(look(9_090, 503))
        p.released(nowMicros: 9_090 * Self.s, work: 503)
        #expect(!look(20_000, 503))
        #expect(!look(20_100, 600))
        // A reload's new uplink counts from 0 again: the next burst is measured from there.
        #expect(!look(20_200, 3))
        #expect(!look(20_215, 110))
        #expect(look(20_275, 110))
    }

    /// Any history of work: never a release within a minute of work after the first, never
    /// without a burst of work since the last, and the first a second after start whatever happens.
    @Test func noReleaseWhileWorkGoesOnAndNoneWithoutABurst() async {
        await propertyCheck(input: Gen.int(in: 0...400).array(of: 1...80), Gen.int(in: 1...60)) { steps, everySeconds in
            var p = PageReleaseSchedule(startedAtMicros: 0)
            var now: Int64 = 0, work = 0, lastMove: Int64 = 0, atRelease: Int?
            for step in steps {
                now += Int64(everySeconds) * Self.s
                // Half the looks see no new work.
                if step % 2 == 0 { work += step; if step > 0 { lastMove = now } }
                if p.look(nowMicros: now, work: work) {
                    if let atRelease {
                        #expect(now - lastMove >= PageReleaseSchedule.quietMicros)
                        #expect(work - atRelease >= PageReleaseSchedule.burstWork)
                    }
                    atRelease = work
                    p.released(nowMicros: now, work: work)
                }
            }
            #expect(atRelease != nil, "the first release comes a second after start whatever the work")
        }
    }
}

private extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(target) { return String(self[..<i]) + replacement + String(self[index(i, offsetBy: target.count)...]) }
            i = index(after: i)
        }
        return self
    }
}
