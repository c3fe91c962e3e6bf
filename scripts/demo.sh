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

rm -rf "$work/state" "$work/cloud.sqlite" "$work"/*.log "$work/chime.log"
mkdir -p "$work"
scripts/make-test-pki.sh "$work/pki"
[ -s "$work/gateway.whsec" ] || echo "whsec_$(openssl rand -base64 24)" > "$work/gateway.whsec"

"$agent" check-config "$config"
# Enrollment: the receiver learns the gateway's public key before the first event.
"$agent" pubkey --config "$config" > "$work/gateway.pub"
echo "demo: gateway public key $(cat "$work/gateway.pub")"

"$cloud" serve --host 127.0.0.1 --port $port --ready-file "$work/cloud-ready.json" \
  --tls-cert "$work/pki/server.pem" --tls-key "$work/pki/server.key" --db "$work/cloud.sqlite" \
  --gateway-secret "$work/gateway.whsec" --gateway-public-key "$work/gateway.pub" \
  > "$work/cloud.log" 2> "$work/cloud.err" &
pids+=($!)
rm -f "$work/cloud-ready.json"
for _ in $(seq 1 300); do [ -s "$work/cloud-ready.json" ] && break; sleep 0.1; done
[ -s "$work/cloud-ready.json" ] || { echo "demo: receiver did not start:"; cat "$work/cloud.err"; exit 1; }
echo "demo: receiver listening on https://127.0.0.1:$port"

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
echo "=== agentctl status ==="
"$agentctl" status --socket "$work/control.sock" || true
echo
if [ -z "$delivered" ]; then
  echo "demo: FAILED — no delivered event. Agent log:"; tail -n 30 "$work/agent.log"; exit 1
fi
echo "demo: done (logs in .work/sim/)"
