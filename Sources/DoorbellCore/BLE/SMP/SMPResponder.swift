// The base station's side of pairing with a phone: the SMP responder (the phone is the central
// and initiates), LE Secure Connections only, Just Works (the box has no display or keyboard:
// IO capability NoInputNoOutput), bonding with the phone's identity (IRK and identity address)
// so that it is recognised under its next private address. Hand-written from the Core
// specification Vol 3 Part H §2.3.5.6 and §3.5–3.6; the agent's host has no bluetoothd to do it.
//
// One value per pairing attempt, made when a Pairing Request arrives (and only while the
// owner's pairing window is open — outside it the link layer answers Pairing Not Supported).
// It takes PDUs and the time and returns the PDUs to send and, at the end, the outcome. The
// link layer answers the controller's LTK request with `encryptionKey` and reports
// `encrypted(at:)` when the link is encrypted; the phone then sends its keys.
//
// Just Works only: the box has no display, and the pairing window (`agentctl pair`) is what
// guards who may bond. Passkey entry with the six digits shown by `agentctl` would add MITM
// protection at pairing time; it is not built yet (it needs the passkey's 20 rounds of f4).
//
// Refused on purpose: LE legacy pairing (its key exchange is broken by a passive listener),
// key sizes below 16, the specification's published debug public key, and a public key that
// is not on the curve or is our own reflected back.

public struct SMPBond: Equatable, Sendable {
    /// Most significant octet first; EDIV and Rand are 0 under Secure Connections.
    public var ltk: [UInt8]
    /// The phone's Identity Resolving Key, when it distributed one (PhoneBonds recognises it by it).
    public var peerIRK: [UInt8]?
    /// The phone's identity address, or the address it paired under when it sent none.
    public var peerIdentity: BLEIdentityAddress
    /// Just Works: encrypted, not protected against a man in the middle at pairing time.
    public var authenticated: Bool

    public init(ltk: [UInt8], peerIRK: [UInt8]?, peerIdentity: BLEIdentityAddress, authenticated: Bool) {
        self.ltk = ltk
        self.peerIRK = peerIRK
        self.peerIdentity = peerIdentity
        self.authenticated = authenticated
    }
}

public struct SMPFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Origin: Equatable, Sendable { case local, peer, timeout }
    public let origin: Origin
    public let reason: SMPFailureReason
    public let description: String
}

public struct SMPResponder: Sendable {
    public static let timeoutMicros: Int64 = 30_000_000
    /// Sent by the base station to ask a connected, unbonded phone to pair (while the window is open).
    public static let securityRequest = SMPPDU.securityRequest(authReq: SMPPairingParameters.bonding | SMPPairingParameters.secureConnections)
    /// The answer to a Pairing Request while the pairing window is closed.
    public static let windowClosed = SMPPDU.pairingFailed(.pairingNotSupported)

    public enum Outcome: Equatable, Sendable {
        /// Answer the controller's LE Long Term Key Request with this key (EDIV 0, Rand 0).
        case encryptionKey([UInt8])
        case paired(SMPBond)
        case failed(SMPFailure)
    }

    public struct Step: Equatable, Sendable {
        public var send: [SMPPDU]
        public var outcome: Outcome?

        public init(send: [SMPPDU] = [], outcome: Outcome? = nil) {
            self.send = send
            self.outcome = outcome
        }
    }

    private enum State: Sendable {
        case awaitingRequest
        case awaitingPublicKey
        case awaitingRandom
        case awaitingDHKeyCheck
        case awaitingEncryption
        case awaitingIdentity(irk: [UInt8]?)
        case finished
    }

    static let debugPublicKey: [UInt8] = Hex.decode(
        "20b003d2f297be2c5e2c83a7e9f9a5b9eff49111acf4fddbcc0301480e359de6"
            + "dc809c49652aeb6d63329abf5a52155c766345c28fed3024741c8ed01589d28b") ?? []

