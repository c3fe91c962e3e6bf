#!/usr/bin/env bash
# make-test-pki.sh OUTDIR — a throwaway PKI for tests and demos of doorbell-cloud.
#
# Writes into OUTDIR:
#   ca.pem, ca.key          a self-signed test CA (EC P-256, 30 days)
#   server.pem, server.key  a server certificate signed by it (EC P-256, 30 days),
#                           SAN IP:127.0.0.1, IP:::1, DNS:localhost
# Idempotent: leaves a complete, still-valid set alone (quiet), re-creates all four files
# when one is missing or the server certificate expires within a day.
# Clients trust it with e.g. `curl --cacert OUTDIR/ca.pem https://127.0.0.1:PORT/healthz`.
# Never use these files outside tests.
set -euo pipefail

die() { echo "make-test-pki.sh: $*" >&2; exit 1; }

[[ $# -eq 1 && -n "$1" ]] || die "usage: make-test-pki.sh OUTDIR"
command -v openssl >/dev/null 2>&1 || die "openssl not found (apt-get install openssl)"
out=$1
mkdir -p "$out" || die "cannot create $out"

complete=true
for f in ca.pem ca.key server.pem server.key; do
    [[ -s "$out/$f" ]] || complete=false
done
if $complete && openssl x509 -in "$out/server.pem" -noout -checkend 86400 >/dev/null 2>&1 \
    && openssl verify -CAfile "$out/ca.pem" "$out/server.pem" >/dev/null 2>&1; then
    exit 0
fi

work=$(mktemp -d "$out/.pki.XXXXXX") || die "cannot create a temporary directory in $out"
trap 'rm -rf "$work"' EXIT
log="$work/openssl.log"
run() { "$@" >>"$log" 2>&1 || { cat "$log" >&2; die "failed: $*"; }; }
umask 077

cat >"$work/ca.ext" <<'EXT'
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EXT
cat >"$work/server.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EXT

run openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/ca.key"
run openssl req -new -key "$work/ca.key" -subj "/CN=doorbell-cloud test CA" -out "$work/ca.csr"
run openssl x509 -req -in "$work/ca.csr" -signkey "$work/ca.key" -days 30 -sha256 \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$work/ca.ext" -out "$work/ca.pem"

run openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/server.key"
run openssl req -new -key "$work/server.key" -subj "/CN=localhost" -out "$work/server.csr"
run openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -days 30 -sha256 \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$work/server.ext" -out "$work/server.pem"
run openssl verify -CAfile "$work/ca.pem" "$work/server.pem"

chmod 600 "$work/ca.key" "$work/server.key"
chmod 644 "$work/ca.pem" "$work/server.pem"
for f in ca.key ca.pem server.key server.pem; do
    mv -f "$work/$f" "$out/$f" || die "cannot write $out/$f"
done
