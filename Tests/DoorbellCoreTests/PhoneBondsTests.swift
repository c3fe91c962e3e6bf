import DoorbellCore
import Testing

/// The bonded phones: recognised behind a changing private address, bounded, kept as JSON.
@Suite struct PhoneBondsTests {
    /// A stand-in for SMP's `ah` (any keyed 24-bit hash shows the resolution rule).
    static func ah(_ irk: [UInt8], _ prand: [UInt8]) -> [UInt8] {
        let d = SHA256.hash(irk + prand)
        return Array(d.prefix(3))
    }
    static let irk: [UInt8] = Array(1...16)
    static func bond(_ last: UInt8, name: String = "Anna's iPhone", at: Int64 = 1_000_000) -> PhoneBond {
        PhoneBond(address: [0xC4, 0x11, 0x22, 0x33, 0x44, last], addressIsRandom: true, irk: irk.map { $0 ^ last }, ltk: Array(repeating: last, count: 16),
                  name: name, bondedAtMicros: at)
    }
    /// A resolvable private address for `irk`: prand with top bits 01, then ah(irk, prand).
    static func rpa(_ irk: [UInt8], prand: [UInt8] = [0x4A, 0xBC, 0xDE]) -> [UInt8] { prand + ah(irk, prand) }

    @Test func nameAndLastSeenChangeOnlyABondThatIsStillThere() {
        var bonds = PhoneBonds()
        bonds.add(Self.bond(1))
        let id = Self.bond(1).id
        let same = bonds.name(id, "Anna's iPhone"), renamedTo = bonds.name(id, "Anna’s iPhone 15")
        #expect(same == nil, "unchanged")
        #expect(renamedTo?.name == "Anna’s iPhone 15")
        let seen = bonds.seen(id, at: 5), stranger = bonds.seen("00:00:00:00:00:00", at: 5)
        #expect(seen?.lastSeenMicros == 5 && stranger == nil)
        var renamed = Self.bond(1, name: "Other")
        let replaced = bonds.replace(renamed)
        #expect(replaced && bonds.bonds.map(\.name) == ["Other"])
        _ = bonds.forget(id)
        renamed.name = "Late"
        let late = bonds.replace(renamed)
        #expect(!late && bonds.bonds.isEmpty, "a forgotten phone stays forgotten")
    }

    @Test func aPhoneIsKnownBehindAnyPrivateAddressItsIRKMade() {
        var bonds = PhoneBonds()
        bonds.add(Self.bond(1))
        bonds.add(Self.bond(2, name: "Ben's iPhone"))
        let ben = Self.bond(2)
        #expect(bonds.resolve(address: Self.rpa(ben.irk), isRandom: true, ah: Self.ah)?.name == "Ben's iPhone")
        #expect(bonds.resolve(address: Self.rpa(ben.irk, prand: [0x7F, 0, 1]), isRandom: true, ah: Self.ah)?.name == "Ben's iPhone")
        #expect(bonds.resolve(address: ben.address, isRandom: true, ah: Self.ah)?.name == "Ben's iPhone", "its identity address")
        #expect(bonds.resolve(address: ben.address, isRandom: false, ah: Self.ah) == nil, "a public address is another device")
        var wrong = Self.rpa(ben.irk)
        wrong[5] ^= 1
        #expect(bonds.resolve(address: wrong, isRandom: true, ah: Self.ah) == nil)
        // Top bits 11 (static) or 00 (non-resolvable) are not resolvable private addresses.
        #expect(bonds.resolve(address: Self.rpa(ben.irk, prand: [0xCA, 0xBC, 0xDE]), isRandom: true, ah: Self.ah) == nil)
        #expect(bonds.resolve(address: [1, 2, 3], isRandom: true, ah: Self.ah) == nil)
    }

    @Test func bondsAreBoundedAndTheLongestUnseenGoesFirst() {
        var bonds = PhoneBonds()
        for i in 0..<PhoneBonds.maximum { bonds.add(Self.bond(UInt8(i), at: Int64(i + 1) * 1_000_000)) }
        bonds.seen(Self.bond(0).id, at: 99_000_000)
        let evicted = bonds.add(Self.bond(200, at: 100_000_000))
        #expect(evicted?.id == Self.bond(1).id, "phone 0 was seen lately; phone 1 is the longest unseen")
        #expect(bonds.bonds.count == PhoneBonds.maximum)
        #expect(bonds.add(Self.bond(200, name: "renamed", at: 101_000_000)) == nil, "the same phone again replaces its bond")
        #expect(bonds.forget("c4:11:22:33:44:c8")?.name == "renamed")
        #expect(bonds.forget("Anna's iPhone") != nil)
        #expect(bonds.forget("nobody") == nil)
    }

    @Test func theFileReadsBackAndADamagedOneSaysWhatIsWrong() throws {
        var bonds = PhoneBonds()
        var b = Self.bond(7)
        b.lastSeenMicros = 5_000_000
        bonds.add(b)
        let text = JSONWriter.string(bonds.json)
        #expect(text.contains("\"address\":\"C4:11:22:33:44:07\""))
        #expect(try PhoneBonds(json: try JSONReader.parse(text)) == bonds)
        for (bad, says) in [(#"{"phones":[]}"#, "not a bonds file"),
                            (#"{"version":1,"phones":[{"address":"C4:11:22:33:44","irk":"00","ltk":"00","bonded_at":"x"}]}"#, "not six hex octets"),
                            (#"{"version":1,"phones":[{"address":"C4:11:22:33:44:07","irk":"00","ltk":"00","bonded_at":"x"}]}"#, "32 hex digits"),
                            (#"{"version":1,"phones":[{"address":"C4:11:22:33:44:07"}]}"#, "\"irk\" is missing")] {
            #expect(throws: PhoneBondsError.self) { try PhoneBonds(json: try JSONReader.parse(bad)) }
            do { _ = try PhoneBonds(json: try JSONReader.parse(bad)) } catch { #expect("\(error)".contains(says), "\(error)") }
        }
    }
}
