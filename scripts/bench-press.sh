#!/usr/bin/env bash
# The press → receiver rows of `make bench` (issue #28): the agent beside a plain Python peer, in
# rounds, each round the agent then the peer against a fresh stdlib HTTPS receiver that logs the
# wall time each request arrives. The agent's radio stand-in (uplink_peer.py radio) stamps each
# press line it writes (two codes alternating, so no line repeats the one before); the peer
# (uplink_peer.py presses) signs (v1 + v1a) and POSTs one press per interval on a kept-alive
# connection, not durable. p99 of 200 presses is the second-worst one and swings several times
# over for the peer alone, so each round has many presses and the figure is the median of the
# per-round p99 ratios, with every round's ratio and load beside it.
# Usage: bench-press.sh AGENT BENCH WORKDIR PYTHON [LABEL]; prints name<TAB>value<TAB>unit<TAB>method
# rows (bench.sh adds the load average to each). LABEL suffixes the row names (a baseline binary
# measured beside the current one). BENCH_LATENCY_PRESSES (default 1000) per round,
# BENCH_LATENCY_INTERVAL (0.03 s), BENCH_LATENCY_ROUNDS (3). BENCH_LATENCY_PRELOAD: an LD_PRELOAD
# for the agent only (a slow-fsync shim: it slows the agent, never the peer).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
agent=$1 bench=$2 work=$3 py=$4 label=${5:+_$5}
n=${BENCH_LATENCY_PRESSES:-1000}
interval=${BENCH_LATENCY_INTERVAL:-0.03}
rounds=${BENCH_LATENCY_ROUNDS:-3}
mkdir -p "$work"
[ -s "$work/pki/ca.pem" ] || scripts/make-test-pki.sh "$work/pki" >/dev/null
[ -s "$work/g.whsec" ] || echo "whsec_$(openssl rand -base64 24)" > "$work/g.whsec"
[ -s "$work/device.key" ] || { head -c 32 /dev/urandom > "$work/device.key"; chmod 600 "$work/device.key"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# One round in $work/r$1: sets a50 a99 p50 p99 n_agent n_peer and the load after it.
round() {
  local d=$work/r$1 rpid apid steal0
  # CPU time the hypervisor gave to others (/proc/stat steal, in ticks): this box's 2 cores are
  # shared, and a round the host took cores from is a round whose tail says little of the agent.
  steal0=$(awk '/^cpu / {print $9}' /proc/stat)
  rm -rf "$d"; mkdir -p "$d/state"; cp "$work/device.key" "$d/state/"
  python3 Tests/helpers/https_test_server.py --cert "$work/pki/server.pem" --key "$work/pki/server.key" --script 200 \
    --log "$d/recv.jsonl" --ready-file "$d/recv.json" --max-seconds 1800 & rpid=$!; pids+=($rpid)
  for _ in $(seq 1 200); do [ -s "$d/recv.json" ] && break; sleep 0.05; done
  local port; port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$d/recv.json")
  printf '#!/bin/sh\nexec "%s" "%s" radio %d %s "%s"\n' "$py" "$root/Tests/helpers/uplink_peer.py" "$n" "$interval" "$d/radio.stamps" > "$d/radio.sh"
  chmod +x "$d/radio.sh"
  cat > "$d/agent.toml" <<CONF
gateway_id = "gw-bench"
[paths]
state_dir = "$d/state"
control_socket = "$d/agent.sock"
[log]
level = "warning"
[clock]
require_sync = false
[radio.rtl433]
binary = "$d/radio.sh"
[uplink]
url = "https://127.0.0.1:$port/events"
ca_file = "$work/pki/ca.pem"
hmac_secret_file = "$work/g.whsec"
[tracker.button]
cooldown_ms = 0
repeat_gap_ms = 20
[[device]]
id = "front-door"
match = { code = "0x5A3C91" }
[[device]]
id = "back-door"
match = { code = "0x5A3C92" }
CONF
  LD_PRELOAD=${BENCH_LATENCY_PRELOAD:-} "$agent" run --config "$d/agent.toml" 2>"$d/agent.log" & apid=$!; pids+=($apid)
  # Asked only once the radio has written every press: each status request is a thread in the
  # agent (≈ 0.4 ms, the outbox read for its depth), and asked every 100 ms during the presses it
  # landed in the agent's p99 — the peer's rounds have no such visitor.
  sleep "$(python3 -c "print($n * $interval + 1)")"
  "$bench" wait-drained "$d/agent.sock" "$n" || { echo "bench-press: the presses were not delivered within 10 minutes; see $d/agent.log" >&2; exit 1; }
  kill $apid; wait $apid 2>/dev/null || true
  "$bench" prefill "$d/peer.sqlite" gw-bench "$((n + 1))"
  "$py" Tests/helpers/uplink_peer.py presses "$d/peer.sqlite" "https://127.0.0.1:$port/events" "$work/pki/ca.pem" \
    "$work/g.whsec" "$work/device.key" "$((n + 1))" "$interval" > "$d/peer.json"
  sleep 0.5
  kill $rpid; wait $rpid 2>/dev/null || true
  # Each of the agent's events goes with the last radio line written before its occurred_at (a
  # frame is read within a few ms of its line), the peer's in order (one POST at a time).
  read -r a50 a99 p50 p99 n_agent n_peer <<<"$(python3 - "$d/radio.stamps" "$d/recv.jsonl" "$d/peer.json" <<'PY'
import bisect, datetime, json, sys
radio = sorted(float(l.split()[0]) for l in open(sys.argv[1]))
peer = json.load(open(sys.argv[3]))
logged = [json.loads(l) for l in open(sys.argv[2])]
def q(xs, p): xs = sorted(xs); return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000
agent = []
for l in logged:
    if l["t"] >= peer["t_start"]: continue
    occurred = datetime.datetime.fromisoformat(json.loads(l["body"])["occurred_at"].replace("Z", "+00:00")).timestamp()
    k = bisect.bisect_right(radio, occurred + 0.0005) - 1
    if k >= 0: agent.append(l["t"] - radio[k])
peer_lat = [e - t for t, e in zip(peer["t_press"], [l["t"] for l in logged if l["t"] >= peer["t_start"]][1:])]
print("%.3f %.3f %.3f %.3f %d %d" % (q(agent, .5), q(agent, .99), q(peer_lat, .5), q(peer_lat, .99), len(agent), len(peer_lat)))
PY
)"
  read -r load _ < /proc/loadavg
  steal=$(( $(awk '/^cpu / {print $9}' /proc/stat) - steal0 ))
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
A50=() A99=() P50=() P99=() R=() detail=()
for i in $(seq 1 "$rounds"); do
  round "$i"
  r=$(python3 -c "print(round($a99 / $p99, 2))")
  A50+=("$a50") A99+=("$a99") P50+=("$p50") P99+=("$p99") R+=("$r")
  detail+=("$r (agent $a50/$a99, peer $p50/$p99 ms, $n_agent/$n_peer presses, load $load, steal $steal ticks)")
done
rs=$(printf '%s\n' "${R[@]}" | sort -g | tr '\n' ' ')
printf 'press_to_receiver_p50%s\t%s\tms\t%s\n' "$label" "$(median "${A50[@]}")" "median of $rounds rounds of $n presses (radio lines, one every $interval s, two codes alternating) → the stdlib HTTPS receiver's log line for it: the agent stores (fsync), signs and POSTs"
printf 'press_to_receiver_p99%s\t%s\tms\t%s\n' "$label" "$(median "${A99[@]}")" "median of the rounds' 99th percentiles"
printf 'press_python_peer_p50%s\t%s\tms\t%s\n' "$label" "$(median "${P50[@]}")" "same rounds, CPython (sign v1 + v1a, POST on a kept-alive connection, not durable) → the same receiver (uplink_peer.py presses)"
printf 'press_python_peer_p99%s\t%s\tms\t%s\n' "$label" "$(median "${P99[@]}")" "median of the rounds' 99th percentiles"
printf 'press_p99_ratio_agent_to_python%s\t%s\t×\t%s\n' "$label" "$(median "${R[@]}")" "median of per-round p99 ratios (goal ≤ 1.3), spread ${rs% }; rounds: $(IFS=';'; echo "${detail[*]}")"
