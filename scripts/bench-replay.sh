#!/usr/bin/env bash
# The replay rows of `make bench` (issue #28): `doorbell-agent replay` of a btsnoop capture beside
# the Python peer (Tests/helpers/ble_replay_reference.py: bluetooth-data-tools + ibeacon-ble +
# bthome-ble, as Home Assistant decodes raw adverts), in the same run, on the same capture.
# Usage: bench-replay.sh AGENT BENCH WORKDIR PYTHON [LABEL]; prints name<TAB>value<TAB>unit<TAB>method
# rows (bench.sh adds the load average to each). LABEL (optional) suffixes the row names, so a
# baseline binary can be measured beside the current one in the same run.
# BENCH_REPLAY_ADVERTS (default 200000): the capture; BENCH_REPLAY_RUNS (3): alternating runs,
# medians taken; BENCH_REPLAY_CALLGRIND (1): 0 skips the instruction counts (they take minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
agent=$1 bench=$2 work=$3 py=$4 label=${5:+_$5}
adverts=${BENCH_REPLAY_ADVERTS:-200000}
runs=${BENCH_REPLAY_RUNS:-3}
mkdir -p "$work"
capture=$work/replay-$adverts.btsnoop
long=$work/replay-$((adverts * 10)).btsnoop
[ -s "$capture" ] || "$bench" ble-capture "$adverts" "$capture"
[ -s "$long" ] || "$bench" ble-capture "$((adverts * 10))" "$long"

# One run of a command, stdout to a file: wall seconds, peak RSS (KiB), exit status, CPU seconds
# (scripts/measure-run.py; the board's figures, scripts/bench-board.sh, use it in the guests too).
measure() { python3 scripts/measure-run.py "$@"; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

agent_s=() peer_s=() agent_rss=() peer_rss=() agent_cpu=() peer_cpu=()
for _ in $(seq 1 "$runs"); do
  read -r s rss rc cpu < <(measure "$work/replay-agent.jsonl" "$agent" replay "$capture")
  [ "$rc" = 0 ] || { echo "bench-replay: doorbell-agent replay failed: $(cat "$work/replay-agent.jsonl.err")" >&2; exit 1; }
  agent_s+=("$s") agent_rss+=("$rss") agent_cpu+=("$cpu")
  read -r s rss rc cpu < <(measure "$work/replay-peer.jsonl" "$py" Tests/helpers/ble_replay_reference.py "$capture")
  [ "$rc" = 0 ] || { echo "bench-replay: the Python peer failed: $(cat "$work/replay-peer.jsonl.err")" >&2; exit 1; }
  peer_s+=("$s") peer_rss+=("$rss") peer_cpu+=("$cpu")
done
as=$(printf '%s\n' "${agent_s[@]}" | median) ps=$(printf '%s\n' "${peer_s[@]}" | median)
arss=$(printf '%s\n' "${agent_rss[@]}" | median) prss=$(printf '%s\n' "${peer_rss[@]}" | median)
acpu=$(printf '%s\n' "${agent_cpu[@]}" | median) pcpu=$(printf '%s\n' "${peer_cpu[@]}" | median)
events=$(wc -l < "$work/replay-agent.jsonl") peer_events=$(wc -l < "$work/replay-peer.jsonl")
read -r ls lrss rc _ < <(measure /dev/null "$agent" replay "$long")
[ "$rc" = 0 ] || { echo "bench-replay: doorbell-agent replay of $long failed" >&2; exit 1; }
ratio=$(python3 -c "print(round($ps / $as, 1))")
printf 'replay_adverts_per_s%s\t%s\tadverts/s\t%s\n' "$label" "$(python3 -c "print(round($adverts / $as))")" \
  "doorbell-agent replay of a $adverts-advert btsnoop capture (doorbell-bench ble-capture: 40 % BTHome presses from 4096 rotating addresses, 10 % encrypted, 30 % iBeacon, 20 % noise; no config), whole process, stdout to a file, median of $runs alternating with the peer ($events events): ${ratio}× the Python peer"
printf 'replay_peak_rss%s\t%s\tMiB\t%s\n' "$label" "$(python3 -c "print(round($arss / 1024, 1))")" "same runs, wait4 ru_maxrss, median"
printf 'replay_peak_rss_10x%s\t%s\tMiB\t%s\n' "$label" "$(python3 -c "print(round($lrss / 1024, 1))")" \
  "the same replay of a capture 10× as long ($((adverts * 10)) adverts, $(python3 -c "print(round($adverts * 10 / $ls))") adverts/s): peak RSS must not grow with the capture"
if [ -z "$label" ]; then
  printf 'replay_python_peer_adverts_per_s\t%s\tadverts/s\t%s\n' "$(python3 -c "print(round($adverts / $ps))")" \
    "the same capture through Tests/helpers/ble_replay_reference.py (bluetooth-data-tools parse_advertisement_data_bytes + ibeacon-ble + bthome-ble, CPython $("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])'), streaming the file), whole process, median of $runs ($peer_events events)"
  printf 'replay_python_peer_peak_rss\t%s\tMiB\t%s\n' "$(python3 -c "print(round($prss / 1024, 1))")" "same runs, wait4 ru_maxrss, median"
