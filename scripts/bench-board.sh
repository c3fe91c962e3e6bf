#!/usr/bin/env bash
# make bench BENCH_BOARD=1 (or run by hand, as root): the agent's figures on the board it is made
# for (issue #25), written into docs/benchmarks.md between the board-bench markers.
# - Stripped sizes of doorbell-agent and agentctl in the arm64 trixie, arm64 bookworm and amd64
#   bookworm packages (built with `make deb ARCH=… DIST=…` when .work/deb/<dist>/ has none).
# - Inside the field rig's arm64 Debian 13 board (qemu-system-aarch64 -M virt, Cortex-A72, TCG) and,
#   the same way, inside its amd64 Debian 12 PC guest (qemu-system-x86_64, TCG): the footprint idle
#   and while draining BENCH_BACKLOG (10000) prefilled events to the rig's HTTPS receiver, and
#   `doorbell-agent replay` of a BENCH_BOARD_ADVERTS-advert (50000) btsnoop capture, median of
#   BENCH_BOARD_RUNS (3) (scripts/field-rig/bench_board_guest.sh). Outbox and capture are made on
#   the host by doorbell-bench (prefill, ble-capture) as scripts/bench.sh makes them.
# Both guests are emulated: times are reported as arm64/x86_64 ratios only; memory is meaningful.
# BOARD_DEB and PC_DEB name other packages. Guest images are the rig's cached ones (run.sh builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
backlog=${BENCH_BACKLOG:-10000}
adverts=${BENCH_BOARD_ADVERTS:-50000}
runs=${BENCH_BOARD_RUNS:-3}
work=$root/.work/bench-board
# BENCH_BOARD_REUSE=1: the guests' figures of the last run ($work/results.jsonl) are kept, the
# sizes read again and the section rewritten (e.g. once a missing package has been built).
reuse=${BENCH_BOARD_REUSE:-0}
[ "$(id -u)" -eq 0 ] || { echo "bench-board: needs root (the cross build's chroot, the rig's guests)" >&2; exit 1; }
if [ "$reuse" = 1 ]; then
  [ -s "$work/results.jsonl" ] || { echo "bench-board: no $work/results.jsonl to reuse: run without BENCH_BOARD_REUSE" >&2; exit 1; }
  rm -rf "$work"/x-*
else
  rm -rf "$work"; mkdir -p "$work"
fi

# The packages, newest of each kind; built when missing.
deb() { # dist arch
  local d
  d=$(ls -t .work/deb/$1/doorbell-agent_*_$2.deb 2>/dev/null | head -1)
  if [ -z "$d" ]; then ARCH=$2 DIST=$1 scripts/make-deb.sh >&2; d=$(ls -t .work/deb/$1/doorbell-agent_*_$2.deb | head -1); fi
  realpath "$d"
}
board_deb=${BOARD_DEB:-$(deb trixie arm64)}
pc_deb=${PC_DEB:-$(deb bookworm amd64)}
mib() { python3 -c "import os,sys; print('%.2f' % (os.path.getsize(sys.argv[1]) / 1048576))" "$1"; }
sizes=()
for spec in "trixie arm64" "bookworm arm64" "bookworm amd64"; do
  set -- $spec
  case "$1 $2" in "trixie arm64") d=$board_deb ;; "bookworm amd64") d=$pc_deb ;; *) d=$(deb "$1" "$2") ;; esac
  x=$work/x-$1-$2; dpkg-deb -x "$d" "$x"
  sizes+=("| \`ARCH=$2 DIST=$1\` | $(mib "$x/usr/bin/doorbell-agent") MiB | $(mib "$x/usr/bin/agentctl") MiB | $(mib "$d") MiB | $(basename "$d") |")
done

