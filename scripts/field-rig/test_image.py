"""The field image itself in the rig (issue #29 item 5, first step): the .img.xz that `make image`
wrote, not a rebuilt root file system, booted under qemu-system-aarch64 -M virt with a Cortex-A72.

The Pi's own boot path cannot run here: -M virt has no VideoCore, so the firmware on the FAT
partition (start*.elf reading config.txt) never runs. qemu starts the kernel and initrd that the
image's boot partition holds (copied there by raspi-firmware's hook), with the arguments of the
image's own cmdline.txt (root=PARTUUID of slot A, ro) and the virt board's console instead of the
Pi's UART. The test's command channel comes in on the kernel command line, as an installer could
edit cmdline.txt: a 9p mount (systemd.mount-extra) and a unit passed as a system credential
(systemd.extra-unit.*, systemd ≥ 256) that runs rig-runner from the share. The test edits only
what an installer edits: doorbell.toml on the decompressed file's FAT partition (mtools); the
disk is a copy-on-write overlay over it, larger than the image, as a card is.

The first boot (issue #29 item 2) runs against a real doorbell-cloud on the host (SQLite on disk,
the rig's certificate for 10.0.2.2): the installer's file is first wrong (an unknown key in the
agent part), then fixed; the press comes from a recording that the image's own rtl_433 replays
([radio.rtl433] replay) through the shipped unit, the outbox and the uplink; the power cut kills
qemu during a burst of presses. RIG_CLOUD_BIN: the cloud's binary (default
cloud/.build/debug/doorbell-cloud, `make build-cloud`).

Updates (issue #29 item 4): the rig plays the Pi firmware, which -M virt lacks. Before every boot it
reads the card's FAT partition (out of the copy-on-write disk) and boots the kernel, initrd and
cmdline.txt of the slot directory that config.txt's os_prefix= names, or tryboot.txt's once after
the guest reset with the kernel's "Restarting system with command '0 tryboot'" on the console (what
the kernel hands the firmware on a Pi). The OS side (RAUC, the tryboot backend, the bundle's hook,
doorbell-slot-check) is the image's own; the firmware's reading of the files is not tested here.
Bundles: make bundle's (next to the image), a broken one (its agent exits 1) and a foreign one
(signed with another key), both made here from it.

RIG_IMAGE: the .img.xz (default: the newest .work/image/doorbell-<RIG_IMAGE_BOARD>-*.img.xz,
board default raspberrypi-4). Run by scripts/field-rig/run-image.sh (make test-image).
"""
import base64
import http.server
import glob
import json
import os
import re
import shutil
import sqlite3
import ssl
import subprocess
import threading
import time
import unittest
import urllib.request

import rig

BOARD = os.environ.get("RIG_IMAGE_BOARD", "raspberrypi-4")
LAYOUT = os.path.join(rig.REPO, "scripts", "image", "layout.conf")
CLOUD_BIN = os.environ.get("RIG_CLOUD_BIN", os.path.join(rig.REPO, "cloud", ".build", "debug", "doorbell-cloud"))
# The card the image is written to: larger than the image, so the first boot grows /data.
CARD_BYTES = 4 * 1024**3
BURST = 12  # devices that only `agentctl inject` presses (the power cut's burst)


def layout():
    """scripts/image/layout.conf's assignments (the one description of the disk)."""
    out = {}
    for line in rig.read(LAYOUT).splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def image_file():
    if os.environ.get("RIG_IMAGE"):
        return os.path.realpath(os.environ["RIG_IMAGE"])
    found = sorted(glob.glob(os.path.join(rig.REPO, ".work", "image", f"doorbell-{BOARD}-*.img.xz")), key=os.path.getmtime)
    if not found:
        raise FileNotFoundError(f"no .work/image/doorbell-{BOARD}-*.img.xz: make image BOARD={BOARD}")
    return found[-1]


def mdir(fat, where):
    """The names in a FAT directory (mtools)."""
    listing = subprocess.run(["mdir", "-b", "-i", fat, where], check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    return sorted(os.path.basename(p.rstrip("/")) for p in listing)


def partitions(raw):
    """sfdisk's view of the image: (disk id, [(start byte, size byte, type)])."""
    table = json.loads(subprocess.run(["sfdisk", "--json", raw], check=True, stdout=subprocess.PIPE, text=True).stdout)["partitiontable"]
    sector = table.get("sectorsize", 512)
    return table["id"], [(p["start"] * sector, p["size"] * sector, p["type"]) for p in table["partitions"]]


RUNNER_UNIT = """[Unit]
Description=Field rig command channel (the test's, passed on the kernel command line; not in the image)
RequiresMountsFor=/run/rig
[Service]
ExecStart=/bin/bash /run/rig/bin/rig-runner
Restart=always
"""


def rig_cmdline(image_cmdline):
    """The image's cmdline.txt for -M virt: its consoles dropped (the Pi's UARTs; qemu_command adds
    the virt board's), the rig's command channel added."""
    kept = [a for a in image_cmdline.split() if not a.startswith("console=")]
    unit = base64.b64encode(RUNNER_UNIT.encode()).decode()
    return " ".join(kept + [
        "systemd.mount-extra=rig:/run/rig:9p:trans=virtio,version=9p2000.L,msize=262144",
        f"systemd.set_credential_binary=systemd.extra-unit.rig-runner.service:{unit}",
        "systemd.wants=rig-runner.service"])


class Cloud(rig.Peer):
    """`doorbell-cloud serve` on the host's loopback (the guest's 10.0.2.2), SQLite on disk, with
    one account made by `doorbell-cloud account create`."""

    def __init__(self, dirpath):
        if not os.access(CLOUD_BIN, os.X_OK):
            raise FileNotFoundError(f"{CLOUD_BIN} is missing: make build-cloud (or RIG_CLOUD_BIN)")
        self.ca, key, cert = rig.make_pki(os.path.join(rig.WORK, "pki"))
        self.db = os.path.join(dirpath, "cloud.sqlite")
        ready = os.path.join(dirpath, "cloud-ready.json")
        for f in (ready, self.db):
            if os.path.exists(f):
                os.remove(f)
        owner = json.loads(subprocess.run([CLOUD_BIN, "account", "create", "--db", self.db, "--name", "Image test"], check=True,
                                          stdout=subprocess.PIPE, text=True).stdout)
        self.account, self.token = owner["id"], owner["token"]
        super().__init__("cloud", [CLOUD_BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--ready-file", ready,
                                   "--tls-cert", cert, "--tls-key", key, "--db", self.db], dirpath)
        self.port = json.loads(rig.wait_for("cloud ready", 60, lambda: os.path.exists(ready) and rig.read(ready)))["port"]
        self.url = f"https://10.0.2.2:{self.port}"

    def api(self, method, path, body):
        """The app API as the account (the certificate names 10.0.2.2: the chain is checked, not the name)."""
        context = ssl.create_default_context(cafile=self.ca)
        context.check_hostname = False
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(), method=method,
                                         headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return json.loads(answer.read())

    def rows(self, sql, *args):
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def events(self):
        out = subprocess.run([CLOUD_BIN, "events", "--db", self.db], check=True, stdout=subprocess.PIPE, text=True).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]


