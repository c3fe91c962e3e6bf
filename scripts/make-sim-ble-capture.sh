#!/usr/bin/env bash
# Re-makes board/sim/recordings/garden.btsnoop: the agent scans the virtual controller
# (Tests/helpers/ble, scenario board/sim/recordings/garden.scenario.json) and `agentctl capture`
# records the HCI traffic. Needs .venv (scripts/venv.sh) and a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=$(scripts/venv.sh)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
timeout 60 "$py" Tests/helpers/ble/virtual_radio.py --port 0 --scenario board/sim/recordings/garden.scenario.json --seed 1 \
  --max-seconds 40 --ready-file "$work/ready.json" --truth "$work/truth.jsonl" > /dev/null 2>&1 &
for _ in $(seq 1 100); do [ -s "$work/ready.json" ] && break; sleep 0.1; done
port=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['port'])" "$work/ready.json")
cat > "$work/agent.toml" <<TOML
gateway_id = "gw-capture"
[paths]
state_dir = "$work/state"
control_socket = "$work/control.sock"
[clock]
require_sync = false
[radio.ble]
transport = "tcp"
address = "127.0.0.1:$port"
TOML
.build/debug/doorbell-agent run --config "$work/agent.toml" 2> "$work/agent.log" &
for _ in $(seq 1 100); do .build/debug/agentctl status --socket "$work/control.sock" >/dev/null 2>&1 && break; sleep 0.1; done
.build/debug/agentctl capture --seconds 9 --out "$root/board/sim/recordings/garden.btsnoop" --socket "$work/control.sock"
