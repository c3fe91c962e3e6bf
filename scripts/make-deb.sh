#!/usr/bin/env bash
# make deb: a Debian package of the agent for this machine's architecture
# (dpkg --print-architecture; on a Pi 64-bit that is arm64).
#   BUILD=release (default): -c release --static-swift-stdlib, stripped — what goes on gateways.
#   BUILD=debug: the debug binaries already built (quick, for the package layout tests).
# Output: .work/deb/doorbell-agent_<version>_<arch>.deb
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BUILD=${BUILD:-release}
version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/DoorbellCore/WebhookSigner.swift)
arch=$(dpkg --print-architecture)
out=$root/.work/deb
stage=$out/stage
pkg=$out/doorbell-agent_${version}_${arch}.deb

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
for tool in dpkg-deb help2man gzip; do
  command -v $tool >/dev/null || { echo "make-deb: $tool missing (apt-get install dpkg-dev help2man)" >&2; exit 1; }
done

rm -rf "$stage"
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/usr/lib/sysusers.d" \
  "$stage/usr/lib/tmpfiles.d" "$stage/etc/doorbell-agent" "$stage/usr/share/doc/doorbell-agent" \
  "$stage/usr/share/man/man1" "$stage/usr/share/doorbell-agent" \
  "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
  "$stage/usr/share/fish/vendor_completions.d"

for b in doorbell-agent agentctl; do
  install -m 0755 "$bin/$b" "$stage/usr/bin/$b"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/$b"
  # Man pages from the CLIs' own help, so they never drift from the code.
  help2man --no-info --no-discard-stderr --section=1 --name="$("$stage/usr/bin/$b" --help | sed -n '1s/^OVERVIEW: //p')" \
    "$stage/usr/bin/$b" | gzip -9n > "$stage/usr/share/man/man1/$b.1.gz"
  "$stage/usr/bin/$b" --generate-completion-script bash | sed '1{/^#!/d}' > "$stage/usr/share/bash-completion/completions/$b"
  "$stage/usr/bin/$b" --generate-completion-script zsh > "$stage/usr/share/zsh/vendor-completions/_$b"
  "$stage/usr/bin/$b" --generate-completion-script fish > "$stage/usr/share/fish/vendor_completions.d/$b.fish"
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
Depends: libc6, libbluetooth3, libcurl4 (>= 7.74), libssl3 (>= 3.0), libsqlite3-0, libgpiod2, libmosquitto1, systemd
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
