"""The field rig's host side: boots the cached Debian 12 guest under qemu (TCG), runs commands in
it through the 9p share, and starts the host-side peers (HTTPS receiver, Bumble controller).

Stdlib only. Every wait is bounded; every process started here is stopped by its own pid.
"""
import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORK = os.environ.get("RIG_WORK", os.path.join(REPO, ".work", "field-rig"))
HOST_ARCH = subprocess.run(["dpkg", "--print-architecture"], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def host_guest(host_arch):
    """The one place that picks the guest for a host (issue #25 item 5; run.sh asks here through
    `rig.py host-guest`): Debian 12 of the host's own architecture, so an arm64 host (a Pi) boots
    an arm64 board, under KVM when it can, instead of emulating a PC."""
    if host_arch not in ("amd64", "arm64"):
        raise ValueError(f"the rig boots amd64 and arm64 guests; this host is {host_arch}")
    return host_arch, "bookworm"


# The guest every scenario boots unless it names another: RIG_ARCH (amd64|arm64) and RIG_DIST
# (bookworm|trixie), as build-rootfs.sh takes them, by default host_guest's. run.sh runs the
# same scenarios on the host's own guest and on the emulated arm64 Debian 13 board this way.
GUEST_ARCH = os.environ.get("RIG_ARCH") or HOST_ARCH
GUEST_DIST = os.environ.get("RIG_DIST") or "bookworm"


def qemu_machine(arch, host_arch, kvm):
    """qemu for a guest: its own architecture's emulator; KVM only for an arm64 guest on an arm64
    host whose /dev/kvm works (a Pi running make test), so the amd64 rig keeps the TCG timing it
    was tuned on. Returns (argv prefix, console tty)."""
    if arch == "amd64":
        return ["qemu-system-x86_64", "-accel", "tcg", "-smp", "1"], "ttyS0"
    if arch != "arm64":
        raise ValueError(f"no qemu machine for a {arch} guest (amd64 or arm64)")
    if host_arch == "arm64" and kvm:
        return ["qemu-system-aarch64", "-M", "virt", "-accel", "kvm", "-cpu", "host", "-smp", "2"], "ttyAMA0"
    # Under TCG a Cortex-A72 (a Pi 4's core); thread=multi lets a second vCPU use the second host core.
    return ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a72", "-accel", "tcg,thread=multi", "-smp", "2"], "ttyAMA0"


def log(*a):
    print("rig:", *a, file=sys.stderr, flush=True)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def wait_for(what, seconds, check, step=0.3):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        v = check()
        if v:
            return v
        time.sleep(step)
    raise TimeoutError(f"timed out after {seconds} s waiting for {what}")


def rootfs_dir(ntp="timesyncd", arch=None, dist=None):
    out = subprocess.run([os.path.join(HERE, "build-rootfs.sh")], check=True, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, RIG_NTP=ntp, RIG_ARCH=arch or GUEST_ARCH, RIG_DIST=dist or GUEST_DIST)).stdout
    return out.strip().splitlines()[-1]


def qemu_command(arch, host_arch, kvm, base, disk, share, console_log, memory_mb=1024, cmdline=None):
    """The command line that boots a guest of `arch` on a `host_arch` host: Debian's kernel and
    initrd from the directory `base`, its disk, the 9p share. cmdline: the kernel's arguments
    before the console (default: the rig's root file system on /dev/vda, read-write)."""
    machine, tty = qemu_machine(arch, host_arch, kvm)
    cmdline = cmdline or "root=/dev/vda rw"
    return machine + [
        "-m", str(memory_mb), "-no-reboot", "-display", "none", "-monitor", "none", "-nodefaults",
        "-kernel", os.path.join(base, "vmlinuz"), "-initrd", os.path.join(base, "initrd.img"),
        "-append", f"{cmdline} console={tty} panic=-1 systemd.show_status=0 net.ifnames=0",
        "-drive", f"file={disk},if=none,id=d0,format=qcow2,cache=writeback", "-device", "virtio-blk-pci,drive=d0",
        "-fsdev", f"local,id=rig,path={share},security_model=none", "-device", "virtio-9p-pci,fsdev=rig,mount_tag=rig",
        "-netdev", "user,id=n0,ipv6=off", "-device", "virtio-net-pci,netdev=n0",
        "-serial", f"file:{console_log}"]

