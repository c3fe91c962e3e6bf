"""The rig's guest selection as an arm64 host runs it (issue #25 item 5), checked on any host: no
qemu of ours is mocked and nothing boots. run.sh asks `rig.py host-guest` which guest its host
gets, and Guest.boot runs rig.qemu_command; here both run with a given host architecture, and
the command line is checked against what this machine's qemu and the cached images really have.

What this cannot show: that an arm64 host's KVM boots the Debian 12 arm64 image (never run on an
arm64 host; see the README). Run by run.sh before any guest boots; seconds.
"""
import os
import subprocess
import sys
import unittest

import rig


def dry_run(host, kvm, arch, base):
    """The qemu argv `rig.py dry-run` prints: the script itself, as run.sh would run it."""
    out = subprocess.run([sys.executable, os.path.join(rig.HERE, "rig.py"), "dry-run", host, "1" if kvm else "0", arch, base],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.splitlines()


def option(argv, flag):
    return argv[argv.index(flag) + 1]


def cached_arm64_rootfs(dist):
    """A built arm64 root file system of that release in the rig's cache (build-rootfs.sh names
    it rootfs-<ntp>-arm64-<dist>-<key>), or None."""
    cache = os.environ.get("RIG_CACHE", "/var/cache/doorbell-field-rig")
    names = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
    built = [os.path.join(cache, n) for n in names if n.startswith(f"rootfs-timesyncd-arm64-{dist}-")]
    return next((d for d in built if os.path.exists(os.path.join(d, "done"))), None)


class GuestSelection(unittest.TestCase):
    def test_host_picks_its_own_architecture(self):
        for host in ("amd64", "arm64"):
            out = subprocess.run([sys.executable, os.path.join(rig.HERE, "rig.py"), "host-guest", host],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout.split()
            self.assertEqual(out, [host, "bookworm"])
        bad = subprocess.run([sys.executable, os.path.join(rig.HERE, "rig.py"), "host-guest", "riscv64"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("this host is riscv64", bad.stderr)

    def test_arm64_host_boots_the_virt_board(self):
        """KVM with the host's CPU when /dev/kvm works; else TCG with a CPU this qemu emulates.
        Either way the console is the virt board's PL011 (ttyAMA0), or the guest's boot is silent."""
        arch, _dist = rig.host_guest("arm64")
        kvm = dry_run("arm64", True, arch, "/base")
        self.assertEqual(kvm[0], "qemu-system-aarch64")
        self.assertEqual(option(kvm, "-M"), "virt")
        self.assertEqual(option(kvm, "-accel"), "kvm")
        self.assertEqual(option(kvm, "-cpu"), "host")
        tcg = dry_run("arm64", False, arch, "/base")
        self.assertEqual(option(tcg, "-accel").split(",")[0], "tcg")
        cpus = subprocess.run([tcg[0], "-M", "virt", "-cpu", "help"], check=True, stdout=subprocess.PIPE, text=True).stdout.split()
        self.assertIn(option(tcg, "-cpu"), cpus)
        for argv in (kvm, tcg):
            self.assertIn("console=ttyAMA0", option(argv, "-append"))
            self.assertEqual(option(argv, "-kernel"), "/base/vmlinuz")
            self.assertEqual(option(argv, "-initrd"), "/base/initrd.img")
        # An amd64 host never uses KVM (the rig's timings were tuned under TCG).
        pc = dry_run("amd64", True, "amd64", "/base")
        self.assertEqual((pc[0], option(pc, "-accel")), ("qemu-system-x86_64", "tcg"))
        self.assertIn("console=ttyS0", option(pc, "-append"))

    def test_arm64_image_has_what_the_command_boots(self):
        """The kernel and initrd the command names exist in an arm64 image and are arm64's. The
        arm64 Debian 13 board's image stands in for Debian 12's (same build-rootfs.sh, same
        linux-image-arm64 package; the Debian 12 one was never built here: 66 min cold)."""
        base = cached_arm64_rootfs("bookworm") or cached_arm64_rootfs("trixie")
        if base is None:
            self.skipTest("no arm64 root file system cached yet (build-rootfs.sh builds it for the board)")
        argv = dry_run("arm64", False, "arm64", base)
        kernel, initrd = option(argv, "-kernel"), option(argv, "-initrd")
        with open(kernel, "rb") as f:
            head = f.read(64)
        # The arm64 Image header: "ARM\x64" at offset 56.
        self.assertEqual(head[56:60], b"ARM\x64", kernel)
        self.assertGreater(os.path.getsize(initrd), 1_000_000)


def plan(script, env):
    """A build-root script's plan (what it would install, for which architectures), as an arm64
    or amd64 host would make it; nothing is downloaded."""
    out = subprocess.run([os.path.join(rig.REPO, script)] + env.pop("args", []), env={**os.environ, **env},
                         check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    return dict(word.split("=", 1) for word in out)


class BuildRoots(unittest.TestCase):
    """make test on an arm64 host builds its roots natively: the cross build root (the arm64
    trixie package) and the kbuild root (gpio-sim for the board) are the host's architecture,
    with the other architecture added only to build for it. Before, both were amd64 roots with
    arm64 added, which an arm64 host could make only under emulation."""

    def test_cross_build_root_is_the_hosts(self):
        for host, other, cpu in (("amd64", "arm64", "aarch64"), ("arm64", "amd64", "x86_64")):
            p = plan("scripts/cross/build-root.sh", {"CROSS_PLAN": "1", "CROSS_HOST_ARCH": host})
            self.assertEqual(p["architectures"].split(","), [host, other])
            self.assertIn(f"binutils-{cpu.replace('_', '-')}-linux-gnu", p["packages"].split(","))
            self.assertEqual(p["other"], f"/opt/swift-{cpu}")

    def test_kbuild_root_cross_compiles_only_a_foreign_kernel(self):
        kver = "6.12.118+deb13-arm64"
        native = plan("scripts/field-rig/build-gpio-sim.sh", {"KBUILD_PLAN": "1", "KBUILD_HOST_ARCH": "arm64", "args": [kver, "/nonexistent"]})
        self.assertEqual((native["architectures"], native["make"]), ("arm64", ""))
        self.assertNotIn("gcc-aarch64-linux-gnu", native["packages"])
        cross = plan("scripts/field-rig/build-gpio-sim.sh", {"KBUILD_PLAN": "1", "KBUILD_HOST_ARCH": "amd64", "args": [kver, "/nonexistent"]})
        self.assertEqual(cross["architectures"], "amd64,arm64")
        self.assertIn("gcc-aarch64-linux-gnu", cross["packages"].split(","))
        self.assertIn("CROSS_COMPILE=aarch64-linux-gnu-", cross["make"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
