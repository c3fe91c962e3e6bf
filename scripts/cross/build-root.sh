#!/usr/bin/env bash
# The cross build root (issue #25): a Debian sid amd64 tree with Debian's own Swift (`swiftlang`,
# 6.2.x) and lld, plus the Swift runtime and static stdlib for aarch64 taken from the same
# version's arm64 packages. Debian's Swift is the only one that ships an arm64 runtime we can
# install from a registry; swift.org's 6.3 toolchain here has none.
# Built with mmdebstrap, cached under $CROSS_CACHE keyed by this script, so a warm run reuses it.
# Prints the build root's path.
set -euo pipefail
CROSS_CACHE=${CROSS_CACHE:-/var/cache/doorbell-cross}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# sid's archive here can be a frozen snapshot whose Release is past Valid-Until.
aptopt='Acquire::Check-Valid-Until "false"'
# libc6-dev and libstdc++-dev: the manifest and any host-side build are compiled for the build root itself.
packages=(swiftlang lld pkg-config git ca-certificates binutils-aarch64-linux-gnu file libc6-dev libstdc++-15-dev)

key=$(cat "$0" | sha256sum | cut -c1-16)
dir=$CROSS_CACHE/buildroot-$key
if [ -f "$dir/done" ]; then echo "$dir/root"; exit 0; fi
command -v mmdebstrap >/dev/null || { echo "cross: mmdebstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "cross: needs root (mmdebstrap, chroot)" >&2; exit 1; }
mkdir -p "$CROSS_CACHE"
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp"
echo "cross: mmdebstrap sid build root (${packages[*]}) into $dir.tmp/root — downloads about 0.7 GB once" >&2
# The arm64 runtime: swiftlang:arm64 and libswiftlang:arm64 of exactly the host swiftlang's
# version, unpacked (not installed) into /opt/swift-aarch64; only its lib/swift{,_static} is kept.
nice -n 10 mmdebstrap --mode=root --variant=apt --quiet --aptopt="$aptopt" \
  --architectures=amd64,arm64 \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --customize-hook='chroot "$1" sh -ec "
    v=\$(dpkg-query -W -f='\${Version}' swiftlang)
    mkdir -p /tmp/arm64 /opt/swift-aarch64 && cd /tmp/arm64
    apt-get download -q swiftlang:arm64=\$v libswiftlang:arm64=\$v
    for d in *.deb; do dpkg-deb -x \$d /tmp/arm64/x; done
    cp -a /tmp/arm64/x/usr/libexec/swift/lib/swift /tmp/arm64/x/usr/libexec/swift/lib/swift_static /opt/swift-aarch64/
    rm -rf /tmp/arm64 /var/cache/apt/archives/*.deb
    # clang's builtin headers (stdarg.h, …) are the same for every target: the host's copy.
    ln -s /usr/libexec/swift/lib/clang /opt/swift-aarch64/clang
    echo \$v > /opt/swift-aarch64/VERSION"' \
  sid "$dir.tmp/root" "deb $MIRROR sid main" >&2
mv "$dir.tmp" "$dir"
touch "$dir/done"
for old in "$CROSS_CACHE"/buildroot-*; do [ "$old" = "$dir" ] || rm -rf "$old"; done
echo "$dir/root"
