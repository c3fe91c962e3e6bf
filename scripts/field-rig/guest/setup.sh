#!/bin/sh
# Runs once inside the guest's root file system while build-rootfs.sh makes it (chroot).
set -eu
cd /_rigguest
install -m 0755 rig-runner /usr/local/sbin/rig-runner
install -m 0644 rig-runner.service /etc/systemd/system/rig-runner.service
install -D -m 0644 rig.network /etc/systemd/network/50-rig.network
install -D -m 0644 timesyncd-rig.conf /etc/systemd/timesyncd.conf.d/rig.conf
systemctl enable rig-runner.service systemd-networkd.service
mkdir -p /rig
cat > /etc/fstab <<FSTAB
/dev/vda / ext4 errors=remount-ro 0 1
rig /rig 9p trans=virtio,version=9p2000.L,msize=262144,nofail,x-systemd.device-timeout=30s 0 0
FSTAB
echo rig > /etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 rig\n' > /etc/hosts
passwd -d root >/dev/null
rm -rf /_rigguest