fi
printf 'replay_speed_ratio%s\t%s\t×\t%s\n' "$label" "$ratio" "adverts/s of doorbell-agent replay ÷ the Python peer's, same capture, same run (goal ≥ 20×, peak RSS ≤ 32 MiB at any length)"
printf 'replay_cpu_ratio%s\t%s\t×\t%s\n' "$label" "$(python3 -c "print(round($pcpu / $acpu, 1))")" \
  "the same by CPU time (user + system, medians: the agent $acpu s, the peer $pcpu s), which the other processes on the machine disturb less than wall time"

# Instructions per advert (callgrind: independent of the load). The difference between a capture
# and one twice as long, divided by the extra adverts: start-up (Python's imports, the agent's
# config) cancels out.
if [ "${BENCH_REPLAY_CALLGRIND:-1}" = 1 ]; then
  ir() { # capture command...
    local c=$1; shift
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" "$c" 2>&1 >/dev/null | awk '/Collected :/ {print $NF}'
  }
  # Valgrind 3.19 gives up on the release binary's DWARF 5 debug info: a copy without it (the
  # symbol table stays, so callgrind_annotate still names the functions).
  cp "$agent" "$work/agent-callgrind$label"; strip --strip-debug "$work/agent-callgrind$label"
  cg=$((adverts / 10)) pcg=$((adverts / 100))
  for n in $cg $((cg * 2)) $pcg $((pcg * 2)); do [ -s "$work/replay-$n.btsnoop" ] || "$bench" ble-capture "$n" "$work/replay-$n.btsnoop"; done
  a1=$(ir "$work/replay-$cg.btsnoop" "$work/agent-callgrind$label" replay) a2=$(ir "$work/replay-$((cg * 2)).btsnoop" "$work/agent-callgrind$label" replay)
  ai=$(( (a2 - a1) / cg ))
  if [ -z "$label" ]; then
    p1=$(ir "$work/replay-$pcg.btsnoop" "$py" Tests/helpers/ble_replay_reference.py) p2=$(ir "$work/replay-$((pcg * 2)).btsnoop" "$py" Tests/helpers/ble_replay_reference.py)
    pi=$(( (p2 - p1) / pcg ))
    printf 'replay_instructions_per_advert\t%s\tinstructions\t%s\n' "$ai" \
      "callgrind: (Ir of a $((cg * 2))-advert replay − Ir of a $cg-advert one) / $cg, whole process: $(python3 -c "print(round($pi / $ai, 1))")× fewer than the Python peer"
    printf 'replay_python_peer_instructions_per_advert\t%s\tinstructions\t%s\n' "$pi" "the same for the peer on $pcg and $((pcg * 2)) adverts (CPython under callgrind is slow)"
    printf 'replay_instructions_ratio\t%s\t×\t%s\n' "$(python3 -c "print(round($pi / $ai, 1))")" "the peer's instructions per advert ÷ the agent's (goal ≥ 20×)"
  else
    printf 'replay_instructions_per_advert%s\t%s\tinstructions\t%s\n' "$label" "$ai" "callgrind, as replay_instructions_per_advert"
  fi
fi
