#!/usr/bin/env bash
# make image BOARD=raspberrypi-4 (issue #29): the field image, one file that Raspberry Pi Imager or
# dd writes to an SD card as it is. build-base.sh's Debian 13 arm64 root (cached; Debian's kernel,
# raspi-firmware, rauc, rtl-433, ...), copied and made this board's: raspi-firmware's hook writes
# config.txt and cmdline.txt from the board's settings (board/<board>/image.conf), the agent's
# arm64 trixie .deb is installed and enabled with the board's agent.toml (customize.sh), and the
# disk is laid out as scripts/image/layout.conf says (boot, root A, root B, data) with sfdisk,
# mkfs.fat + mtools and mkfs.ext4 -d.
#
# Reproducible: SOURCE_DATE_EPOCH is the git commit's time; file system ids, serials and
# timestamps are fixed; the same inputs (the repository, the .deb, the Debian archive's state)
# give the same bytes. IMAGE_FRESH=1 also builds the base root again, without the cache.
#
# Inputs: BOARD (a board/<name> with image.conf); IMAGE_DEB (default: the newest
# .work/deb/trixie/doorbell-agent_*_arm64.deb, built by `make deb ARCH=arm64 DIST=trixie` if none);
# IMAGE_BASE (a build-base.sh directory to use instead of the cached one: trying the image's own
# files on an older base while a new one builds).
# Output: .work/image/doorbell-<board>-<version>.img.xz, .img.xz.sha256, .packages (the root's
# dpkg-query list, also printed) and .rootfs.ext4 (the root slot's file system, make bundle's
# input). The image's RAUC keyring is an input too: BUNDLE_KEYRING, or the development keys
# (bundle-keys.sh). Needs root (mmdebstrap, chroot, binfmt_misc).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
here=$repo/scripts/image
die() { echo "build-image: $*" >&2; exit 1; }

BOARD=${BOARD:-${1:-}}
boards=$(cd board && ls -d */image.conf 2>/dev/null | sed 's|/image.conf||' | tr '\n' ' ')
[ -n "$BOARD" ] || { echo "build-image: usage: make image BOARD=<board> (one of: $boards)" >&2; exit 64; }
[ -f "board/$BOARD/image.conf" ] || { echo "build-image: board $BOARD has no field image (board/$BOARD/image.conf); boards with one: $boards" >&2; exit 64; }
[ -f "board/$BOARD/agent.toml" ] || die "board/$BOARD/agent.toml is missing"
# shellcheck source=layout.conf
. "$here/layout.conf"
# shellcheck disable=SC1090
. "board/$BOARD/image.conf"
out=$repo/.work/image

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, chroot, binfmt_misc): run it as root"
for tool in mmdebstrap sfdisk mkfs.fat mmd mcopy mkfs.ext4 debugfs xz dpkg-deb git; do
  command -v $tool >/dev/null || die "$tool is missing: scripts/install-deps.sh installs it (mmdebstrap, fdisk, dosfstools, mtools, e2fsprogs, xz-utils, dpkg-dev, git)"
done

deb=${IMAGE_DEB:-$(ls -t .work/deb/trixie/doorbell-agent_*_arm64.deb 2>/dev/null | head -1 || true)}
if [ -z "$deb" ]; then
  echo "build-image: no arm64 trixie package yet: make deb ARCH=arm64 DIST=trixie" >&2
  ARCH=arm64 DIST=trixie nice -n 10 scripts/make-deb.sh >&2
  deb=$(ls -t .work/deb/trixie/doorbell-agent_*_arm64.deb | head -1)
fi
deb=$(realpath "$deb")
[ "$(dpkg-deb -f "$deb" Architecture)" = arm64 ] || die "$deb is not an arm64 package (IMAGE_DEB)"
version=$(dpkg-deb -f "$deb" Version)

part_uuid() { printf '%s-%02d' "$DISK_ID" "$1"; }

