import CFuzzDriver
import CloudCore

#if canImport(Glibc)
import Glibc
#endif

// Fuzz targets for the cloud's parsers of outside input. Built two ways:
// - with `-sanitize=fuzzer,address -DFUZZING` (scripts/fuzz.sh): libFuzzer drives
//   LLVMFuzzerTestOneInput; CLOUD_FUZZ_TARGET picks the parser;
// - normally: `cloud-fuzz TARGET FILE...` runs saved inputs once, as `make test` does.

enum CloudFuzzTarget: String, CaseIterable {
    /// An event body as a gateway POSTs it.
    case envelope
    /// The Standard Webhooks headers and body through every check of `POST /events`.
    case webhook
    /// The same headers and a heartbeat body through every check of `POST /heartbeat`.
    case heartbeat
    /// An APNs answer: 2 bytes of status, the rest the body.
    case apns
    /// A doorbell name (free text the owner types) into the push payload.
    case payload
    /// A base station's receipt body (`push.displayed`), and free text read off a phone.
    case receipt
    /// Any JSON the cloud reads, through the strict check (syntax, depth, duplicate keys), and a
    /// name through the free-text rule.
    case strictjson

    static let secret = try? WebhookSecret(parsing: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")

    func run(_ bytes: [UInt8]) {
        switch self {
        case .envelope:
            if let envelope = try? EventEnvelope.parse(bytes) {
                precondition(!envelope.id.isEmpty && envelope.sequence >= 1, "accepted an envelope without id or sequence")
            }
        case .webhook, .heartbeat:
            // Lines: webhook-id, webhook-timestamp, webhook-signature, gateway id; the rest is the body.
            let parts = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 4, omittingEmptySubsequences: false)
            func text(_ index: Int) -> String? {
                index < parts.count ? String(decoding: parts[index], as: UTF8.self) : nil
            }
            guard let secret = Self.secret, let keys = try? GatewayKeys(secret: secret, publicKey: nil) else { return }
            let request = WebhookRequest(
                webhookID: text(0), webhookTimestamp: text(1), webhookSignature: text(2), gatewayID: text(3),
                body: parts.count > 4 ? Array(parts[4]) : [])
            if self == .heartbeat {
                if let heartbeat = try? WebhookIntake(keys: keys).verifyHeartbeat(request, now: 1_800_000_000) {
                    precondition(heartbeat.id == request.webhookID && String(heartbeat.sentAt) == request.webhookTimestamp,
                                 "verified a heartbeat whose id or sent_at is not the signed one")
                }
            } else if let verified = try? WebhookIntake(keys: keys).verify(request, now: 1_800_000_000) {
                precondition(verified.envelope.id == request.webhookID, "verified an event whose id is not webhook-id")
            }
        case .apns:
            guard bytes.count >= 2 else { return }
            let status = Int(bytes[0]) << 8 | Int(bytes[1])
            let verdict = APNsVerdict.classify(status: status, body: Array(bytes.dropFirst(2)))
            if status == 200 { precondition(verdict == .delivered, "200 must be delivered") }
        case .payload:
            let name = String(decoding: bytes, as: UTF8.self)
            let event = EventEnvelope(id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", sequence: 1, type: "doorbell.pressed",
                                      gatewayID: "gw", deviceID: "d", occurredAt: "2026-11-23T18:00:00Z")
            let payload = PushPayload.forEvent(event, doorbell: .init(id: "gw:d", name: name, gatewayID: "gw"))
            precondition(payload != nil, "a doorbell press must always produce a payload")
            precondition((payload?.utf8.count ?? 0) <= PushPayload.maximumBytes, "payload over 4 KB")
            // Every phone's push is as long as the stored one, whatever the name spells.
            if let payload {
                let sent = PushPayload.personalized(payload, eventID: event.id, token: name)
                precondition(sent.utf8.count == payload.utf8.count, "a personalized payload changed size")
            }
        case .receipt:
            for type in ["push.displayed", "push.not_displayed"] {
                if let r = PushReceiptReport.parse(type: type, body: bytes) {
                    precondition(!r.phoneID.isEmpty, "a receipt without a phone")
                    if let reference = r.reference { precondition(reference.count == PushReference.length, "a malformed reference") }
                }
            }
            if let found = PushReference.find(in: String(decoding: bytes, as: UTF8.self)) {
                precondition(found.count == PushReference.length, "a malformed reference")
            }
        case .strictjson:
            if (try? StrictJSON.check(bytes)) != nil {
                // Accepted text stays accepted inside an array one level deeper allowed: the check
                // is about the value, not where it stands.
                let wrapped = Array("[".utf8) + bytes + Array("]".utf8)
                precondition((try? StrictJSON.check(wrapped, maximumDepth: StrictJSON.maximumDepth + 1)) != nil,
                             "accepted alone, refused inside an array")
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if TextChecks.freeTextProblem(text, field: "name", characters: 100, bytes: 400) == nil {
                precondition(text.utf8.count <= 400 && !text.utf8.contains(0), "a name over the limit or with a NUL passed")
            }
        }
    }
}

#if FUZZING
nonisolated(unsafe) let selectedTarget: CloudFuzzTarget = {
    guard let name = getenv("CLOUD_FUZZ_TARGET").map({ String(cString: $0) }), let t = CloudFuzzTarget(rawValue: name) else {
        fatalError("set CLOUD_FUZZ_TARGET to one of: \(CloudFuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return t
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    selectedTarget.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

// SwiftPM links an executable's entry point under this name; here it hands over to libFuzzer.
@_cdecl("cloud_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    _ = selectedTarget
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        guard let data else { return 0 }
        selectedTarget.run(Array(UnsafeBufferPointer(start: data, count: Int(size))))
        return 0
    }
}
#else
@main
struct CloudFuzzReplay {
    static func main() {
        let args = CommandLine.arguments.dropFirst()
        guard let name = args.first, let target = CloudFuzzTarget(rawValue: name) else {
            print("usage: cloud-fuzz \(CloudFuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE...")
            exit(64)
        }
        var count = 0
        for path in args.dropFirst() {
            guard let file = fopen(path, "rb") else { print("cannot read \(path)"); exit(66) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = fread(&buffer, 1, buffer.count, file)
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            fclose(file)
            target.run(bytes)
            count += 1
        }
        print("cloud-fuzz \(name): \(count) inputs, no crash")
    }
}
#endif
