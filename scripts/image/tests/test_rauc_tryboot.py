"""RAUC's tryboot backend (scripts/image/overlay/usr/libexec/doorbell-image/rauc-tryboot) against a
boot directory laid out as build-image.sh writes the FAT partition, driven as RAUC 1.13's custom
backend drives it (get-primary, set-primary, get-state, set-state). Seconds; no RAUC, no VM: the
whole flow on the image itself is scripts/field-rig/test_image.py (make test-image).

The rule: config.txt (what every ordinary boot loads) only ever names a slot that was committed
(the image's, or one marked good while booted on trial); tryboot.txt names the slot on trial."""
import os
import random
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BACKEND = os.path.join(HERE, "..", "overlay", "usr", "libexec", "doorbell-image", "rauc-tryboot")
CONFIG = "arm_64bit=1\nenable_uart=1\nkernel=vmlinuz\ninitramfs initrd.img followkernel\n\nos_prefix=a/\n"


class Boot:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tryboot-")
        os.makedirs(os.path.join(self.dir, "a"))
        for name in ("config.txt", "tryboot.txt"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(CONFIG)

    def run(self, *args):
        done = subprocess.run(["bash", BACKEND, *args], env=dict(os.environ, DOORBELL_FIRMWARE_DIR=self.dir),
                              capture_output=True, text=True, timeout=30)
        return done.returncode, done.stdout.strip(), done.stderr.strip()

    def ok(self, *args):
        rc, out, err = self.run(*args)
        assert rc == 0, f"{args}: rc {rc}: {err}"
        return out

    def prefix(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return re.findall(r"(?m)^os_prefix=(.*)$", f.read())

    def install(self, slot):
        """What `rauc install` does to the boot backend: the target marked bad, written (the
        bundle's hook makes its directory), then made primary."""
        self.ok("set-state", slot, "bad")
        os.makedirs(os.path.join(self.dir, slot.lower()), exist_ok=True)
        self.ok("set-primary", slot)


class TrybootBackend(unittest.TestCase):
    def setUp(self):
        self.boot = Boot()
        self.addCleanup(shutil.rmtree, self.boot.dir)

    def test_image_as_built(self):
        b = self.boot
        self.assertEqual(b.ok("get-primary"), "A")
        self.assertEqual((b.ok("get-state", "A"), b.ok("get-state", "B")), ("good", "bad"))

    def test_install_then_good_commits(self):
        b = self.boot
        b.install("B")
        self.assertEqual((b.prefix("config.txt"), b.prefix("tryboot.txt")), (["a/"], ["b/"]))
        self.assertEqual(b.ok("get-primary"), "B")
        b.ok("set-state", "B", "good")  # rauc status mark-good on the trial boot
        self.assertEqual((b.prefix("config.txt"), b.prefix("tryboot.txt")), (["b/"], ["b/"]))
        self.assertEqual((b.ok("get-primary"), b.ok("get-state", "A"), b.ok("get-state", "B")), ("B", "good", "good"))
        # Everything but os_prefix= is config.txt's own (the firmware's settings survive a switch).
        with open(os.path.join(b.dir, "config.txt")) as f:
            self.assertEqual(f.read(), CONFIG.replace("os_prefix=a/", "os_prefix=b/"))
        self.assertFalse([n for n in os.listdir(b.dir) if n.endswith(".new")])

    def test_install_then_bad_falls_back(self):
        b = self.boot
        b.install("B")
        b.ok("set-state", "B", "bad")  # rauc status mark-bad on the trial boot
        self.assertEqual((b.prefix("config.txt"), b.prefix("tryboot.txt")), (["a/"], ["a/"]))
        self.assertEqual((b.ok("get-primary"), b.ok("get-state", "B")), ("A", "bad"))

    def test_only_bootable_slot_cannot_be_marked_bad(self):
        rc, _out, err = self.boot.run("set-state", "A", "bad")
        self.assertNotEqual(rc, 0)
        self.assertIn("install a bundle into the other slot first", err)
        self.assertEqual(self.boot.prefix("config.txt"), ["a/"])

    def test_slot_without_boot_files_is_never_named(self):
        rc, _out, err = self.boot.run("set-primary", "B")
        self.assertNotEqual(rc, 0)
        self.assertIn("slot B has no boot files", err)
        self.assertEqual(self.boot.prefix("tryboot.txt"), ["a/"])

    def test_unknown_slot_and_damaged_config_explained(self):
        rc, _out, err = self.boot.run("get-state", "C")
        self.assertNotEqual(rc, 0)
        self.assertIn("unknown slot 'C'", err)
        with open(os.path.join(self.boot.dir, "config.txt"), "w") as f:
            f.write("arm_64bit=1\n")
        rc, _out, err = self.boot.run("get-primary")
        self.assertNotEqual(rc, 0)
        self.assertIn("names no slot", err)

    def test_random_update_histories_keep_config_on_a_committed_slot(self):
        """Random sequences of installs and trial outcomes (a property, bounded: 12 histories of
        12 steps, seeded): config.txt always names a slot that was committed, and after a trial
        ends the slot on trial is good only if it was marked good."""
        rng = random.Random(29)
        for _history in range(12):
            b = Boot()
            try:
                committed = {"A"}
                current = "A"  # the slot config.txt names
                for _step in range(12):
                    target = "B" if current == "A" else "A"
                    b.install(target)
                    committed.discard(target)
                    self.assertEqual(b.ok("get-primary"), target)
                    if rng.random() < 0.5:
                        b.ok("set-state", target, "good")
                        committed.add(target)
                        current = target
                    else:
                        b.ok("set-state", target, "bad")
                        self.assertEqual(b.ok("get-state", target), "bad")
                    # The committed slot is good; a slot given up is bad until installed again.
                    self.assertEqual(b.ok("get-state", current), "good")
                    self.assertEqual(b.prefix("config.txt"), [current.lower() + "/"])
                    self.assertIn(current, committed)
                    self.assertEqual(b.ok("get-primary"), current)
            finally:
                shutil.rmtree(b.dir)


SLOT_CHECK = os.path.join(HERE, "..", "overlay", "usr", "libexec", "doorbell-image", "slot-check")


class SlotCheck(unittest.TestCase):
    """slot-check's rule with stand-ins for agentctl, rauc, systemctl and sleep on PATH (the
    backend says slot B is booted, config.txt names A: B is on trial)."""

    def run_check(self, status, agentctl_rc=0):
        d = tempfile.mkdtemp(prefix="slot-check-")
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "bin"))
        with open(os.path.join(d, "config.txt"), "w") as f:
            f.write(CONFIG)
        with open(os.path.join(d, "status.json"), "w") as f:
            f.write(status)
        calls = os.path.join(d, "calls")
        stubs = {
            "backend": "echo B",
            "agentctl": f'[ "$1 $2" = "status --json" ] && cat {d}/status.json; exit {agentctl_rc}',
            "rauc": f'echo "rauc $*" >> {calls}',
            "systemctl": f'echo "systemctl $*" >> {calls}',
            "sleep": "exit 0",
        }
        for name, body in stubs.items():
            path = os.path.join(d, "bin", name)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n" + body + "\n")
            os.chmod(path, 0o755)
        env = dict(os.environ, PATH=os.path.join(d, "bin") + ":" + os.environ["PATH"], DOORBELL_FIRMWARE_DIR=d,
                   DOORBELL_TRYBOOT_BACKEND=os.path.join(d, "bin", "backend"), DOORBELL_SLOT_HEALTH_SECONDS="10")
        done = subprocess.run(["bash", SLOT_CHECK], env=env, capture_output=True, text=True, timeout=60)
        with open(calls) if os.path.exists(calls) else open(os.devnull) as f:
            return done, f.read().splitlines()

    def test_a_quiet_house_is_marked_good_on_a_heartbeat(self):
        """Nothing delivered (an empty outbox after a night-time update), agent degraded (exit 1,
        a radio missing), but the cloud answered its heartbeat: good. The old rule (delivered >= 1)
        fell back here."""
        status = '{"outbox": {"storage": "ok", "depth": 0}, "uplink": {"delivered": 0, "cloud_reached_since_start": true}}'
        done, calls = self.run_check(status, agentctl_rc=1)
        self.assertEqual(calls, ["rauc status mark-good booted"], done.stdout + done.stderr)
        self.assertEqual(done.returncode, 0)

    def test_no_answer_from_the_cloud_falls_back(self):
        for status in ('{"outbox": {"storage": "ok"}, "uplink": {"delivered": 0, "cloud_reached_since_start": false}}',
                       '{"outbox": {"storage": "full"}, "uplink": {"cloud_reached_since_start": true}}',
                       '{"outbox": {"storage": "ok"}, "uplink": null}'):
            with self.subTest(status=status):
                done, calls = self.run_check(status)
                self.assertEqual(calls, ["rauc status mark-bad booted", "systemctl reboot"], done.stdout + done.stderr)
                self.assertIn("did not answer", done.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
