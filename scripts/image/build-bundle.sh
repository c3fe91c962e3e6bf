#!/usr/bin/env bash
# make bundle BOARD=raspberrypi-4 (issue #29 item 4): a signed RAUC update bundle (verity format)
# for the field image's A/B root slots. Its root file system is build-image.sh's own
# (.work/image/doorbell-<board>-<version>.rootfs.ext4, the same bytes as the image's slot A: one
# pipeline; built first if missing), compatible=doorbell-<board>, version = the .deb's version,
# and a slot hook (bundle-hook.sh) that copies the new slot's kernel, initrd and device trees to
# its directory on the FAT partition. Signed with bundle-keys.sh's key (BUNDLE_KEY/BUNDLE_CERT/
# BUNDLE_KEYRING, or the development keys) and checked against the keyring before it is written.
# Inputs: BOARD, IMAGE_DEB (as build-image.sh), BUNDLE_ROOTFS (another root file system image:
# the rig's broken-agent bundle), BUNDLE_OUT (the output file), BUNDLE_VERSION (the manifest's
# version instead of the .deb's: a rebuilt root of the same package; doorbell-update compares it
# with the version the booted slot was installed from). Output:
# .work/image/doorbell-<board>-<version>.raucb and its .sha256. Host tools: rauc, mksquashfs.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=$PWD/scripts/image
die() { echo "build-bundle: $*" >&2; exit 1; }
BOARD=${BOARD:-${1:-}}
[ -n "$BOARD" ] || { echo "build-bundle: usage: make bundle BOARD=<board>" >&2; exit 64; }
[ -f "board/$BOARD/image.conf" ] || { echo "build-bundle: board $BOARD has no field image (board/$BOARD/image.conf)" >&2; exit 64; }
for tool in rauc mksquashfs dpkg-deb; do
  command -v $tool >/dev/null || die "$tool is missing: scripts/install-deps.sh installs it (rauc, squashfs-tools, dpkg-dev)"
done
deb=${IMAGE_DEB:-$(ls -t .work/deb/trixie/doorbell-agent_*_arm64.deb 2>/dev/null | head -1 || true)}
[ -n "$deb" ] || die "no arm64 trixie package: make deb ARCH=arm64 DIST=trixie (or IMAGE_DEB)"
version=$(dpkg-deb -f "$deb" Version)
name=doorbell-$BOARD-$version
bundle_version=${BUNDLE_VERSION:-$version}
case $bundle_version in *[!A-Za-z0-9.+~-]*|'') die "BUNDLE_VERSION '$bundle_version' is not a Debian-style version (letters, digits, . + ~ -)";; esac
rootfs=${BUNDLE_ROOTFS:-.work/image/$name.rootfs.ext4}
if [ ! -f "$rootfs" ]; then
  [ -z "${BUNDLE_ROOTFS:-}" ] || die "BUNDLE_ROOTFS $rootfs does not exist"
  IMAGE_DEB=$deb BOARD=$BOARD "$here/build-image.sh" >&2
fi
mapfile -t keys < <("$here/bundle-keys.sh")
out=${BUNDLE_OUT:-$PWD/.work/image/$name.raucb}
work=$(mktemp -d "$PWD/.work/bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/content"
cp --sparse=always "$rootfs" "$work/content/rootfs.ext4"
install -m 0755 "$here/bundle-hook.sh" "$work/content/hook.sh"
cat > "$work/content/manifest.raucm" <<MANIFEST
[update]
compatible=doorbell-$BOARD
version=$bundle_version
description=doorbell-agent field image root for $BOARD
build=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

[bundle]
format=verity

[hooks]
filename=hook.sh

[image.rootfs]
filename=rootfs.ext4
hooks=post-install
MANIFEST
rm -f "$out"
mkdir -p "$(dirname "$out")"
# zstd: the image's kernel reads it (CONFIG_SQUASHFS_ZSTD) and it packs a 1 GiB root in a
# fraction of xz's time on a small build machine.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)} nice -n 10 rauc bundle \
  --cert="${keys[1]}" --key="${keys[0]}" --keyring="${keys[2]}" --mksquashfs-args="-comp zstd" \
  "$work/content" "$out" >&2 || die "rauc bundle failed (above)"
(cd "$(dirname "$out")" && sha256sum "$(basename "$out")" > "$(basename "$out").sha256")
echo "build-bundle: $out: $(du -h "$out" | cut -f1), compatible doorbell-$BOARD, version $bundle_version"
