#!/usr/bin/env bash
# make test-field: the field rig (issue #15). The .deb (make deb, unless RIG_DEB names one or
# RIG_SKIP_DEB=1 takes the newest in .work/deb) installed into a Debian 12 guest under qemu TCG,
# booted with systemd and Debian's kernel, and every scenario in test_field.py run against it;
# test_chrony.py on an image with chrony; test_gpio.py with gpio-sim (build-gpio-sim.sh) as the GPIO chip.
# The guest's root file system is cached in $RIG_CACHE (default /var/cache/doorbell-field-rig),
# keyed by its package list (one image with timesyncd, one with chrony); each takes 1-14 minutes
# to build, a warm run 3-4.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(dpkg --print-architecture)" = amd64 ] || { echo "test-field: the rig boots an amd64 guest; this host is $(dpkg --print-architecture)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "test-field: needs root (mmdebstrap, qemu's 9p share)" >&2; exit 1; }
[ -f Tests/helpers/ble/virtual_radio.py ] || { echo "test-field: Tests/helpers/ble/virtual_radio.py (the Bumble controller) is missing" >&2; exit 1; }
scripts/venv.sh >/dev/null
[ -n "${RIG_DEB:-}" ] || [ "${RIG_SKIP_DEB:-0}" = 1 ] || scripts/make-deb.sh
start=$(date +%s)
scripts/field-rig/build-rootfs.sh >/dev/null
RIG_NTP=chrony scripts/field-rig/build-rootfs.sh >/dev/null
echo "test-field: guest root file systems (timesyncd, chrony) ready in $(( $(date +%s) - start )) s"
cd scripts/field-rig
timeout 1800 ../../.venv/bin/python -W error::ResourceWarning test_field.py
timeout 900 ../../.venv/bin/python -W error::ResourceWarning test_chrony.py
timeout 900 ../../.venv/bin/python -W error::ResourceWarning test_gpio.py
echo "test-field: all scenarios passed in $(( $(date +%s) - start )) s"
