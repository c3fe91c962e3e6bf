// The phones bonded to the base station (ANCS needs an encrypted, bonded link): each phone's
// identity address, its IRK (to recognise it behind the resolvable private address it changes
// every few minutes) and the LTK both sides re-encrypt with, so a returning phone needs no new
// pairing. A value: the runtime's `BondStore` keeps it in the state directory (0600, written
// durably) as the JSON below. Addresses are written most significant octet first, as people
// and BlueZ write them ("4C:3A:…"); keys as hex in the order they travel on the air (LSO first).
//
// Beside the keys, what the base station must remember about the phone's notifications across
// link drops and restarts (small and bounded, written only when it changes): the notifications
// the phone announced live whose attributes were never read (reported when a later read
// completes, even when the phone then lists them as pre-existing), and the references of the
// pushes already reported as displayed (one `push.displayed` per push and phone, ever).

public struct PhoneBond: Sendable, Equatable {
    /// The identity address (public or static random), most significant octet first.
    public var address: [UInt8]
    public var addressIsRandom: Bool
    public var irk: [UInt8]
    public var ltk: [UInt8]
    public var name: String
    public var bondedAtMicros: Int64
    public var lastSeenMicros: Int64?
    /// Notifications announced live and never read, oldest first (at most `maximumUnfinished`).
    public var unfinished: [Unfinished] = []
    /// References of the pushes reported as displayed, oldest first (at most `maximumReceipts`).
    public var receipts: [String] = []

    /// A notification the phone announced live (not pre-existing) whose read the link cut.
    public struct Unfinished: Sendable, Equatable {
        public var uid: UInt32
        /// The ANCS CategoryID: a UID the phone reuses for another notification is not taken for it.
        public var category: Int
        public var announcedAtMicros: Int64
        public init(uid: UInt32, category: Int, announcedAtMicros: Int64) {
            self.uid = uid
            self.category = category
            self.announcedAtMicros = announcedAtMicros
        }
    }

    /// Bounds of the two memories: a few link drops' worth of notifications, and far more pushes
    /// than a phone keeps on its lock screen.
    public static let maximumUnfinished = 32
    public static let maximumReceipts = 64
    /// An unfinished notification older than this is forgotten (the phone has long removed it, and
    /// its UID may name another one).
    public static let unfinishedLifetimeMicros: Int64 = 86_400_000_000

    public init(address: [UInt8], addressIsRandom: Bool, irk: [UInt8], ltk: [UInt8], name: String, bondedAtMicros: Int64, lastSeenMicros: Int64? = nil) {
        self.address = address
        self.addressIsRandom = addressIsRandom
        self.irk = irk
        self.ltk = ltk
        self.name = name
        self.bondedAtMicros = bondedAtMicros
        self.lastSeenMicros = lastSeenMicros
    }

    /// Remembers notifications whose read was cut, within the bounds; false when nothing changed.
    public mutating func remember(unfinished new: [Unfinished], at now: Int64) -> Bool {
        let before = unfinished
        unfinished.removeAll { old in new.contains { $0.uid == old.uid } || now - old.announcedAtMicros >= Self.unfinishedLifetimeMicros }
        unfinished += new
        if unfinished.count > Self.maximumUnfinished { unfinished.removeFirst(unfinished.count - Self.maximumUnfinished) }
        return unfinished != before
    }

    /// The unfinished notification with this UID and category, if remembered.
    public func isUnfinished(uid: UInt32, category: Int) -> Bool { unfinished.contains { $0.uid == uid && $0.category == category } }

    /// Its read completed (or it went): forgotten; false when it was not remembered.
    public mutating func finished(uid: UInt32) -> Bool {
        let count = unfinished.count
        unfinished.removeAll { $0.uid == uid }
        return unfinished.count != count
    }

