#!/usr/bin/env bash
# build-image.sh's last step in the root ($1, a copy of build-base.sh's tree with /proc mounted):
# the agent and the image's own files. BOARD, the agent's .deb and the RAUC keyring (the
# certificates bundles must be signed under) are $2, $3 and $4. What it writes
# comes from scripts/image/overlay, layout.conf and the board profile.
set -euo pipefail
root=$1 BOARD=$2 deb=$3 keyring=$4
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=layout.conf
. "$here/layout.conf"
part_uuid() { printf '%s-%02d' "$DISK_ID" "$1"; }

# The agent: the .deb (its postinst enables the unit), the board's agent.toml as the config.
cp "$deb" "$root/tmp/doorbell-agent.deb"
# No dpkg.log line: it carries the build's time (two builds of one commit differed only there).
chroot "$root" dpkg --log=/dev/null -i /tmp/doorbell-agent.deb >&2
rm "$root/tmp/doorbell-agent.deb"
install -m 0644 "$repo/board/$BOARD/agent.toml" "$root/etc/doorbell-agent/agent.toml"
# An RTL-SDR on USB ([radio.rtl433]): the board profile's udev rule for plain Debian.
install -m 0644 "$repo/board/common/99-doorbell-agent.rules" "$root/etc/udev/rules.d/99-doorbell-agent.rules"
chroot "$root" doorbell-agent check-config /etc/doorbell-agent/agent.toml >&2

# The image's files (the machine-id script went in before the kernel, build-image.sh's setup).
(cd "$here/overlay" && find . -type f ! -path './etc/initramfs-tools/*' | sort) | while read -r f; do
  mode=0644; [ ! -x "$here/overlay/$f" ] || mode=0755
  install -D -m $mode "$here/overlay/$f" "$root/$f"
  sed -i "s|@DATA_PARTUUID@|$(part_uuid 4)|g; s|@ROOT_A_PARTUUID@|$(part_uuid 2)|g; s|@ROOT_B_PARTUUID@|$(part_uuid 3)|g; s|@BOARD@|$BOARD|g" "$root/$f"
done
install -m 0644 "$keyring" "$root/etc/rauc/keyring.pem"
chroot "$root" systemctl enable doorbell-slot-check.service doorbell-update.timer doorbell-firstboot.service doorbell-grow-data.service doorbell-wifi.path \
  systemd-networkd.service systemd-resolved.service systemd-timesyncd.service >&2
# The installer's Wi-Fi (doorbell-agent provision writes it on the data partition): Debian's
# wpa_supplicant@wlan0 reads it through a link, started when wlan0 appears (a wired box's unit is
# then skipped by its condition: overlay's drop-in) or when the file is written (doorbell-wifi.path).
ln -sfn /data/etc/wpa_supplicant/wpa_supplicant-wlan0.conf "$root/etc/wpa_supplicant/wpa_supplicant-wlan0.conf"
mkdir -p "$root/etc/systemd/system/sys-subsystem-net-devices-wlan0.device.wants"
ln -sfn /usr/lib/systemd/system/wpa_supplicant@.service "$root/etc/systemd/system/sys-subsystem-net-devices-wlan0.device.wants/wpa_supplicant@wlan0.service"
# The agent holds hci0 on the HCI user channel; bluetoothd must not power it up between restarts
# (board/<board>/README.md, "Bluetooth: the controller is the agent's alone").
sed -i 's/^#\?AutoEnable=.*/AutoEnable=false/' "$root/etc/bluetooth/main.conf"

# The read-only root: what is written in operation is on the data partition (build-image.sh moves
# it there), bound back where Debian and the agent expect it. nofail: a box whose data partition
# is damaged still boots and stays reachable (the agent then cannot start: its state is not there).
# The partitions' wait is long (300 s, not 30): in the emulated rig udev announced them after 30 s
# and the data mount, its binds and the agent all failed with "dependency".
cat > "$root/etc/fstab" <<EOF
# The field image (scripts/image/layout.conf). The root is the slot cmdline.txt names (root=, ro).
PARTUUID=$(part_uuid 1) /boot/firmware vfat rw,noatime,umask=0077,nofail,x-systemd.device-timeout=300s 0 2
PARTUUID=$(part_uuid 4) /data ext4 rw,noatime,nofail,x-systemd.device-timeout=300s 0 2
/data/lib/doorbell-agent /var/lib/doorbell-agent none bind,nofail,x-systemd.requires-mounts-for=/data 0 0
/data/lib/bluetooth /var/lib/bluetooth none bind,nofail,x-systemd.requires-mounts-for=/data 0 0
/data/lib/systemd /var/lib/systemd none bind,nofail,x-systemd.requires-mounts-for=/data 0 0
/data/log /var/log none bind,nofail,x-systemd.requires-mounts-for=/data 0 0
/data/etc/doorbell-agent /etc/doorbell-agent none bind,nofail,x-systemd.requires-mounts-for=/data 0 0
tmpfs /tmp tmpfs rw,nosuid,nodev,size=64M,mode=1777 0 0
tmpfs /var/tmp tmpfs rw,nosuid,nodev,size=16M,mode=1777 0 0
EOF
echo doorbell > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 doorbell\n::1 localhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
# Empty: the initramfs binds the gateway's own id from the data partition over it.
: > "$root/etc/machine-id"
# No password login: the installer's ssh key comes from doorbell.toml; the console shows the boot.
chroot "$root" passwd -l root >&2
# Host keys are the gateway's own (made on the data partition at first start), never the image's.
rm -f "$root"/etc/ssh/ssh_host_*
# systemd's ConditionNeedsUpdate: the image is up to date as built (the root cannot record it).
touch "$root/etc/.updated" "$root/var/.updated"
