"""The field image's update service (scripts/image/overlay/usr/libexec/doorbell-image/update, with
booted-version beside it): when it pulls a bundle from `[update] url` and when it leaves the box
alone; and slot-check's part in it, on a boot of the committed slot: a trial that never reached
its check (a crash, a reset, a firmware that ignored the tryboot) is marked bad and its version
recorded, so the same release is not installed and rebooted into every six hours. Host-side, seconds: the script itself with stand-ins for the programs it asks (rauc,
doorbell-agent check-config, systemctl, the tryboot backend's get-current), the real dpkg for
version order and the real python3 tomllib for the config. Streaming, install and the trial boot
for real: scripts/field-rig/test_image.py (make test-image).

The rules: nothing while a slot is on trial; only a version newer than the booted slot's (RAUC's
record, else the image's package); never a version that failed its trial on this box; a refused
config or an unreadable bundle is an error that names the cause, and changes nothing."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LIBEXEC = os.path.join(HERE, "..", "overlay", "usr", "libexec", "doorbell-image")
URL = "http://10.0.2.2:8080/doorbell-raspberrypi-4.raucb"

# Each stand-in appends its arguments to calls.log and answers from files the test writes.
RAUC = r"""#!/bin/bash
echo "rauc $*" >> "$BOX/calls.log"
case $1 in
  status) cat "$BOX/rauc-status.json" ;;
  info) [ -f "$BOX/bundle.json" ] || { echo "rauc-Error: streaming failed: HTTP 404" >&2; exit 1; }
        echo "rauc-Message: Verified inline signature" >&2; cat "$BOX/bundle.json" ;;
  install) exit "$(cat "$BOX/install-rc" 2>/dev/null || echo 0)" ;;
esac
# What RAUC does with mark-bad other: the boot backend's set-state for the slot not booted.
if [ "$1 $2 $3" = "status mark-bad other" ]; then
  other=$(tr AB BA < "$BOX/current")
  exec "$DOORBELL_IMAGE_LIBEXEC/rauc-tryboot" set-state "$other" bad