    private let local: BLEIdentityAddress
    private let peer: BLEIdentityAddress
    private let keyPair: P256KeyPair
    private let nonce: [UInt8]
    private var state = State.awaitingRequest
    private var request: SMPPairingParameters?
    private var response: SMPPairingParameters?
    private var peerKey: [UInt8] = []
    private var dhKey: [UInt8] = []
    private var peerNonce: [UInt8] = []
    private var ltk: [UInt8] = []
    public private(set) var deadline: Int64?

    /// `local` and `peer` are the addresses of this connection (the phone's current private
    /// address, not its identity). `nonce` is 16 fresh random octets (SecureRandom.bytes(16)).
    public init(local: BLEIdentityAddress, peer: BLEIdentityAddress, keyPair: P256KeyPair, nonce: [UInt8]) {
        precondition(nonce.count == 16, "an SMP nonce is 16 octets")
        self.local = local
        self.peer = peer
        self.keyPair = keyPair
        self.nonce = nonce
    }

    public var isFinished: Bool { if case .finished = state { true } else { false } }

    /// One PDU from the SMP channel.
    public mutating func received(_ bytes: [UInt8], at now: Int64) -> Step {
        if isFinished { return Step() }
        if let expired = tick(at: now).outcome { return Step(outcome: expired) }
        deadline = now + Self.timeoutMicros
        let pdu: SMPPDU
        do { pdu = try SMPPDU(parsing: bytes) } catch {
            return fail(error, "the phone sent an SMP PDU this host cannot read (\(Hex.encode(Array(bytes.prefix(8)))))")
        }
        switch (state, pdu) {
        case let (_, .pairingFailed(reason)):
            state = .finished
            deadline = nil
            return Step(outcome: .failed(SMPFailure(origin: .peer, reason: reason,
                description: "the phone ended pairing: \(reason). Open the pairing window again and retry from the phone's Bluetooth settings.")))
        case let (.awaitingRequest, .pairingRequest(p)):
            return pairingRequest(p)
        case let (.awaitingPublicKey, .pairingPublicKey(x, y)):
            return publicKey(x + y)
        case let (.awaitingRandom, .pairingRandom(n)):
            peerNonce = n
            state = .awaitingDHKeyCheck
            return Step(send: [.pairingRandom(nonce)])
        case let (.awaitingDHKeyCheck, .pairingDHKeyCheck(ea)):
            return dhKeyCheck(ea)
        case let (.awaitingIdentity(nil), .identityInformation(irk)):
            state = .awaitingIdentity(irk: irk)
            return Step()
        case let (.awaitingIdentity(irk?), .identityAddressInformation(identity)):
            return finish(irk: irk, identity: identity)
        case (_, .keypressNotification):
            return Step()
        default:
            return fail(.unspecifiedReason, "the phone sent \(Self.name(pdu)) out of turn; pairing aborted")
        }
    }

    /// The link is encrypted with the LTK: the phone now distributes the keys it agreed to.
    public mutating func encrypted(at now: Int64) -> Step {
        guard case .awaitingEncryption = state else { return Step() }
        deadline = now + Self.timeoutMicros
        if let r = response, r.initiatorKeys & SMPPairingParameters.identityKey != 0 {
            state = .awaitingIdentity(irk: nil)
            return Step()
        }
        return finish(irk: nil, identity: peer)
    }

    /// Pairing that stalls for 30 s fails; the specification forbids further SMP on this link.
    public mutating func tick(at now: Int64) -> Step {
        guard let d = deadline, now >= d, !isFinished else { return Step() }
        state = .finished
        deadline = nil
        return Step(outcome: .failed(SMPFailure(origin: .timeout, reason: .unspecifiedReason,
            description: "pairing stalled for 30 s (SMP timeout); the phone must reconnect to pair again")))
    }

