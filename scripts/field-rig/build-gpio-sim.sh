#!/usr/bin/env bash
# gpio-sim for a Debian kernel that lacks it (issue #25): Debian builds neither CONFIG_GPIO_SIM nor
# CONFIG_IRQ_SIM, so the module is built out of tree from Debian's own linux-source and headers
# for KVER, with irq_sim compiled into it. One line of irq_sim.c changes: it calls irq_to_desc(),
# which 6.1 does not export to modules; generic_handle_irq() (exported) runs the same flow handler.
# Usage: build-gpio-sim.sh KVER OUTDIR  (e.g. 6.1.0-56-amd64) → OUTDIR/gpio-sim.ko
# Measured 2026-11-27: builds in 8 s; in the rig's bookworm guest `insmod`, a configfs chip
# (/sys/kernel/config/gpio-sim/…/live) appears as /dev/gpiochip0 and writing pull-up to
# sim_gpio0/pull raises the line. Not yet wired into build-rootfs.sh or a scenario.
set -euo pipefail
KVER=${1:?usage: build-gpio-sim.sh KVER OUTDIR}
OUT=${2:?usage: build-gpio-sim.sh KVER OUTDIR}
series=$(echo "$KVER" | cut -d. -f1-2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DEBIAN_FRONTEND=noninteractive
dpkg-query -W -f='${Status}' "linux-headers-$KVER" 2>/dev/null | grep -q "install ok installed" \
  || apt-get install -y -qq --no-install-recommends "linux-headers-$KVER" >/dev/null
(cd "$work" && apt-get download -q "linux-source-$series" >/dev/null)
dpkg-deb --fsys-tarfile "$work"/linux-source-*.deb | tar -x -C "$work" --wildcards '*/linux-source-*.tar.xz'
tarball=$(find "$work" -name "linux-source-$series.tar.xz")
tar -xJf "$tarball" -C "$work" "linux-source-$series/drivers/gpio/gpio-sim.c" \
  "linux-source-$series/drivers/gpio/gpiolib.h" "linux-source-$series/kernel/irq/irq_sim.c"
mkdir -p "$work/mod"
src=$work/linux-source-$series
cp "$src/drivers/gpio/gpio-sim.c" "$work/mod/gpio-sim-main.c"
cp "$src/drivers/gpio/gpiolib.h" "$src/kernel/irq/irq_sim.c" "$work/mod/"
sed -i 's/handle_simple_irq(irq_to_desc(irqnum));/generic_handle_irq(irqnum);/' "$work/mod/irq_sim.c"
grep -q 'generic_handle_irq(irqnum);' "$work/mod/irq_sim.c" || { echo "build-gpio-sim: irq_sim.c changed upstream; check the patch" >&2; exit 1; }
printf 'obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-main.o irq_sim.o\n' > "$work/mod/Kbuild"
make -s -C "/usr/src/linux-headers-$KVER" M="$work/mod" modules >&2
mkdir -p "$OUT"
cp "$work/mod/gpio-sim.ko" "$OUT/"
echo "$OUT/gpio-sim.ko"
