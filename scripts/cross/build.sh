#!/usr/bin/env bash
# Cross-builds doorbell-agent and agentctl (release, static Swift runtime) for DIST and ARCH with
# Debian's Swift in the build root (build-root.sh) against a sysroot of that release's libraries
# (sysroot.sh), through a Swift SDK bundle written here. Runs the build in the build root with
# chroot, in a private mount namespace (unshare -m), so nothing stays mounted afterwards.
# Prints the directory holding the two binaries.
set -euo pipefail
DIST=${1:?usage: build.sh DIST ARCH}
ARCH=${2:?usage: build.sh DIST ARCH}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "cross: needs root (chroot, mount)" >&2; exit 1; }
buildroot=$("$here/build-root.sh")
sysroot=$("$here/sysroot.sh" "$DIST" "$ARCH")
# The triples are the ones Debian's swiftlang names its runtimes with.
# The build root is this machine's architecture (build-root.sh): its own runtime for a native
# build, /opt/swift-<cpu> for the other one.
host=$(dpkg --print-architecture)
case $ARCH in
  arm64) triple=aarch64-unknown-linux-gnu; multiarch=aarch64-linux-gnu; cpu=aarch64 ;;
  amd64) triple=x86_64-pc-linux-gnu; multiarch=x86_64-linux-gnu; cpu=x86_64 ;;
  *) echo "cross: ARCH must be amd64 or arm64, not $ARCH" >&2; exit 64 ;;
esac
runtime=/opt/swift-$cpu
[ "$ARCH" = "$host" ] && runtime=/usr/libexec/swift/lib
case $host in
  amd64) host_triples='"x86_64-unknown-linux-gnu", "x86_64-pc-linux-gnu"' ;;
  arm64) host_triples='"aarch64-unknown-linux-gnu"' ;;
esac
name=doorbell-$DIST-$ARCH
scratch=.build-cross-$DIST-$ARCH
sdks=$repo/$scratch/sdks
bundle=$sdks/$name.artifactbundle
rm -rf "$sdks"; mkdir -p "$bundle/sdk"
cat > "$bundle/info.json" <<JSON
{"schemaVersion": "1.0", "artifacts": {"$name": {"type": "swiftSDK", "version": "1",
 "variants": [{"path": "sdk", "supportedTriples": [$host_triples]}]}}}
JSON
# Inside the build root the sysroot is mounted at /sysroot; the runtime is the target's own.
cat > "$bundle/sdk/swift-sdk.json" <<JSON
{"schemaVersion": "4.0", "targetTriples": {"$triple": {
  "sdkRootPath": "/sysroot",
  "swiftResourcesPath": "$runtime/swift",
  "swiftStaticResourcesPath": "$runtime/swift_static",
  "toolsetPaths": ["toolset.json"]}}}
JSON
cat > "$bundle/sdk/toolset.json" <<JSON
{"schemaVersion": "1.0", "swiftCompiler": {"extraCLIOptions": ["-use-ld=lld", "-resource-dir", "$runtime/swift_static"]},
 "cCompiler": {"extraCLIOptions": ["--target=$triple"]}}
JSON

# sid's static libswiftCore wants glibc 2.38's C23 strtol family; bookworm has 2.36.
extra=()
if [ "$DIST" = bookworm ]; then
  extra=(-Xlinker /src/$scratch/isoc23.o)
fi

mkdir -p "$buildroot/src" "$buildroot/sysroot" "$buildroot/opt/swift-packages"
cp /etc/resolv.conf "$buildroot/etc/resolv.conf" 2>/dev/null || true
# This workplace resolves github.com from a local mirror through git's url rewriting: carry it in.
[ -d /opt/swift-packages ] && git config --system --list 2>/dev/null | sed -n 's/^url\.\(.*\)\.insteadof=\(.*\)$/\1 \2/p' > "$buildroot/tmp/url-rewrites" || : > "$buildroot/tmp/url-rewrites"
start=$(date +%s)
unshare -m sh -ec "
  mount --bind '$repo' '$buildroot/src'
  mount --bind '$sysroot' '$buildroot/sysroot'
  mount -t proc proc '$buildroot/proc'
  # The driver links the static runtime from <sysroot>/usr/lib/swift_static whatever the SDK's
  # swiftStaticResourcesPath says: lay the target's runtime there (in this namespace only).
  for d in swift swift_static; do
    mkdir -p '$sysroot'/usr/lib/\$d
    mount --bind '$buildroot$runtime'/\$d '$buildroot/sysroot/usr/lib/'\$d
  done
  [ -d /opt/swift-packages ] && mount --bind /opt/swift-packages '$buildroot/opt/swift-packages'
  chroot '$buildroot' env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    PKG_CONFIG_SYSROOT_DIR=/sysroot \
    PKG_CONFIG_LIBDIR=/sysroot/usr/lib/$multiarch/pkgconfig:/sysroot/usr/share/pkgconfig \
    sh -ec '
      while read -r to from; do git config --global --add url.\$to.insteadOf \"\$from\"; done < /tmp/url-rewrites
      cd /src
      if [ $DIST = bookworm ]; then
        /usr/libexec/swift/bin/clang --target=$triple --sysroot=/sysroot -O2 -c scripts/cross/isoc23.c -o $scratch/isoc23.o
      fi
      for p in doorbell-agent agentctl; do
        swift build -c release --static-swift-stdlib --scratch-path $scratch \
          --swift-sdks-path /src/$scratch/sdks --swift-sdk $name --product \$p ${extra[*]}
      done'
" >&2
bin=$repo/$scratch/$triple/release
[ -x "$bin/doorbell-agent" ] || bin=$repo/$scratch/release
echo "cross: $DIST $ARCH built in $(( $(date +%s) - start )) s: $(file -b "$bin/doorbell-agent" | cut -d, -f1-2)" >&2
echo "$bin"
