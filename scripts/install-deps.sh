#!/usr/bin/env bash
# Installs what the build, the demo and the tests need, from Debian packages only, and only
# what is missing. Safe to run again. Needs root (apt-get) unless everything is present.
set -euo pipefail

# gcc: SyncerCrashTests compiles its fsync-holding LD_PRELOAD shim with /usr/bin/cc.
packages=(rtl-433 curl libgpiod-dev gpiod bluez libbluetooth-dev libmosquitto-dev mosquitto mosquitto-clients libcurl4-openssl-dev libssl-dev libsqlite3-dev postgresql openssl ca-certificates python3 python3-venv gcc libc6-dev sqlite3 dpkg-dev lintian help2man)
# The field rig (make test-field): Debian guests built with mmdebstrap, booted with qemu: on amd64
# the PC guest (TCG) and the arm64 board (TCG; its image's maintainer scripts run under
# qemu-user-static, which mmdebstrap checks with arch-test); on arm64 only the board (KVM if usable).
case $(dpkg --print-architecture) in
  amd64) packages+=(mmdebstrap arch-test qemu-system-x86 qemu-system-arm qemu-utils e2fsprogs) ;;
  arm64) packages+=(mmdebstrap arch-test qemu-system-arm qemu-utils e2fsprogs) ;;
esac
# Cross packages (make deb ARCH=…): the build root and sysroots come from mmdebstrap; a package for
# the other architecture is stripped with its binutils and its binaries run by qemu-user-static.
case $(dpkg --print-architecture) in
  amd64) packages+=(binutils-aarch64-linux-gnu) ;;
  arm64) packages+=(binutils-x86-64-linux-gnu) ;;
esac
packages+=(mmdebstrap qemu-user-static)
# The field image (make image): the partition table, the FAT boot partition and its files, ext4
# with -d, the compressed image (scripts/image/build-image.sh).
packages+=(fdisk dosfstools mtools e2fsprogs xz-utils git)
# Update bundles (make bundle): RAUC signs them (its CMS over a squashfs of the root slot).
packages+=(rauc squashfs-tools openssl)
# make bench's instruction counts (callgrind) and the release link order (scripts/footprint/make-order-file.sh).
packages+=(valgrind)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to apt-get install ${missing[*]} (run as root or install them yourself)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  echo "install-deps: the Swift 6.3 toolchain is not on PATH. Install it from swift.org (Debian 12 / aarch64 builds exist) and put its usr/bin on PATH." >&2
  exit 1
fi