class Guest:
    """One VM with its own copy-on-write disk over the cached base image."""

    def __init__(self, name, rtc_base=None, serial_tcp_port=None, usb_serial_tcp_port=None, memory_mb=1024, keep_disk=False, ntp="timesyncd",
                 arch=None, dist=None):
        """keep_disk: boot the disk a previous run left (to look at a failure), not a fresh one.
        ntp: the image's NTP client, timesyncd or chrony (build-rootfs.sh RIG_NTP).
        arch, dist: the guest (default GUEST_ARCH, GUEST_DIST): amd64 is a PC (qemu-system-x86_64),
        arm64 the qemu "virt" board with a Cortex-A72 (qemu-system-aarch64)."""
        self.arch = arch or GUEST_ARCH
        self.dist = dist or GUEST_DIST
        if self.arch == "arm64" and serial_tcp_port:
            raise ValueError("the arm64 virt board has one UART (the console): no ttyS1 controller there; use usb_serial_tcp_port")
        self.name = name
        self.dir = os.path.join(WORK, name)
        self.share = os.path.join(self.dir, "share")
        self.disk = os.path.join(self.dir, "disk.qcow2")
        self.base = rootfs_dir(ntp, self.arch, self.dist)
        if keep_disk:
            shutil.rmtree(self.share, ignore_errors=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.share, "q"))
        os.makedirs(os.path.join(self.share, "out"))
        shutil.copytree(os.path.join(HERE, "share"), os.path.join(self.share, "bin"))
        if not keep_disk:
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", os.path.join(self.base, "base.img"), self.disk],
                           check=True)
        self.rtc_base = rtc_base
        self.serial_tcp_port = serial_tcp_port
        self.usb_serial_tcp_port = usb_serial_tcp_port
        self.memory_mb = memory_mb
        self.proc = None
        self.seq = 0
        self.boots = 0
        self.cmdline = None  # the kernel's arguments: qemu_command's default

    def path(self, *p):
        return os.path.join(self.share, *p)

    def boot(self, timeout=600):
        # Unloaded, the guest is up in 30-60 s under TCG; on a busy 2-core host udev alone took
        # 200 s once (2026-11-26), so the bound is generous: a hang still ends the run.
        ready = self.path("out", "ready")
        if os.path.exists(ready):
            os.remove(ready)
        self.boots += 1
        cmd = qemu_command(self.arch, HOST_ARCH, kvm_usable(), self.base, self.disk, self.share,
                           os.path.join(self.dir, f"console-{self.boots}.log"), self.memory_mb, self.cmdline)
        if self.serial_tcp_port:
            # ttyS1: an H4 UART whose other end is a Bumble controller on the host.
            cmd += ["-chardev", f"socket,id=bt,host=127.0.0.1,port={self.serial_tcp_port},reconnect=1", "-serial", "chardev:bt"]
        if self.usb_serial_tcp_port:
            # ttyUSB0: qemu's usb-serial is an FTDI FT232 (the guest's ftdi_sio), as an FTDI/CP210x
            # H4 adapter on a Pi's USB port; its far end another Bumble controller.
            cmd += ["-device", "qemu-xhci,id=xhci", "-chardev", f"socket,id=btusb,host=127.0.0.1,port={self.usb_serial_tcp_port},reconnect=1",
                    "-device", "usb-serial,bus=xhci.0,chardev=btusb"]
        if self.rtc_base:
            cmd += ["-rtc", f"base={self.rtc_base},clock=host"]
        log(self.name, "boot", self.boots)
        start = time.monotonic()
        with open(os.path.join(self.dir, "qemu.log"), "a") as out:
            self.proc = subprocess.Popen(["nice", "-n", "10"] + cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(f"{self.name} guest to come up", timeout, lambda: os.path.exists(ready) or self.proc.poll() is not None, 0.5)
        except TimeoutError:
            self.kill()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"qemu exited with {self.proc.returncode}; see {self.dir}/qemu.log")
        self.boot_id = read(ready).strip()
        log(self.name, f"up in {time.monotonic() - start:.0f} s, boot_id {self.boot_id}")
        return self.boot_id

    def slowness(self):
        """How much longer the guest's own waits should be: an arm64 guest under TCG runs its
        tools (btmgmt, python3) about three times slower than the PC guest (hci0 took over 90 s to
        come up there, 2026-11-27)."""
        return 3 if self.arch == "arm64" and not (HOST_ARCH == "arm64" and kvm_usable()) else 1

    def run(self, script, timeout=120, check=True):
        """Runs a bash script as root in the guest; returns (rc, output)."""
        self.seq += 1
        sid = f"{self.boots}-{self.seq:04d}"
        tmp = self.path("q", sid + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"# timeout {int(timeout)}\nset -o pipefail\n{script}\n")
        os.rename(tmp, self.path("q", sid + ".sh"))
        rcfile = self.path("out", sid + ".rc")
        wait_for(f"guest command {sid}", timeout + 30, lambda: os.path.exists(rcfile) or (self.proc and self.proc.poll() is not None), 0.2)
        if not os.path.exists(rcfile):
            raise RuntimeError("the guest stopped while running: " + script[:200])
        rc = int(read(rcfile).strip() or "255")
        out = read(self.path("out", sid + ".out"))
        if check and rc != 0:
            raise RuntimeError(f"guest command failed (rc {rc}):\n{script}\n--- output ---\n{out[-4000:]}")
        return rc, out

    def sh(self, script, timeout=120):
        return self.run(script, timeout)[1]

    def kill(self):
        """The power cut: qemu dies at once, the guest gets no shutdown and flushes nothing."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def shutdown(self, timeout=90):
        if self.proc and self.proc.poll() is None:
            try:
                self.run("systemctl --no-block poweroff", 30, check=False)
                self.proc.wait(timeout)
            except Exception:
                pass
        self.kill()

    def console(self):
        return read(os.path.join(self.dir, f"console-{self.boots}.log"))


def kvm_usable():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
        return True
    except OSError:
        return False


class Peer:
    """A host process (receiver, controller) stopped by its own pid."""

    def __init__(self, name, argv, dirpath):
        self.name = name
        self.log = os.path.join(dirpath, name + ".log")
        with open(self.log, "a") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def make_pki(dirpath):
    """A CA and a server certificate for 10.0.2.2, the host as user-mode networking shows it."""
    os.makedirs(dirpath, exist_ok=True)
    ca, key, cert = (os.path.join(dirpath, n) for n in ("ca.pem", "server.key", "server.pem"))
    if os.path.exists(cert):
        return ca, key, cert
    q = dict(check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                    "-subj", "/CN=field rig CA", "-keyout", os.path.join(dirpath, "ca.key"), "-out", ca], **q)
    ext = os.path.join(dirpath, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName = IP:10.0.2.2\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n")
    csr = os.path.join(dirpath, "server.csr")
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=10.0.2.2",
                    "-keyout", key, "-out", csr], **q)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", os.path.join(dirpath, "ca.key"), "-CAcreateserial",
                    "-days", "30", "-extfile", ext, "-out", cert], **q)
    return ca, key, cert


SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class Receiver(Peer):
    """Tests/helpers/https_test_server.py on the host's loopback; the guest reaches it as 10.0.2.2."""

    def __init__(self, dirpath, script="200", max_seconds=1800):
        ca, key, cert = make_pki(os.path.join(WORK, "pki"))
        self.ca = ca
        self.requests_log = os.path.join(dirpath, "requests.jsonl")
        ready = os.path.join(dirpath, "receiver-ready.json")
        if os.path.exists(ready):
            os.remove(ready)
        super().__init__("receiver", [sys.executable, os.path.join(REPO, "Tests/helpers/https_test_server.py"), "--cert", cert, "--key", key,
                                      "--script", script, "--log", self.requests_log, "--ready-file", ready,
                                      "--max-seconds", str(max_seconds)], dirpath)
        self.port = json.loads(wait_for("receiver ready", 30, lambda: os.path.exists(ready) and read(ready)))["port"]
        self.url = f"https://10.0.2.2:{self.port}/events"

    def requests(self):
        if not os.path.exists(self.requests_log):
            return []
        return [json.loads(line) for line in read(self.requests_log).splitlines() if line.strip()]

    def verified_bodies(self):
        """The bodies of the 200-answered requests whose Standard Webhooks HMAC (v1) verifies."""
        key = base64.b64decode(SECRET[len("whsec_"):])
        out = []
        for r in self.requests():
            h = {k.lower(): v for k, v in r["headers"].items()}
            signed = f"{h.get('webhook-id')}.{h.get('webhook-timestamp')}.{r['body']}".encode("latin-1")
            mac = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
            if r["answer"] == "200" and ("v1," + mac) in h.get("webhook-signature", "").split():
                out.append(json.loads(r["body"]))
        return out


