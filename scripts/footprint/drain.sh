#!/usr/bin/env bash
# drain.sh AGENT TAG N [ENV=VAL...]: prefill N events, start agent against https_test_server.py, wait drained,
# print wall, cpu, HWM, RSS/PD at the end, faults; sample RSS breakdown at the peak moment if SAMPLE=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
agent=$1; tag=$2; n=$3; shift 3
w=/tmp/fp/w; st=$w/drain-$tag; rm -rf $st; mkdir -p $st
bench=/tmp/fp/bench
$bench prefill $st/outbox.sqlite gw-bench $n
[ -f $w/device.key ] && cp $w/device.key $st/
py=$repo/.venv/bin/python; [ -x $py ] || py=python3
rm -f $w/srv-$tag.json
python3 $repo/Tests/helpers/https_test_server.py --cert $w/pki/server.pem --key $w/pki/server.key --log /dev/null --ready-file $w/srv-$tag.json --max-seconds 900 >/dev/null 2>&1 & spid=$!
for _ in $(seq 1 200); do [ -s $w/srv-$tag.json ] && break; sleep 0.05; done
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' $w/srv-$tag.json)
cat > $w/drain-$tag.toml <<CONF
gateway_id = "gw-bench"
[paths]
state_dir = "$st"
control_socket = "$w/drain-$tag.sock"
[log]
level = "warning"
[clock]
require_sync = false
[radio.rtl433]
binary = "$w/quiet.sh"
[uplink]
url = "https://127.0.0.1:$port/events"
ca_file = "$w/pki/ca.pem"
hmac_secret_file = "$w/g.whsec"
CONF
t0=$(date +%s.%N)
env "$@" $agent run --config $w/drain-$tag.toml 2>$w/drain-$tag.log & pid=$!
$bench wait-drained $w/drain-$tag.sock
t1=$(date +%s.%N)
[ -f $w/device.key ] || cp $st/device.key $w/device.key
r() { awk -v k="$2:" '$1==k {print $2}' /proc/$pid/$1; }
printf '%s n %s wall %.2f s cpu %s ticks HWM %s RSS %s PD %s minflt %s majflt %s load %s\n' "$tag" $n "$(python3 -c "print($t1-$t0)")" "$(awk '{print $14+$15}' /proc/$pid/stat)" "$(r status VmHWM)" "$(r status VmRSS)" "$(r smaps_rollup Private_Dirty)" "$(awk '{print $10}' /proc/$pid/stat)" "$(awk '{print $12}' /proc/$pid/stat)" "$(cut -d' ' -f1 /proc/loadavg)"
if [ -n "${SNAP:-}" ]; then cp /proc/$pid/smaps $SNAP; fi
kill $pid; wait $pid 2>/dev/null || true
kill $spid; wait $spid 2>/dev/null || true
