#!/usr/bin/env bash
# A target sysroot for DIST (bookworm|trixie) and ARCH (amd64|arm64): the -dev packages the agent
# links against, unpacked with mmdebstrap --variant=extract (no emulation, no maintainer scripts).
# Cached under $CROSS_CACHE keyed by this script and its arguments. Prints the sysroot's path.
set -euo pipefail
DIST=${1:?usage: sysroot.sh DIST ARCH}
ARCH=${2:?usage: sysroot.sh DIST ARCH}
CROSS_CACHE=${CROSS_CACHE:-/var/cache/doorbell-cross}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
case $DIST in bookworm|trixie) ;; *) echo "cross: DIST must be bookworm or trixie, not $DIST" >&2; exit 64 ;; esac
case $ARCH in amd64|arm64) ;; *) echo "cross: ARCH must be amd64 or arm64, not $ARCH" >&2; exit 64 ;; esac
gcc=12; [ "$DIST" = trixie ] && gcc=14
# libc, the C++ runtime and crt files for the static Swift runtime, and the agent's C libraries.
packages=(libc6-dev linux-libc-dev "libgcc-$gcc-dev" "libstdc++-$gcc-dev" libcurl4-openssl-dev libssl-dev
  libsqlite3-dev libgpiod-dev libmosquitto-dev libbluetooth-dev zlib1g-dev)

key=$( (cat "$0"; echo "$DIST $ARCH") | sha256sum | cut -c1-16)
dir=$CROSS_CACHE/sysroot-$DIST-$ARCH-$key
if [ -f "$dir/done" ]; then echo "$dir/root"; exit 0; fi
[ "$(id -u)" -eq 0 ] || { echo "cross: needs root (mmdebstrap)" >&2; exit 1; }
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp"
echo "cross: $DIST $ARCH sysroot (${#packages[@]} packages) into $dir.tmp/root" >&2
sources=("deb $MIRROR $DIST main")
[ "$DIST" = bookworm ] && sources+=("deb $MIRROR-security bookworm-security main" "deb $MIRROR bookworm-updates main")
[ "$DIST" = trixie ] && sources+=("deb $MIRROR-security trixie-security main" "deb $MIRROR trixie-updates main")
nice -n 10 mmdebstrap --mode=root --variant=extract --quiet --architectures="$ARCH" \
  --include="$(IFS=,; echo "${packages[*]}")" "$DIST" "$dir.tmp/root" "${sources[@]}" >&2
# trixie's packages ship everything under /usr (the usr-merge is done); the /lib -> usr/lib links
# come from base-files, which extract does not install. libc.so's linker script and the dynamic
# linker's path name /lib.
for d in bin sbin lib lib64; do
  [ -e "$dir.tmp/root/$d" ] || [ ! -d "$dir.tmp/root/usr/$d" ] || ln -s "usr/$d" "$dir.tmp/root/$d"
done
# Absolute symlinks (libfoo.so -> /lib/aarch64-linux-gnu/libfoo.so.1) would resolve to the build
# machine's own libraries: make each relative to the sysroot.
root=$dir.tmp/root
find "$root" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$root$target")" "$link"
done
rm -rf "$root/var/cache/apt/archives/"*.deb
mv "$dir.tmp" "$dir"
touch "$dir/done"
for old in "$CROSS_CACHE"/sysroot-$DIST-$ARCH-*; do [ "$old" = "$dir" ] || rm -rf "$old"; done
echo "$dir/root"
