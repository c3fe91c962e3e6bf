#!/usr/bin/env bash
# make-order-file.sh AGENT [OUT]: writes the link order of the agent's code (default
# packaging/doorbell-agent.order), which release builds hand to lld (Package.swift).
# Why: on a file page fault the kernel maps up to 15 cached neighbours as well (fault-around,
# 64 KiB), so the code that start-up and idle run, scattered over the 6.7 MB of text, kept ≈ 6 MiB
# of the binary resident at idle (docs/benchmarks.md, "Code laid out by use"). Laid out next to
# each other, those functions fill ≈ 550 KB and most of the rest of the text is never mapped.
# How: AGENT (a release build with its symbols) runs under callgrind as a gateway starts: the
# config `make bench` idles with (common.sh's fp_conf), but with a receiver (Tests/helpers/https_test_server.py) at its
# uplink URL; start-up, then ten seconds idle, then its counters are dumped. Every function of the
# binary that ran is written, in the order callgrind lists them (measured: that order keeps idle
# VmRSS 0.7 MiB lower than the same functions sorted by name, and adding the functions a press
# runs after them costs idle 0.6 MiB and gains nothing after a drain). Not byte-stable between
# runs. A function renamed since is ignored by the linker and one added is laid out as before:
# regenerate after large changes (the idle RSS row of `make bench` shows when it has gone stale).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
agent=$(realpath "${1:?usage: make-order-file.sh AGENT [OUT]}")
out=${2:-$root/packaging/doorbell-agent.order}
command -v valgrind >/dev/null || { echo "make-order-file: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
FP_DIR=$(mktemp -d /tmp/doorbell-order.XXXXXX)
. scripts/footprint/common.sh
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$fp"; }
trap cleanup EXIT
mkdir -p "$w/state"
# valgrind's reader gives up on the Swift toolchain's DWARF 5; the symbol table is all it needs.
objcopy --strip-debug "$agent" "$w/agent"
scripts/make-test-pki.sh "$w/pki" >/dev/null
echo "whsec_$(openssl rand -base64 24)" > "$w/g.whsec"
printf '#!/bin/sh\nexec sleep 100000\n' > "$w/quiet.sh"
chmod +x "$w/quiet.sh"
python3 Tests/helpers/https_test_server.py --cert "$w/pki/server.pem" --key "$w/pki/server.key" --script 200 \
  --log "$w/recv.jsonl" --ready-file "$w/recv.json" --max-seconds 600 >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 1 200); do [ -s "$w/recv.json" ] && break; sleep 0.05; done
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$w/recv.json")
fp_conf order "$w/state" "https://127.0.0.1:$port/events"
# The unit's environment (systemd/doorbell-agent.service), as make bench runs it.
GNUTLS_NO_IMPLICIT_INIT=1 valgrind -q --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
  --compress-pos=no --callgrind-out-file="$w/cg.out" "$w/agent" run --config "$w/order.toml" 2>"$w/agent.log" & apid=$!
pids+=($apid)
for _ in $(seq 1 600); do [ -S "$w/order.sock" ] && break; sleep 0.1; done
[ -S "$w/order.sock" ] || { echo "make-order-file: the agent did not start in 60 s; its log:" >&2; cat "$w/agent.log" >&2; exit 1; }
sleep 10
kill -TERM $apid
wait $apid || { echo "make-order-file: the agent did not stop cleanly:" >&2; cat "$w/agent.log" >&2; exit 1; }
[ -s "$w/cg.out" ] || { echo "make-order-file: callgrind wrote nothing" >&2; exit 1; }
python3 - "$w/agent" "$out" "$w/cg.out" <<'PY'
import subprocess, sys
binary, out, dump = sys.argv[1:]
defined = set()
for line in subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTW":
        defined.add(parts[2])
ran, seen, obj = [], set(), None
for line in open(dump):
    if line.startswith("ob="):
        obj = line[3:].strip()
    elif line.startswith("fn=") and obj == binary:
        name = line[3:].strip()
        if name in defined and name not in seen:
            seen.add(name)
            ran.append(name)
if len(ran) < 200:
    sys.exit(f"make-order-file: only {len(ran)} functions of the agent ran to idle; expected about a thousand")
with open(out, "w") as f:
    f.write("".join(n + "\n" for n in ran))
print(f"make-order-file: {len(ran)} functions that ran to idle → {out}")
PY
