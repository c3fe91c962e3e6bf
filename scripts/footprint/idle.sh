#!/usr/bin/env bash
# idle.sh AGENT TAG [ENV=VAL...]: start the agent idle like bench.sh, print VmRSS/PSS/PD at 2 s and by mapping.
set -euo pipefail
. "$(dirname "$0")/common.sh"
agent=$1; tag=$2; shift 2
st=$w/idle-$tag; rm -rf $st; mkdir -p $st
fp_conf idle-$tag $st "https://127.0.0.1:9/events"
env "$@" $agent run --config $w/idle-$tag.toml 2>$w/idle-$tag.log & pid=$!
sleep 2
r() { fp_field $pid "$@"; }
printf '%s RSS %s PSS %s PD %s minflt %s\n' "$tag" "$(r status VmRSS)" "$(r smaps_rollup Pss)" "$(r smaps_rollup Private_Dirty)" "$(awk '{print $10}' /proc/$pid/stat)"
awk '/^[0-9a-f]+-[0-9a-f]+ / {f = NF >= 6 ? $6 : "[anon]"; n = split(f, parts, "/"); f = parts[n]} /^Rss:/ {rss[f] += $2} END {for (k in rss) printf "%s %d\n", k, rss[k]}' /proc/$pid/smaps | sort -k2 -rn | head -${TOP:-14} | tr '\n' ';'; echo
if [ -n "${SNAP:-}" ]; then cp /proc/$pid/smaps $SNAP; fi
kill $pid; wait $pid 2>/dev/null || true
