#!/usr/bin/env bash
# smoke-test.sh — end to end over real HTTPS: start `doorbell-cloud serve` on a free port with a
# throwaway PKI, check /healthz with curl trusting only the test CA, deliver an event signed
# v1 (python3 hmac) and v1a (openssl Ed25519), deliver it again, deliver a forged one, read
# the store back, stop the server with SIGTERM.
#
# Usage: cloud/scripts/smoke-test.sh            (builds doorbell-cloud if needed)
#        DOORBELL_CLOUD=/path/to/doorbell-cloud cloud/scripts/smoke-test.sh
# Needs: bash, curl, openssl (3.x), python3.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
package=$(dirname "$here")
repo=$(dirname "$package")

if [[ -z "${DOORBELL_CLOUD:-}" ]]; then
    (cd "$package" && swift build --product doorbell-cloud >/dev/null)
    DOORBELL_CLOUD="$(cd "$package" && swift build --show-bin-path)/doorbell-cloud"
fi

work=$(mktemp -d)
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}

"$repo/scripts/make-test-pki.sh" "$work/pki"
python3 -c 'import base64, os; print("whsec_" + base64.b64encode(os.urandom(32)).decode())' >"$work/secret"
openssl genpkey -algorithm ed25519 -out "$work/device.key" 2>/dev/null
# The raw 32-byte public key is the tail of its DER SubjectPublicKeyInfo.
echo "ed25519:$(openssl pkey -in "$work/device.key" -pubout -outform DER | tail -c 32 | base64)" >"$work/device.pub"

"$DOORBELL_CLOUD" serve --port 0 --ready-file "$work/ready.json" \
    --tls-cert "$work/pki/server.pem" --tls-key "$work/pki/server.key" --db "$work/events.sqlite" \
    --gateway-secret "$work/secret" --gateway-public-key "$work/device.pub" \
    >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
for _ in $(seq 200); do [[ -s "$work/ready.json" ]] && break; sleep 0.1; done
[[ -s "$work/ready.json" ]] || { cat "$work/stderr" >&2; echo "server did not become ready" >&2; exit 1; }
port=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["port"])' "$work/ready.json")
base="https://127.0.0.1:$port"

check "healthz over TLS, trusting only the test CA" \
    curl -fsS --cacert "$work/pki/ca.pem" -o /dev/null "$base/healthz"

id="019a4f6e-2b1c-7c3d-8e9f-0a1b2c3d4e5f"
printf '%s' "{\"id\":\"$id\",\"sequence\":1,\"type\":\"doorbell.pressed\",\"gateway_id\":\"gw-0001\",\"occurred_at\":\"2026-11-22T14:03:07.123456Z\",\"clock_synced\":true,\"test\":true,\"device\":{\"id\":\"front-door\",\"name\":\"Front door\",\"radio\":\"rtl433\"},\"data\":{\"code\":\"91568f\",\"model\":\"EV1527-flex\",\"suppressed\":0},\"agent\":{\"version\":\"0.1.0\"}}" >"$work/body"
ts=$(date +%s)
{ printf '%s.%s.' "$id" "$ts"; cat "$work/body"; } >"$work/signed"
v1=$(python3 -c '
import base64, hashlib, hmac, sys
key = base64.b64decode(open(sys.argv[1]).read().strip().removeprefix("whsec_"))
print(base64.b64encode(hmac.new(key, open(sys.argv[2], "rb").read(), hashlib.sha256).digest()).decode())
' "$work/secret" "$work/signed")
v1a=$(openssl pkeyutl -sign -rawin -inkey "$work/device.key" -in "$work/signed" | base64 -w0)

post() { # post SIGNATURE -> prints HTTP status
    curl -sS --cacert "$work/pki/ca.pem" -o "$work/response" -w '%{http_code}' -X POST "$base/events" \
        -H 'content-type: application/json' -H "webhook-id: $id" -H "webhook-timestamp: $ts" \
        -H "webhook-signature: $1" -H 'doorbell-gateway-id: gw-0001' --data-binary @"$work/body"
}
wait_line() { # wait_line PATTERN: the server flushes each line at once
    for _ in $(seq 50); do grep -q -- "$1" "$work/stdout" && return 0; sleep 0.1; done
    return 1
}

check "first delivery is 200 accepted" test "$(post "v1,$v1 v1a,$v1a")" = 200
check "EVENT line with both signature versions" \
    wait_line "^EVENT {\"id\":\"$id\",\"sequence\":1,.*\"verified\":\[\"v1\",\"v1a\"\]}$"
check "second delivery is 200 duplicate" test "$(post "v1,$v1 v1a,$v1a")" = 200
check "response says duplicate" grep -q '"status":"duplicate"' "$work/response"
check "DUPLICATE line" wait_line "^DUPLICATE $id$"
check "forged signature is 401" test "$(post "v1,$v1a")" = 401
check "REJECTED line" wait_line "^REJECTED bad_signature id=$id "
check "events lists exactly one stored event" \
    test "$("$DOORBELL_CLOUD" events --db "$work/events.sqlite" | grep -c "\"id\":\"$id\"")" = 1

kill -TERM "$server_pid"
stopped=false
for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || { stopped=true; break; }; sleep 0.1; done
check "SIGTERM stops the server" $stopped
if $stopped; then
    status=0; wait "$server_pid" || status=$?
    check "exit status 0 after SIGTERM" test "$status" = 0
fi
server_pid=""

echo "smoke-test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
