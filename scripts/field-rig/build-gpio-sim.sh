#!/usr/bin/env bash
# gpio-sim for a Debian kernel that lacks it (issue #25): Debian builds neither CONFIG_GPIO_SIM nor
# CONFIG_IRQ_SIM, so the module is built out of tree from Debian's own linux-source and headers
# for KVER, with irq_sim compiled into it. One line of irq_sim.c changes: it calls irq_to_desc(),
# which 6.1 does not export to modules; generic_handle_irq() (exported) runs the same flow handler.
# Out of tree rather than a kernel of our own: the rig keeps booting Debian's kernel, the one a
# field image runs, and the module builds in seconds instead of a kernel's tens of minutes.
#
# Usage: build-gpio-sim.sh KVER OUTDIR  (e.g. 6.1.0-56-amd64, 6.12.57+deb13-arm64) → OUTDIR/gpio-sim.ko
#   ARCH: the guest's Debian architecture (amd64, arm64), by default the one KVER ends with;
#   DIST: the guest's release (bookworm, trixie), by default read from KVER (+deb13: trixie).
#   For this machine's own architecture and release the host builds it (apt-get installs
#   linux-headers-KVER). Otherwise it builds in a small DIST build root of this machine's own
#   architecture (mmdebstrap, cached in $RIG_CACHE/kbuild-DIST-*): that release's make and gcc,
#   plus its cross gcc when ARCH is not the host's (aarch64-linux-gnu-gcc on an amd64 host,
#   x86_64-linux-gnu-gcc on an arm64 one: a Pi builds its own board's module natively), the
#   native linux-kbuild of KVER, and linux-headers-KVER of ARCH unpacked over it.
#   KBUILD_PLAN=1 prints the build root's architectures, packages and make arguments, and stops.
# Measured 2026-11-27: builds in 8 s; in the rig's bookworm guest `insmod`, a configfs chip
# (/sys/kernel/config/gpio-sim/…/live) appears as /dev/gpiochip0 and writing pull-up to
# sim_gpio0/pull raises the line (scripts/field-rig/test_gpio.py).
set -euo pipefail
KVER=${1:?usage: build-gpio-sim.sh KVER OUTDIR}
OUT=${2:?usage: build-gpio-sim.sh KVER OUTDIR}
ARCH=${ARCH:-${KVER##*-}}
case $ARCH in
  amd64) karch=x86_64 gnu=x86_64-linux-gnu ;;
  arm64) karch=arm64 gnu=aarch64-linux-gnu ;;
  *) echo "build-gpio-sim: ARCH must be amd64 or arm64 (got \"$ARCH\"; set ARCH= when KVER does not end with it)" >&2; exit 64 ;;
