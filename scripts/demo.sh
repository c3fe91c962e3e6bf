#!/usr/bin/env bash
# make demo: the sim board end to end. A recorded doorbell press goes through rtl_433, another
# bell's receiver-pin timeline through the agent's own OOK decoder (the GPIO path), a BLE
# capture (BTHome button, a visitor's iBeacon) through the BLE decoders and trackers; the agent
# rings the local chime at once and sends each press (decode → press → durable outbox → signed
# HTTPS) to the reference receiver, which verifies both signatures and prints the event. Then
# `agentctl status`, then everything stops.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/.work/sim
agent=$root/.build/debug/doorbell-agent
agentctl=$root/.build/debug/agentctl
cloud=$root/cloud/.build/debug/doorbell-cloud
config=$root/board/sim/agent.toml
port=8443
topic=com.example.doorbell
apns_team=DEMOTEAM01
apns_key_id=DEMOKEY001

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
  echo "demo: port $port is busy; stop whatever listens there (ss -ltnp | grep $port) and run make demo again" >&2
  exit 1
fi

rm -rf "$work/state" "$work"/cloud.sqlite* "$work"/*.log "$work/chime.log" "$work/apns.jsonl" "$work"/*-ready.json
mkdir -p "$work"
py=$(scripts/venv.sh)  # the APNs test server's Python (h2, cryptography); made once, from PyPI
scripts/make-test-pki.sh "$work/pki"
[ -s "$work/gateway.whsec" ] || echo "whsec_$(openssl rand -base64 24)" > "$work/gateway.whsec"
gateway=$(sed -n 's/^gateway_id *= *"\(.*\)".*/\1/p' "$config")

