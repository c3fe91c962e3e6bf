#!/bin/bash
# The bundle's slot hook (make bundle; RAUC runs it with the new root slot mounted after writing
# it): the slot's boot files, which the firmware loads from the FAT partition, copied from the new
# root into the slot's directory there (a/ or b/), with a cmdline.txt whose root= is this slot.
# The directory is written beside and renamed into place, so a power cut leaves the old one or
# the new one (the slot is not bootable either way until the install finishes: RAUC marked it bad).
set -euo pipefail
case $1 in
  slot-post-install) ;;
  *) exit 0 ;;
esac
die() { echo "bundle-hook: $*" >&2; exit 1; }
fw=/boot/firmware
src=$RAUC_SLOT_MOUNT_POINT/usr/lib/doorbell-image/slot-boot
[ -f "$src/vmlinuz" ] || die "the new root has no $src/vmlinuz: this bundle's root was not built by scripts/image/build-image.sh"
dir=$(echo "$RAUC_SLOT_BOOTNAME" | tr AB ab)
case $dir in a|b) ;; *) die "slot bootname $RAUC_SLOT_BOOTNAME is not A or B (/etc/rauc/system.conf)";; esac
partuuid=$(blkid -s PARTUUID -o value "$RAUC_SLOT_DEVICE") || die "blkid cannot read $RAUC_SLOT_DEVICE's PARTUUID"
rm -rf "${fw:?}/$dir.new"
cp -r "$src" "$fw/$dir.new"
sed -i "s|root=PARTUUID=[^ ]*|root=PARTUUID=$partuuid|" "$fw/$dir.new/cmdline.txt"
grep -q "root=PARTUUID=$partuuid " "$fw/$dir.new/cmdline.txt" || die "the new root's cmdline.txt has no root= to point at $partuuid"
sync -f "$fw/$dir.new/cmdline.txt"
rm -rf "${fw:?}/$dir.old"
if [ -d "$fw/$dir" ]; then mv "$fw/$dir" "$fw/$dir.old"; fi
mv "$fw/$dir.new" "$fw/$dir"
rm -rf "${fw:?}/$dir.old"
sync -f "$fw/$dir/cmdline.txt"
echo "bundle-hook: slot $RAUC_SLOT_BOOTNAME's boot files in $fw/$dir/ (root=PARTUUID=$partuuid)"
