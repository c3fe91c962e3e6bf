#!/usr/bin/env bash
# make test-image [BOARD=raspberrypi-4]: the field image itself booted in the rig's emulated
# aarch64 board (test_image.py): the newest .work/image/doorbell-<board>-*.img.xz, built by
# `make image` first if there is none (RIG_IMAGE names another file), against doorbell-cloud
# (cloud/.build/debug, built if missing). Not part of make test (the image's cold build is about
# forty minutes and the run itself about half an hour; see the README, "Make a field image").
# The update checks need the image's bundle: built here from the image's root if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
board=${1:-raspberrypi-4}
[ "$(id -u)" -eq 0 ] || { echo "test-image: needs root (qemu's 9p share; make image)" >&2; exit 1; }
for tool in qemu-system-aarch64 qemu-img sfdisk mdir mcopy xz ssh-keygen rauc mksquashfs debugfs openssl; do
  command -v $tool >/dev/null || { echo "test-image: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
if [ -z "${RIG_IMAGE:-}" ] && ! ls .work/image/doorbell-"$board"-*.img.xz >/dev/null 2>&1; then
  BOARD=$board scripts/image/build-image.sh
fi
# The update bundle of that image (its root file system, signed with the key the image trusts):
# test_image.py installs it, and makes its broken and foreign variants from it (rauc, debugfs).
image=${RIG_IMAGE:-$(ls -t .work/image/doorbell-"$board"-*.img.xz | head -1)}
if [ ! -f "${image%.img.xz}.raucb" ]; then
  [ -f "${image%.img.xz}.rootfs.ext4" ] || { echo "test-image: ${image%.img.xz}.rootfs.ext4 is missing (an image from before make bundle): make image BOARD=$board again" >&2; exit 1; }
  BOARD=$board BUNDLE_ROOTFS="${image%.img.xz}.rootfs.ext4" BUNDLE_OUT="${image%.img.xz}.raucb" scripts/image/build-bundle.sh
fi
# The test cloud the image enrols with and delivers to (RIG_CLOUD_BIN names another build).
if [ -z "${RIG_CLOUD_BIN:-}" ] && [ ! -x cloud/.build/debug/doorbell-cloud ]; then
  (cd cloud && nice -n 10 swift build --product doorbell-cloud)
fi
scripts/venv.sh >/dev/null
start=$(date +%s)
cd scripts/field-rig
RIG_IMAGE_BOARD=$board timeout 3600 ../../.venv/bin/python -W error::ResourceWarning test_image.py
echo "test-image: $board passed in $(( $(date +%s) - start )) s"
