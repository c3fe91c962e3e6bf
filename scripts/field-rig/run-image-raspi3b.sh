#!/usr/bin/env bash
# The Raspberry Pi 3 field image on qemu's Pi 3 machine model (test_image_raspi3b.py), from make
# test-field: the newest .work/image/doorbell-raspberrypi-3-*.img.xz, built by `make image` first if
# there is none (RIG_IMAGE names another file). About 5 minutes under TCG on a built image.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "test-image-raspi3b: needs root (make image)" >&2; exit 1; }
for tool in qemu-system-aarch64 sfdisk mcopy xz; do
  command -v $tool >/dev/null || { echo "test-image-raspi3b: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
qemu-system-aarch64 -M help | grep -q '^raspi3b' || { echo "test-image-raspi3b: this qemu has no raspi3b machine" >&2; exit 1; }
if [ -z "${RIG_IMAGE:-}" ] && ! ls .work/image/doorbell-raspberrypi-3-*.img.xz >/dev/null 2>&1; then
  BOARD=raspberrypi-3 scripts/image/build-image.sh
fi
scripts/venv.sh >/dev/null
start=$(date +%s)
timeout 1800 .venv/bin/python -W error::ResourceWarning scripts/field-rig/test_image_raspi3b.py
echo "test-image-raspi3b: passed in $(( $(date +%s) - start )) s"
