// What agentctl prints for people from each typed reply (`--json` prints the reply itself).
// In the core so the wording is tested against golden text (ControlResponseTests).

public enum ControlReplyText {
    public static func pubkey(_ r: PubkeyReply) -> [String] {
        ["\(r.algorithm):\(r.publicKey)", "key id: \(r.keyID)"]
    }

    public static func queue(_ r: QueueListReply) -> [String] {
        var lines = ["\(r.depth) event(s) waiting, \(r.dead) dead letter(s)"]
        for e in r.events {
            let error = e.lastError.map { "  last error: \($0)" } ?? ""
            lines.append("#\(e.sequence) \(e.type) \(e.id) age \(e.ageSeconds) s, \(e.attempts) attempt(s)\(error)")
        }
        return lines
    }

    public static func requeued(_ r: QueueRetryReply) -> String { "requeued \(r.requeued) event(s)" }

    public static func purged(_ r: QueuePurgeReply) -> String { "purged \(r.purged) dead letter(s)" }

    public static func injected(_ r: InjectReply, device: String) -> String {
        "injected a test press of \(device): event \(r.eventIDs.joined(separator: ", ")); follow it with agentctl events --follow or agentctl status"
    }

    public static func pairing(_ r: PairReply) -> String {
        r.pairingUntil.map { "pairing open until \($0)" } ?? "pairing closed"
    }

    public static func phones(_ r: PhonesReply) -> [String] {
        var lines: [String] = []
        if r.phones.isEmpty { lines.append("no bonded phones (agentctl pair opens pairing)") }
        for p in r.phones {
            let state = p.connected ? (p.readingNotifications ? "connected, reading notifications" : "connected") : "not connected"
            let name = p.name.isEmpty ? "" : " \(p.name)"
            lines.append("\(p.id)\(name): \(state), last seen \(p.lastSeen ?? "never"), bonded \(p.bondedAt)")
        }
        if let until = r.pairingUntil { lines.append("pairing open until \(until)") }
        if let e = r.lastError { lines.append("last error: \(e)") }
        return lines
    }

    public static func forgot(_ r: ForgetReply) -> String { "forgot \(r.forgotten)" }

    public static func answered(_ r: AnswerReply) -> String { "dismissing on \(r.dismissing) connected phone(s)" }

    /// One transmitter of `agentctl scan`, with its frame rate over the listening time (nil: not
    /// measured), and for a stranger the config that would select it.
    public static func transmitter(_ t: ScanReply.Transmitter, framesPerSecond: Double?) -> [String] {
        let rate = framesPerSecond.map(oneDecimal) ?? "-"
        let rssi = t.rssiDB.map { oneDecimal($0) + " dB" } ?? "-"
        let who = t.device.map { "device \($0)" } ?? "NOT CONFIGURED"
        var lines = ["\(t.radio) \(t.identity)  \(t.model)  rssi \(rssi)  \(rate) frames/s  last \(t.lastSeen)  \(who)"]
        guard t.device == nil else { return lines }
        if t.radio == "ble" {
            // The BLE pipeline writes the whole snippet (a [[device]] or a [[region]]).
            lines += t.match.split(separator: "\n").map { "    " + $0 }
        } else {
            let id = String(t.identity.map { $0 == "=" || $0 == "," ? "-" : $0 })
            lines += ["    [[device]]", "    id = \"rf-\(id)\"", "    name = \"...\"", "    radio = \"\(t.radio)\"", "    match = \(t.match)"]
        }
        return lines
    }

    /// One event (its body as sent to the cloud) as a line, for `agentctl events`.
    public static func event(_ e: JSONValue) -> String {
        let test = e["test"]?.boolValue == true ? " [test]" : ""
        let code = e["data"]?["code"]?.stringValue.map { " code \($0)" } ?? ""
        return "\(e["occurred_at"]?.stringValue ?? "-") #\(e["sequence"]?.intValue ?? 0) \(e["type"]?.stringValue ?? "?") \(e["device"]?["id"]?.stringValue ?? "?")\(code)\(test)"
    }

    static func oneDecimal(_ v: Double) -> String { String(Double(Int((v * 10).rounded())) / 10) }
}