def venv_python():
    return subprocess.run([os.path.join(REPO, "scripts/venv.sh")], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


class VirtualRadio(Peer):
    """Tests/helpers/ble/virtual_radio.py (Bumble): a controller speaking H4 on a host TCP port, with
    scripted advertisers on its air and a ground-truth log."""

    TOOL = os.path.join(REPO, "Tests", "helpers", "ble", "virtual_radio.py")

    def __init__(self, dirpath, scenario, max_seconds=600, name="radio", extra=()):
        self.truth_path = os.path.join(dirpath, name + "-truth.jsonl")
        sc = os.path.join(dirpath, name + "-scenario.json")
        with open(sc, "w") as f:
            json.dump(scenario, f)
        ready = os.path.join(dirpath, name + "-ready.json")
        if os.path.exists(ready):
            os.remove(ready)
        super().__init__(name, [venv_python(), self.TOOL, "--port", "0", "--scenario", sc, "--seed", "1", "--max-seconds", str(max_seconds),
                                "--hold", "--truth", self.truth_path, "--ready-file", ready, *extra], dirpath)
        self.port = json.loads(wait_for("virtual radio ready", 60, lambda: os.path.exists(ready) and read(ready)))["port"]

    def truth(self):
        if not os.path.exists(self.truth_path):
            return []
        return [json.loads(line) for line in read(self.truth_path).splitlines() if line.strip()]


class NTPServer:
    """A stratum-1 NTP server on the host's loopback (the guest's 10.0.2.2) answering with the
    host's clock, on a thread; silent until `serving` is set, as an unreachable server would be."""

    def __init__(self):
        import socket
        import threading
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.serving = threading.Event()
        self.stopping = threading.Event()
        self.answered = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _timestamp(t):
        seconds = int(t) + 2_208_988_800  # 1900 → 1970
        return seconds.to_bytes(4, "big") + int((t % 1) * 2**32).to_bytes(4, "big")

    def _run(self):
        while not self.stopping.is_set():
            try:
                request, peer = self.sock.recvfrom(512)
            except OSError:
                continue
            if len(request) < 48 or not self.serving.is_set():
                continue
            received = time.time()
            version = (request[0] >> 3) & 7
            # LI 0, the client's version, mode 4 (server); stratum 1, its poll, precision 2^-20.
            header = bytes([(version << 3) | 4, 1, request[2], 0xEC]) + bytes(4) + (16).to_bytes(4, "big") + b"GPS\0"
            answer = header + self._timestamp(received) + request[40:48] + self._timestamp(received) + self._timestamp(time.time())
            self.sock.sendto(answer, peer)
            self.answered += 1

    def stop(self):
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()


def agent_status(guest, user="rig-installer"):
    """`agentctl status --json` as a member of the doorbell-agent group, parsed."""
    rc, out = guest.run(f"runuser -u {user} -- agentctl status --json", 30, check=False)
    try:
        return json.loads(out)
    except ValueError:
        return None


def wait_agent_status(guest, what, pred, seconds=60):
    """The first `agentctl status --json` for which pred holds (bounded by seconds)."""
    def check():
        s = agent_status(guest)
        return s if s is not None and pred(s) else None
    return wait_for(what, seconds, check, 1.0)


def install_deb_script(deb="/rig/current.deb"):
    """Shell lines: the package installed, the receiver's CA and the HMAC secret in place, and the
    installer account whose `agentctl status` the scenarios read."""
    return f'''dpkg -i {deb}
install -m 0640 -g doorbell-agent /rig/ca.pem /etc/doorbell-agent/rig-ca.pem
echo "{SECRET}" > /etc/doorbell-agent/gateway.whsec
chgrp doorbell-agent /etc/doorbell-agent/gateway.whsec; chmod 0640 /etc/doorbell-agent/gateway.whsec
useradd --system -G doorbell-agent rig-installer
'''


def uplink_toml(receiver):
    """The [uplink] section that delivers to the host's receiver."""
    return f'''[uplink]
url = "{receiver.url}"
ca_file = "/etc/doorbell-agent/rig-ca.pem"
hmac_secret_file = "/etc/doorbell-agent/gateway.whsec"
retry_initial_ms = 500
'''


def main(argv):
    """`rig.py host-guest [HOST_ARCH]`: "ARCH DIST" of the guest for this (or that) host, for run.sh.
    `rig.py dry-run HOST_ARCH KVM(0|1) ARCH BASE`: the qemu command line a host of HOST_ARCH
    would boot that guest with (nothing is built or booted; BASE is a root file system's cache
    directory), one argument a line, so the selection can be checked as such a host runs it."""
    if argv[:1] == ["host-guest"]:
        print(*host_guest(argv[1] if len(argv) > 1 else HOST_ARCH))
    elif argv[:1] == ["dry-run"] and len(argv) == 5:
        host, kvm, arch, base = argv[1:]
        print("\n".join(qemu_command(arch, host, kvm == "1", base, "disk.qcow2", "share", "console.log")))
    else:
        print(main.__doc__, file=sys.stderr)
        return 64
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ValueError as e:
        print(f"rig: {e}", file=sys.stderr)
        sys.exit(1)