if [ "$reuse" != 1 ]; then
  # The backlog and the capture, as make bench makes them.
  swift build --product doorbell-bench >&2
  bench=$root/.build/debug/doorbell-bench
  "$bench" prefill "$work/outbox.sqlite" gw-bench "$backlog"
  "$bench" ble-capture "$adverts" "$work/capture.btsnoop"

  # Both guests at once, so both see the same load on the host (2 cores: the board's 2 vCPUs and
  # the PC's one share them with the receivers).
  cd scripts/field-rig
  export RIG_WORK=$work/rig
  python3 -c 'import os, rig; rig.make_pki(os.path.join(rig.WORK, "pki"))'
  pids=()
  for spec in "arm64-trixie=$board_deb" "amd64-bookworm=$pc_deb"; do
    python3 bench_board.py "$work" "$work/outbox.sqlite" "$work/capture.btsnoop" "$adverts" "$backlog" "$runs" "$spec" \
      > "$work/${spec%%=*}.json" 2> "$work/${spec%%=*}.log" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "bench-board: a guest's run failed; see $work/*.log" >&2; tail -20 "$work"/*.log >&2; exit 1; }; done
  cd "$root"
  cat "$work/arm64-trixie.json" "$work/amd64-bookworm.json" > "$work/results.jsonl"
fi

machine="$(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
python3 - "$work/results.jsonl" "$work/section.md" "$machine" "$(date -u +%Y-%m-%d)" "$backlog" "$(printf '%s\n' "${sizes[@]}")" <<'PY'
import json, sys
results, table_out, machine, day, backlog, sizes = sys.argv[1:7]
by = {r["platform"]: r for r in map(json.loads, open(results))}
arm, pc = by["arm64-trixie"], by["amd64-bookworm"]
value = lambda r, k: next((row for row in r["rows"] if row[0] == k), None)
# Ratios: memory as arm64/x86_64; times as how much slower the board is (x86_64 rate / arm64 rate,
# or arm64 CPU / x86_64 CPU), so every ratio above 1 means "the board needs more".
slower = {"drain_events_per_s", "replay_adverts_per_s"}
lines = []
for row in arm["rows"]:
    name, v, unit, method = row
    other = value(pc, name)
    if name == "guest" or other is None:
        continue
    a, b = float(v), float(other[1])
    ratio = (b / a if name in slower else a / b) if a and b else float("nan")
    lines.append(f"| {name} | {v} | {other[1]} | {unit} | {ratio:.2f}× | {method} |")
load = lambda r: "%.1f → %.1f" % tuple(r["host_load"])
table = f"""<!-- board-bench:start -->
## On the board: arm64 in the emulated aarch64 guest beside x86_64 (`scripts/bench-board.sh`, {day}, host {machine})
Both columns measured the same way by `scripts/field-rig/bench_board_guest.sh` inside a field-rig
guest under qemu TCG, both guests at once: **arm64** = {arm["deb"]} on the Debian 13 `virt` board
(Cortex-A72; {value(arm, "guest")[1]}); **x86_64** = {pc["deb"]} on the Debian 12 PC guest
({value(pc, "guest")[1]}). Host load average (1 min) at boot → end: arm64 {load(arm)}, x86_64
{load(pc)}; the rig's receiver accepted {arm["accepted"]} and {pc["accepted"]} requests. Memory
figures are the target's own. **Times under emulation mean nothing absolutely**: the ratio column says how much more
the board needs (memory arm64/x86_64; time x86_64 rate/arm64 rate, or arm64 CPU/x86_64 CPU), and
for times it mixes TCG's cost of emulating each instruction set with the code's own.

| figure | arm64 | x86_64 | unit | arm64 ÷ x86_64 | method |
|---|---|---|---|---|---|
{chr(10).join(lines)}

Stripped binaries in the packages (`make deb ARCH=… DIST=…`):

| package | doorbell-agent | agentctl | .deb | file |
|---|---|---|---|---|
{sizes}
<!-- board-bench:end -->"""
open(table_out, "w").write(table)
print(table)
PY
python3 scripts/doc-section.py docs/benchmarks.md board-bench "$(cat "$work/section.md")"
echo "bench-board: written to docs/benchmarks.md" >&2
