#!/usr/bin/env bash
# make test-image [BOARD=raspberrypi-4]: the field image itself booted in the rig's emulated
# aarch64 board (test_image.py): the newest .work/image/doorbell-<board>-*.img.xz, built by
# `make image` first if there is none (RIG_IMAGE names another file). Not part of make test yet
# (the image's cold build is about half an hour; see the README, "Make a field image").
set -euo pipefail
cd "$(dirname "$0")/../.."
board=${1:-raspberrypi-4}
[ "$(id -u)" -eq 0 ] || { echo "test-image: needs root (qemu's 9p share; make image)" >&2; exit 1; }
for tool in qemu-system-aarch64 qemu-img sfdisk mdir mcopy xz; do
  command -v $tool >/dev/null || { echo "test-image: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
if [ -z "${RIG_IMAGE:-}" ] && ! ls .work/image/doorbell-"$board"-*.img.xz >/dev/null 2>&1; then
  BOARD=$board scripts/image/build-image.sh
fi
scripts/venv.sh >/dev/null
start=$(date +%s)
cd scripts/field-rig
RIG_IMAGE_BOARD=$board timeout 1800 ../../.venv/bin/python -W error::ResourceWarning test_image.py
echo "test-image: $board passed in $(( $(date +%s) - start )) s"