fi
"""
AGENT = r"""#!/bin/bash
echo "doorbell-agent $*" >> "$BOX/calls.log"
[ ! -f "$BOX/config-refused" ] || { cat "$BOX/config-refused" >&2; exit 1; }
"""
LOGGER = r"""#!/bin/bash
echo "$(basename "$0") $*" >> "$BOX/calls.log"
"""
DPKG_QUERY = r"""#!/bin/bash
echo "0.1.0"
"""
# The real backend, but the booted slot from the test (the real one reads /proc/cmdline).
TRYBOOT = r"""#!/bin/bash
[ "$1" = get-current ] && exec cat "$BOX/current"
exec bash "$DOORBELL_IMAGE_LIBEXEC/rauc-tryboot.real" "$@"
"""


class Box:
    """A box as the script sees it: its config, its firmware's config.txt, RAUC's status."""
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="update-")
        self.bin, self.libexec, self.fw = (os.path.join(self.dir, d) for d in ("bin", "libexec", "firmware"))
        for d in (self.bin, self.libexec, self.fw):
            os.makedirs(d)
        for name, text in (("rauc", RAUC), ("doorbell-agent", AGENT), ("systemctl", LOGGER), ("dpkg-query", DPKG_QUERY)):
            self.script(os.path.join(self.bin, name), text)
        for name in ("update", "booted-version", "slot-check"):
            shutil.copy(os.path.join(LIBEXEC, name), self.libexec)
        shutil.copy(os.path.join(LIBEXEC, "rauc-tryboot"), os.path.join(self.libexec, "rauc-tryboot.real"))
        self.script(os.path.join(self.libexec, "rauc-tryboot"), TRYBOOT)
        for slot in ("a", "b"):
            os.makedirs(os.path.join(self.fw, slot))
        self.config(f'gateway_id = "gw"\n[update]\nurl = "{URL}"\n')
        self.committed("A", current="A")
        self.booted_bundle(None)

    @staticmethod
    def script(path, text):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def config(self, text):
        self.write("agent.toml", text)

    def committed(self, slot, current, trial=None):
        """config.txt names slot, tryboot.txt names trial (default: slot), current is booted."""
        for name, s in (("config.txt", slot), ("tryboot.txt", trial or slot)):
            with open(os.path.join(self.fw, name), "w") as f:
                f.write(f"arm_64bit=1\nos_prefix={s.lower()}/\n")
        self.write("current", current + "\n")

    def firmware(self, name):
        with open(os.path.join(self.fw, name)) as f:
            return f.read()

    def booted_bundle(self, version, other=None):
        """RAUC's status: slot A booted; version: the bundle RAUC installed there (None: the
        slot the image was flashed with, no record); other: the bundle installed in B."""
        a = {"class": "rootfs", "bootname": "A", "state": "booted"}
        b = {"class": "rootfs", "bootname": "B", "state": "inactive"}
        for slot, v in ((a, version), (b, other)):
            if v:
                slot["slot_status"] = {"bundle": {"compatible": "doorbell-raspberrypi-4", "version": v}}
        self.write("rauc-status.json", json.dumps({"booted": "A", "slots": [{"rootfs.0": a}, {"rootfs.1": b}]}))

    def offer(self, version):
        self.write("bundle.json", json.dumps({"compatible": "doorbell-raspberrypi-4", "version": version}))

    def run(self, script="update"):
        env = dict(os.environ, BOX=self.dir, PATH=self.bin + ":" + os.environ["PATH"],
                   DOORBELL_AGENT_CONFIG=os.path.join(self.dir, "agent.toml"),
                   DOORBELL_UPDATE_FAILED=os.path.join(self.dir, "failed-versions"),
                   DOORBELL_IMAGE_LIBEXEC=self.libexec, DOORBELL_FIRMWARE_DIR=self.fw)
        done = subprocess.run(["bash", os.path.join(self.libexec, script)], env=env, capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout + done.stderr

    def calls(self):
        try:
            with open(os.path.join(self.dir, "calls.log")) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def installed(self):
        return [c for c in self.calls() if c.startswith("rauc install") or c.startswith("systemctl")]


class UpdateService(unittest.TestCase):
    def setUp(self):
        self.box = Box()
        self.addCleanup(shutil.rmtree, self.box.dir)

    def test_a_newer_bundle_is_installed_and_tried_once(self):
        self.box.offer("0.1.1")
        rc, out = self.box.run()
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.box.installed(), [f"rauc install {URL}", "systemctl --no-block reboot --reboot-argument=0 tryboot"], out)
        self.assertIn("installing 0.1.1 over 0.1.0", out)

    def test_the_same_version_is_up_to_date(self):
        self.box.offer("0.1.0")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (0, []), out)
        self.assertIn("up to date", out)

    def test_the_booted_slots_bundle_counts_not_the_package(self):
        # A bundle rebuilt from the same package (BUNDLE_VERSION): after its update RAUC's record
        # says 0.1.0+r2; the package still says 0.1.0. Pulling it again would loop for ever.
        self.box.booted_bundle("0.1.0+r2")
        self.box.offer("0.1.0+r2")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (0, []), out)

    def test_an_older_bundle_is_not_a_downgrade(self):
        self.box.booted_bundle("0.2.0")
        self.box.offer("0.1.9")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (0, []), out)
        self.assertIn("older than the installed 0.2.0", out)

    def test_a_version_that_failed_its_trial_here_is_not_pulled_again(self):
        self.box.offer("0.1.1")
        self.box.write("failed-versions", "0.1.1\n")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (0, []), out)
        self.assertIn("failed its trial boot on this box before", out)
        self.box.offer("0.1.2")
        rc, out = self.box.run()
        self.assertEqual(self.box.installed()[0], f"rauc install {URL}", out)

    def test_nothing_while_a_slot_is_on_trial(self):
        self.box.committed("A", current="B")
        self.box.offer("0.1.1")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (0, []), out)
        self.assertIn("on trial", out)
        self.assertFalse([c for c in self.box.calls() if c.startswith("rauc info")], "the bundle was fetched during a trial")

    def test_without_an_url_nothing_is_fetched(self):
        self.box.config('gateway_id = "gw"\n')
        self.box.offer("0.1.1")
        rc, out = self.box.run()
        self.assertEqual((rc, [c for c in self.box.calls() if c.startswith("rauc")]), (0, []), out)
        self.assertIn("no [update] url", out)

    def test_a_refused_config_is_an_error_that_says_why(self):
        self.box.write("config-refused", "agent.toml: update.url: must be the bundle's http:// or https:// address\n")
        self.box.offer("0.1.1")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (1, []), out)
        self.assertIn("update.url: must be", out)

    def test_an_unreachable_bundle_is_an_error_that_names_it(self):
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (1, []), out)
        self.assertIn(URL, out)
        self.assertIn("HTTP 404", out)

    def test_a_failed_install_does_not_reboot(self):
        self.box.offer("0.1.1")
        self.box.write("install-rc", "1")
        rc, out = self.box.run()
        self.assertEqual(rc, 1, out)
        self.assertEqual(self.box.installed(), [f"rauc install {URL}"], out)


class SlotCheckOnTheCommittedSlot(unittest.TestCase):
    def setUp(self):
        self.box = Box()
        self.addCleanup(shutil.rmtree, self.box.dir)

    def test_a_trial_that_never_reached_its_check_is_marked_bad_and_not_pulled_again(self):
        # 0.1.1 was installed into B and a tryboot asked for; the board came back on A.
        self.box.committed("A", current="A", trial="B")
        self.box.booted_bundle(None, other="0.1.1")
        rc, out = self.box.run("slot-check")
        self.assertEqual(rc, 0, out)
        self.assertIn("slot B was installed for a trial boot that never reached its check", out)
        self.assertIn("os_prefix=a/", self.box.firmware("tryboot.txt"), out)
        self.assertEqual(self.box.firmware("rauc-bad.txt").split(), ["B"])
        self.assertEqual(self.box.firmware("config.txt"), self.box.firmware("tryboot.txt"))
        with open(os.path.join(self.box.dir, "failed-versions")) as f:
            self.assertEqual(f.read().split(), ["0.1.1"])
        # The timer's next run does not install it again.
        self.box.offer("0.1.1")
        rc, out = self.box.run()
        self.assertEqual((rc, self.box.installed()), (0, []), out)

    def test_an_ordinary_boot_of_the_committed_slot_changes_nothing(self):
        self.box.booted_bundle(None, other="0.1.1")
        before = (self.box.firmware("config.txt"), self.box.firmware("tryboot.txt"))
        rc, out = self.box.run("slot-check")
        self.assertEqual(rc, 0, out)
        self.assertIn("nothing to decide", out)
        self.assertEqual((self.box.firmware("config.txt"), self.box.firmware("tryboot.txt")), before)
        self.assertFalse(os.path.exists(os.path.join(self.box.dir, "failed-versions")))
        self.assertEqual([c for c in self.box.calls() if c.startswith("rauc")], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
