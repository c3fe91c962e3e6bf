#!/usr/bin/env bash
# The keys RAUC bundles are signed with and the keyring the image checks them against (make image,
# make bundle). A maker's own: BUNDLE_KEY, BUNDLE_CERT (PEM; a PKCS#11 URI works for the key) and
# BUNDLE_KEYRING (the CA certificate(s) the image trusts; default BUNDLE_CERT). None given: the
# development keys in .work/rauc-dev-keys, made once (a self-signed certificate, 10 years), with a
# warning each time: anyone with this clone can sign bundles those images install.
# Prints three lines: key, certificate, keyring.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${BUNDLE_KEY:-}${BUNDLE_CERT:-}" ]; then
  [ -n "${BUNDLE_KEY:-}" ] && [ -n "${BUNDLE_CERT:-}" ] || { echo "bundle-keys: give both BUNDLE_KEY and BUNDLE_CERT (and BUNDLE_KEYRING if the certificate is not its own CA)" >&2; exit 64; }
  [ -r "$BUNDLE_CERT" ] || { echo "bundle-keys: BUNDLE_CERT $BUNDLE_CERT is not readable" >&2; exit 66; }
  keyring=${BUNDLE_KEYRING:-$BUNDLE_CERT}
  [ -r "$keyring" ] || { echo "bundle-keys: BUNDLE_KEYRING $keyring is not readable" >&2; exit 66; }
  printf '%s\n%s\n%s\n' "$BUNDLE_KEY" "$(realpath "$BUNDLE_CERT")" "$(realpath "$keyring")"
  exit 0
fi
dir=$PWD/.work/rauc-dev-keys
if [ ! -f "$dir/dev.cert.pem" ]; then
  command -v openssl >/dev/null || { echo "bundle-keys: openssl is missing (scripts/install-deps.sh)" >&2; exit 69; }
  mkdir -p "$dir"
  chmod 700 "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/O=doorbell-agent development/CN=doorbell bundle signing (DEVELOPMENT ONLY)" \
    -keyout "$dir/dev.key.pem.tmp" -out "$dir/dev.cert.pem.tmp" 2>/dev/null
  mv "$dir/dev.key.pem.tmp" "$dir/dev.key.pem"
  mv "$dir/dev.cert.pem.tmp" "$dir/dev.cert.pem"
fi
echo "bundle-keys: WARNING: development signing keys ($dir): images built with them install any bundle signed there; give BUNDLE_KEY, BUNDLE_CERT and BUNDLE_KEYRING for images that leave your desk" >&2
printf '%s\n%s\n%s\n' "$dir/dev.key.pem" "$dir/dev.cert.pem" "$dir/dev.cert.pem"