split_tree() {
  # What is written in operation moves to the data partition; the root keeps empty mount points
  # with the same owner and mode (fstab binds them). The FAT partition's files leave the root.
  local t=$1 root=$1/root from to
  mkdir -p "$t/boot" "$t/data/lib" "$t/data/etc"
  mv "$root/boot/firmware/"* "$t/boot/"
  # The FAT partition as the tryboot backend wants it (rauc-tryboot): the firmware's own files and
  # its two configs at the top, slot A's boot files in a/ (b/ comes with the first update).
  (cd "$t/boot" && rm -rf -- vmlinuz-* initrd.img-* ./*.dtb overlays cmdline.txt)
  cp -r "$root/usr/lib/doorbell-image/slot-boot" "$t/boot/a"
  cp "$t/boot/config.txt" "$t/boot/tryboot.txt"
  for pair in var/lib/doorbell-agent:lib/doorbell-agent var/lib/bluetooth:lib/bluetooth var/lib/systemd:lib/systemd \
              var/log:log etc/doorbell-agent:etc/doorbell-agent; do
    from=$root/${pair%%:*} to=$t/data/${pair#*:}
    mkdir -p "$from"
    cp -a "$from" "$to"
    find "$from" -mindepth 1 -delete
  done
  install -d -m 0755 "$t/data/rauc" "$root/data"
  install -d -m 0700 "$t/data/ssh"
  # The journal's directory on the data partition (journald makes the machine's own below it).
  install -d -m 2755 -g "$(awk -F: '$1 == "systemd-journal" {print $3}' "$root/etc/group")" "$t/data/log/journal"
}

# clamp_inode_times TREE FSIMAGE: every inode of the ext4 file system that `mkfs.ext4 -d TREE`
# made gets SOURCE_DATE_EPOCH as its ctime and atime (mkfs copies them from the tree: the build's
# own time, and no tool sets a file's ctime), with debugfs by path. The mtimes are clamped already.
clamp_inode_times() {
  local tree=$1 fs=$2 cmds=$work/debugfs.cmds
  if (cd "$1" && find . -name '*"*' | grep -q .); then die "a file name in $1 has a double quote: debugfs cannot name it"; fi
  (cd "$tree" && find . -mindepth 1 | LC_ALL=C sort | sed 's|^\.||') | while IFS= read -r f; do
    for field in ctime atime; do printf 'sif "%s" %s @%s\nsif "%s" %s_extra 0\n' "$f" $field "$SOURCE_DATE_EPOCH" "$f" $field; done
  done > "$cmds"
  for f in / /lost+found; do
    for field in ctime atime; do printf 'sif %s %s @%s\nsif %s %s_extra 0\n' $f $field "$SOURCE_DATE_EPOCH" $f $field; done
  done >> "$cmds"
  debugfs -w -f "$cmds" "$fs" > "$work/debugfs.log" 2>&1 || die "debugfs could not set the inode times in $fs: $(tail -3 "$work/debugfs.log")"
  if grep -v '^debugfs' "$work/debugfs.log" | grep -q .; then die "debugfs: $(grep -v '^debugfs' "$work/debugfs.log" | head -3)"; fi
}

base=${IMAGE_BASE:-$("$here/build-base.sh" | tail -1)}
# The image's own epoch (the base has its inputs'): every file newer than it is clamped to it. One
# given in the environment wins (reproducible-builds.org's rule): rebuilding an older image.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export SOURCE_DATE_EPOCH
work=$out/$BOARD.tmp
tree=$work/tree
root=$tree/root
cleanup() { for m in proc dev; do if mountpoint -q "$root/$m" 2>/dev/null; then umount "$root/$m"; fi; done; }
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$tree"
cp -a "$base/root" "$root"
[ "${IMAGE_FRESH:-0}" != 1 ] || [ -n "${IMAGE_BASE:-}" ] || rm -rf "$base"
# The chroot's maintainer scripts and hooks need /proc (ischroot) and /dev/null.
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
# The board's boot files: raspi-firmware's settings, then its kernel hook again (it writes
# config.txt and cmdline.txt from them, as on a Debian Pi at every kernel update).
printf 'ROOTPART=PARTUUID=%s\nCONSOLES="%s"\n' "$(part_uuid 2)" "$IMAGE_CONSOLES" > "$root/etc/default/raspi-firmware"
# The hook writes "rw"; the kernel and systemd take the last of rw/ro: the root stays read-only.
echo "ro" > "$root/etc/default/raspi-extra-cmdline"
rm -f "$root/etc/default/raspi-firmware-custom"
[ -z "$IMAGE_CONFIG_TXT" ] || printf '%s\n' "$IMAGE_CONFIG_TXT" > "$root/etc/default/raspi-firmware-custom"
chroot "$root" env DEB_MAINT_PARAMS=configure /etc/kernel/postinst.d/z50-raspi-firmware >&2
# One slot's boot files under fixed names, kept in its root (a bundle's hook copies them to the
# slot's FAT directory); config.txt loads them from os_prefix= (slot A's directory in the image).
slot_boot=$root/usr/lib/doorbell-image/slot-boot
rm -rf "$slot_boot"
mkdir -p "$slot_boot"
cp "$root"/boot/firmware/vmlinuz-* "$slot_boot/vmlinuz"
cp "$root"/boot/firmware/initrd.img-* "$slot_boot/initrd.img"
cp -r "$root"/boot/firmware/*.dtb "$root/boot/firmware/overlays" "$root/boot/firmware/cmdline.txt" "$slot_boot/"
sed -i 's|^kernel=vmlinuz-.*|kernel=vmlinuz|; s|^initramfs initrd\.img-.*|initramfs initrd.img followkernel|' "$root/boot/firmware/config.txt"
grep -qx 'kernel=vmlinuz' "$root/boot/firmware/config.txt" && grep -qx 'initramfs initrd.img followkernel' "$root/boot/firmware/config.txt" \
  || die "raspi-firmware's config.txt has no kernel= or initramfs line to point at the slot's files: $(cat "$root/boot/firmware/config.txt")"
printf '\n# The root slot whose boot files the firmware loads (a/ or b/): RAUC switches it (rauc-tryboot).\nos_prefix=a/\n' >> "$root/boot/firmware/config.txt"
mapfile -t keys < <("$here/bundle-keys.sh")
"$here/customize.sh" "$root" "$BOARD" "$deb" "${keys[2]}"
cleanup
split_tree "$tree"
for dtb in $IMAGE_DTBS; do
  [ -f "$tree/boot/a/$dtb" ] || die "the boot partition has no $dtb: Debian's kernel $(ls "$root/lib/modules") has no device tree for $BOARD (see board/$BOARD/image.conf)"
done
grep -q "root=PARTUUID=$(part_uuid 2) " "$tree/boot/a/cmdline.txt" || die "raspi-firmware's cmdline.txt does not boot slot A: $(cat "$tree/boot/a/cmdline.txt")"
# The installer's file is the board's agent.toml with a [provision] table: provision installs it
# (without that table) as /etc/doorbell-agent/agent.toml, so the board's settings come along.
{ sed '/^\[provision\]/,$d' "$here/doorbell.toml"; cat "board/$BOARD/agent.toml"; echo
  sed -n '/^\[provision\]/,$p' "$here/doorbell.toml"; } > "$work/doorbell.toml"
install -m 0644 "$work/doorbell.toml" "$tree/boot/doorbell.toml"

# The partitions, each a file first, with fixed ids and every timestamp clamped to
# SOURCE_DATE_EPOCH (files made while building carry the build's time).
find "$tree" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"
export E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH
mkfs.fat -F 32 -n BOOT -i "$BOOT_SERIAL" --invariant -C "$work/boot.img" $((BOOT_MB * 1024)) >/dev/null
# mtools in sorted order (not the directory's), so the FAT's entries are the same on every host;
# mtools takes its own timestamps from SOURCE_DATE_EPOCH.
(cd "$tree/boot" && find . -mindepth 1 -type d | LC_ALL=C sort | sed 's|^\./||' | while read -r d; do mmd -i "$work/boot.img" "::$d"; done
 find . -type f | LC_ALL=C sort | sed 's|^\./||' | while read -r f; do mcopy -m -i "$work/boot.img" "$f" "::$f"; done)
used_mb=$(du -s -B1M "$root" | cut -f1)
[ "$used_mb" -lt $((ROOT_MB * 9 / 10)) ] || die "the root file system needs ${used_mb} MiB, more than 90% of a ${ROOT_MB} MiB slot: raise ROOT_MB in scripts/image/layout.conf (every slot and bundle follows it)"
mkfs.ext4 -q -F -L rootfs -U "$ROOT_UUID" -E "hash_seed=$EXT4_HASH_SEED,root_owner=0:0" -m 0 -d "$root" "$work/root.img" "${ROOT_MB}M"
mkfs.ext4 -q -F -L data -U "$DATA_UUID" -E "hash_seed=$EXT4_HASH_SEED,root_owner=0:0" -d "$tree/data" "$work/data.img" "${DATA_MB}M"
clamp_inode_times "$root" "$work/root.img"
clamp_inode_times "$tree/data" "$work/data.img"

name=doorbell-$BOARD-$version
img=$work/$name.img
start_mb=4
total_mb=$((start_mb + BOOT_MB + 2 * ROOT_MB + DATA_MB))
truncate -s $((total_mb * 1024 * 1024)) "$img"
sfdisk --quiet "$img" <<EOF
label: dos
label-id: 0x$DISK_ID
unit: sectors
$((start_mb * 2048)),$((BOOT_MB * 2048)),c,*
$(((start_mb + BOOT_MB) * 2048)),$((ROOT_MB * 2048)),83
$(((start_mb + BOOT_MB + ROOT_MB) * 2048)),$((ROOT_MB * 2048)),83
$(((start_mb + BOOT_MB + 2 * ROOT_MB) * 2048)),$((DATA_MB * 2048)),83
EOF
# Slot B stays empty (zeros) until RAUC installs into it.
dd if="$work/boot.img" of="$img" bs=1M seek=$start_mb conv=notrunc,sparse status=none
dd if="$work/root.img" of="$img" bs=1M seek=$((start_mb + BOOT_MB)) conv=notrunc,sparse status=none
dd if="$work/data.img" of="$img" bs=1M seek=$((start_mb + BOOT_MB + 2 * ROOT_MB)) conv=notrunc,sparse status=none
# -T2: xz's multi-threaded output depends on its block size, not on the number of threads.
nice -n 10 xz -T2 -6 -c "$img" > "$work/$name.img.xz"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${Package}\t${Version}\t${Architecture}\n' > "$work/$name.packages"
# The root slot's file system, for make bundle (the same bytes as slot A's: one pipeline).
cp --sparse=always "$work/root.img" "$work/$name.rootfs.ext4"
mv "$work/$name.img.xz" "$work/$name.packages" "$work/$name.rootfs.ext4" "$out/"
(cd "$out" && sha256sum "$name.img.xz" > "$name.img.xz.sha256")
rm -rf "$work"
cat "$out/$name.packages"
echo "build-image: $(wc -l < "$out/$name.packages") packages, root ${used_mb} MiB of a ${ROOT_MB} MiB slot"
echo "build-image: $out/$name.img.xz: $(du -h "$out/$name.img.xz" | cut -f1) compressed, $total_mb MiB on the card"
cat "$out/$name.img.xz.sha256"
