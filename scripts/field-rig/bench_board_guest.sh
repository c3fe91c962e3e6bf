#!/bin/bash
# Runs INSIDE a field-rig guest (scripts/bench-board.sh copies it into the 9p share): the agent's
# footprint idle and while draining a prefilled outbox, and `doorbell-agent replay` of a btsnoop
# capture, measured as scripts/bench.sh and scripts/bench-replay.sh measure them on the host.
# Usage: bench_board_guest.sh RECEIVER_URL BACKLOG RUNS OUT
# Reads /rig/current.deb, /rig/ca.pem, /rig/outbox.sqlite (doorbell-bench prefill, BACKLOG events
# for gw-bench), /rig/capture.btsnoop (doorbell-bench ble-capture), /rig/measure-run.py.
# Writes name<TAB>value<TAB>unit<TAB>method rows to OUT. Tools: bash, coreutils, python3-minimal.
set -euo pipefail
url=$1 backlog=$2 runs=$3 out=$4
w=/var/tmp/bench
rm -rf "$w"; mkdir -p "$w"
: > "$out"
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$out"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

# The package as the field rig installs it; its own service is stopped so only our agents run.
dpkg -i /rig/current.deb > "$w/dpkg.log" 2>&1
systemctl stop doorbell-agent
install -m 0600 /rig/ca.pem "$w/ca.pem"
echo "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" > "$w/g.whsec"   # rig.SECRET
printf '#!/bin/sh\nexec sleep 100000\n' > "$w/quiet.sh"; chmod +x "$w/quiet.sh"
conf() { # name url: the bench's config (scripts/bench.sh conf), a quiet rtl_433 stand-in as radio
  cat > "$w/$1.toml" <<CONF
gateway_id = "gw-bench"
[paths]
state_dir = "$w/$1-state"
control_socket = "$w/$1.sock"
[log]
level = "warning"
[clock]
require_sync = false
[radio.rtl433]
binary = "$w/quiet.sh"
[uplink]
url = "$2"
ca_file = "$w/ca.pem"
hmac_secret_file = "$w/g.whsec"
CONF
}
status() { agentctl status --json --socket "$w/$1.sock" 2>/dev/null || true; }
depth() { status "$1" | tr -d ' \n' | sed -n 's/.*"outbox":{"depth":\([0-9]*\).*/\1/p'; }
rollup() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/smaps_rollup"; }
vm() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/status"; }
ticks=$(getconf CLK_TCK)

# Idle: 2 s after the agent answers its control socket (start-up under TCG takes longer than on
# the host; what is resident then is what an idle board holds).
conf idle "https://127.0.0.1:9/events"
mkdir -p "$w/idle-state"
doorbell-agent run --config "$w/idle.toml" 2> "$w/idle.log" & pid=$!
for _ in $(seq 1 300); do [ -n "$(depth idle)" ] && break; sleep 0.5; done
[ -n "$(depth idle)" ] || { echo "the idle agent did not answer within 150 s:"; cat "$w/idle.log"; exit 1; }
sleep 2
row rss_idle "$(mib "$(vm $pid VmRSS)")" MiB "VmRSS 2 s after the control socket answers, rtl_433 stand-in radio, uplink idle"
row rss_idle_pss "$(mib "$(rollup $pid Pss)")" MiB "same moment, PSS (smaps_rollup)"
row rss_idle_private_dirty "$(mib "$(rollup $pid Private_Dirty)")" MiB "same moment, Private_Dirty: what the agent alone holds"
kill $pid; wait $pid 2>/dev/null || true

# Draining the prefilled outbox to the host's receiver; the footprint sampled every 2 s while it
# drains (the largest sample of each), VmHWM at the end.
conf drain "$url"
mkdir -p "$w/drain-state"
cp "$w/idle-state/device.key" "$w/drain-state/"
cp /rig/outbox.sqlite "$w/drain-state/outbox.sqlite"
t0=$(date +%s.%N)
doorbell-agent run --config "$w/drain.toml" 2> "$w/drain.log" & pid=$!
max_rss=0 max_pss=0 max_pd=0 samples=0 d=
for _ in $(seq 1 1800); do
  sleep 2
  kill -0 $pid 2>/dev/null || { echo "the draining agent exited:"; cat "$w/drain.log"; exit 1; }
  r=$(vm $pid VmRSS) p=$(rollup $pid Pss) q=$(rollup $pid Private_Dirty)
  samples=$((samples + 1))
  [ "$r" -gt $max_rss ] && max_rss=$r; [ "$p" -gt $max_pss ] && max_pss=$p; [ "$q" -gt $max_pd ] && max_pd=$q
  d=$(depth drain)
  [ "$d" = 0 ] && break
done
t1=$(date +%s.%N)
[ "$d" = 0 ] || { echo "the outbox did not drain within an hour (depth ${d:-?}):"; tail -20 "$w/drain.log"; exit 1; }
hwm=$(vm $pid VmHWM) cpu=$(awk '{print $14+$15}' /proc/$pid/stat)
kill $pid; wait $pid 2>/dev/null || true
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')
row rss_draining "$(mib $max_rss)" MiB "largest VmRSS of $samples samples (every 2 s) while draining $backlog events to the host's receiver"
row pss_draining "$(mib $max_pss)" MiB "same samples, largest PSS"
row private_dirty_draining "$(mib $max_pd)" MiB "same samples, largest Private_Dirty"
row rss_peak_draining "$(mib $hwm)" MiB "VmHWM after the drain"
row drain_events_per_s "$(awk -v n="$backlog" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')" events/s "$backlog events, agent start to empty outbox (the 2 s sampling granularity included)"
row drain_agent_cpu_per_event "$(awk -v c="$cpu" -v t="$ticks" -v n="$backlog" 'BEGIN {printf "%.0f", c * 1e6 / t / n}')" µs "the agent's utime+stime per delivered event"

# Replay: the capture from local disk, whole process, stdout to a file, median of RUNS.
cp /rig/capture.btsnoop "$w/capture.btsnoop"
adverts=$(cat /rig/capture.adverts)
med() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
: > "$w/runs"
for _ in $(seq 1 "$runs"); do
  read -r s rss rc c < <(python3 /rig/measure-run.py "$w/replay.jsonl" /usr/bin/doorbell-agent replay "$w/capture.btsnoop")
  [ "$rc" = 0 ] || { echo "doorbell-agent replay failed:"; cat "$w/replay.jsonl.err"; exit 1; }
  echo "$s $rss $c" >> "$w/runs"
done
s=$(cut -d' ' -f1 "$w/runs" | med) rss=$(cut -d' ' -f2 "$w/runs" | med) c=$(cut -d' ' -f3 "$w/runs" | med)
row replay_adverts_per_s "$(awk -v n="$adverts" -v s="$s" 'BEGIN {printf "%.0f", n / s}')" adverts/s "doorbell-agent replay of a $adverts-advert capture (doorbell-bench ble-capture), median of $runs ($(wc -l < "$w/replay.jsonl") events)"
row replay_cpu_s "$(awk -v c="$c" 'BEGIN {printf "%.2f", c}')" s "same runs, user + system CPU, median"
row replay_peak_rss "$(mib "$rss")" MiB "same runs, VmHWM read every 20 ms until exit (measure-run.py; the guest has no resource module for wait4), median"
row guest "$(uname -m) $(. /etc/os-release && echo "$VERSION_CODENAME"), kernel $(uname -r), $(nproc) vCPU, $(($(getconf PAGESIZE) / 1024)) KiB pages" "" "load average in the guest at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
