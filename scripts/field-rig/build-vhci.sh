#!/usr/bin/env bash
# hci_vhci for a Debian arm64 kernel that lacks it (# CONFIG_BT_HCIVHCI is not set in bookworm's
# and trixie's arm64 configs): built out of tree from Debian's linux-source with that kernel's own
# linux-headers, in a throw-away Debian chroot (this host's architecture) of the kernel's
# distribution with its arm64 cross compiler (the headers' host tools, linux-kbuild, need that
# distribution's libc, not this host's). Usage: build-vhci.sh KVER OUTDIR (e.g. 6.12.118+deb13-arm64) → prints OUTDIR/hci_vhci.ko.
# Cached: OUTDIR keeps the module with a stamp of this script, so a warm run builds nothing.
set -euo pipefail
KVER=${1:?usage: build-vhci.sh KVER OUTDIR}
OUT=${2:?usage: build-vhci.sh KVER OUTDIR}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
stamp=$(sha256sum "$0" | cut -c1-16)
if [ -f "$OUT/hci_vhci.ko" ] && [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ]; then echo "$OUT/hci_vhci.ko"; exit 0; fi
case $KVER in *-arm64) ;; *) echo "build-vhci: KVER must be a Debian arm64 kernel (…-arm64), not $KVER" >&2; exit 64 ;; esac
abi=${KVER%-arm64}                            # 6.12.118+deb13
series=$(echo "$KVER" | cut -d. -f1-2)        # 6.12
# trixie names linux-kbuild by the kernel's ABI, bookworm by its series.
case $abi in
  *+deb13*) dist=trixie gcc=14 kbuild=linux-kbuild-$abi ;;
  *) dist=bookworm gcc=12 kbuild=linux-kbuild-$series ;;
esac
# On an arm64 host (a Pi running make test) the chroot is native: its own gcc, no cross compiler.
host=$(dpkg --print-architecture)
if [ "$host" = arm64 ]; then
  cc=gcc-$gcc cross= ccpkg=gcc-$gcc archs=arm64
else
  cc=aarch64-linux-gnu-gcc-$gcc cross=aarch64-linux-gnu- ccpkg=gcc-$gcc-aarch64-linux-gnu archs=$host,arm64
fi
[ "$(id -u)" -eq 0 ] || { echo "build-vhci: needs root (mmdebstrap)" >&2; exit 1; }
work=$(mktemp -d)
# /proc is mounted in the chroot while make runs: unmount it before removing anything.
trap 'umount "$work/root/proc" 2>/dev/null || true; rm -rf --one-file-system "$work"' EXIT
start=$(date +%s)
# The arm64 headers and the source are only unpacked (no emulation): apt downloads them in the
# chroot, which knows both architectures.
nice -n 10 mmdebstrap --mode=root --variant=apt --quiet --architectures="$archs" \
  --include="make,$ccpkg,$kbuild,xz-utils" \
  --customize-hook="chroot \"\$1\" sh -c 'cd /tmp && apt-get download -q linux-headers-$KVER:arm64 linux-headers-$abi-common linux-source-$series >/dev/null && for d in /tmp/*.deb; do dpkg-deb -x \$d /; done'" \
  "$dist" "$work/root" "deb $MIRROR $dist main" "deb $MIRROR-security $dist-security main" >&2
root=$work/root
tar -xJf "$root/usr/src/linux-source-$series.tar.xz" -C "$work" "linux-source-$series/drivers/bluetooth/hci_vhci.c"
mkdir -p "$root/mod"
cp "$work/linux-source-$series/drivers/bluetooth/hci_vhci.c" "$root/mod/"
echo 'obj-m := hci_vhci.o' > "$root/mod/Kbuild"
mount -t proc proc "$root/proc"
chroot "$root" make -s -C "/usr/src/linux-headers-$KVER" M=/mod ARCH=arm64 CROSS_COMPILE="$cross" CC="$cc" modules >&2 \
  || { echo "build-vhci: hci_vhci did not build for $KVER (see above)" >&2; exit 1; }
umount "$root/proc"
# The kernel refuses a module whose vermagic is not its own: check it here, not at boot.
modinfo -F vermagic "$root/mod/hci_vhci.ko" | grep -q "^$KVER " \
  || { echo "build-vhci: hci_vhci.ko's vermagic is not $KVER: $(modinfo -F vermagic "$root/mod/hci_vhci.ko")" >&2; exit 1; }
mkdir -p "$OUT"
cp "$root/mod/hci_vhci.ko" "$OUT/"
echo "$stamp" > "$OUT/stamp"
echo "build-vhci: hci_vhci.ko for $KVER in $(( $(date +%s) - start )) s" >&2
echo "$OUT/hci_vhci.ko"
