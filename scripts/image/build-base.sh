#!/usr/bin/env bash
# The field image's Debian 13 arm64 root, the same for every board: mmdebstrap from the Debian
# archive (a foreign architecture's maintainer scripts run under qemu-user through binfmt_misc,
# as the field rig's build-rootfs.sh does), with Debian's kernel, initramfs and raspi-firmware.
# What differs per board (config.txt, cmdline.txt, agent.toml) and the agent's .deb are added by
# build-image.sh on a copy, so a new agent build does not cost this step again.
# Cached in $IMAGE_CACHE (default /var/cache/doorbell-image) keyed by a hash of its inputs (this
# script, what it puts in the root, the package list); IMAGE_FRESH=1 builds a fresh one beside
# the cache (build-image.sh removes it after use), to check that two builds give the same bytes.
# Its SOURCE_DATE_EPOCH is the time of the last commit that changed those inputs, so a commit
# elsewhere does not make a new tree. Prints the directory whose root/ holds the tree. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() { echo "build-base: $*" >&2; exit 1; }
IMAGE_CACHE=${IMAGE_CACHE:-/var/cache/doorbell-image}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# shellcheck source=layout.conf
. "$here/layout.conf"
machine_id_script=$here/overlay/etc/initramfs-tools/scripts/local-bottom/doorbell-machine-id
inputs=("$0" "$here/layout.conf" "$machine_id_script" "$repo/packaging/deb/depends-trixie")
SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct -- "${inputs[@]}")
[ -n "$SOURCE_DATE_EPOCH" ] || die "none of its inputs is committed yet (git log gives no time for ${inputs[*]})"
export SOURCE_DATE_EPOCH

# The agent's Depends (read from the file that writes them, as the rig does), Debian's kernel and
# Pi firmware, the time service, BlueZ and the Pi's Bluetooth firmware, Wi-Fi, RAUC (the `rauc`
# command needs `rauc-service`, its D-Bus service: test_image.py found `rauc status` failing without
# it), rtl-433, ssh for the installer's key, busybox for the initramfs's machine-id script.
depends=$(tr ',' '\n' < "$repo/packaging/deb/depends-trixie" | sed 's/(.*)//; s/[[:space:]]//g' | grep -v '^$')
packages=(systemd systemd-sysv systemd-timesyncd systemd-resolved udev dbus kmod iproute2 ca-certificates
  linux-image-arm64 initramfs-tools busybox raspi-firmware firmware-brcm80211 bluez bluez-firmware
  wpasupplicant rtl-433 rauc rauc-service openssh-server dosfstools e2fsprogs cloud-guest-utils fdisk $depends)
key=$( (cat "${inputs[@]}"; echo "${packages[*]} $SOURCE_DATE_EPOCH $MIRROR") | sha256sum | cut -c1-16)
dir=$IMAGE_CACHE/base-$key
[ "${IMAGE_FRESH:-0}" != 1 ] || dir=$IMAGE_CACHE/fresh-$$
if [ -f "$dir/done" ]; then echo "$dir"; exit 0; fi
[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, binfmt_misc): run it as root"
command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (scripts/install-deps.sh)"
mkdir -p "$IMAGE_CACHE"
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp/setup/etc/initramfs-tools/scripts/local-bottom" "$dir.tmp/setup/boot/firmware"
"$repo/scripts/field-rig/binfmt-register.sh" arm64
# In place before the kernel installs, so the initramfs it makes has the machine-id script.
sed "s|@DATA_PARTUUID@|$DISK_ID-04|g" "$machine_id_script" > "$dir.tmp/setup/etc/initramfs-tools/scripts/local-bottom/doorbell-machine-id"
chmod 0755 "$dir.tmp/setup/etc/initramfs-tools/scripts/local-bottom/doorbell-machine-id"
echo "build-base: mmdebstrap trixie arm64 (${#packages[@]} packages) into $dir.tmp/root" >&2
start=$(date +%s)
nice -n 10 mmdebstrap --mode=root --variant=minbase --quiet --architectures=arm64 \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-include=/usr/share/doc/doorbell-agent/*' \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --setup-hook="cp -a $dir.tmp/setup/. \"\$1/\"" \
  trixie "$dir.tmp/root" "deb $MIRROR trixie main non-free-firmware" "deb $MIRROR-security trixie-security main non-free-firmware" >&2
echo "build-base: mmdebstrap took $(( $(date +%s) - start )) s" >&2
rm -rf "$dir.tmp/setup"
mv "$dir.tmp" "$dir"
touch "$dir/done"
# Older keys are stale: keep only this one (never another build's .tmp, nor a fresh- check).
[ "${IMAGE_FRESH:-0}" = 1 ] || for old in "$IMAGE_CACHE"/base-*; do
  case $old in "$dir"|*.tmp) ;; *) rm -rf "$old" ;; esac
done
echo "$dir"
