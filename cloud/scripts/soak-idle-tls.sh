#!/usr/bin/env bash
# soak-idle-tls.sh — does doorbell-cloud serve's RSS level off under rounds of idle TLS
# connections, or grow without bound (issue #27, 13)? Not part of `make test`: a bounded soak,
# run by hand, at low priority (nice) so it shares the machine.
#
# Starts `serve` (SQLite, a throwaway test PKI) and runs ROUNDS rounds; in each, COUNT TLS
# connections are opened and left idle until the server closes them (--header-timeout-seconds,
# 10 s by default), then VmRSS is read from /proc. One line per round:
#     round N closed K/COUNT rss_kib R
# After the last round, `malloc_trim(0)` is called in the server through gdb (when gdb is
# installed, and ptrace allows it) and VmRSS read again: what it gives back is free memory the
# allocator was keeping (its high-water mark), not memory still in use.
#
# Usage: cloud/scripts/soak-idle-tls.sh BINARY WORKDIR [ROUNDS] [COUNT]
#   e.g. cloud/scripts/soak-idle-tls.sh cloud/.build/debug/doorbell-cloud /tmp/soak 20 600
# Environment: NICE (default 10), SERVE_ARGS (extra `serve` options), and whatever the server
# should see (MALLOC_ARENA_MAX=2 to compare arenas).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 BINARY WORKDIR [ROUNDS] [COUNT]" >&2
    exit 2
fi
binary=$(realpath "$1")
work=$2
rounds=${3:-20}
count=${4:-600}
nice_level=${NICE:-10}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
client="$repo/Tests/helpers/hostile_http_client.py"

[[ -x "$binary" ]] || { echo "soak: no executable at $binary (cd cloud && swift build)" >&2; exit 1; }
[[ "$rounds" =~ ^[0-9]+$ && "$count" =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 200 ]] \
    || { echo "soak: ROUNDS must be 1-200 and COUNT a number" >&2; exit 2; }
mkdir -p "$work"
[[ -f "$work/pki/ca.pem" ]] || bash "$repo/scripts/make-test-pki.sh" "$work/pki" >/dev/null
# Each client connection is a descriptor in the client too.
ulimit -n $((count + 256)) 2>/dev/null || true

rm -f "$work/ready.json" "$work/soak.sqlite"*
# shellcheck disable=SC2086  # SERVE_ARGS is a list of options
nice -n "$nice_level" "$binary" serve --port 0 --ready-file "$work/ready.json" \
    --tls-cert "$work/pki/server.pem" --tls-key "$work/pki/server.key" --db "$work/soak.sqlite" \
    --max-connections $((count + 100)) ${SERVE_ARGS:-} >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
    [[ -s "$work/ready.json" ]] && break
    kill -0 "$pid" 2>/dev/null || { echo "soak: serve exited:" >&2; tail -n 20 "$work/serve.err" >&2; exit 1; }
    sleep 0.1
done
[[ -s "$work/ready.json" ]] || { echo "soak: serve not ready within 30 s" >&2; exit 1; }
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$work/ready.json")

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
echo "soak: serve pid $pid on 127.0.0.1:$port, $rounds rounds of $count idle TLS connections; rss_kib at start $(rss)"
for round in $(seq 1 "$rounds"); do
    # The server closes each after its header timeout (10 s); 60 s bounds a server that does not.
    # A loaded machine may lose a handshake (the server's timeout runs from the accept): the round
    # is reported and the soak goes on.
    if out=$(nice -n "$nice_level" python3 "$client" --port "$port" --ca "$work/pki/ca.pem" --count "$count" --seconds 60 idle \
            2>"$work/client.err"); then
        closed=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["closed"])' "$out")
    else
        closed="? (client failed: $(tail -n 1 "$work/client.err"))"
    fi
    sleep 2 # let the server finish tearing the last ones down
    echo "round $round closed $closed/$count rss_kib $(rss)"
done
if command -v gdb >/dev/null 2>&1; then
    if gdb -batch -ex 'call (int) malloc_trim(0)' "$binary" "$pid" >"$work/gdb.log" 2>&1 \
            && grep -q '^\$1 = ' "$work/gdb.log"; then
        echo "after malloc_trim(0): rss_kib $(rss)"
    else
        echo "soak: gdb could not call malloc_trim in the server (ptrace refused, or a kernel that will not let gdb set registers); see $work/gdb.log"
    fi
fi
