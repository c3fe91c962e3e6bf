// The process's own mappings as /proc/self/smaps lists them, and which of them hold only clean
// pages of a file: code and read-only data of the binary and its libraries. Those can be
// unmapped (MADV_DONTNEED) without losing a byte — the pages stay in the page cache and a later
// touch maps them again — which is how the agent gives back what start-up alone ran (#28:
// ≈ 12 of an idle 17 MiB VmRSS were such pages). Hand-written: smaps is a kernel text format
// no library parses. docs/benchmarks.md, "Clean pages given back".
//
// Unmapping a page that is not clean loses data (a relocated page of a library, a private
// copy made by a write), so the rule refuses anything it cannot prove clean: writable or
// shared mappings, any anonymous or swapped page (a private file mapping's written pages are
// anonymous), locked, I/O or PFN mappings, no file path or a deleted file, and a record whose
// counters are missing or unreadable.

public struct ProcessMapping: Sendable, Equatable {
    public var start: UInt64
    public var end: UInt64
    /// `r-xp` and so on: read, write, execute, private (p) or shared (s).
    public var permissions: String
    /// The file, `[heap]`-style name, or empty for an anonymous mapping.
    public var path: String
    /// Kilobytes, as smaps counts them; nil when the record had no such line.
    public var rssKiB: Int?
    public var anonymousKiB: Int?
    public var swapKiB: Int?
    public var lockedKiB: Int?
    public var privateDirtyKiB: Int?
    public var sharedDirtyKiB: Int?
    /// The two-letter flags of the `VmFlags:` line (`rd`, `ex`, `lo`, …).
    public var vmFlags: [String] = []

    public init(start: UInt64, end: UInt64, permissions: String, path: String) {
        self.start = start
        self.end = end
        self.permissions = permissions
        self.path = path
    }

    /// Whether every resident page is a clean copy of the file, so unmapping loses nothing.
    public var holdsOnlyCleanFilePages: Bool {
        let p = Array(permissions.utf8)
        guard p.count == 4, p[0] == UInt8(ascii: "r"), p[1] != UInt8(ascii: "w"), p[3] == UInt8(ascii: "p") else { return false }
        guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { return false }
        guard let anonymousKiB, let swapKiB, let lockedKiB, let privateDirtyKiB, let sharedDirtyKiB,
              anonymousKiB == 0, swapKiB == 0, lockedKiB == 0, privateDirtyKiB == 0, sharedDirtyKiB == 0 else { return false }
        // Locked, I/O, raw PFN, hugetlb and userfaultfd mappings are not ordinary file pages.
        return !vmFlags.contains { ["lo", "io", "pf", "ht", "um", "uw", "wr", "sh"].contains($0) }
    }
}

public enum ProcessMappings {
    /// The records of an smaps text, in order. A line that is neither a header nor `Name: value`
    /// ends the record before it and drops the lines after it up to the next header (an
    /// unreadable header's counters are never lent to the record above).
    public static func parse(smaps bytes: [UInt8]) -> [ProcessMapping] {
        var out: [ProcessMapping] = []
        var current: ProcessMapping?
        var droppingRecord = false
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            if let header = header(line) {
                if let current { out.append(current) }
                current = header
                droppingRecord = false
                continue
            }
            if !isFieldShaped(line) {
                // A header we cannot read: its counters must not land on the record before.
                if let current { out.append(current) }
                current = nil
                droppingRecord = true
                continue
            }
            guard !droppingRecord, var record = current else { continue }
            field(line, into: &record)
            current = record
        }
        if let current { out.append(current) }
        return out
    }

    /// The address ranges that can be unmapped without losing data, in order.
    public static func releasable(_ mappings: [ProcessMapping]) -> [ProcessMapping] {
        mappings.filter { $0.holdsOnlyCleanFilePages && ($0.rssKiB ?? 0) > 0 && $0.end > $0.start }
    }

    // "start-end perms offset dev inode [path]": the address range is lower-case hex.
    private static func header(_ line: ArraySlice<UInt8>) -> ProcessMapping? {
        var fields: [ArraySlice<UInt8>] = []
        var i = line.startIndex
        // Five fields, then the rest (the path may hold spaces).
        while fields.count < 5 {
            while i < line.endIndex, line[i] == 0x20 { i += 1 }
            guard i < line.endIndex else { break }
            let s = i
            while i < line.endIndex, line[i] != 0x20 { i += 1 }
            fields.append(line[s..<i])
        }
        guard fields.count == 5, let dash = fields[0].firstIndex(of: UInt8(ascii: "-")),
              let start = hex(fields[0][..<dash]), let end = hex(fields[0][(dash + 1)...]), start <= end,
              fields[1].count == 4 else { return nil }
        while i < line.endIndex, line[i] == 0x20 { i += 1 }
        return ProcessMapping(start: start, end: end, permissions: String(decoding: fields[1], as: UTF8.self),
                              path: String(decoding: line[i...], as: UTF8.self))
    }

    /// `Name:` with a name of letters and underscores: a counter of the record above. Any other
    /// line is a header, readable or not.
    private static func isFieldShaped(_ line: ArraySlice<UInt8>) -> Bool {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else { return false }
        return line[..<colon].allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
    }

    private static func field(_ line: ArraySlice<UInt8>, into m: inout ProcessMapping) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self)
        let rest = line[(colon + 1)...]
        if name == "VmFlags" {
            m.vmFlags = rest.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
            return
        }
        // An unreadable count is nil, as a missing one: the rule then refuses the mapping.
        let words = rest.split(separator: 0x20)
        let kib = words.count == 2 && words[1].elementsEqual("kB".utf8) ? decimal(words[0]) : nil
        switch name {
        case "Rss": m.rssKiB = kib
        case "Anonymous": m.anonymousKiB = kib
        case "Swap": m.swapKiB = kib
        case "Locked": m.lockedKiB = kib
        case "Private_Dirty": m.privateDirtyKiB = kib
        case "Shared_Dirty": m.sharedDirtyKiB = kib
        default: break
        }
    }

    private static func isHexDigit(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66)
    }

    private static func hex(_ s: ArraySlice<UInt8>) -> UInt64? {
        guard !s.isEmpty, s.count <= 16 else { return nil }
        var v: UInt64 = 0
        for b in s {
            guard isHexDigit(b) else { return nil }
            v = v << 4 | UInt64(b <= 0x39 ? b - 0x30 : b - 0x61 + 10)
        }
        return v
    }

    private static func decimal(_ s: ArraySlice<UInt8>) -> Int? {
        guard !s.isEmpty, s.count <= 18 else { return nil }
        var v = 0
        for b in s {
            guard b >= 0x30, b <= 0x39 else { return nil }
            v = v * 10 + Int(b - 0x30)
        }
        return v
    }
}