    /// A push reported as displayed; false when it already was.
    public mutating func receiptReported(_ reference: String) -> Bool {
        guard !receipts.contains(reference) else { return false }
        receipts.append(reference)
        if receipts.count > Self.maximumReceipts { receipts.removeFirst(receipts.count - Self.maximumReceipts) }
        return true
    }

    /// "4C:3A:0B:11:22:33" — the phone's id in events, status and `agentctl forget`.
    public var id: String { Hex.encode(address, uppercase: true, separator: UInt8(ascii: ":")) }
}

public struct PhoneBondsError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

public struct PhoneBonds: Sendable, Equatable {
    public private(set) var bonds: [PhoneBond] = []
    /// A base station serves a household: bounded, oldest unseen bond goes first.
    public static let maximum = 16

    public init(_ bonds: [PhoneBond] = []) { self.bonds = Array(bonds.suffix(Self.maximum)) }

    /// Adds or replaces (same identity address) a bond; returns the bond evicted to make room.
    @discardableResult
    public mutating func add(_ bond: PhoneBond) -> PhoneBond? {
        bonds.removeAll { $0.address == bond.address }
        bonds.append(bond)
        guard bonds.count > Self.maximum else { return nil }
        let oldest = bonds.indices.min { (bonds[$0].lastSeenMicros ?? bonds[$0].bondedAtMicros) < (bonds[$1].lastSeenMicros ?? bonds[$1].bondedAtMicros) } ?? 0
        return bonds.remove(at: oldest)
    }

    /// Forgets the phone with this id ("4C:3A:…", case-insensitive) or name; what was removed.
    public mutating func forget(_ idOrName: String) -> PhoneBond? {
        guard let i = bonds.firstIndex(where: { $0.id.lowercased() == idOrName.lowercased() || $0.name == idOrName }) else { return nil }
        return bonds.remove(at: i)
    }

    /// The phone was connected until `now`; the bond as it is now.
    @discardableResult
    public mutating func seen(_ id: String, at now: Int64) -> PhoneBond? {
        guard let i = bonds.firstIndex(where: { $0.id == id }) else { return nil }
        bonds[i].lastSeenMicros = now
        return bonds[i]
    }

    /// Changes the bond with this id in place; false when it is gone or `change` says nothing changed.
    public mutating func update(_ id: String, _ change: (inout PhoneBond) -> Bool) -> Bool {
        guard let i = bonds.firstIndex(where: { $0.id == id }) else { return false }
        return change(&bonds[i])
    }

    /// The phone's Device Name; the bond when the name changed.
    public mutating func name(_ id: String, _ name: String) -> PhoneBond? {
        guard let i = bonds.firstIndex(where: { $0.id == id }), bonds[i].name != name else { return nil }
        bonds[i].name = name
        return bonds[i]
    }

    /// Replaces the stored bond with the same identity; false (nothing added) when it is gone, so a
    /// late update cannot bring back a phone that `forget` removed.
    @discardableResult
    public mutating func replace(_ bond: PhoneBond) -> Bool {
        guard let i = bonds.firstIndex(where: { $0.address == bond.address }) else { return false }
        bonds[i] = bond
        return true
    }

    /// The bond a connecting address belongs to: its identity address itself, or a resolvable
    /// private address (top bits 01) whose hash part is `ah(irk, prand)` for the bond's IRK.
    /// `ah` is the SMP address hash (Core spec Vol 3 Part H §2.2.2), given 16-octet IRK and
    /// 3-octet prand most significant octet first, returning 3 octets the same way.
    public func resolve(address: [UInt8], isRandom: Bool, ah: ([UInt8], [UInt8]) -> [UInt8]) -> PhoneBond? {
        guard address.count == 6 else { return nil }
        if let exact = bonds.first(where: { $0.address == address && $0.addressIsRandom == isRandom }) { return exact }
        guard isRandom, address[0] & 0xC0 == 0x40 else { return nil }
        let prand = Array(address[0..<3])
        let hash = Array(address[3..<6])
        return bonds.first { $0.irk.count == 16 && ah($0.irk, prand) == hash }
    }

