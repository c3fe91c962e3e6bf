#!/usr/bin/env bash
# The cross build root (issue #25): a Debian sid tree of this machine's architecture with Debian's
# own Swift (`swiftlang`, 6.2.x) and lld, plus the Swift runtime and static stdlib of the other
# architecture (aarch64 on an amd64 host, x86_64 on an arm64 one) taken from the same version's
# packages of that architecture, in /opt/swift-<cpu>. The build root's own architecture builds
# natively with /usr/libexec/swift/lib: on an arm64 host (a Pi running make test) nothing runs
# emulated. Debian's Swift is the only one that ships an arm64 runtime we can install from a
# registry; swift.org's 6.3 toolchain here has none.
# Built with mmdebstrap, cached under $CROSS_CACHE keyed by this script and the host's
# architecture, so a warm run reuses it. Prints the build root's path.
# CROSS_PLAN=1 prints the root's architectures, packages and runtime directory, and stops
# (CROSS_HOST_ARCH stands for the host's architecture there: test_rig.py checks an arm64 host's).
set -euo pipefail
CROSS_CACHE=${CROSS_CACHE:-/var/cache/doorbell-cross}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# sid's archive here can be a frozen snapshot whose Release is past Valid-Until.
aptopt='Acquire::Check-Valid-Until "false"'
host=${CROSS_HOST_ARCH:-$(dpkg --print-architecture)}
case $host in
  amd64) other=arm64 other_cpu=aarch64 ;;
  arm64) other=amd64 other_cpu=x86_64 ;;
  *) echo "cross: the build root runs on amd64 or arm64 hosts, not $host" >&2; exit 64 ;;
esac
# libc6-dev and libstdc++-dev: the manifest and any host-side build are compiled for the build
# root itself; the other architecture's binutils strip its binaries.
packages=(swiftlang lld pkg-config git ca-certificates "binutils-${other_cpu//_/-}-linux-gnu" file libc6-dev libstdc++-15-dev)
if [ "${CROSS_PLAN:-0}" = 1 ]; then
  echo "architectures=$host,$other packages=$(IFS=,; echo "${packages[*]}") native=/usr/libexec/swift/lib other=/opt/swift-$other_cpu"
  exit 0
fi

key=$( (cat "$0"; echo "$host") | sha256sum | cut -c1-16)
dir=$CROSS_CACHE/buildroot-$key
if [ -f "$dir/done" ]; then echo "$dir/root"; exit 0; fi
command -v mmdebstrap >/dev/null || { echo "cross: mmdebstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "cross: needs root (mmdebstrap, chroot)" >&2; exit 1; }
mkdir -p "$CROSS_CACHE"
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp"
echo "cross: mmdebstrap sid $host build root (${packages[*]}, the $other runtime) into $dir.tmp/root — downloads about 0.7 GB once" >&2
# The other architecture's runtime: swiftlang and libswiftlang of exactly the host swiftlang's
# version, unpacked (not installed) into /opt/swift-<cpu>; only its lib/swift{,_static} is kept.
# A script file rather than quoted text in the hook: the hook's quoting once hid a syntax error
# that only a cold build (a fresh machine) reached.
cat > "$dir.tmp/other-runtime.sh" <<SCRIPT
set -e
v=\$(dpkg-query -W -f='\${Version}' swiftlang)
mkdir -p /tmp/other /opt/swift-$other_cpu
cd /tmp/other
apt-get download -q swiftlang:$other=\$v libswiftlang:$other=\$v
for d in *.deb; do dpkg-deb -x \$d /tmp/other/x; done
cp -a /tmp/other/x/usr/libexec/swift/lib/swift /tmp/other/x/usr/libexec/swift/lib/swift_static /opt/swift-$other_cpu/
rm -rf /tmp/other /var/cache/apt/archives/*.deb
# clang's builtin headers (stdarg.h, ...) are the same for every target: the host's copy.
ln -s /usr/libexec/swift/lib/clang /opt/swift-$other_cpu/clang
echo \$v > /opt/swift-$other_cpu/VERSION
SCRIPT
nice -n 10 mmdebstrap --mode=root --variant=apt --quiet --aptopt="$aptopt" \
  --architectures="$host,$other" \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --customize-hook="chroot \"\$1\" sh -e < '$dir.tmp/other-runtime.sh'" \
  sid "$dir.tmp/root" "deb $MIRROR sid main" >&2
mv "$dir.tmp" "$dir"
touch "$dir/done"
for old in "$CROSS_CACHE"/buildroot-*; do [ "$old" = "$dir" ] || rm -rf "$old"; done
echo "$dir/root"
