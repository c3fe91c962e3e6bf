#!/usr/bin/env bash
# Installs what the build, the demo and the tests need, from Debian packages only, and only
# what is missing. Safe to run again. Needs root (apt-get) unless everything is present.
set -euo pipefail

packages=(rtl-433 curl libgpiod-dev gpiod bluez libbluetooth-dev libmosquitto-dev mosquitto mosquitto-clients libcurl4-openssl-dev libssl-dev libsqlite3-dev postgresql openssl ca-certificates python3 python3-venv sqlite3 dpkg-dev lintian help2man)
# The field rig (make test-field): a Debian guest built with mmdebstrap, booted with qemu (TCG).
[ "$(dpkg --print-architecture)" = amd64 ] && packages+=(mmdebstrap qemu-system-x86 qemu-utils e2fsprogs)
# Cross packages (make deb ARCH=arm64): the build root and sysroots come from mmdebstrap; the arm64
# package is stripped with binutils-aarch64-linux-gnu and its binaries run by qemu-user-static.
packages+=(mmdebstrap binutils-aarch64-linux-gnu qemu-user-static)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to apt-get install ${missing[*]} (run as root or install them yourself)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  echo "install-deps: the Swift 6.3 toolchain is not on PATH. Install it from swift.org (Debian 12 / aarch64 builds exist) and put its usr/bin on PATH." >&2
  exit 1
fi