    private mutating func pairingRequest(_ p: SMPPairingParameters) -> Step {
        guard p.authReq & SMPPairingParameters.secureConnections != 0 else {
            return fail(.authenticationRequirements, "the phone asked for LE legacy pairing, which the base station refuses (a listener could recover its key); pair from a phone with Bluetooth 4.2 or later")
        }
        guard p.ioCapability <= 0x04, (7...16).contains(p.maxKeySize) else {
            return fail(.invalidParameters, "the phone's Pairing Request has an invalid IO capability or key size")
        }
        guard p.maxKeySize == 16 else {
            return fail(.encryptionKeySize, "the phone offered a \(p.maxKeySize)-octet key; the base station requires 16")
        }
        guard p.oobDataFlag == 0 else {
            return fail(.oobNotAvailable, "the phone asked for out-of-band pairing data, which the base station does not have")
        }
        // Only the phone's identity is wanted: an LTK is derived under Secure Connections and the
        // base station keeps its own static address, so it distributes nothing.
        let r = SMPPairingParameters(ioCapability: SMPPairingParameters.noInputNoOutput, oobDataFlag: 0,
                                     authReq: SMPPairingParameters.bonding | SMPPairingParameters.secureConnections,
                                     maxKeySize: 16, initiatorKeys: p.initiatorKeys & SMPPairingParameters.identityKey, responderKeys: 0)
        request = p
        response = r
        state = .awaitingPublicKey
        return Step(send: [.pairingResponse(r)])
    }

    private mutating func publicKey(_ key: [UInt8]) -> Step {
        guard key != Self.debugPublicKey else {
            return fail(.authenticationRequirements, "the phone used the Bluetooth specification's published debug key; pairing refused (turn off Bluetooth debug mode on the phone)")
        }
        guard key != keyPair.publicKey else {
            return fail(.dhKeyCheckFailed, "the phone returned the base station's own public key (a reflection attack); pairing aborted")
        }
        do { dhKey = try keyPair.dhKey(peerPublicKey: key) } catch {
            return fail(.dhKeyCheckFailed, error.description)
        }
        peerKey = key
        state = .awaitingRandom
        let own = keyPair.publicKey
        let confirm = SMPCrypto.f4(u: Array(own[..<32]), v: Array(key[..<32]), x: nonce, z: 0)
        return Step(send: [.pairingPublicKey(x: Array(own[..<32]), y: Array(own[32...])), .pairingConfirm(confirm)])
    }

    private mutating func dhKeyCheck(_ ea: [UInt8]) -> Step {
        guard let req = request, let res = response else { return fail(.unspecifiedReason, "pairing state lost") }
        let (macKey, key) = SMPCrypto.f5(w: dhKey, n1: peerNonce, n2: nonce, a1: peer.field, a2: local.field)
        let zero = [UInt8](repeating: 0, count: 16)
        let expected = SMPCrypto.f6(w: macKey, n1: peerNonce, n2: nonce, r: zero, ioCap: req.ioCapField, a1: peer.field, a2: local.field)
        guard expected == ea else {
            return fail(.dhKeyCheckFailed, "the phone's DHKey check does not match: the keys were tampered with on the air, or the phone's stack is broken; pairing aborted")
        }
        ltk = key
        state = .awaitingEncryption
        let eb = SMPCrypto.f6(w: macKey, n1: nonce, n2: peerNonce, r: zero, ioCap: res.ioCapField, a1: local.field, a2: peer.field)
        return Step(send: [.pairingDHKeyCheck(eb)], outcome: .encryptionKey(key))
    }

    private mutating func finish(irk: [UInt8]?, identity: BLEIdentityAddress) -> Step {
        state = .finished
        deadline = nil
        return Step(outcome: .paired(SMPBond(ltk: ltk, peerIRK: irk, peerIdentity: identity, authenticated: false)))
    }

    private mutating func fail(_ reason: SMPFailureReason, _ why: String) -> Step {
        state = .finished
        deadline = nil
        return Step(send: [.pairingFailed(reason)], outcome: .failed(SMPFailure(origin: .local, reason: reason, description: why)))
    }

    static func name(_ pdu: SMPPDU) -> String {
        String(describing: pdu).prefix { $0 != "(" }.description
    }
}