def boot_file(sample, cloud, token, ssh_key, bad=False):
    """The installer's doorbell.toml: the image's sample (the board's agent.toml and [provision])
    with the cloud, its CA (from the rig's share: a real cloud's is publicly trusted), a recording
    for rtl_433 to replay, the buttons, and the [provision] keys. bad: an unknown key in the agent
    part (what a typo makes), which provision must report and survive."""
    agent, _provision = sample.split("\n[provision]\n", 1)
    agent, n = re.subn(r'(?m)^url = "https://cloud\.example\.com/events"$',
                       f'url = "{cloud.url}/events"\nca_file = "/run/rig/ca.pem"\nretry_initial_ms = 500', agent)
    assert n == 1, "the sample's [uplink] url moved: update test_image.boot_file"
    if bad:
        agent, n = re.subn(r"(?m)^cooldown_ms = ", "cooldown_msec = ", agent)
        assert n == 1, "the sample's [tracker.button] cooldown_ms moved: update test_image.boot_file"
    devices = "".join(f'\n[[device]]\nid = "dev-{i:02d}"\nradio = "rtl433"\nmatch = {{ code = "0x{0x100000 + i:06X}" }}\n' for i in range(BURST))
    return f"""{agent}
[radio.rtl433]
conf_file = "rtl_433-doorbells.conf"
replay = ["/run/rig/front-door.ook"]

[[device]]
id = "front-door"
name = "Front door"
radio = "rtl433"
match = {{ code = "0x5A3C91" }}
{devices}
[provision]
cloud_url = "{cloud.url}"
enrolment_token = "{token}"
ssh_authorized_key = "{ssh_key}"
wifi_ssid = "rig-wifi"
wifi_psk = "rig-passphrase-1"
wifi_country = "DE"
"""