esac
case $KVER in *+deb13*) kdist=trixie ;; *) kdist=bookworm ;; esac
DIST=${DIST:-$kdist}
host=${KBUILD_HOST_ARCH:-$(dpkg --print-architecture)}
# The build root is the host's architecture; a foreign ARCH adds its cross gcc.
archs=$host kpackages=make,gcc,libc6-dev,xz-utils,ca-certificates cross=()
if [ "$ARCH" != "$host" ]; then
  archs=$host,$ARCH kpackages=$kpackages,gcc-${gnu//_/-} cross=(ARCH="$karch" CROSS_COMPILE=$gnu-)
fi
if [ "${KBUILD_PLAN:-0}" = 1 ]; then
  echo "architectures=$archs packages=$kpackages make=$(IFS=,; echo "${cross[*]}")"
  exit 0
fi
key=$( (cat "$0"; echo "$KVER $ARCH $DIST") | sha256sum | cut -c1-16)
if [ -f "$OUT/gpio-sim.ko" ] && [ "$(cat "$OUT/gpio-sim.key" 2>/dev/null)" = "$key" ]; then
  echo "$OUT/gpio-sim.ko"; exit 0
fi
series=$(echo "$KVER" | cut -d. -f1-2)
host_dist=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DEBIAN_FRONTEND=noninteractive
if [ "$ARCH" = "$(dpkg --print-architecture)" ] && [ "$DIST" = "$host_dist" ]; then
  root=
  KDIR=/usr/src/linux-headers-$KVER
  [ -d "$KDIR" ] || apt-get install -y -qq --no-install-recommends "linux-headers-$KVER" >/dev/null
  (cd "$work" && apt-get -o APT::Sandbox::User=root download -q "linux-source-$series" >/dev/null)
else
  case $DIST in bookworm|trixie) ;; *) echo "build-gpio-sim: DIST must be bookworm or trixie" >&2; exit 64 ;; esac
  [ "$(id -u)" -eq 0 ] || { echo "build-gpio-sim: needs root (mmdebstrap, chroot)" >&2; exit 1; }
  RIG_CACHE=${RIG_CACHE:-/var/cache/doorbell-field-rig}
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
  rootkey=$( (sed -n '/# kbuild root:/,/# end of kbuild root/p' "$0"; echo "$DIST $archs $kpackages") | sha256sum | cut -c1-16)
  # kbuild root: make, gcc and, for a foreign ARCH, its cross gcc of DIST (the compiler its kernels are built with).
  rootdir=$RIG_CACHE/kbuild-$DIST-$rootkey
  if [ ! -f "$rootdir/done" ]; then
    command -v mmdebstrap >/dev/null || { echo "build-gpio-sim: mmdebstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
    rm -rf "$rootdir"
    mkdir -p "$rootdir"
    nice -n 10 mmdebstrap --mode=root --variant=apt --quiet --architectures="$archs" \
      --include="$kpackages" \
      "$DIST" "$rootdir/root" "deb $MIRROR $DIST main" "deb $MIRROR-security $DIST-security main" "deb $MIRROR $DIST-updates main" >&2
    touch "$rootdir/done"
    for old in "$RIG_CACHE"/kbuild-$DIST-*; do [ "$old" = "$rootdir" ] || rm -rf "$old"; done
  fi
  # end of kbuild root
  root=$rootdir/root
  mkdir -p "$root/tmp/dl"
  chroot "$root" sh -c "cd /tmp/dl && apt-get update -qq && apt-get -o APT::Sandbox::User=root download -q linux-headers-$KVER:$ARCH linux-source-$series" >&2
  # The headers' own Depends name the -common headers and the linux-kbuild of KVER: the native
  # (host's) kbuild, whose tools (modpost, fixdep) run here.
  deps=$(dpkg-deb -f "$root"/tmp/dl/linux-headers-"$KVER"_*.deb Depends | tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g' | grep -E '^linux-(headers|kbuild)-')
  chroot "$root" apt-get install -y -qq --no-install-recommends $deps >&2
  dpkg-deb -x "$root"/tmp/dl/linux-headers-"$KVER"_*.deb "$root"
  mv "$root"/tmp/dl/linux-source-*.deb "$work/"
  rm -rf "$root/tmp/dl"
  KDIR=/usr/src/linux-headers-$KVER
fi
dpkg-deb --fsys-tarfile "$work"/linux-source-*.deb | tar -x -C "$work" --wildcards '*/linux-source-*.tar.xz'
tarball=$(find "$work" -name "linux-source-$series.tar.xz")
tar -xJf "$tarball" -C "$work" "linux-source-$series/drivers/gpio/gpio-sim.c" \
  "linux-source-$series/drivers/gpio/gpiolib.h" "linux-source-$series/kernel/irq/irq_sim.c"
mkdir -p "$work/mod"
src=$work/linux-source-$series
cp "$src/drivers/gpio/gpio-sim.c" "$work/mod/gpio-sim-main.c"
cp "$src/drivers/gpio/gpiolib.h" "$src/kernel/irq/irq_sim.c" "$work/mod/"
# 6.1's irq_sim calls the unexported irq_to_desc(); later kernels may not (then nothing to patch).
if grep -q 'handle_simple_irq(irq_to_desc(irqnum));' "$work/mod/irq_sim.c"; then
  sed -i 's/handle_simple_irq(irq_to_desc(irqnum));/generic_handle_irq(irqnum);/' "$work/mod/irq_sim.c"
fi
grep -q 'irq_to_desc' "$work/mod/irq_sim.c" && { echo "build-gpio-sim: irq_sim.c of $series still calls irq_to_desc() (not exported to modules); check the patch" >&2; exit 1; }
printf 'obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-main.o irq_sim.o\n' > "$work/mod/Kbuild"
if [ -z "$root" ]; then
  make -s -C "$KDIR" M="$work/mod" "${cross[@]}" modules >&2
else
  rm -rf "$root/tmp/mod" && cp -r "$work/mod" "$root/tmp/mod"
  chroot "$root" make -s -C "$KDIR" M=/tmp/mod "${cross[@]}" modules >&2
  cp "$root/tmp/mod/gpio-sim.ko" "$work/mod/" && rm -rf "$root/tmp/mod"
fi
vermagic=$(modinfo -F vermagic "$work/mod/gpio-sim.ko")
case $vermagic in "$KVER "*) ;; *) echo "build-gpio-sim: built for \"$vermagic\", not $KVER" >&2; exit 1 ;; esac
mkdir -p "$OUT"
cp "$work/mod/gpio-sim.ko" "$OUT/"
echo "$key" > "$OUT/gpio-sim.key"
echo "$OUT/gpio-sim.ko"
