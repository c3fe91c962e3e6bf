"""The field image for the Raspberry Pi 3 (make image BOARD=raspberrypi-3) booted on qemu's own Pi 3
machine model, `qemu-system-aarch64 -M raspi3b` (bookworm's qemu 7.2; trixie's qemu 10 adds
raspi4b), from the image's own boot partition: the kernel, initrd and `cmdline.txt` of slot A's
directory and the Pi 3 Model B device tree that raspi-firmware put beside them, the card as the
machine's SD card (sdhci, mmcblk0). What it shows that `-M virt` (test_image.py) does not: Debian's
kernel on the BCM2837 device tree, the root found as PARTUUID on mmcblk0p2, the data partition
grown on the SD card (growpart on mmcblk0p4), the agent up under the shipped unit on that machine.
What neither shows: the VideoCore firmware reading config.txt/tryboot.txt (qemu takes -kernel and
-dtb instead), the Bluetooth UART (qemu's BCM2835 mailbox has no GPIO expander: hci_uart_bcm's
probe fails), Wi-Fi, real SD card timing.

No network and no virtio on this machine model: the test reads the console (the mini UART, ttyS1
as the board profile's cmdline says) and passes one unit on the kernel command line (a system
credential, as test_image.py does) that prints a report there once start-up has finished.
Run by `make test-field` (scripts/field-rig/run-image-raspi3b.sh); about 5 min under TCG."""
import base64
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BOARD = os.environ.get("RIG_IMAGE_BOARD", "raspberrypi-3")
DTB = "bcm2837-rpi-3-b.dtb"
CARD_BYTES = 4 << 30  # qemu's SD card wants a power of two; larger than the image: growpart runs
BOOT_SECONDS = int(os.environ.get("RIG_RASPI3B_SECONDS", "1200"))

REPORT_UNIT = """[Unit]
Description=Image test report on the console (passed on the kernel command line; not in the image)
After=multi-user.target doorbell-agent.service doorbell-grow-data.service doorbell-firstboot.service
[Service]
# exec, not oneshot: start-up must finish (is-system-running --wait) while this runs.
Type=exec
StandardOutput=tty
TTYPath=/dev/ttyS1
# One line (Python joins the continued lines); "$$" is systemd's literal "$".
ExecStart=/bin/bash -c 'systemctl is-system-running --wait >/dev/null; sleep 20; \
echo "RIG-REPORT agent $$(systemctl is-active doorbell-agent.service)"; \
echo "RIG-REPORT root $$(findmnt -n -o SOURCE /) $$(findmnt -n -o OPTIONS / | cut -d, -f1)"; \
echo "RIG-REPORT data $$(findmnt -n -o SOURCE /data) $$(lsblk -b -n -o SIZE /dev/mmcblk0p4)"; \
echo "RIG-REPORT failed $$(systemctl --failed --plain --no-legend | cut -d" " -f1 | tr "\\n" " ")"; \
echo "RIG-REPORT status $$(agentctl status --json | tr -d "\\n")"; \
echo "RIG-REPORT done"'
"""


def image_file():
    if os.environ.get("RIG_IMAGE"):
        return os.path.realpath(os.environ["RIG_IMAGE"])
    found = sorted(glob.glob(os.path.join(REPO, ".work", "image", f"doorbell-{BOARD}-*.img.xz")), key=os.path.getmtime)
    if not found:
        raise FileNotFoundError(f"no .work/image/doorbell-{BOARD}-*.img.xz: make image BOARD={BOARD}")
    return found[-1]


