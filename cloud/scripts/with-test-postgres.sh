#!/usr/bin/env bash
# with-test-postgres.sh — runs CMD against a throwaway PostgreSQL 15 server: initdb in a temp
# dir, listen on 127.0.0.1 (free port) and a socket in that dir, trust auth, fsync off; CMD gets
# DOORBELL_CLOUD_TEST_POSTGRES (a libpq conninfo for it); the server is stopped and its data
# removed afterwards, whatever CMD did. Exits with CMD's status.
#
# Without PostgreSQL (or, as root, without a postgres user to run it as) CMD runs without the
# variable and the PostgreSQL tests skip themselves; under CI=true that is a failure instead (exit
# 1 before CMD runs), as is any other skip in CI, and the Swift suites fail rather than skip.
#
# Usage: cloud/scripts/with-test-postgres.sh swift test --scratch-path /tmp/pg-build --filter CloudStoreTests
#        PG_BIN=/usr/lib/postgresql/16/bin cloud/scripts/with-test-postgres.sh CMD...
set -euo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: $0 CMD [ARG...]" >&2
    exit 2
fi
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
unset DOORBELL_CLOUD_TEST_POSTGRES

skip_reason=""
as_pg=()
if [[ ! -x "$pg_bin/initdb" || ! -x "$pg_bin/pg_ctl" || ! -x "$pg_bin/postgres" ]]; then
    skip_reason="no PostgreSQL in $pg_bin (apt-get install postgresql, or set PG_BIN)"
elif [[ $(id -u) -eq 0 ]]; then
    # PostgreSQL refuses to run as root.
    if id postgres >/dev/null 2>&1 && command -v runuser >/dev/null 2>&1; then
        as_pg=(runuser -u postgres --)
    else
        skip_reason="running as root and there is no postgres user to run the server as"
    fi
fi
# Not root: the server runs as the invoking user, which PostgreSQL accepts.
if [[ -n "$skip_reason" ]]; then
    if [[ "${CI:-}" == "true" ]]; then
        echo "with-test-postgres: $skip_reason; under CI=true the PostgreSQL tests must run, not skip" >&2
        exit 1
    fi
    echo "with-test-postgres: $skip_reason; the PostgreSQL tests are skipped" >&2
    exec "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/doorbell-pg.XXXXXX")
data="$work/data"
log="$work/server.log"
pg() { # pg PROGRAM ARG...: as the server's user, from $work (that user may not be allowed into our cwd)
    local program=$1
    shift
    (cd "$work" && "${as_pg[@]}" "$pg_bin/$program" "$@")
}
stop_server() {
    [[ -f "$data/postmaster.pid" ]] || return 0
    local pid
    pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
    # immediate: nothing in a throwaway cluster is worth a clean shutdown.
    pg pg_ctl -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1 && return 0
    if [[ "$pid" =~ ^[0-9]+$ ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
}
cleanup() {
    stop_server
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ ${#as_pg[@]} -eq 0 ]] || chown postgres: "$work"
if ! pg initdb -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$work/initdb.log" 2>&1; then
    echo "with-test-postgres: initdb failed:" >&2
    cat "$work/initdb.log" >&2
    exit 1
fi

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    else
        echo $((30000 + RANDOM % 20000))
    fi
}

# The port may be taken between choosing and binding it: try a few.
port=""
for _ in 1 2 3 4 5; do
    candidate=$(free_port)
    if pg pg_ctl -D "$data" -l "$log" -w -t 30 \
            -o "-c listen_addresses=127.0.0.1 -p $candidate -c unix_socket_directories=$work -c fsync=off -c full_page_writes=off -c synchronous_commit=off" \
            start >/dev/null 2>&1; then
        port=$candidate
        break
    fi
    # A start that timed out may still come up later: make sure it is gone before retrying.
    stop_server
    grep -q "could not bind\|Address already in use" "$log" 2>/dev/null || break
done
if [[ -z "$port" ]]; then
    echo "with-test-postgres: the test PostgreSQL server did not start; its log:" >&2
    cat "$log" >&2 2>/dev/null || true
    exit 1
fi

export DOORBELL_CLOUD_TEST_POSTGRES="host=127.0.0.1 port=$port user=postgres dbname=postgres"
echo "with-test-postgres: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port" >&2
status=0
"$@" || status=$?
exit "$status"
