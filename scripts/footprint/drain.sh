#!/usr/bin/env bash
# drain.sh AGENT TAG N [ENV=VAL...]: prefill N events, start agent against https_test_server.py, wait drained,
# print wall, cpu, HWM, RSS/PD at the end, faults; a copy of /proc/PID/smaps at that moment to $SNAP if set.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/common.sh"
agent=$1; tag=$2; n=$3; shift 3
st=$w/drain-$tag; rm -rf $st; mkdir -p $st
$bench prefill $st/outbox.sqlite gw-bench $n
[ -f $w/device.key ] && cp $w/device.key $st/
rm -f $w/srv-$tag.json
python3 $repo/Tests/helpers/https_test_server.py --cert $w/pki/server.pem --key $w/pki/server.key --log /dev/null --ready-file $w/srv-$tag.json --max-seconds 900 >/dev/null 2>&1 & spid=$!
for _ in $(seq 1 200); do [ -s $w/srv-$tag.json ] && break; sleep 0.05; done
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' $w/srv-$tag.json)
fp_conf drain-$tag $st "https://127.0.0.1:$port/events"
t0=$(date +%s.%N)
env "$@" $agent run --config $w/drain-$tag.toml 2>$w/drain-$tag.log & pid=$!
$bench wait-drained $w/drain-$tag.sock
t1=$(date +%s.%N)
[ -f $w/device.key ] || cp $st/device.key $w/device.key
r() { fp_field $pid "$@"; }
printf '%s n %s wall %.2f s cpu %s ticks HWM %s RSS %s PD %s minflt %s majflt %s load %s\n' "$tag" $n "$(python3 -c "print($t1-$t0)")" "$(awk '{print $14+$15}' /proc/$pid/stat)" "$(r status VmHWM)" "$(r status VmRSS)" "$(r smaps_rollup Private_Dirty)" "$(awk '{print $10}' /proc/$pid/stat)" "$(awk '{print $12}' /proc/$pid/stat)" "$(cut -d' ' -f1 /proc/loadavg)"
if [ -n "${SNAP:-}" ]; then cp /proc/$pid/smaps $SNAP; fi
kill $pid; wait $pid 2>/dev/null || true
kill $spid; wait $spid 2>/dev/null || true