class Raspi3bBoot(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="raspi3b-", dir=os.path.join(REPO, ".work"))
        card = os.path.join(cls.dir, "card.img")
        with open(card, "wb") as out:
            subprocess.run(["xz", "-dc", image_file()], stdout=out, check=True)
        image_bytes = os.path.getsize(card)
        if image_bytes > CARD_BYTES:
            raise AssertionError(f"the image ({image_bytes} bytes) is larger than the emulated card")
        os.truncate(card, CARD_BYTES)
        table = json.loads(subprocess.run(["sfdisk", "--json", card], check=True, stdout=subprocess.PIPE, text=True).stdout)["partitiontable"]
        fat = f"{card}@@{table['partitions'][0]['start'] * table.get('sectorsize', 512)}"
        # Slot A's boot files, as config.txt's os_prefix=a/ makes the firmware load them.
        for name in ("vmlinuz", "initrd.img", "cmdline.txt", DTB):
            subprocess.run(["mcopy", "-o", "-i", fat, f"::a/{name}", os.path.join(cls.dir, name)], check=True)
        with open(os.path.join(cls.dir, "cmdline.txt")) as f:
            cls.cmdline = f.read().split()
        unit = base64.b64encode(REPORT_UNIT.encode()).decode()
        # tty0 has no display here; the board's serial console stays (the report's TTY).
        args = [a for a in cls.cmdline if a != "console=tty0"] + [
            f"systemd.set_credential_binary=systemd.extra-unit.rig-report.service:{unit}",
            "systemd.wants=rig-report.service"]
        cls.console = os.path.join(cls.dir, "console.log")
        start = time.monotonic()
        errors = open(os.path.join(cls.dir, "qemu.err"), "w")
        cls.qemu = subprocess.Popen(
            ["qemu-system-aarch64", "-M", "raspi3b", "-accel", "tcg,thread=single",
             "-kernel", os.path.join(cls.dir, "vmlinuz"), "-initrd", os.path.join(cls.dir, "initrd.img"),
             "-dtb", os.path.join(cls.dir, DTB), "-append", " ".join(args),
             "-drive", f"file={card},format=raw,if=sd",
             # serial0 is the PL011 (Bluetooth's UART on a Pi 3), serial1 the mini UART: ttyS1.
             "-serial", "null", "-serial", f"file:{cls.console}",
             "-display", "none", "-monitor", "none", "-no-reboot"],
            stdout=subprocess.DEVNULL, stderr=errors)
        errors.close()
        try:
            deadline = time.monotonic() + BOOT_SECONDS
            while time.monotonic() < deadline and "RIG-REPORT done" not in cls.text():
                if cls.qemu.poll() is not None:
                    with open(os.path.join(cls.dir, "qemu.err")) as f:
                        raise AssertionError(f"qemu ended ({cls.qemu.returncode}): {f.read()[-500:]}\n{cls.text()[-2000:]}")
                time.sleep(2)
            cls.seconds = time.monotonic() - start
            print(f"raspi3b: report after {cls.seconds:.0f} s", flush=True)
        finally:
            cls.qemu.kill()
            cls.qemu.wait()
        cls.report = {}
        for line in cls.text().splitlines():
            m = re.search(r"RIG-REPORT (\w+) ?(.*)$", line)
            if m:
                cls.report[m.group(1)] = m.group(2).strip()

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("RIG_KEEP"):
            print(f"raspi3b: kept {cls.dir}")
        else:
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def text(cls):
        try:
            with open(cls.console, errors="replace") as f:
                return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", f.read())
        except FileNotFoundError:
            return ""

    def test_1_report_came(self):
        self.assertIn("done", self.report, "no report on the console within the bound:\n" + self.text()[-3000:])

    def test_2_pi3_device_tree_and_sd_card(self):
        self.assertIn("Machine model: Raspberry Pi 3 Model B", self.text())
        self.assertRegex(self.text(), r"mmcblk0: p1 p2 p3 p4")

    def test_3_root_is_slot_a_read_only_on_the_card(self):
        self.assertIn("root=PARTUUID=", " ".join(self.cmdline))
        self.assertEqual(self.report.get("root"), "/dev/mmcblk0p2 ro")

    def test_4_data_grown_on_the_card(self):
        source, size = self.report.get("data", " 0").split()
        self.assertEqual(source, "/dev/mmcblk0p4")
        # The card's end less growpart's margin; the image's data partition is 256 MiB.
        self.assertGreater(int(size), CARD_BYTES - (2600 << 20))

    def test_5_agent_up_under_the_shipped_unit(self):
        self.assertEqual(self.report.get("agent"), "active", self.report)
        status = json.loads(self.report["status"])
        self.assertEqual(status["outbox"]["storage"], "ok", status)

    def test_6_nothing_failed_but_the_unprovisioned_first_boot(self):
        # The image's sample doorbell.toml has no enrolment token: doorbell-firstboot says so
        # (test_image.py's test_2) and is the one unit allowed to fail; qemu's raspi3b has no
        # network interface at all (the Pi 3's USB Ethernet is not emulated), so
        # systemd-networkd-wait-online times out, as on a box with neither cable nor Wi-Fi.
        failed = set(self.report.get("failed", "").split())
        self.assertLessEqual(failed, {"doorbell-firstboot.service", "systemd-networkd-wait-online.service"}, self.report)
        status = json.loads(self.report["status"])
        self.assertEqual(status["provisioning"]["state"], "problem", status["provisioning"])
        self.assertIn("enrolment_token", status["provisioning"]["message"])

    def test_7_ook_receiver_on_the_board_profiles_gpio_chip(self):
        """board/raspberrypi-3/agent.toml names the receiver's pin by the chip's label; Debian's
        kernel on the Pi 3 device tree gives qemu's emulated BCM2835 GPIO controller that label,
        and the agent (libgpiod 2) holds the line."""
        status = json.loads(self.report["status"])
        ook = next(r for r in status["radios"] if r["name"] == "ook")
        self.assertEqual((ook["state"], ook["source"]), ("running", "gpio"), ook)
        self.assertTrue(ook["gpio"].startswith("pinctrl-bcm2835 "), ook)


if __name__ == "__main__":
    unittest.main(verbosity=2)