    /// `resolve` with SMP's `ah`; the bonds keep IRKs in air order, `ah` takes the spec's.
    public func resolve(address: [UInt8], isRandom: Bool) -> PhoneBond? {
        resolve(address: address, isRandom: isRandom) { irk, prand in SMPCrypto.ah(irk: irk.reversed(), prand: prand) }
    }

    public var json: JSONValue {
        .object([("version", .number(1)), ("phones", .array(bonds.map { b in
            .object([("address", .string(b.id)), ("address_type", .string(b.addressIsRandom ? "random" : "public")),
                     ("irk", .string(Hex.encode(b.irk))), ("ltk", .string(Hex.encode(b.ltk))), ("name", .string(b.name)),
                     ("bonded_at", .string(RFC3339.format(micros: b.bondedAtMicros))),
                     ("last_seen", b.lastSeenMicros.map { .string(RFC3339.format(micros: $0)) } ?? .null),
                     ("unfinished", .array(b.unfinished.map { u in
                        .object([("uid", .number(Double(u.uid))), ("category", .number(Double(u.category))),
                                 ("announced_at", .string(RFC3339.format(micros: u.announcedAtMicros)))])
                     })),
                     ("receipts", .array(b.receipts.map { .string($0) }))])
        }))])
    }

    public init(json: JSONValue) throws(PhoneBondsError) {
        guard json["version"]?.intValue == 1, let list = json["phones"]?.arrayValues else {
            throw PhoneBondsError(description: "not a bonds file of this agent (no \"version\": 1 and \"phones\")")
        }
        var bonds: [PhoneBond] = []
        for (i, p) in list.enumerated() {
            func field(_ key: String) throws(PhoneBondsError) -> String {
                guard let v = p[key]?.stringValue else { throw PhoneBondsError(description: "phone \(i + 1): \"\(key)\" is missing") }
                return v
            }
            let text = try field("address")
            let parts = text.split(separator: ":")
            let octets = parts.compactMap { Hex.decode(String($0), count: 1)?.first }
            guard parts.count == 6, octets.count == 6 else { throw PhoneBondsError(description: "phone \(i + 1): address \"\(text)\" is not six hex octets") }
            guard let irk = Hex.decode(try field("irk"), count: 16), let ltk = Hex.decode(try field("ltk"), count: 16) else {
                throw PhoneBondsError(description: "phone \(i + 1): irk and ltk must be 32 hex digits each")
            }
            guard let bonded = RFC3339.parse(try field("bonded_at")) else { throw PhoneBondsError(description: "phone \(i + 1): bonded_at is not a time") }
            var bond = PhoneBond(address: octets, addressIsRandom: p["address_type"]?.stringValue == "random", irk: irk, ltk: ltk,
                                 name: p["name"]?.stringValue ?? "", bondedAtMicros: bonded,
                                 lastSeenMicros: p["last_seen"]?.stringValue.flatMap(RFC3339.parse))
            // Absent in files of older agents; an entry that does not read is dropped (a memory, not a key).
            bond.unfinished = Array((p["unfinished"]?.arrayValues ?? []).compactMap { u in
                guard let uid = u["uid"]?.intValue.flatMap({ UInt32(exactly: $0) }), let category = u["category"]?.intValue,
                      let at = u["announced_at"]?.stringValue.flatMap(RFC3339.parse) else { return nil }
                return PhoneBond.Unfinished(uid: uid, category: Int(category), announcedAtMicros: at)
            }.suffix(PhoneBond.maximumUnfinished))
            bond.receipts = Array((p["receipts"]?.arrayValues ?? []).compactMap(\.stringValue).suffix(PhoneBond.maximumReceipts))
            bonds.append(bond)
        }
        self.init(bonds)
    }
}
