#!/usr/bin/env bash
# make deb: a Debian package of the agent (release, static Swift runtime, stripped).
#   With neither ARCH nor DIST: for this machine's architecture and release, built with the Swift
#   on PATH. Output: .work/deb/doorbell-agent_<version>_<arch>.deb
#   ARCH=amd64|arm64 and/or DIST=bookworm|trixie: cross-built with Debian's own Swift in a build
#   root against that release's libraries (scripts/cross/), whatever this machine is.
#   Output: .work/deb/<dist>/doorbell-agent_<version>_<arch>.deb
#   BUILD=debug: the debug binaries already built (quick, for the package layout tests).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BUILD=${BUILD:-release}
version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/DoorbellCore/WebhookSigner.swift)
host_arch=$(dpkg --print-architecture)
host_dist=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
out=$root/.work/deb
if [ -n "${ARCH:-}${DIST:-}" ]; then
  arch=${ARCH:-$host_arch}
  dist=${DIST:-$host_dist}
  out=$out/$dist
  [ "$BUILD" = release ] || { echo "make-deb: ARCH/DIST builds are release builds only" >&2; exit 64; }
  bin=$(scripts/cross/build.sh "$dist" "$arch")
  # Man pages and completions come from the CLIs' own help, the same on every architecture:
  # the host's build of the same source writes them.
  swift build --product doorbell-agent >&2
  swift build --product agentctl >&2
  helpbin=$root/.build/debug
else
  arch=$host_arch
  dist=$host_dist
  case $BUILD in
    release)
      swift build -c release --static-swift-stdlib --scratch-path .build-release --product doorbell-agent
      swift build -c release --static-swift-stdlib --scratch-path .build-release --product agentctl
      bin=$root/.build-release/release ;;
    debug)
      swift build --product doorbell-agent
      swift build --product agentctl
      bin=$root/.build/debug ;;
    *) echo "make-deb: BUILD must be release or debug" >&2; exit 64 ;;
  esac
  helpbin=$bin
fi
[ -f "packaging/deb/depends-$dist" ] || { echo "make-deb: no Depends for $dist (packaging/deb/depends-bookworm, -trixie)" >&2; exit 64; }
depends=$(cat "packaging/deb/depends-$dist")
stage=$out/stage-$arch
pkg=$out/doorbell-agent_${version}_${arch}.deb
strip=strip
case $arch in arm64) cpu=aarch64 ;; *) cpu=x86_64 ;; esac
[ "$arch" = "$host_arch" ] || strip=$cpu-linux-gnu-strip
for tool in dpkg-deb help2man gzip $strip; do
  command -v $tool >/dev/null || { echo "make-deb: $tool missing (apt-get install dpkg-dev help2man binutils-${cpu//_/-}-linux-gnu; scripts/install-deps.sh)" >&2; exit 1; }
done

rm -rf "$stage"
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/usr/lib/sysusers.d" \
  "$stage/usr/lib/tmpfiles.d" "$stage/etc/doorbell-agent" "$stage/usr/share/doc/doorbell-agent" \
  "$stage/usr/share/man/man1" "$stage/usr/share/doorbell-agent" \
  "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
  "$stage/usr/share/fish/vendor_completions.d"

for b in doorbell-agent agentctl; do
  install -m 0755 "$bin/$b" "$stage/usr/bin/$b"
  $strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/$b"
  # Man pages from the CLIs' own help, so they never drift from the code.
  help2man --no-info --no-discard-stderr --section=1 --name="$("$helpbin/$b" --help | sed -n '1s/^OVERVIEW: //p')" \
    "$helpbin/$b" | gzip -9n > "$stage/usr/share/man/man1/$b.1.gz"
  "$helpbin/$b" --generate-completion-script bash | sed '1{/^#!/d}' > "$stage/usr/share/bash-completion/completions/$b"
  "$helpbin/$b" --generate-completion-script zsh > "$stage/usr/share/zsh/vendor-completions/_$b"
  "$helpbin/$b" --generate-completion-script fish > "$stage/usr/share/fish/vendor_completions.d/$b.fish"
done

install -m 0644 systemd/doorbell-agent.service "$stage/lib/systemd/system/doorbell-agent.service"
install -m 0644 systemd/doorbell-agent.sysusers "$stage/usr/lib/sysusers.d/doorbell-agent.conf"
install -m 0644 systemd/doorbell-agent.tmpfiles "$stage/usr/lib/tmpfiles.d/doorbell-agent.conf"
install -m 0644 packaging/agent.toml "$stage/etc/doorbell-agent/agent.toml"
install -m 0644 board/common/rtl_433-doorbells.conf "$stage/etc/doorbell-agent/rtl_433-doorbells.conf"
cp -r board "$stage/usr/share/doorbell-agent/board"
find "$stage/usr/share/doorbell-agent" -type f -exec chmod 0644 {} +
install -m 0644 README.md docs/protocol.md docs/control.md "$stage/usr/share/doc/doorbell-agent/"
install -m 0644 packaging/deb/copyright "$stage/usr/share/doc/doorbell-agent/copyright"
printf 'doorbell-agent (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- doorbell-agent developers <dev@doorbell-agent.invalid>  %s\n' \
  "$version" "$version" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" \
  | gzip -9n > "$stage/usr/share/doc/doorbell-agent/changelog.gz"

for s in postinst prerm postrm; do install -m 0755 "packaging/deb/$s" "$stage/DEBIAN/$s"; done
printf '/etc/doorbell-agent/agent.toml\n/etc/doorbell-agent/rtl_433-doorbells.conf\n' > "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: doorbell-agent
Version: $version
Architecture: $arch
Maintainer: doorbell-agent developers <dev@doorbell-agent.invalid>
Installed-Size: $size
Depends: $depends
Recommends: rtl-433
Section: net
Priority: optional
Homepage: https://github.com/doorbell-agent/doorbell-agent
Description: doorbell base station agent: 433 MHz presses to signed cloud events
 Runs on a wireless doorbell's base station (Raspberry Pi class board).
 It turns the burst of repeats of one button press into exactly one
 event, stores it durably in a SQLite outbox and delivers it over
 HTTPS, signed per Standard Webhooks (HMAC v1 and Ed25519 v1a), to
 the cloud. agentctl shows status, queue and events.
CONTROL
dpkg-deb --root-owner-group -Zxz --build "$stage" "$pkg" >/dev/null
echo "make-deb: $pkg ($(du -h "$pkg" | cut -f1))"