class ImageGuest(rig.Guest):
    """A rig guest whose disk is the field image (an overlay over it) and whose kernel, initrd and
    arguments come from the image's FAT partition."""

    def __init__(self, name, image):
        self.arch, self.dist = "arm64", "trixie"
        self.name = name
        self.dir = os.path.join(rig.WORK, name)
        self.share = os.path.join(self.dir, "share")
        self.base = os.path.join(self.dir, "boot")
        self.disk = os.path.join(self.dir, "disk.qcow2")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.share, "q"))
        os.makedirs(os.path.join(self.share, "out"))
        os.makedirs(os.path.join(self.share, "bin"))
        os.makedirs(self.base)
        # rig-runner with its share where the read-only root lets it be mounted (/run/rig).
        runner = rig.read(os.path.join(rig.HERE, "guest", "rig-runner")).replace("/rig/", "/run/rig/").replace("/rig ", "/run/rig ")
        with open(os.path.join(self.share, "bin", "rig-runner"), "w") as f:
            f.write(runner)
        self.raw = os.path.join(self.dir, "image.img")
        start = time.monotonic()
        with open(self.raw, "wb") as out:
            xz = subprocess.Popen(["xz", "-dc", image], stdout=subprocess.PIPE)
            subprocess.run(["dd", "of=/dev/stdout", "bs=1M", "conv=sparse", "status=none"], stdin=xz.stdout, stdout=out, check=True)
            xz.stdout.close()
            if xz.wait() != 0:
                raise RuntimeError(f"xz -d {image} failed")
        rig.log(name, f"image decompressed in {time.monotonic() - start:.0f} s")
        self.disk_id, self.parts = partitions(self.raw)
        boot_offset = self.parts[0][0]
        fat = f"{self.raw}@@{boot_offset}"
        self.boot_files = mdir(fat, "::")
        self.fat = fat
        self.sample = subprocess.run(["mcopy", "-n", "-i", fat, "::doorbell.toml", "-"], check=True, stdout=subprocess.PIPE, text=True).stdout
        # The card: the image and free space after it (zeros past the file's end).
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", self.raw, self.disk, str(CARD_BYTES)], check=True)
        self.serial_tcp_port = self.usb_serial_tcp_port = self.rtc_base = None
        self.memory_mb = 1024
        self.proc = None
        self.seq = 0
        self.boots = 0
        # What the firmware reads at the next power-on: tryboot.txt once after `reboot '0 tryboot'`.
        self.tryboot = False
        self.booted_config = None
        self.firmware()
        self.image_cmdline = self.slot_cmdline

    def card_fat(self):
        """The FAT partition as the card holds it now (the guest's writes included): a raw copy
        out of the copy-on-write disk, read with mtools."""
        start, size, _type = self.parts[0]
        out = os.path.join(self.dir, "fat.raw")
        if os.path.exists(out):
            os.remove(out)
        mib = 1024 * 1024
        # qemu-img dd counts count= from the start of the input, skipped blocks included (unlike
        # dd): count=size would leave the partition's last `start` bytes out, and a file the guest
        # wrote there would read short (the seventh run's 9e: a/initrd.img cut at 10 of 36 MB).
        subprocess.run(["qemu-img", "dd", "-f", "qcow2", "-O", "raw", f"bs={mib}", f"skip={start // mib}", f"count={(start + size) // mib}",
                        f"if={self.disk}", f"of={out}"], check=True)
        if os.path.getsize(out) != size:
            raise RuntimeError(f"the FAT partition's copy is {os.path.getsize(out)} bytes, the partition {size}")
        return out

    def firmware(self):
        """The rig playing the Pi firmware (which -M virt does not have): config.txt, or tryboot.txt
        once after a tryboot reboot, names the slot directory (os_prefix=) whose kernel, initrd and
        cmdline.txt qemu boots. The OS side of the tryboot protocol is real; the firmware is this."""
        fat = self.card_fat()
        config = "tryboot.txt" if self.tryboot else "config.txt"
        self.tryboot = False
        text = subprocess.run(["mcopy", "-n", "-i", fat, "::" + config, "-"], check=True, stdout=subprocess.PIPE, text=True).stdout
        prefixes = re.findall(r"(?m)^os_prefix=(\S*)$", text)
        if not prefixes:
            raise RuntimeError(f"{config} on the card names no os_prefix=: the firmware would not find a slot's kernel\n{text}")
        prefix = prefixes[-1]
        for src, dst in (("vmlinuz", "vmlinuz"), ("initrd.img", "initrd.img"), ("cmdline.txt", "cmdline.txt")):
            subprocess.run(["mcopy", "-n", "-i", fat, "::" + prefix + src, os.path.join(self.base, dst)], check=True)
        with open(os.path.join(self.base, "config.txt"), "w") as f:
            f.write(text)
        self.booted_config = (config, prefix)
        self.slot_cmdline = rig.read(os.path.join(self.base, "cmdline.txt")).strip()
        # mac80211_hwsim: emulated Wi-Fi radios (wlan0, wlan1), so wpa_supplicant@wlan0 really runs.
        self.cmdline = rig_cmdline(self.slot_cmdline) + " modules-load=mac80211_hwsim"
        rig.log(self.name, f"firmware: {config} names {prefix}")

    def boot(self, timeout=600):
        if self.boots > 0:
            self.firmware()
        return super().boot(timeout)

    def wait_reset(self, seconds):
        """Waits (bounded) for the guest to reset itself (qemu runs with -no-reboot, so it exits) and
        notes whether it asked for a tryboot: the kernel prints the reboot command it passes on
        (on a Pi to the firmware's mailbox) as "reboot: Restarting system with command '0 tryboot'"."""
        rig.wait_for(f"{self.name} to reset", seconds, lambda: self.proc is None or self.proc.poll() is not None, 1.0)
        self.proc = None
        self.tryboot = "Restarting system with command '0 tryboot'" in self.console()
        return self.tryboot

    def edit_boot_file(self, text):
        """What the installer does after flashing: doorbell.toml on the FAT partition replaced
        (before the first boot, so straight into the image file under the overlay)."""
        local = os.path.join(self.dir, "doorbell.toml")
        with open(local, "w") as f:
            f.write(text)
        subprocess.run(["mcopy", "-o", "-i", self.fat, local, "::doorbell.toml"], check=True)