# api METHOD PATH TOKEN [JSON]: one call to the receiver's app API; prints the JSON answer,
# fails (with the answer) unless it is 2xx.
api() {
  "$py" - "https://127.0.0.1:$port" "$work/pki/ca.pem" "$@" <<'PY'
import json, ssl, sys, urllib.error, urllib.request
base, ca, method, path, token = sys.argv[1:6]
body = sys.argv[6].encode() if len(sys.argv) > 6 else None
request = urllib.request.Request(base + path, data=body, method=method,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                     urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
try:
    with opener.open(request, timeout=10) as response:
        print(response.read().decode())
except urllib.error.HTTPError as e:
    sys.exit(f"demo: {method} {path} answered {e.code}: {e.read().decode()}")
PY
}
# json FIELD: a field of the JSON object on stdin.
json() { "$py" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# The APNs side: Apple's .p8 signing key (ES256, PKCS#8) for the receiver, its public half for
# the test server, which checks every provider token with it.
openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out "$work/apns.p8"
openssl ec -in "$work/apns.p8" -pubout -out "$work/apns.pub.pem" 2>/dev/null
"$py" Tests/helpers/apns_test_server.py --cert "$work/pki/server.pem" --key "$work/pki/server.key" \
  --port 0 --ready-file "$work/apns-ready.json" --team-id $apns_team --key-id $apns_key_id \
  --public-key "$work/apns.pub.pem" --topic $topic --log "$work/apns.jsonl" --max-seconds 600 \
  > /dev/null 2> "$work/apns.err" &
pids+=($!)
for _ in $(seq 1 300); do [ -s "$work/apns-ready.json" ] && break; sleep 0.1; done
[ -s "$work/apns-ready.json" ] || { echo "demo: APNs test server did not start:"; cat "$work/apns.err"; exit 1; }
apns_url=https://127.0.0.1:$(json port < "$work/apns-ready.json")
echo "demo: APNs test server listening on $apns_url (HTTP/2, checks ES256 provider tokens)"

# The owner, made straight in the receiver's database (no admin token needed).
owner=$("$cloud" account create --db "$work/cloud.sqlite" --name "Demo owner")
owner_token=$(json token <<<"$owner")
echo "demo: account $(json id <<<"$owner") (\"Demo owner\") created with doorbell-cloud account create"

"$agent" check-config "$config"
# Enrollment: the receiver learns the gateway's public key before the first event.
"$agent" pubkey --config "$config" > "$work/gateway.pub"
echo "demo: gateway public key $(cat "$work/gateway.pub")"

"$cloud" serve --host 127.0.0.1 --port $port --ready-file "$work/cloud-ready.json" \
  --tls-cert "$work/pki/server.pem" --tls-key "$work/pki/server.key" --db "$work/cloud.sqlite" \
  --apns-key "$work/apns.p8" --apns-key-id $apns_key_id --apns-team-id $apns_team --apns-topic $topic \
  --apns-sandbox-url "$apns_url" --apns-production-url "$apns_url" --apns-ca "$work/pki/ca.pem" \
  > "$work/cloud.log" 2> "$work/cloud.err" &
pids+=($!)
rm -f "$work/cloud-ready.json"
for _ in $(seq 1 300); do [ -s "$work/cloud-ready.json" ] && break; sleep 0.1; done
[ -s "$work/cloud-ready.json" ] || { echo "demo: receiver did not start:"; cat "$work/cloud.err"; exit 1; }
echo "demo: receiver listening on https://127.0.0.1:$port"

# Enrollment: the owner claims the gateway with its public key and secret (both signatures then
# verify against the enrolled keys), and registers two phones of a development build.
api POST /gateways "$owner_token" \
  "{\"id\":\"$gateway\",\"public_key\":\"$(cat "$work/gateway.pub")\",\"secret\":\"$(cat "$work/gateway.whsec")\"}" > /dev/null
echo "demo: gateway $gateway enrolled by the owner"
phones=()
for _ in 1 2; do
  token=$(openssl rand -hex 32)
  # The app's per-installation secret comes with every registration (docs/protocol.md).
  api PUT "/phones/$token" "$owner_token" "{\"environment\":\"sandbox\",\"bundle_id\":\"$topic\",\"installation_secret\":\"$(openssl rand -hex 32)\"}" > /dev/null
  phones+=("$token")
done
echo "demo: phones ${phones[0]:0:8}… and ${phones[1]:0:8}… registered (sandbox, $topic)"

# The house's MQTT broker (Mosquitto on loopback) and a subscriber that shows what Home Assistant gets.
mqtt_port=$(sed -n '/^\[mqtt\]/,/^\[/s/^port *= *\([0-9]*\).*/\1/p' "$config")
if (exec 3<>/dev/tcp/127.0.0.1/$mqtt_port) 2>/dev/null; then
  echo "demo: port $mqtt_port (MQTT) is busy; stop whatever listens there and run make demo again" >&2
  exit 1
fi
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$mqtt_port" > "$work/mosquitto.conf"
mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$mqtt_port) 2>/dev/null && break; sleep 0.1; done
mosquitto_sub -h 127.0.0.1 -p "$mqtt_port" -t '#' -q 1 -F '%r %t %p' > "$work/mqtt.log" 2>&1 &
pids+=($!)
echo "demo: MQTT broker (Mosquitto) on 127.0.0.1:$mqtt_port, Home Assistant discovery on"

"$agent" run --config "$config" 2> "$work/agent.log" &
pids+=($!)

echo "demo: agent replaying board/sim/recordings/front-door.ook (rtl_433), back-door.vcd (GPIO receiver timeline) and garden.btsnoop (BLE capture) ..."
delivered=""
for _ in $(seq 1 300); do
  status=$("$agentctl" status --json --socket "$work/control.sock" 2>/dev/null || true)
  finished=$(grep -o '"state":"finished"' <<<"$status" | wc -l || true)
  events=$(grep -c '^EVENT ' "$work/cloud.log" || true)
  if [[ "$finished" -ge 3 && "$status" == *'"depth":0'* && "$events" -ge 5 ]]; then
    delivered=yes; break
  fi
  sleep 0.1
done

echo
echo "=== events delivered to the receiver (verified) ==="
grep '^EVENT ' "$work/cloud.log" | sed 's/^EVENT //' || true
echo
echo "=== the local chime (rang before any delivery) ==="
cat "$work/chime.log" 2>/dev/null || echo "(did not ring)"
echo
echo "=== stored at the receiver: the exact signed bodies (doorbell-cloud events) ==="
"$cloud" events --db "$work/cloud.sqlite" || true
echo
# The broker acknowledged everything the cloud got (bounded wait).
for _ in $(seq 1 100); do
  "$agentctl" status --json --socket "$work/control.sock" 2>/dev/null | grep -q '"mqtt":{[^}]*"pending":0' && break
  sleep 0.1
done
echo "=== what Home Assistant receives over MQTT (discovery, availability, diagnostics, entity states, events) ==="
awk '{ line = "  " $2 " " substr($0, length($1) + length($2) + 3); print (length(line) > 170 ? substr(line, 1, 167) "..." : line) }' "$work/mqtt.log" || true
echo
echo "=== agentctl status ==="
"$agentctl" status --socket "$work/control.sock" || true
echo
if [ -z "$delivered" ]; then
  echo "demo: FAILED — no delivered event. Agent log:"; tail -n 30 "$work/agent.log"; exit 1
fi

# Every doorbell event rings both phones: wait (bounded) until APNs has answered them all.
rings=$(grep -c '^EVENT .*"type":"doorbell\.' "$work/cloud.log" || true)
expected=$((rings * ${#phones[@]}))
for _ in $(seq 1 200); do
  answered=$(grep -c '"event": "request"' "$work/apns.jsonl" 2>/dev/null || true)
  [ "$answered" -ge "$expected" ] && break
  sleep 0.1
done
echo "=== pushes the APNs test server received (token, status, alert) ==="
ok=0
"$py" - "$work/apns.jsonl" "$expected" "$rings" <<'PY' || ok=$?
import collections, json, sys
log, expected, rings = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pushes = [r for r in map(json.loads, open(log)) if r["event"] == "request"]
for p in pushes:
    alert = ((p.get("payload") or {}).get("aps") or {}).get("alert") or {}
    text = f'{alert.get("title", "?")}: {alert.get("body", "?")}' if isinstance(alert, dict) else str(alert)
    print(f'PUSH {p["token"][:8]}… {p["status"]}{" " + p["reason"] if p["reason"] else ""} "{text}"')
statuses = collections.Counter(p["status"] for p in pushes)
phones = len({p["token"] for p in pushes})
answers = ", ".join(f"{n} × {s}" for s, n in sorted(statuses.items())) or "none"
print(f"\ndemo: {len(pushes)} pushes to {phones} phones for {rings} doorbell presses ({answers}); expected {expected}")
sys.exit(0 if expected > 0 and len(pushes) == expected and statuses[200] == expected else 1)
PY
echo
if [ $ok -ne 0 ]; then
  echo "demo: FAILED — the phones did not all ring. Receiver log:"; tail -n 30 "$work/cloud.err"; exit 1
fi
echo "demo: done (logs in .work/sim/)"
