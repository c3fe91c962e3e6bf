#!/usr/bin/env bash
# Lets this host run ARCH's binaries (the maintainer scripts of a foreign guest's packages while
# mmdebstrap builds its root file system): qemu-user-static registered with binfmt_misc. The F
# flag makes the kernel open the interpreter now, so it works inside the chroot, which has none.
# Idempotent; needs root. Measured 2026-11-27 in this container: binfmt_misc was not mounted, but
# mounting and registering were allowed.
set -euo pipefail
ARCH=${1:?usage: binfmt-register.sh ARCH}
case $ARCH in arm64) name=aarch64 ;; amd64) name=x86_64 ;; *) echo "binfmt-register: no qemu-user entry for $ARCH" >&2; exit 64 ;; esac
conf=/usr/lib/binfmt.d/qemu-$name.conf
qemu=/usr/bin/qemu-$name-static
[ -x "$qemu" ] && [ -f "$conf" ] || { echo "binfmt-register: $qemu or $conf missing: apt-get install qemu-user-static (scripts/install-deps.sh)" >&2; exit 1; }
misc=/proc/sys/fs/binfmt_misc
[ -e "$misc/register" ] || mount -t binfmt_misc binfmt_misc "$misc" || {
  echo "binfmt-register: cannot mount binfmt_misc on $misc; a foreign guest's root file system needs it (run privileged, or build the image on a $ARCH host)" >&2; exit 1; }
if [ -e "$misc/qemu-$name" ]; then
  grep -q '^flags: .*F' "$misc/qemu-$name" && exit 0
  echo -1 > "$misc/qemu-$name"  # registered without F (the chroot could not find it): again with F
fi
# Debian's entry, with the static binary itself as interpreter and the flags F (fix binary) and C.
sed -E "s|:[^:]*:[A-Z]*$|:$qemu:FC|" "$conf" > "$misc/register"