class BundleServer:
    """A plain HTTP server for update bundles on the host's loopback (the guest's 10.0.2.2) that
    answers byte ranges: RAUC streams a bundle with Range requests and fetches only what it
    installs. http.server's own handler ignores Range, so this one serves it (single ranges)."""

    def __init__(self, directory):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            ranges = []

            def do_HEAD(self):
                self.answer(body=False)

            def do_GET(self):
                self.answer(body=True)

            def answer(self, body):
                path = os.path.join(directory, os.path.basename(self.path.split("?")[0]))
                if not os.path.isfile(path):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                size = os.path.getsize(path)
                start, end = 0, size - 1
                wanted = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "") or "")
                if wanted and (wanted.group(1) or wanted.group(2)):
                    if wanted.group(1):
                        start = int(wanted.group(1))
                        end = min(int(wanted.group(2)), size - 1) if wanted.group(2) else size - 1
                    else:
                        start = max(0, size - int(wanted.group(2)))
                    if start > end:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                    Handler.ranges.append((start, end))
                else:
                    self.send_response(200)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                if body:
                    with open(path, "rb") as f:
                        f.seek(start)
                        left = end - start + 1
                        while left > 0:
                            chunk = f.read(min(left, 1 << 20))
                            if not chunk:
                                break
                            self.wfile.write(chunk)
                            left -= len(chunk)

            def log_message(self, *args):
                pass

        self.handler = Handler
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://10.0.2.2:{self.port}/{name}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class FieldImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.layout = layout()
        cls.image = image_file()
        rig.log("image", cls.image)
        cls.g = ImageGuest("image-" + BOARD, cls.image)
        cls.cloud = Cloud(cls.g.dir)
        try:
            cls.token = cls.cloud.api("POST", "/enrolment-tokens", {})["token"]
            key = os.path.join(cls.g.share, "installer_key")
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "installer@rig", "-f", key], check=True)
            cls.ssh_key = rig.read(key + ".pub").strip()
            shutil.copy(cls.cloud.ca, os.path.join(cls.g.share, "ca.pem"))
            shutil.copy(os.path.join(rig.REPO, "board", "sim", "recordings", "front-door.ook"), os.path.join(cls.g.share, "front-door.ook"))
            # First the file as an installer might get it wrong; test_7 fixes it and boots again.
            cls.good_file = boot_file(cls.g.sample, cls.cloud, cls.token, cls.ssh_key)
            cls.g.edit_boot_file(boot_file(cls.g.sample, cls.cloud, cls.token, cls.ssh_key, bad=True))
            start = time.monotonic()
            cls.g.boot(timeout=900)
            # Boot to multi-user, bounded: is-system-running --wait returns once start-up has finished.
            cls.state = cls.g.run("systemctl is-system-running --wait", 600, check=False)[1].strip()
            cls.boot_seconds = time.monotonic() - start
            # A figure for the README, not an assertion (TCG's timing means nothing for a real Pi).
            rig.log("image", f"start-up finished ({cls.state}) {cls.boot_seconds:.0f} s after qemu started")
        except BaseException:
            cls.g.kill()
            cls.cloud.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.g.shutdown()
        cls.cloud.stop()

    def part_uuid(self, n):
        return f"{self.layout['DISK_ID']}-{n:02d}"

    def status(self):
        """`agentctl status --json` (root is allowed on the control socket), or None."""
        _rc, out = self.g.run("agentctl status --json", 60, check=False)
        try:
            return json.loads(out)
        except ValueError:
            return None

    def wait_status(self, what, pred, seconds):
        def check():
            s = self.status()
            return s if s is not None and pred(s) else None
        return rig.wait_for(what, seconds, check, 2.0)

    def sync_clock(self):
        """What systemd-timesyncd does once it has a server (qemu's user network has none): set the
        clock, then touch its flag; the agent holds events until then."""
        self.g.sh(f"date -s @{time.time():.3f} >/dev/null\nmkdir -p /run/systemd/timesync\ntouch /run/systemd/timesync/synchronized")

    def reachable_by_ssh(self):
        """The installer's key logs in as root (the guest's own ssh client to its sshd)."""
        return self.g.run("install -m 0600 /run/rig/installer_key /tmp/installer_key && "
                          "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=60 "
                          "-i /tmp/installer_key root@127.0.0.1 'echo reached $(cat /etc/hostname)'", 180, check=False)

    def test_1_layout_is_what_layout_conf_says(self):
        """Four partitions (FAT boot, two equal root slots, data) on the fixed disk id, and the
        boot partition as raspi-firmware lays it out: firmware, the board's device trees, a
        cmdline.txt that boots slot A read-only, the sample doorbell.toml."""
        self.assertEqual(self.g.disk_id.lower(), "0x" + self.layout["DISK_ID"])
        mib = 1024 * 1024
        sizes = [size // mib for _start, size, _type in self.g.parts]
        types = [t for _start, _size, t in self.g.parts]
        lay = self.layout
        self.assertEqual(sizes, [int(lay["BOOT_MB"]), int(lay["ROOT_MB"]), int(lay["ROOT_MB"]), int(lay["DATA_MB"])])
        self.assertEqual(types, ["c", "83", "83", "83"])
        conf = os.path.join(rig.REPO, "board", BOARD, "image.conf")
        dtbs = subprocess.run(["bash", "-c", '. "$1"; echo $IMAGE_DTBS', "-", conf], check=True, stdout=subprocess.PIPE, text=True).stdout.split()
        self.assertTrue(dtbs)
        # Slot A's boot files in a/ (os_prefix=); b/ only after the first update.
        slot_a = mdir(self.g.fat, "::a")
        for dtb in dtbs:
            self.assertIn(dtb, slot_a)
        for f in ("vmlinuz", "initrd.img", "cmdline.txt", "overlays"):
            self.assertIn(f, slot_a)
        for f in ("config.txt", "tryboot.txt", "doorbell.toml", "bootcode.bin", "start4.elf", "a"):
            self.assertIn(f, self.g.boot_files)
        self.assertNotIn("b", self.g.boot_files)
        self.assertEqual(self.g.booted_config, ("config.txt", "a/"))
        tryboot = subprocess.run(["mcopy", "-n", "-i", self.g.fat, "::tryboot.txt", "-"], check=True, stdout=subprocess.PIPE, text=True).stdout
        self.assertEqual(re.findall(r"(?m)^os_prefix=.*$", tryboot), ["os_prefix=a/"])
        args = self.g.image_cmdline.split()
        self.assertIn(f"root=PARTUUID={self.part_uuid(2)}", args)
        # raspi-firmware's hook writes "rw"; the image's "ro" comes after it, and the last wins.
        self.assertEqual([a for a in args if a in ("ro", "rw")][-1], "ro")
        config = rig.read(os.path.join(self.g.base, "config.txt"))
        self.assertEqual(re.findall(r"(?m)^(?:os_prefix|kernel)=.*$", config), ["kernel=vmlinuz", "os_prefix=a/"])
        self.assertIn("arm_64bit=1", config)
        self.assertIn("enable_uart=1", config)

    def test_2_bad_boot_file_reported_and_box_reachable(self):
        """systemd reaches multi-user. The installer's file has an unknown key in the agent part:
        doorbell-firstboot fails with 78 (the one unit allowed to fail), the reason with its line is
        on the console, in `agentctl status` and at the cloud (POST /enrol/problems, the token not
        spent), and the box stays reachable: the SSH key and the Wi-Fi were written first, on /data
        (the root is read-only), so the key logs in and wpa_supplicant@wlan0 runs on the emulated
        radio with the file provision wrote."""
        self.assertIn(self.state, ("running", "degraded"), self.g.console()[-3000:])
        self.assertEqual(self.g.sh("systemctl is-active multi-user.target").strip(), "active")
        failed = self.g.sh("systemctl list-units --failed --plain --no-legend | awk '{print $1}'").split()
        self.assertTrue(set(failed) <= {"doorbell-firstboot.service"}, failed)
        ran = self.g.sh("systemctl show -p ExecMainStatus -p ConditionResult doorbell-firstboot.service")
        self.assertIn("ConditionResult=yes", ran)
        self.assertIn("ExecMainStatus=78", ran)
        self.assertRegex(self.g.console(), r"doorbell-agent provision: .*doorbell\.toml:\d+.*cooldown_msec")
        s = self.status()
        self.assertIsNotNone(s)
        self.assertEqual(s["provisioning"]["state"], "problem", s.get("provisioning"))
        self.assertIn("cooldown_msec", s["provisioning"]["message"])
        problems = self.cloud.rows("SELECT problem FROM provisioning_reports")
        self.assertTrue(any("cooldown_msec" in p for (p,) in problems), problems)
        self.assertEqual(self.cloud.rows("SELECT used_at_ms FROM enrolment_tokens"), [(None,)])
        rc, out = self.reachable_by_ssh()
        self.assertEqual((rc, out.strip().splitlines()[-1:]), (0, ["reached doorbell"]), out)
        self.assertEqual(self.g.sh("stat -c '%a %U' /data/ssh/authorized_keys").strip(), "600 root")
        self.assertIn("psk=", self.g.sh("cat /etc/wpa_supplicant/wpa_supplicant-wlan0.conf"))
        self.assertEqual(self.g.sh("stat -c %a /data/etc/wpa_supplicant/wpa_supplicant-wlan0.conf").strip(), "600")
        rig.wait_for("wpa_supplicant@wlan0 active", 120,
                     lambda: self.g.run("systemctl is-active wpa_supplicant@wlan0.service", 30, check=False)[1].strip() == "active", 2.0)

    def test_3_root_is_slot_a_read_only(self):
        out = self.g.sh("findmnt -n -o SOURCE,OPTIONS /; readlink -f /dev/disk/by-partuuid/" + self.part_uuid(2))
        (source, options), device = out.split("\n")[0].split(), out.split("\n")[1].strip()
        self.assertEqual(source, device)
        self.assertIn("ro", options.split(","))
        rc, _ = self.g.run("touch /usr/rig-write-test", 30, check=False)
        self.assertNotEqual(rc, 0, "the root accepted a write")

    def test_4_data_partition_holds_what_is_written(self):
        """/data is partition 4, and the agent's state, the journal, BlueZ's bonds and systemd's
        state are bound from it; the journal is persistent there, under the gateway's machine id,
        which is on /data too (the initramfs binds it over the read-only /etc/machine-id)."""
        data = self.g.sh("readlink -f /dev/disk/by-partuuid/" + self.part_uuid(4)).strip()
        self.assertEqual(self.g.sh("findmnt -n -o SOURCE /data").strip(), data)
        for where, sub in (("/var/lib/doorbell-agent", "/lib/doorbell-agent"), ("/var/log", "/log"), ("/var/lib/bluetooth", "/lib/bluetooth"),
                           ("/var/lib/systemd", "/lib/systemd"), ("/etc/doorbell-agent", "/etc/doorbell-agent")):
            self.assertEqual(self.g.sh(f"findmnt -n -o SOURCE {where}").strip(), f"{data}[{sub}]", where)
        machine_id = self.g.sh("cat /etc/machine-id").strip()
        self.assertEqual(self.g.sh("cat /data/machine-id").strip(), machine_id)
        self.assertEqual(self.g.sh(f"test -d /var/log/journal/{machine_id} && echo yes").strip(), "yes")
        self.assertIn("tmpfs", self.g.sh("findmnt -n -o FSTYPE /tmp; findmnt -n -o FSTYPE /var/tmp"))

    def test_4b_data_partition_grown_to_the_card(self):
        """The card is larger than the image: the first boot grew partition 4 to its end and the
        file system with it (doorbell-grow-data: growpart, resize2fs online)."""
        disk_bytes = int(self.g.sh("blockdev --getsize64 /dev/vda").strip())
        self.assertEqual(disk_bytes, CARD_BYTES)
        data = self.g.sh("readlink -f /dev/disk/by-partuuid/" + self.part_uuid(4)).strip()
        name = os.path.basename(data)
        start, size = (int(self.g.sh(f"cat /sys/class/block/{name}/{f}").strip()) for f in ("start", "size"))
        # growpart leaves the last 33 sectors free on an MBR disk too (room for a GPT's backup header).
        self.assertLessEqual((start + size) * 512, disk_bytes)
        self.assertGreater((start + size) * 512, disk_bytes - 1024**2, "partition 4 does not end at the card's end")
        fs_bytes = int(self.g.sh("df -B1 --output=size /data | tail -1").strip())
        self.assertGreater(fs_bytes, CARD_BYTES - self.g.parts[3][0] - 256 * 1024**2, "the file system was not grown with its partition")
        self.assertEqual(self.g.sh("systemctl is-active doorbell-grow-data.service").strip(), "active")

    def test_5_agent_active_under_the_shipped_unit(self):
        """The installed agent runs under the unit the package ships, unchanged (no drop-in), with
        the board's agent.toml, and writes its state on the data partition."""
        self.assertEqual(self.g.sh("systemctl is-active doorbell-agent.service").strip(), "active")
        self.assertEqual(self.g.sh("systemctl show -P DropInPaths doorbell-agent.service").strip(), "")
        shipped = rig.read(os.path.join(rig.REPO, "systemd", "doorbell-agent.service"))
        self.assertEqual(self.g.sh("cat \"$(systemctl show -P FragmentPath doorbell-agent.service)\""), shipped)
        board = rig.read(os.path.join(rig.REPO, "board", BOARD, "agent.toml"))
        self.assertEqual(self.g.sh("cat /etc/doorbell-agent/agent.toml"), board)
        # The device key is made at the agent's first start, in its state directory: on /data.
        files = self.g.sh("ls /data/lib/doorbell-agent").split()
        self.assertTrue(files, "the agent wrote nothing in its state directory")

    def rauc_status(self):
        """`rauc status --detailed` as JSON, with "booted" made the booted slot's name (RAUC gives
        the device there) and each slot's boot_status."""
        # The JSON on stdout; RAUC's warnings on stderr, shown if it fails.
        out = self.g.sh("rauc status --detailed --output-format=json 2>/tmp/rauc.err || { cat /tmp/rauc.err; exit 1; }", 120)
        status = json.loads(out)
        slots = {name: slot for entry in status["slots"] for name, slot in entry.items()}
        status["booted"] = [name for name, slot in slots.items() if slot["state"] == "booted"]
        return status, slots

    def test_6_rauc_sees_both_slots(self):
        """RAUC through the tryboot backend: booted from A, A primary and good, B (never written) bad."""
        status, slots = self.rauc_status()
        self.assertEqual(set(slots), {"rootfs.0", "rootfs.1"})
        self.assertEqual((status["booted"], status["boot_primary"]), (["rootfs.0"], "rootfs.0"), status)
        self.assertEqual((slots["rootfs.0"]["boot_status"], slots["rootfs.1"]["boot_status"]), ("good", "bad"), slots)

    def test_7_fixed_boot_file_provisions_at_next_boot(self):
        """The installer fixes the file (here from the box itself, as over SSH) and powers the box
        off and on: provision takes the file in, the gateway is enrolled at the cloud with the
        device's own key through the token, the token and the Wi-Fi passphrase are gone from the
        FAT file, and the agent runs with the installed config."""
        with open(os.path.join(self.g.share, "doorbell.toml"), "w") as f:
            f.write(self.good_file)
        self.g.sh("cp /run/rig/doorbell.toml /boot/firmware/doorbell.toml && sync")
        self.g.shutdown()
        self.g.boot(timeout=900)
        self.g.run("systemctl is-system-running --wait", 600, check=False)
        # Exit 75 (the network not up yet) would be retried every 30 s: wait for the outcome.
        def finished():
            out = self.g.sh("systemctl show -p ExecMainStatus -p ActiveState doorbell-firstboot.service")
            return out if "ActiveState=active" in out or "ActiveState=failed" in out else None
        ran = rig.wait_for("doorbell-firstboot finished", 300, finished, 3.0)
        self.assertIn("ExecMainStatus=0", ran, self.g.sh("journalctl -b -u doorbell-firstboot --no-pager | tail -20"))
        self.assertIn("ActiveState=active", ran)
        provisioning = json.loads(self.g.sh("cat /var/lib/doorbell-agent/provisioning.json"))
        self.assertEqual(provisioning["state"], "provisioned", provisioning)
        gateway = provisioning["gateway_id"]
        s = self.wait_status("the agent up with the installed config", lambda s: "provisioning" in s, 180)
        self.assertEqual(s["provisioning"]["state"], "provisioned")
        # "ed25519:<base64>" (the cloud may keep the key with or without the algorithm's prefix).
        pubkey = self.g.sh("agentctl pubkey").splitlines()[0].strip().split(":")[-1]
        enrolled = [(a, (k or "").split(":")[-1]) for a, k in self.cloud.rows("SELECT account_id, public_key FROM gateways WHERE id = ?", gateway)]
        self.assertEqual(enrolled, [(self.cloud.account, pubkey)])
        self.assertEqual(self.cloud.rows("SELECT used_by_gateway FROM enrolment_tokens"), [(gateway,)])
        left = self.g.sh("cat /boot/firmware/doorbell.toml")
        self.assertNotIn(self.token, left)
        self.assertNotIn("rig-passphrase-1", left)
        self.assertIn(self.cloud.url, left)
        installed = self.g.sh("cat /etc/doorbell-agent/agent.toml")
        self.assertNotRegex(installed, r"(?m)^\[provision\]")
        self.assertIn(f'gateway_id = "{gateway}"', installed)
        self.assertEqual(self.g.sh("systemctl is-active doorbell-agent.service wpa_supplicant@wlan0.service").split(), ["active", "active"])
        rc, out = self.reachable_by_ssh()
        self.assertEqual(rc, 0, out)

    def test_8_press_delivered_to_the_cloud(self):
        """The recorded press, replayed by the image's rtl_433 under the shipped unit, decoded,
        stored and signed by the agent, reaches the cloud, which verifies it with the key the
        enrolment gave it (v1a)."""
        self.sync_clock()
        gateway = json.loads(self.g.sh("cat /var/lib/doorbell-agent/provisioning.json"))["gateway_id"]

        def pressed():
            return [e for e in self.cloud.events() if e["gateway_id"] == gateway and e["device"] == "front-door"
                    and e["type"] == "doorbell.pressed"]
        events = rig.wait_for("the press at the cloud", 300, pressed, 2.0)
        self.assertIn("v1a", events[0]["verified"], events[0])
        self.assertIs(events[0]["body"]["test"], False, "a replayed radio press, not agentctl inject")
        self.assertEqual(events[0]["body"]["device"]["radio"], "rtl433")

    def test_9_power_cut(self):
        """qemu killed during a burst of presses that wait in the outbox (the clock flag taken away
        first): the box boots again and every press the agent acknowledged reaches the cloud."""
        self.g.sh("rm -f /run/systemd/timesync/synchronized")
        with open(self.g.path("burst.sh"), "w") as f:
            f.write("".join(f"agentctl inject press --json --device dev-{i:02d} >> /run/rig/acked.jsonl\n" for i in range(BURST)))
        acked_log = self.g.path("acked.jsonl")
        self.g.sh("systemd-run --unit rig-burst bash /run/rig/burst.sh")

        def acked():
            if not os.path.exists(acked_log):
                return []
            return [i for line in rig.read(acked_log).splitlines() if line.endswith("}") for i in json.loads(line)["event_ids"]]
        rig.wait_for("half the burst acknowledged", 300, lambda: len(acked()) >= BURST // 2, 0.5)
        self.g.kill()
        stored = acked()
        self.g.boot(timeout=900)
        state = self.g.run("systemctl is-system-running --wait", 600, check=False)[1].strip()
        self.assertIn(state, ("running", "degraded"), self.g.console()[-3000:])
        s = self.wait_status("agent up after the power cut", lambda s: True, 180)
        self.assertEqual(s["outbox"]["storage"], "ok", s["outbox"])
        self.sync_clock()
        self.wait_status("outbox drained after the power cut", lambda s: s["outbox"]["depth"] == 0, 300)
        at_cloud = {e["id"] for e in self.cloud.events()}
        rig.log("image", f"power cut: {len(stored)} presses acknowledged before the cut, {len(at_cloud)} events at the cloud")
        self.assertEqual(set(stored) - at_cloud, set(), "an acknowledged press was lost in the power cut")


    # Updates (issue #29 item 4): RAUC bundles through the tryboot backend, the rig playing the
    # firmware (ImageGuest.firmware). Named test_9b.. so they run after the power cut, in order.

    def bundle(self, name):
        """A bundle for this test in the share: the good one (make bundle's, next to the image),
        the broken one (the same root with an agent that exits 1, signed with the same key), or the
        foreign one (the good one signed again with another key)."""
        good = self.image[:-len(".img.xz")] + ".raucb"
        rootfs = self.image[:-len(".img.xz")] + ".rootfs.ext4"
        out = self.g.path(name + ".raucb")
        if os.path.exists(out):
            return "/run/rig/" + name + ".raucb"
        if not os.path.exists(good):
            raise FileNotFoundError(f"{good} is missing: make bundle BOARD={BOARD}")
        if name == "good":
            shutil.copy(good, out)
        elif name == "broken":
            broken = os.path.join(self.g.dir, "broken.rootfs.ext4")
            subprocess.run(["cp", "--sparse=always", rootfs, broken], check=True)
            fake = os.path.join(self.g.dir, "exit1")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'doorbell-agent: the broken bundle of the image test' >&2\nexit 1\n")
            done = subprocess.run(["debugfs", "-w", "-R", "rm /usr/bin/doorbell-agent", broken], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            cmds = os.path.join(self.g.dir, "broken.debugfs")
            with open(cmds, "w") as f:
                f.write(f"write {fake} /usr/bin/doorbell-agent\nsif /usr/bin/doorbell-agent mode 0100755\n")
            subprocess.run(["debugfs", "-w", "-f", cmds, broken], check=True, capture_output=True)
            listed = subprocess.run(["debugfs", "-R", "cat /usr/bin/doorbell-agent", broken], check=True, capture_output=True, text=True).stdout
            self.assertIn("exit 1", listed)
            env = dict(os.environ, BOARD=BOARD, BUNDLE_ROOTFS=broken, BUNDLE_OUT=out)
            subprocess.run([os.path.join(rig.REPO, "scripts", "image", "build-bundle.sh")], check=True, env=env, stdout=subprocess.DEVNULL)
        elif name == "newer":
            # The same root as a later release: only the manifest's version differs
            # (BUNDLE_VERSION), which is what doorbell-update compares.
            env = dict(os.environ, BOARD=BOARD, BUNDLE_ROOTFS=rootfs, BUNDLE_OUT=out, BUNDLE_VERSION=self.newer_version())
            subprocess.run([os.path.join(rig.REPO, "scripts", "image", "build-bundle.sh")], check=True, env=env, stdout=subprocess.DEVNULL)
        elif name == "foreign":
            keys = os.path.join(rig.REPO, ".work", "rauc-dev-keys")
            other = os.path.join(self.g.dir, "other")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30",
                            "-subj", "/CN=someone else", "-keyout", other + ".key", "-out", other + ".cert"], check=True, capture_output=True)
            subprocess.run(["rauc", "resign", f"--keyring={keys}/dev.cert.pem", f"--signing-keyring={other}.cert", f"--cert={other}.cert",
                            f"--key={other}.key", good, out], check=True, capture_output=True)
        return "/run/rig/" + name + ".raucb"

    def newer_version(self):
        """A later release of the image's own version (dpkg orders 0.1.0+pulled1 after 0.1.0)."""
        version = re.fullmatch(rf"doorbell-{re.escape(BOARD)}-(.+)\.img\.xz", os.path.basename(self.image)).group(1)
        return version + "+pulled1"

    def fat_prefixes(self):
        """(config.txt's, tryboot.txt's) os_prefix= as the box sees them."""
        return tuple(self.g.sh(f"sed -n 's/^os_prefix=//p' /boot/firmware/{f}").strip() for f in ("config.txt", "tryboot.txt"))

    def root_partition(self):
        return self.g.sh("cat /sys/class/block/$(basename $(findmnt -n -o SOURCE /))/partition").strip()

    def install_and_tryboot(self, bundle):
        """`rauc install` on the box, then the reboot an update asks for: once into the new slot."""
        rc, out = self.g.run(f"rauc install {bundle} 2>&1", 1500, check=False)
        self.assertEqual(rc, 0, out)
        # systemd 257 (trixie) refuses the old positional form (`systemctl reboot '0 tryboot'`:
        # "Too many arguments"): the argument for reboot(2) goes in --reboot-argument.
        try:
            rc, out = self.g.run("systemctl --no-block reboot --reboot-argument='0 tryboot'", 60, check=False)
            self.assertEqual(rc, 0, "systemctl refused the tryboot reboot: " + out)
        except RuntimeError:
            pass  # the guest went down before the channel wrote the command's status: the reboot ran
        self.assertTrue(self.g.wait_reset(300), "the guest did not ask the firmware for a tryboot: " + self.g.console()[-2000:])
        self.g.boot(timeout=900)

    def test_9b_bundle_of_another_key_refused(self):
        """A bundle signed with a key the image's keyring does not trust is refused; nothing changes."""
        before = self.fat_prefixes()
        rc, out = self.g.run(f"rauc install {self.bundle('foreign')} 2>&1", 600, check=False)
        self.assertNotEqual(rc, 0, out)
        self.assertRegex(out, r"(?i)signature|verif|certificate", out)
        self.assertEqual(self.fat_prefixes(), before)
        status, slots = self.rauc_status()
        self.assertEqual(status["boot_primary"], "rootfs.0", status)

    def test_9c_update_tried_delivered_marked_good(self):
        """The good bundle: installed into slot B (its boot files in b/, tryboot.txt naming it,
        config.txt still A), booted once by tryboot; the new slot's agent delivers the press that
        waited in the outbox since before the update (same /data, same device key), so
        doorbell-slot-check marks B good (config.txt names b/); a later ordinary reboot stays on B."""
        self.assertEqual(self.root_partition(), "2")
        self.g.sh("rm -f /run/systemd/timesync/synchronized")
        held = json.loads(self.g.sh("agentctl inject press --json --device dev-00"))["event_ids"]
        pubkey = self.g.sh("agentctl pubkey").strip()
        self.install_and_tryboot(self.bundle("good"))
        self.assertEqual(self.g.booted_config, ("tryboot.txt", "b/"))
        self.assertEqual(self.root_partition(), "3")
        self.assertIn(f"root=PARTUUID={self.part_uuid(3)}", self.g.slot_cmdline.split())
        # The rig's channel comes up before the agent does under TCG (first run: "cannot reach
        # the agent" right after the boot): wait for it, as slot-check does.
        self.wait_status("slot B's agent answering", lambda s: True, 300)
        self.assertEqual(self.g.sh("agentctl pubkey").strip(), pubkey)
        self.sync_clock()
        rig.wait_for("the press held before the update at the cloud", 300,
                     lambda: set(held) <= {e["id"] for e in self.cloud.events()}, 2.0)
        rig.wait_for("slot B committed (config.txt names b/)", 400, lambda: self.fat_prefixes() == ("b/", "b/"), 3.0)
        self.assertIn("marked good", self.g.sh("journalctl -b -u doorbell-slot-check --no-pager"))
        status, slots = self.rauc_status()
        self.assertEqual((status["booted"], status["boot_primary"]), (["rootfs.1"], "rootfs.1"), status)
        self.assertEqual((slots["rootfs.0"]["boot_status"], slots["rootfs.1"]["boot_status"]), ("good", "good"), slots)
        try:
            self.g.run("systemctl --no-block reboot", 60, check=False)
        except RuntimeError:
            pass  # the guest went down before the channel wrote the command's status
        self.assertFalse(self.g.wait_reset(300), "an ordinary reboot asked for a tryboot")
        self.g.boot(timeout=900)
        self.assertEqual(self.g.booted_config, ("config.txt", "b/"))
        self.assertEqual(self.root_partition(), "3")
        # The rig's channel can answer before slot-check has run (fourth run, load 12: the journal
        # was still empty): wait for its verdict.
        rig.wait_for("slot-check's verdict on the committed slot", 300,
                     lambda: "committed slot" in self.g.sh("journalctl -b -u doorbell-slot-check --no-pager"), 3.0)

    def test_9d_broken_update_falls_back(self):
        """A bundle whose agent exits 1 (signed with the same key): installed into slot A, booted
        once by tryboot; the agent never runs, so the cloud never answers it and doorbell-slot-check marks A bad and reboots
        on its own; the firmware's ordinary boot loads config.txt's slot B, where the agent works,
        and `rauc status` says A is bad and B booted and primary."""
        self.assertEqual(self.root_partition(), "3")
        self.install_and_tryboot(self.bundle("broken"))
        self.assertEqual(self.g.booted_config, ("tryboot.txt", "a/"))
        self.assertEqual(self.root_partition(), "2")
        self.sync_clock()
        # slot-check's bound is 300 s after the agent's start; then mark-bad and a reboot.
        self.assertFalse(self.g.wait_reset(900), "the broken slot asked for a tryboot again")
        self.assertRegex(self.g.console(), r"slot-check: the cloud did not answer the agent of slot A")
        self.g.boot(timeout=900)
        self.assertEqual(self.g.booted_config, ("config.txt", "b/"))
        self.assertEqual(self.root_partition(), "3")
        self.assertEqual(self.fat_prefixes(), ("b/", "b/"))
        status, slots = self.rauc_status()
        self.assertEqual((status["booted"], status["boot_primary"]), (["rootfs.1"], "rootfs.1"), status)
        self.assertEqual((slots["rootfs.0"]["boot_status"], slots["rootfs.1"]["boot_status"]), ("bad", "good"), slots)
        self.wait_status("the agent of slot B up again", lambda s: True, 180)
        # The update service will not pull the version that failed here again.
        self.assertIn(self.g.sh("dpkg-query -W -f='${Version}' doorbell-agent").strip(),
                      self.g.sh("cat /data/rauc/failed-versions").split())

    def test_9e_update_pulled_from_the_config_url(self):
        """`[update] url` in agent.toml names a newer bundle on an HTTP server: doorbell-update
        (as its timer starts it) streams it with RAUC's range requests into the other slot (A,
        marked bad by 9d), reboots once into it, slot-check keeps it; the next run finds it up
        to date (RAUC's record of the installed bundle, not the package, is the version)."""
        self.assertEqual(self.root_partition(), "3")
        newer = self.bundle("newer")
        server = BundleServer(self.g.share)
        self.addCleanup(server.stop)
        self.g.sh(f"printf '\\n[update]\\nurl = \"%s\"\\n' '{server.url(os.path.basename(newer))}' >> /etc/doorbell-agent/agent.toml\n"
                  "doorbell-agent check-config /etc/doorbell-agent/agent.toml")
        self.g.sh("rm -f /run/systemd/timesync/synchronized")
        held = json.loads(self.g.sh("agentctl inject press --json --device dev-00"))["event_ids"]
        try:
            self.g.run("systemctl start doorbell-update.service", 1500, check=False)
        except RuntimeError:
            pass  # the reboot took the channel down before it answered
        self.assertTrue(server.handler.ranges, "RAUC fetched no byte range: it did not stream")
        self.assertTrue(self.g.wait_reset(600), "doorbell-update did not reboot into the new slot with tryboot")
        self.g.boot(timeout=900)
        self.assertEqual(self.g.booted_config, ("tryboot.txt", "a/"))
        self.assertEqual(self.root_partition(), "2")
        self.wait_status("slot A's agent answering", lambda s: True, 300)
        self.sync_clock()
        rig.wait_for("the press held before the update at the cloud", 300,
                     lambda: set(held) <= {e["id"] for e in self.cloud.events()}, 2.0)
        rig.wait_for("slot A committed (config.txt names a/)", 400, lambda: self.fat_prefixes() == ("a/", "a/"), 3.0)
        self.assertIn(self.newer_version(), self.g.sh("/usr/libexec/doorbell-image/booted-version"))
        rc, out = self.g.run("systemctl start doorbell-update.service && journalctl -b -u doorbell-update --no-pager -n 5", 600, check=False)
        self.assertIn(f"up to date: {self.newer_version()}", out)

if __name__ == "__main__":
    unittest.main(verbosity=2)
