// The configuration reference: every key of agent.toml with its type, default and meaning, as
// the README's table shows it. The `[radio.*]` rows come from the radios' descriptors, the very
// declarations the loader reads those sections with; the other rows are written here.
// `ConfigReferenceTests` holds the three together — the README's table is this table, and every
// key the loader reads is a row here and every row a key the loader reads — so a key cannot be
// added, renamed or dropped in one place only.
// (A table of data: exempt from the ~400-line rule for source files.)

public enum ConfigReference {
    public struct Row: Sendable, Equatable {
        /// As the README writes it: "`[section] key`", several keys separated by ", ".
        public let key: String
        public let type: String
        public let defaultValue: String
        public let meaning: String
    }

    /// The table's rows, in the README's order: the radios' rows are made from their
    /// descriptors (`RadioRegistry`), the others are written here.
    public static let rows: [Row] = general + RadioRegistry.descriptors.flatMap(\.rows) + devicesAndAfter

    static let general: [Row] = [
        Row(key: #"`gateway_id`"#, type: #"string, required"#, defaultValue: #""#,
            meaning: #"this gateway's name in the cloud (`[A-Za-z0-9._-]`, ≤ 64)"#),
        Row(key: #"`[paths] state_dir`"#, type: #"path"#, defaultValue: #"`/var/lib/doorbell-agent`"#,
            meaning: #"outbox database (`outbox.sqlite`) and device key (`device.key`, 0600)"#),
        Row(key: #"`[paths] control_socket`"#, type: #"path"#, defaultValue: #"`/run/doorbell-agent/control.sock`"#,
            meaning: #"control socket for `agentctl`"#),
        Row(key: #"`[log] level`"#, type: #"string"#, defaultValue: #"`info`"#,
            meaning: #"`debug`, `info`, `notice`, `warning`, `error`"#),
    ]

    static let devicesAndAfter: [Row] = [
        Row(key: #"`[tracker.button] repeat_gap_ms`"#, type: #"int"#, defaultValue: #"300"#,
            meaning: #"frames of one device closer than this are the same press"#),
        Row(key: #"`[tracker.button] hold_after_ms`"#, type: #"int"#, defaultValue: #"1500"#,
            meaning: #"a press still repeating after this adds one `doorbell.held`"#),
        Row(key: #"`[tracker.button] cooldown_ms`"#, type: #"int"#, defaultValue: #"3000"#,
            meaning: #"a new press this soon after the last forwarded one of the same button is counted (`suppressed` in status and in the next forwarded press), not forwarded, and does not run `[[action]]`s: the chime rang for the press it follows. The same rule for RF buttons and BTHome buttons (per button of a multi-button remote, any press type; a BTHome `hold_press` follows its press). 0 forwards every press."#),
        Row(key: #"`[[device]] id`"#, type: #"string, required"#, defaultValue: #""#,
            meaning: #"stable id used in events"#),
        Row(key: #"`[[device]] name`"#, type: #"string"#, defaultValue: #"id"#,
            meaning: #"shown in notifications"#),
        Row(key: #"`[[device]] kind`"#, type: #"`doorbell`, `answer_button`"#, defaultValue: #"`doorbell`"#,
            meaning: #"`answer_button`: a button inside the house whose presses mean the door was answered: they are `door.answered` events (the gesture in `data.gesture`), stored and sent like any event but not pushed to the phones by the cloud and not rung by actions on `doorbell.pressed`; with an `[[action]] answer_phones` they dismiss the doorbell alert on the phones"#),
        Row(key: #"`[[device]] radio`"#, type: ConfigLoader.orList(RadioRegistry.names.map { "`\($0)`" }),
            defaultValue: "the first configured of " + RadioRegistry.names.joined(separator: ", "), meaning: #""#),
        Row(key: #"`[[device]] bindkey`"#, type: #"32 hex digits (ble)"#, defaultValue: #""#,
            meaning: #"a BTHome device's AES key; then plaintext adverts from it are refused (downgrade), and its counter must grow (replays refused, also across reboots: the last packet id and counter per button are kept in the outbox, in the transaction that stores the press they produced; an older agent's `state_dir/ble-buttons.json` is taken over once and removed)"#),
        Row(key: #"`[[device]] match`"#, type: #"table, required"#, defaultValue: #""#,
            meaning: #"fields that must all match: `code` (hex string like `"0x91568F"` or integer: the same 24-bit code whether rtl_433's flex decoder or the agent's OOK decoder heard it), `id`, `unit`, `channel`, `button`, `cmd`, `data`, `model`, and for OOK `protocol` (`ev1527`, `pt2262`, `rcswitch-N`) and `tristate`; for BLE buttons only `address` (`"C0:11:22:33:44:02"`). `model` alone is refused: rtl_433 mislabels EV1527 bells. `agentctl status` lists unconfigured transmitters it hears, with their identity."#),
        Row(key: #"`[beacon] uuid`, `major`, `minor`, `measured_power`, `interval_ms`"#, type: #""#, defaultValue: #"power −59, 100 ms"#,
            meaning: #"the base station's own iBeacon (non-connectable), advertised while scanning, so the owner's app wakes up at the door"#),
        Row(key: #"`[[region]] id`, `name`, `uuid`, `major`, `minor`"#, type: #""#, defaultValue: #""#,
            meaning: #"an iBeacon region, matched like CLBeaconRegion (UUID, UUID+major, UUID+major+minor); events `beacon.entered` / `beacon.exited` with uuid, major, minor, RSSI, proximity (immediate/near/far from measured power) and dwell time"#),
        Row(key: #"`[[region]] namespace`, `instance`"#, type: #"20 and 12 hex digits"#, defaultValue: #""#,
            meaning: #"an Eddystone region instead of `uuid`/`major`/`minor` (not both in one region): matches an Eddystone-UID beacon's namespace, or namespace+instance; the same `beacon.entered` / `beacon.exited` with namespace, instance, RSSI, proximity (from the 0 m Tx power − 41 dB) and, once a TLM frame from the same address was heard, `battery_mv` and `temperature_c`. Eddystone-EID beacons rotate their id and cannot be matched (`agentctl scan` lists them; give the beacon a UID slot); URL and encrypted TLM frames are counted only"#),
        Row(key: #"`[[region]] enter_rssi`, `min_samples`, `exit_timeout_s`, `hysteresis_db`"#, type: #"int"#, defaultValue: #"−80, 3, 30, 10"#,
            meaning: #"enter after min_samples sightings at or above enter_rssi; leave after exit_timeout_s unseen or when the smoothed RSSI falls hysteresis_db below enter_rssi. The timeout runs on the scanner's live time: once the whole radio has heard no advert at all for 5 s, the presence clock pauses (`agentctl status` says exits are on hold and why) until reports resume, so a stall never makes a present beacon leave; a timeout exit also needs some advert heard after the beacon's last sighting, and none happens while the radio is degraded. Keep exit_timeout_s well above 5 s plus the beacon's advertising interval."#),
        Row(key: #"`[uplink] url`"#, type: #"https URL, required with `[uplink]`"#, defaultValue: #""#,
            meaning: #"where events are POSTed. Without `[uplink]` (and without `[mqtt]`) events wait in the outbox for one."#),
        Row(key: #"`[uplink] ca_file`"#, type: #"path"#, defaultValue: #"system CAs"#,
            meaning: #"PEM of the CA that signed the receiver's certificate"#),
        Row(key: #"`[uplink] hmac_secret_file`"#, type: #"path"#, defaultValue: #""#,
            meaning: #"file holding the gateway's `whsec_...` secret (signature `v1`)"#),
        Row(key: #"`[uplink] sign_ed25519`"#, type: #"bool"#, defaultValue: #"`true`"#,
            meaning: #"add the `v1a` Ed25519 signature with the device key"#),
        Row(key: #"`[uplink] connect_timeout_ms`, `request_timeout_ms`"#, type: #"int"#, defaultValue: #"5000, 15000"#,
            meaning: #""#),
        Row(key: #"`[uplink] max_in_flight`"#, type: #"int 1–64"#, defaultValue: #"8"#,
            meaning: #"requests in flight at once while a backlog drains: HTTP/2 streams on the one kept-alive connection (over HTTP/1.1 the window goes one request after the other). Within a window the receiver may see sequences out of order; after a window in which nothing went the next is a single request. 1 = one event at a time"#),
        Row(key: #"`[uplink] retry_initial_ms`, `retry_max_ms`"#, type: #"int"#, defaultValue: #"1000, 300000"#,
            meaning: #"exponential backoff with full jitter: the receiver's (after a window in which nothing went) and each event's own (the others pass an event waiting out its own)"#),
        Row(key: #"`[uplink] park_after_failures`"#, type: #"int 3–1000"#, defaultValue: #"15"#,
            meaning: #"an event that failed this many times while the receiver took other events is parked as a dead letter and reported (`gateway.dead_letter`); failures while nothing goes never count"#),
        Row(key: #"`[uplink] heartbeat_interval_s`"#, type: #"int 0 or 60–86400"#, defaultValue: #"0 (the Pi boards' profiles: 900)"#,
            meaning: #"a signed heartbeat (not an event: never in the outbox, never ahead of a press) to the `url` with its last path segment replaced by `heartbeat` (`…/events` → `…/heartbeat`), at start-up and then this often while nothing else reached the cloud; `agentctl status` shows the last 2xx and whether the cloud answered since start (a field image's slot check needs it). 0 = none: off unless set, because only doorbell-cloud (and receivers that add the path) answer it; another Standard Webhooks receiver would answer 404 and the uplink would show degraded"#),
        Row(key: #"`[uplink] pinned_public_key`"#, type: #"string"#, defaultValue: #""#,
            meaning: #"`sha256//<base64>` (several joined by `;`): refuse any server whose public key differs, even with a valid certificate"#),
        Row(key: #"`[uplink] client_cert_file`, `client_key_file`"#, type: #"paths"#, defaultValue: #""#,
            meaning: #"mTLS: the gateway's PEM certificate and key"#),
        Row(key: #"`[uplink] proxy`"#, type: #"URL"#, defaultValue: #"none"#,
            meaning: #"`http://`, `https://`, `socks5://`, `socks5h://`; without it proxy environment variables are ignored"#),
        Row(key: #"`[mqtt] host`"#, type: #"string, required with `[mqtt]`"#, defaultValue: #""#,
            meaning: #"the house's MQTT broker (Home Assistant's Mosquitto add-on, any MQTT 3.1.1/5 broker): a second sink of the same outbox, acknowledged per event by the broker's PUBACK (QoS 1). `[uplink]` becomes optional: with only `[mqtt]` the gateway works without a cloud account. An event leaves the outbox when every configured sink has it."#),
        Row(key: #"`[mqtt] port`"#, type: #"int"#, defaultValue: #"1883, 8883 with `ca_file`"#,
            meaning: #""#),
        Row(key: #"`[mqtt] protocol`"#, type: #"`"3.1.1"`, `"5"`"#, defaultValue: #"`"3.1.1"`"#,
            meaning: #"persistent session either way (clean session off; MQTT 5 with a one-day session expiry)"#),
        Row(key: #"`[mqtt] client_id`"#, type: #"string"#, defaultValue: #"`doorbell-agent-<gateway_id>`"#,
            meaning: #"the session's identity: keep it stable"#),
        Row(key: #"`[mqtt] username`, `password_file`"#, type: #"string, path"#, defaultValue: #""#,
            meaning: #"the password is read from its own file (0600), never from the config (`password = ...` is refused)"#),
        Row(key: #"`[mqtt] ca_file`, `cert_file`, `key_file`"#, type: #"paths"#, defaultValue: #""#,
            meaning: #"TLS to the broker; client certificate and key go together"#),
        Row(key: #"`[mqtt] topic_prefix`"#, type: #"topic levels"#, defaultValue: #"`doorbell`"#,
            meaning: #"topics are `<prefix>/<gateway_id>/...`: `status` (`online`, retained; last will `offline`), `events` (every event, the exact signed body with its `id` to de-duplicate), `<device>/event` (`{"event_type": "ring", ...}`: see [Home Assistant and MQTT](#home-assistant-and-mqtt) for the types), `<device>/battery`, `<region>/presence` (`ON`/`OFF`) and `<region>/attributes` (retained), `diagnostics` (retained JSON, every 30 s)"#),
        Row(key: #"`[mqtt] discovery`, `discovery_prefix`"#, type: #"bool, topic levels"#, defaultValue: #"`true`, `homeassistant`"#,
            meaning: #"Home Assistant MQTT discovery (retained): each device an `event` entity with device triggers per press type, each BTHome button's battery, each region a presence `binary_sensor`, the gateway's diagnostics (events waiting, oldest waiting, radios, last cloud delivery, clock, problem), all under one gateway device (`via_device`). Published at connect, when Home Assistant announces itself on `<discovery_prefix>/status`, and on every `systemctl reload`; a device removed from the config has its entities removed."#),
        Row(key: #"`[mqtt] wait_for_home_assistant_s`"#, type: #"int"#, defaultValue: #"30"#,
            meaning: #"with discovery on: after every connect to the broker (and after Home Assistant says `offline`), events wait for Home Assistant's birth message (`<discovery_prefix>/status` = `online`), then for the broker to acknowledge the discovery sent in answer, and 1 s more, so that Home Assistant is subscribed when they arrive. Without a birth message within this many seconds (Home Assistant was already running, or there is none: Node-RED alone) they go out anyway. 0: publish at once after connecting, as for any MQTT consumer. See [Home Assistant and MQTT](#home-assistant-and-mqtt)."#),
        Row(key: #"`[mqtt] keepalive_s`, `max_in_flight`"#, type: #"int"#, defaultValue: #"60, 20"#,
            meaning: #"keep-alive; events published and not yet acknowledged at once"#),
        Row(key: #"`[mqtt] retry_initial_ms`, `retry_max_ms`"#, type: #"int"#, defaultValue: #"1000, 60000"#,
            meaning: #"reconnect backoff with full jitter"#),
        Row(key: #"`[outbox] max_events`, `max_bytes`"#, type: #"int"#, defaultValue: #"20000, 16 MiB"#,
            meaning: #"bounds of the durable queue. Beyond them the oldest event of the lowest tier is evicted (telemetry, then presence, then the gateway's own reports, presses last: see Durability), counted, logged, and reported to the cloud in a `gateway.evicted` event written in the same transaction; an evicted report's list is carried on by the next, so every gap in `sequence` is explained. No TTL: nothing expires by age."#),
        Row(key: #"`[clock] require_sync`"#, type: #"bool"#, defaultValue: #"`true`"#,
            meaning: #"hold delivery until the wall clock is NTP-synchronized (a Pi has no RTC; receivers reject stale timestamps). Events are still recorded and ring locally; on sync their `occurred_at` is corrected from the monotonic clock. `board/sim` sets it `false`."#),
        Row(key: #"`[clock] sync_file`"#, type: #"path"#, defaultValue: #"`/run/systemd/timesync/synchronized`"#,
            meaning: #"present = synchronized (systemd-timesyncd's flag)"#),
        Row(key: #"`[clock] kernel_check`"#, type: #"bool"#, defaultValue: #"`true`"#,
            meaning: #"otherwise trust the kernel's NTP state (adjtimex), for chrony (with `rtcsync`, as Debian ships it) and ntpd"#),
        Row(key: #"`[[action]] name`"#, type: #"string"#, defaultValue: #"`action-N`"#,
            meaning: #"shown in status and logs"#),
        Row(key: #"`[[action]] gpio_pulse`"#, type: #"table"#, defaultValue: #""#,
            meaning: #"`{ chip = "pinctrl-bcm2711", line = 17, active_low = true, duration_ms = 300 }`: drives a chime relay or buzzer for the duration, then releases the line. Failures (no chip, line busy) show in `agentctl status` and the log, as a problem until a pulse works again."#),
        Row(key: #"`[[action]] gpio_pulse.chip`, `gpio_pulse.line`, `gpio_pulse.active_low`, `gpio_pulse.duration_ms`"#, type: #"string, int, bool, int"#, defaultValue: #"–, –, `false`, 300"#,
            meaning: #"the chip by label (as `[radio.ook] chip`), the line offset (BCM number on a Pi), the level that means on, and how long it stays on (10–60000 ms)"#),
        Row(key: #"`[[action]] exec`"#, type: #"string array (this, `gpio_pulse` or `answer_phones` required)"#, defaultValue: #""#,
            meaning: #"absolute program path (or `./name` beside the config) and arguments, run without a shell the moment an event exists — before it is stored or sent, so the chime rings with the internet down. Environment: `DOORBELL_EVENT_TYPE`, `DOORBELL_DEVICE_ID`, `DOORBELL_DEVICE_NAME`, `DOORBELL_OCCURRED_AT`, `DOORBELL_TEST`, `DOORBELL_EVENT_JSON`"#),
        Row(key: #"`[[action]] answer_phones`"#, type: #"bool (with `[radio.ble] ancs`)"#, defaultValue: #"`false`"#,
            meaning: #"answers the door: the events this action's `on` (default here `["door.answered"]`: every `kind = "answer_button"` device) and `devices` select perform the negative action on the ringing doorbell notification of every connected phone, as `agentctl answer` does. Alone in its action (no `exec` or `gpio_pulse` beside it). The log says what was dismissed on how many phones, or that no doorbell notification was ringing."#),
        Row(key: #"`[[action]] on`"#, type: #"string array"#, defaultValue: #"`["doorbell.pressed"]`"#,
            meaning: #"event types (`["door.answered"]` for an `answer_phones` action)"#),
        Row(key: #"`[[action]] devices`"#, type: #"string array"#, defaultValue: #"all"#,
            meaning: #"device ids"#),
        Row(key: #"`[[action]] timeout_ms`"#, type: #"int"#, defaultValue: #"10000"#,
            meaning: #"killed (its whole process group) after this"#),
        Row(key: #"`[[action]] max_running`"#, type: #"int"#, defaultValue: #"2"#,
            meaning: #"a press arriving while this many still run is skipped and counted: a storm stays bounded"#),
        Row(key: #"`[metrics] file`"#, type: #"path ending `.prom`"#, defaultValue: #"off"#,
            meaning: #"Prometheus text metrics, rewritten atomically (node_exporter textfile collector): frames, observations, events by type, deliveries, failures by reason, outbox depth and oldest age, press→delivered latency histogram, RSS, clock state"#),
        Row(key: #"`[metrics] interval_s`"#, type: #"int"#, defaultValue: #"15"#,
            meaning: #"how often the file is rewritten"#),
        Row(key: #"`[memory] release_clean_pages`"#, type: #"bool"#, defaultValue: #"`true`"#,
            meaning: #"1 s after start-up, and after a burst of work (100 events stored or answered since the last time, then a minute without any), unmap the clean pages of the binary's and its libraries' read-only segments (code and constants that start-up or the burst ran): they stay in the page cache, are the first the kernel reclaims under memory pressure, and fault back in when used (the next press ≈ 0.15 ms slower, once). Idle VmRSS ≈ 6 MiB instead of ≈ 17, after a 2,000-event drain ≈ 8 instead of ≈ 22 (docs/benchmarks.md, "Clean pages given back"); VmHWM keeps the peak. Pages a write or a relocation touched are never unmapped. The log's `memory.released` (info) says how much each time"#),
        Row(key: #"`[update] url`"#, type: #"http(s) URL"#, defaultValue: #"off"#,
            meaning: #"field image only: where `doorbell-update.timer` (every 6 h, spread over an hour) looks for a newer RAUC bundle; a newer signed version is streamed into the other slot and tried once (README, "Make a field image")"#),
    ]

    /// The README's table, byte for byte.
    public static var markdown: String {
        (["| key | type | default | meaning |", "|---|---|---|---|"]
            + rows.map { r in "|" + [r.key, r.type, r.defaultValue, r.meaning].map { $0.isEmpty ? " " : " \($0) " }.joined(separator: "|") + "|" })
            .joined(separator: "\n")
    }

    /// Keys whose own keys are free (a device's `match` names rtl_433 fields).
    public static let freeForm: Set<String> = ["device.match"]

    /// Every key as a dotted path ("radio.rtl433.restart_max_ms", "device.bindkey").
    public static var keyPaths: Set<String> {
        var out: Set<String> = []
        for row in rows {
            var section = ""
            for var part in row.key.split(separator: ",").map({ $0.trimmingCharacters(in: " `") }) {
                if part.hasPrefix("[") {
                    let close = part.lastIndex(of: "]") ?? part.startIndex
                    section = String(part[..<close]).trimmingCharacters(in: "[] ")
                    part = String(part[part.index(after: close)...]).trimmingCharacters(in: " ")
                }
                out.insert(section.isEmpty ? part : section + "." + part)
            }
        }
        return out
    }
}
