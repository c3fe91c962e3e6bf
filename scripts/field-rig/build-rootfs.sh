#!/usr/bin/env bash
# The field rig's guest: a Debian 12 root file system (systemd as PID 1, BlueZ, the .deb's
# dependencies, Debian's own kernel) as an ext4 image, plus that kernel and its initramfs.
# Built with mmdebstrap from the Debian mirror, cached under $RIG_CACHE keyed by a hash of this
# script (the package list and every file it writes into the guest), so a warm run reuses it.
# Prints the cache directory (base.img, vmlinuz, initrd.img).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RIG_CACHE=${RIG_CACHE:-/var/cache/doorbell-field-rig}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

# The image's NTP client: timesyncd (Raspberry Pi OS, Debian's default) or, with RIG_NTP=chrony,
# chrony (they conflict; issue #27's scenario, test_chrony.py). Each has its own cache directory.
RIG_NTP=${RIG_NTP:-timesyncd}
case $RIG_NTP in
  timesyncd) ntp=systemd-timesyncd ;;
  chrony) ntp=chrony ;;
  *) echo "build-rootfs: RIG_NTP must be timesyncd or chrony" >&2; exit 64 ;;
esac

# What a field image has for the agent (its .deb's Depends, BlueZ, an NTP client), plus what the rig
# itself uses in the guest: python3 for the /dev/vhci bridge, strace for evidence.
packages=(systemd systemd-sysv $ntp udev dbus kmod iproute2 procps
  linux-image-amd64 bluez ca-certificates python3-minimal strace sqlite3 less)
# The .deb's own Depends, read from the script that writes them: the guest installs it with
# dpkg -i and no network, so a new dependency must reach the image (and change its key).
depends=$(tr ',' '\n' < "$here/../../packaging/deb/depends-bookworm" | sed 's/(.*)//; s/[[:space:]]//g' | grep -v '^$')
packages+=($depends)

key=$( (cat "$0" "$here/guest/"*; echo "$depends"; echo "$RIG_NTP") | sha256sum | cut -c1-16)
dir=$RIG_CACHE/rootfs-$RIG_NTP-$key
if [ -f "$dir/done" ]; then echo "$dir"; exit 0; fi
command -v mmdebstrap >/dev/null || { echo "build-rootfs: mmdebstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build-rootfs: needs root (mmdebstrap, mkfs.ext4 -d)" >&2; exit 1; }
mkdir -p "$RIG_CACHE"
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp"
root=$dir.tmp/root
echo "build-rootfs: mmdebstrap bookworm (${#packages[@]} packages) into $root" >&2
nice -n 10 mmdebstrap --mode=root --variant=minbase --quiet \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --customize-hook="cp -r $here/guest/. \"\$1/\"_rigguest" \
  --customize-hook="chroot \"\$1\" sh /_rigguest/setup.sh" \
  bookworm "$root" "deb $MIRROR bookworm main" "deb $MIRROR-security bookworm-security main" >&2
cp "$root"/boot/vmlinuz-* "$dir.tmp/vmlinuz"
cp "$root"/boot/initrd.img-* "$dir.tmp/initrd.img"
truncate -s 3G "$dir.tmp/base.img"
nice -n 10 mkfs.ext4 -q -F -L rigroot -d "$root" "$dir.tmp/base.img"
rm -rf "$root"
mv "$dir.tmp" "$dir"
touch "$dir/done"
# Older keys of this NTP client are stale: keep only this one (never another build's .tmp).
for old in "$RIG_CACHE"/rootfs-$RIG_NTP-*; do
  case $old in "$dir"|*.tmp) ;; *) rm -rf "$old" ;; esac
done
echo "$dir"
