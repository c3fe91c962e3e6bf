#!/usr/bin/env bash
# The field rig's guest: a Debian root file system (systemd as PID 1, BlueZ, the .deb's
# dependencies, Debian's own kernel) as an ext4 image, plus that kernel and its initramfs.
# RIG_ARCH (amd64|arm64, default the host's) and RIG_DIST (bookworm|trixie, default bookworm)
# choose the guest: amd64 bookworm is the Debian 12 PC, arm64 trixie a Debian 13 board.
# Built with mmdebstrap from the Debian mirror, cached under $RIG_CACHE keyed by a hash of this
# script (the package list and every file it writes into the guest), so a warm run reuses it.
# A foreign architecture's maintainer scripts run under qemu-user through binfmt_misc
# (binfmt-register.sh); arm64 also gets hci_vhci, which Debian's arm64 kernel lacks (build-vhci.sh).
# Prints the cache directory (base.img, vmlinuz, initrd.img).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RIG_CACHE=${RIG_CACHE:-/var/cache/doorbell-field-rig}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

# The image's NTP client: timesyncd (Raspberry Pi OS, Debian's default) or, with RIG_NTP=chrony,
# chrony (they conflict; issue #27's scenario, test_chrony.py). Each has its own cache directory.
RIG_NTP=${RIG_NTP:-timesyncd}
RIG_ARCH=${RIG_ARCH:-$(dpkg --print-architecture)}
RIG_DIST=${RIG_DIST:-bookworm}
case $RIG_ARCH in amd64|arm64) ;; *) echo "build-rootfs: RIG_ARCH must be amd64 or arm64, not $RIG_ARCH" >&2; exit 64 ;; esac
case $RIG_DIST in bookworm|trixie) ;; *) echo "build-rootfs: RIG_DIST must be bookworm or trixie, not $RIG_DIST" >&2; exit 64 ;; esac
case $RIG_NTP in
  timesyncd) ntp=systemd-timesyncd ;;
  chrony) ntp=chrony ;;
  *) echo "build-rootfs: RIG_NTP must be timesyncd or chrony" >&2; exit 64 ;;
esac

# What a field image has for the agent (its .deb's Depends, BlueZ, an NTP client), plus what the rig
# itself uses in the guest: python3 for the /dev/vhci bridge, strace for evidence.
packages=(systemd systemd-sysv $ntp udev dbus kmod iproute2 procps
  linux-image-$RIG_ARCH bluez ca-certificates python3-minimal strace sqlite3 less)
# The .deb's own Depends, read from the script that writes them: the guest installs it with
# dpkg -i and no network, so a new dependency must reach the image (and change its key).
depends=$(tr ',' '\n' < "$here/../../packaging/deb/depends-$RIG_DIST" | sed 's/(.*)//; s/[[:space:]]//g' | grep -v '^$')
packages+=($depends)

key=$( (cat "$0" "$here/guest/"* "$here/build-vhci.sh"; echo "$depends"; echo "$RIG_NTP $RIG_ARCH $RIG_DIST") | sha256sum | cut -c1-16)
# amd64 bookworm keeps its old name (rootfs-<ntp>-<key>), so other guests never evict it.
flavour=$RIG_NTP
[ "$RIG_ARCH-$RIG_DIST" = amd64-bookworm ] || flavour=$RIG_NTP-$RIG_ARCH-$RIG_DIST
dir=$RIG_CACHE/rootfs-$flavour-$key
if [ -f "$dir/done" ]; then echo "$dir"; exit 0; fi
command -v mmdebstrap >/dev/null || { echo "build-rootfs: mmdebstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build-rootfs: needs root (mmdebstrap, mkfs.ext4 -d)" >&2; exit 1; }
mkdir -p "$RIG_CACHE"
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp"
root=$dir.tmp/root
[ "$RIG_ARCH" = "$(dpkg --print-architecture)" ] || "$here/binfmt-register.sh" "$RIG_ARCH"
echo "build-rootfs: mmdebstrap $RIG_DIST $RIG_ARCH (${#packages[@]} packages) into $root" >&2
start=$(date +%s)
nice -n 10 mmdebstrap --mode=root --variant=minbase --quiet --architectures="$RIG_ARCH" \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --customize-hook="cp -r $here/guest/. \"\$1/\"_rigguest" \
  --customize-hook="chroot \"\$1\" sh /_rigguest/setup.sh" \
  "$RIG_DIST" "$root" "deb $MIRROR $RIG_DIST main" "deb $MIRROR-security $RIG_DIST-security main" >&2
echo "build-rootfs: mmdebstrap took $(( $(date +%s) - start )) s" >&2
if [ "$RIG_ARCH" = arm64 ]; then
  # Debian's arm64 kernel has no hci_vhci (# CONFIG_BT_HCIVHCI is not set): built out of tree for
  # exactly the kernel this image boots, so the Bumble controller can be hci0 as on amd64.
  kver=$(basename "$(ls -d "$root"/lib/modules/*/ | head -1)")
  ko=$("$here/build-vhci.sh" "$kver" "$RIG_CACHE/vhci-$kver")
  install -D -m 0644 "$ko" "$root/lib/modules/$kver/updates/hci_vhci.ko"
  chroot "$root" depmod "$kver"
fi
cp "$root"/boot/vmlinuz-* "$dir.tmp/vmlinuz"
cp "$root"/boot/initrd.img-* "$dir.tmp/initrd.img"
truncate -s 3G "$dir.tmp/base.img"
nice -n 10 mkfs.ext4 -q -F -L rigroot -d "$root" "$dir.tmp/base.img"
rm -rf "$root"
mv "$dir.tmp" "$dir"
touch "$dir/done"
# Older keys of this NTP client are stale: keep only this one (never another build's .tmp).
for old in "$RIG_CACHE"/rootfs-$flavour-*; do
  case $old in "$dir"|*.tmp) ;; "$RIG_CACHE"/rootfs-$flavour-*-*) ;; *) rm -rf "$old" ;; esac
done
echo "$dir"
