"""The GPIO path on a real kernel (issue #25 item 3): the .deb under the shipped unit in the rig's
guest, with a gpio-sim chip as the board's GPIO controller. Debian's kernel has no gpio-sim, so
build-gpio-sim.sh builds it out of tree for the guest's own kernel (cached by kernel version and
script), the guest loads it and makes a chip through configfs: bank "rig-gpio" with line 0 as the
receiver module's DATA pin and line 1 as the chime relay.

These scenarios replace the XCTest testLibgpiodOnARealChip, which could only skip on machines
without GPIO: here libgpiod (1.6 on bookworm; 2 on a trixie guest) opens a kernel chip by label,
requests edges and an output, and reports a line that does not exist.

One guest for the whole run; the tests run in their numbered order. Run by run.sh (make test).
"""
import json
import os
import shutil
import subprocess
import time
import unittest

import rig

DEB = os.environ.get("RIG_DEB") or sorted(
    (os.path.join(rig.REPO, ".work/deb", f) for f in os.listdir(os.path.join(rig.REPO, ".work/deb")) if f.endswith(".deb")),
    key=os.path.getmtime)[-1]
CHIP = "rig-gpio"  # the bank's label: what a board config names (pinctrl-bcm2711 on a Pi 4)
RECEIVER_LINE, RELAY_LINE, LINES = 0, 1, 4
CHIME_MS = 400
# EV1527 (protocol 1) at T = 600 µs, the slowest valid remote (the decoder takes T up to ~650 µs:
# a 3T low must stay under its 2 ms word separator), then faster ones.
SLOW_UNIT = 600
SWEEP_UNITS = (500, 350)
PRESSES_PER_UNIT = 2
CONFIGFS = "/sys/kernel/config/gpio-sim/rig"
# A whole press decoded from the line (test_5): TCG stretches each driven level by 0.3–3 ms, so
# the press is played at time units of milliseconds, with [radio.ook] max_time_unit_us raised
# above the slowest (its word gap, 3⅓ T = 20 ms, stays above a 3T low stretched by 3 ms at 5 ms).
# DECODE_UNIT is the one whose presses must all decode when the guest drove them valid (measured
# 2026-11-27 in two runs: 6 of 6 at 4 ms, 3 of 3 at 5 ms, 1 of 6 at 2 and at 3 ms, 0 of 3 at 1 ms;
# at host load 9 the board's guest stretched most levels by a whole unit and drove none valid at
# 2 or 3 ms): up to DECODE_EXTRA more presses there until one was. The others are measured and logged.
DECODE_MAX_UNIT = 6000
DECODE_UNIT = 4000
DECODE_SWEEP = (2000, 3000, 4000, 5000)
DECODE_PRESSES = 3
DECODE_EXTRA = 3
# Four words: two confirm the code, two more repeat it, all within hold_after_ms (1.5 s) of the
# first code even at 4 ms, so the only event of a press is its doorbell.pressed.
DECODE_WORDS = 4


def code_for(unit, i):
    """A distinct 24-bit code per unit and press, so each arrival names what was sent."""
    return 0xA50000 | (unit << 4) | i


def gpio_sim_module(kver):
    """gpio-sim.ko for the guest's kernel, built on the host once per kernel version and script."""
    cache = os.environ.get("RIG_CACHE", "/var/cache/doorbell-field-rig")
    out = subprocess.run([os.path.join(rig.HERE, "build-gpio-sim.sh"), kver, os.path.join(cache, f"gpio-sim-{kver}")],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


class GPIORig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.t0 = time.monotonic()
        cls.dir = os.path.join(rig.WORK, "gpio-peers")
        shutil.rmtree(cls.dir, ignore_errors=True)
        os.makedirs(cls.dir)
        cls.receiver = rig.Receiver(cls.dir)
        # The one place that picks the guest: an aarch64 / trixie guest (issue #25 item 4) plugs in
        # here; nothing below depends on the architecture (the module is built for `uname -r`).
        cls.g = rig.Guest("gpio")
        shutil.copy(DEB, cls.g.path("current.deb"))
        shutil.copy(cls.receiver.ca, cls.g.path("ca.pem"))
        try:
            cls.g.boot()
            kver = cls.g.sh("uname -r").strip()
            shutil.copy(gpio_sim_module(kver), cls.g.path("gpio-sim.ko"))
            cls.g.sh(rig.install_deb_script() + "insmod /rig/gpio-sim.ko\n")
            cls.chip_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.g.shutdown()
        cls.receiver.stop()
        rig.log(f"gpio rig: {time.monotonic() - cls.t0:.0f} s")

    # Helpers -------------------------------------------------------------------------------

    @classmethod
    def chip_up(cls):
        """The simulated chip appears, as a board's GPIO controller at boot; udev gives the
        package's rule a chance to hand /dev/gpiochipN to group gpio before anyone opens it."""
        cls.g.sh(f'''
mkdir -p {CONFIGFS}/bank0
echo {LINES} > {CONFIGFS}/bank0/num_lines
echo {CHIP} > {CONFIGFS}/bank0/label
echo 1 > {CONFIGFS}/live
udevadm settle -t 30
dev=/sys/devices/platform/$(cat {CONFIGFS}/dev_name)/$(cat {CONFIGFS}/bank0/chip_name)
echo "$dev" > /rig/gpio-sysfs
ls -l /dev/$(cat {CONFIGFS}/bank0/chip_name)
''')
        cls.sysfs = cls.g.sh("cat /rig/gpio-sysfs").strip()

    def chip_down(self):
        """The chip goes away under the agent (a driver unbound, an overlay removed)."""
        self.g.sh(f"echo 0 > {CONFIGFS}/live")

    def configure(self, devices, receiver_line=RECEIVER_LINE, ook_options=""):
        conf = f'''# The GPIO rig's board config (written by scripts/field-rig/test_gpio.py).
gateway_id = "gw-gpio-rig"

[clock]
require_sync = false

[radio.ook]
source = "gpio"
chip = "{CHIP}"
line = {receiver_line}
{ook_options}''' + "".join(f'\n[[device]]\nid = "{d}"\nmatch = {{ code = "0x{c:06X}" }}\n' for d, c in devices) + f'''
[[action]]
name = "chime"
gpio_pulse = {{ chip = "{CHIP}", line = {RELAY_LINE}, duration_ms = {CHIME_MS} }}

''' + rig.uplink_toml(self.receiver)
        with open(self.g.path("agent.toml"), "w") as f:
            f.write(conf)
        self.g.sh("install -m 0640 -g doorbell-agent /rig/agent.toml /etc/doorbell-agent/agent.toml\n"
                  "doorbell-agent check-config /etc/doorbell-agent/agent.toml\nsystemctl restart doorbell-agent")

    def status(self):
        return rig.agent_status(self.g)

    def wait_status(self, what, pred, seconds=60):
        return rig.wait_agent_status(self.g, what, pred, seconds)

    @staticmethod
    def ook(s):
        return next(r for r in s["radios"] if r["name"] == "ook")

    def bodies(self, device):
        return [b for b in self.receiver.verified_bodies() if b["device"]["id"] == device]

    def press(self, code, unit, protocol=1, repeats=8, hold_pid=None):
        """Plays one press on the receiver line from the guest; returns the driver's timing report.
        hold_pid: stopped for exactly the press (the driver sends SIGSTOP and SIGCONT)."""
        hold = f" --hold-pid {hold_pid}" if hold_pid else ""
        out = self.g.sh(f"python3 /rig/bin/gpio_sim.py press {self.sysfs}/sim_gpio{RECEIVER_LINE}/pull --code {code:06x} "
                        f"--unit {unit} --protocol {protocol} --repeats {repeats}{hold}", 60)
        return json.loads(out.strip().splitlines()[-1])

    def install_udev_rule(self):
        """The package's rule, as the board READMEs install it: /dev/gpiochipN to group gpio."""
        self.g.sh("install -m 0644 /usr/share/doorbell-agent/board/common/99-doorbell-agent.rules /etc/udev/rules.d/\n"
                  "udevadm control --reload && udevadm trigger -s gpio && udevadm settle -t 30")

    def main_pid(self):
        return int(self.g.sh("systemctl show -p MainPID --value doorbell-agent").strip())

    def restarts(self):
        return int(self.g.sh("systemctl show -p NRestarts --value doorbell-agent").strip())

    def last_watchdog_ping(self):
        """systemd's monotonic µs of the agent's last WATCHDOG=1."""
        return int(self.g.sh("systemctl show -p WatchdogTimestampMonotonic --value doorbell-agent").strip() or 0)

    # Scenarios -----------------------------------------------------------------------------

    def test_1_libgpiod_on_the_chip(self):
        """Plain Debian leaves /dev/gpiochip* to root: the status says to install the package's udev
        rule (it said "no GPIO chips are visible" and "set chip to one of those labels" before).
        With the rule, as the board READMEs install it, libgpiod finds the kernel chip by its label
        and takes the receiver line for edges under the unit (DeviceAllow=char-gpiochip, group
        gpio); a line the chip does not have is a status naming the chip's lines, not a crash."""
        self.configure([("front-door", code_for(SLOW_UNIT, 0))])
        s = self.wait_status("the chip's permissions reported", lambda s: self.ook(s)["state"] == "missing")
        self.assertIn("permission denied opening /dev/gpiochip", self.ook(s)["last_error"])
        self.assertIn("99-doorbell-agent.rules", self.ook(s)["last_error"])
        self.install_udev_rule()
        self.configure([("front-door", code_for(SLOW_UNIT, 0))], receiver_line=LINES + 10)
        s = self.wait_status("the missing line reported", lambda s: self.ook(s)["state"] == "missing")
        self.assertIn(f"{CHIP} has lines 0-{LINES - 1}; line {LINES + 10} does not exist", self.ook(s)["last_error"])
        self.assertTrue(any(p.startswith("radio ook missing") for p in s["problems"]), s["problems"])
        self.configure([("front-door", code_for(SLOW_UNIT, 0))] + [(f"t{u}-{i}", code_for(u, i)) for u in SWEEP_UNITS
                                                                    for i in range(PRESSES_PER_UNIT)])
        s = self.wait_status("the receiver line taken", lambda s: self.ook(s)["state"] == "running")
        self.assertEqual(s["health"], "ok", s["problems"])
        # The kernel says who holds the line: the agent, by its consumer name.
        info = self.g.sh(f"cat /sys/kernel/debug/gpio 2>/dev/null || mount -t debugfs none /sys/kernel/debug && cat /sys/kernel/debug/gpio")
        # debugfs: 6.1 writes "(name|consumer) in", 6.12 "(consumer) input".
        self.assertRegex(info, rf"gpio-\d+\s+\((\S*\s*\|)?doorbell-agent\s*\) in", info)

    def test_1b_edges_kept_while_the_agent_stalls(self):
        """The kernel keeps the edges that arrive while the agent is not reading (stopped here;
        a busy or emulated CPU, or a receiver chattering at kHz, does the same): libgpiod 2 asks
        for the kernel's largest buffer, 1024. With the default 16 the arm64 trixie board lost
        edges of every press under TCG (issue #25). libgpiod 1.6 cannot ask: 16 there."""
        if self.g.run("ls /usr/lib/*/libgpiod.so.3", 30, check=False)[0] != 0:
            self.skipTest("libgpiod 1.6: the kernel's edge queue is 16 and cannot be enlarged")
        # 52 edges (more than 16), at least 10 ms apart: under TCG gpio-sim may fold sub-ms edges
        # (its interrupt work lags), which is not what this is about.
        # The driver stops the agent for the press alone (≈ 1.6 s of edges), far below the unit's
        # WatchdogSec (30 s): stopped from the host for the driver's start-up under TCG as well,
        # the agent was once restarted by the watchdog, which reset what test_3 counts.
        lines = self.ook(self.status())["lines"]
        pid, restarts, pinged = self.main_pid(), self.restarts(), self.last_watchdog_ping()
        try:
            timing = self.press(code_for(SLOW_UNIT, 9), 10_000, repeats=1, hold_pid=pid)
        finally:
            self.g.sh(f"kill -CONT {pid}")
        rig.log(f"the agent was stopped for {timing['held_ms']} ms while {timing['pulses']} edges were driven")
        rig.wait_for("the queued edges read", 30, lambda: self.ook(self.status())["lines"] >= lines + timing["pulses"], 1.0)
        self.assertEqual(self.ook(self.status())["lines"], lines + timing["pulses"], timing)
        # Alive again for systemd too: a fresh watchdog ping, the same process.
        rig.wait_for("a watchdog ping after the stop", 40, lambda: self.last_watchdog_ping() > pinged, 1.0)
        self.assertEqual((self.main_pid(), self.restarts()), (pid, restarts), "the stop cost a restart")

    def test_2_press_on_the_receiver_line(self):
        """EV1527 presses driven on the receiver line: the agent reads every edge the kernel
        stamps (its pulse count rises by exactly the pulses driven, none folded as glitches), at
        each T of the sweep. Whether a press decodes depends on how well the guest keeps time under
        TCG (figures logged, see the README); a decoded press arrives once at the HTTPS receiver."""
        if self.g.slowness() > 1:
            # Measured on the emulated arm64 board (2026-11-27): gpio-sim itself folds edges
            # driven under a millisecond apart (a bare libgpiod 2 reader got 94 of 100 back to
            # back, 200 of 200 at 20 ms), so an exact count at T = 600 µs is not the agent's to
            # keep there. The board reads every edge in test_1b (52, 10 ms apart) and decodes whole presses at
            # millisecond time units in test_5; the PC guest runs this sweep.
            self.skipTest("aarch64 under TCG: gpio-sim folds sub-millisecond edges; test_5 decodes presses here")
        def ook():
            return self.ook(self.status())
        for unit in (SLOW_UNIT,) + SWEEP_UNITS:
            decoded = 0
            for i in range(PRESSES_PER_UNIT):
                device = f"t{unit}-{i}" if unit != SLOW_UNIT else "front-door"
                code = code_for(unit, i) if unit != SLOW_UNIT else code_for(SLOW_UNIT, 0)
                before, pulses, glitches = len(self.bodies(device)), ook()["pulses"], ook()["glitches"]
                timing = self.press(code, unit)
                # Every edge is read (the kernel keeps 16 per line; the agent wakes for each).
                rig.wait_for("the agent read every edge", 30, lambda: ook()["pulses"] >= pulses + timing["pulses"] // 2, 1.0)
                self.assertEqual(ook()["pulses"], pulses + timing["pulses"] // 2, timing)
                self.assertEqual(ook()["glitches"], glitches, timing)
                time.sleep(3.5)  # a decoded press is delivered within this; also past its cooldown (3 s)
                got = self.bodies(device)
                self.assertLessEqual(len(got) - before, 1, "one press became more than one event")
                if len(got) > before:
                    decoded += 1
                    self.assertEqual(got[-1]["type"], "doorbell.pressed")
                    self.assertEqual(got[-1]["data"]["code"], f"{code:06x}")
                rig.log(f"press at T={unit} µs: {timing}, {'delivered' if len(got) > before else 'not decoded'}")
            rig.log(f"T={unit} µs: {decoded}/{PRESSES_PER_UNIT} presses decoded and delivered")

    def test_3_chime_relay_pulse(self):
        """`gpio_pulse` drives the relay line active for duration_ms, then releases it: seen on the
        chip's own value of that line (sampled every ~1 ms in the guest while it is held)."""
        runs, pid, restarts = self.status()["actions"][0]["runs"], self.main_pid(), self.restarts()
        watch = f"python3 /rig/bin/gpio_sim.py watch {self.sysfs}/sim_gpio{RELAY_LINE}/value --seconds 6"
        out = self.g.sh(f"{watch} > /tmp/relay.json &\nsleep 1\nagentctl inject press --device front-door\nwait\ncat /tmp/relay.json", 60)
        seen = json.loads(out.strip().splitlines()[-1])
        rig.log(f"relay line: {seen}")
        levels = [level for _, level in seen["changes"]]
        self.assertEqual(levels, ["0", "1", "0"], f"idle low, one pulse, low again: {seen}")
        held = seen["changes"][2][0] - seen["changes"][1][0]
        # The sampler sees each change at most one sample gap late: the pulse lasts at least the
        # configured length (less that gap) and ends well before twice it.
        self.assertGreaterEqual(held, CHIME_MS - seen["max_gap_ms"], seen)
        self.assertLess(held, 2 * CHIME_MS, seen)
        s = self.wait_status("the chime run counted", lambda s: s["actions"][0]["runs"] == runs + 1)
        self.assertEqual(s["actions"][0]["failures"], 0, s["actions"])
        self.assertEqual((self.main_pid(), self.restarts()), (pid, restarts), "the agent restarted: its counters were reset")

    def test_4_chip_vanishes_and_returns(self):
        """The chip goes away under the running agent: the receiver is a `missing` radio and the
        relay's failure a problem in agentctl status; the agent neither crashes nor stops, events
        still flow (an injected press is delivered). The chip returns (with a new gpiochip number):
        the receiver takes its line again, the chime works, and the gateway is healthy again."""
        pid = self.main_pid()
        restarts = self.restarts()
        self.chip_down()
        s = self.wait_status("the receiver reported missing", lambda s: self.ook(s)["state"] == "missing")
        self.assertIn(f'no GPIO chip labelled "{CHIP}"', self.ook(s)["last_error"])
        self.assertEqual(s["health"], "degraded")
        self.assertTrue(any(p.startswith("radio ook missing") for p in s["problems"]), s["problems"])
        before = len(self.bodies("front-door"))
        failures = s["actions"][0]["failures"]
        self.g.sh("agentctl inject press --device front-door")
        rig.wait_for("the injected press delivered without the chip", 60, lambda: len(self.bodies("front-door")) > before, 1.0)
        s = self.wait_status("the relay failure recorded", lambda s: s["actions"][0]["failures"] == failures + 1)
        self.assertIn(f'gpio_pulse: no GPIO chip labelled "{CHIP}"', s["actions"][0]["last_error"])
        self.assertTrue(any(p.startswith("action chime: gpio_pulse") for p in s["problems"]), s["problems"])
        self.assertEqual(self.g.sh("systemctl is-active doorbell-agent").strip(), "active")
        self.assertEqual(self.main_pid(), pid, "the agent restarted")
        self.assertEqual(self.restarts(), restarts)

        self.chip_up()
        # The retry backs off (full jitter, 1 s doubling to 60 s): a minute and a half is enough.
        self.wait_status("the receiver running again", lambda s: self.ook(s)["state"] == "running", 120)
        before = len(self.bodies("front-door"))
        # The line works again: an injected press rings the chime, and its old failure is no longer a
        # problem (it stayed one, and the gateway "degraded", for good before).
        runs = self.status()["actions"][0]["runs"]
        time.sleep(3.5)  # past the cooldown of the press before: this one is forwarded and rings
        self.g.sh("agentctl inject press --device front-door")
        rig.wait_for("the press delivered after the chip returned", 60, lambda: len(self.bodies("front-door")) > before, 1.0)
        s = self.wait_status("the chime ran again", lambda s: s["actions"][0]["runs"] == runs + 1)
        self.assertEqual(s["actions"][0]["failures"], failures + 1, s["actions"])
        self.assertEqual(s["health"], "ok", s["problems"])
        self.assertEqual(self.main_pid(), pid, "the agent restarted")

    def test_5_a_press_decoded_from_the_line_is_one_event(self):
        """A whole EV1527 press (sync, 24 bits, DECODE_WORDS words, as the decoder expects it)
        played on the receiver line at time units of milliseconds, with max_time_unit_us raised:
        the agent decodes it from the kernel's edges, and it arrives at the HTTPS receiver as
        exactly one event, HMAC-verified, with the code sent, and rings the chime once — the
        repeats of one press are one press. Every press the guest drove valid at DECODE_UNIT (two
        consecutive words whose levels all landed within T/2: gpio_sim.py's clean_run) decodes; the sweep's
        other units are measured and logged (README: GPIO on a real kernel). Runs on its own too (it
        installs the udev rule and its config itself)."""
        self.install_udev_rule()
        devices = [(f"slow{u}-{i}", code_for(u, i)) for u in DECODE_SWEEP
                   for i in range(DECODE_PRESSES + (DECODE_EXTRA if u == DECODE_UNIT else 0))]
        self.configure(devices, ook_options=f"max_time_unit_us = {DECODE_MAX_UNIT}\n")
        self.wait_status("the receiver line taken", lambda s: self.ook(s)["state"] == "running")
        # Waiting this long after a press's event shows that no second one follows: past the
        # repeat gap (448 T at the setting, 2.7 s) and the chime's run.
        settle = 448 * DECODE_MAX_UNIT / 1e6 + 1.5
        results, valid_missed, valid_at_decode_unit, decoded_at_decode_unit = {}, [], 0, 0
        for unit in DECODE_SWEEP:
            decoded = 0
            # At DECODE_UNIT a loaded host may spoil a press on the line itself (its levels stretched
            # by whole time units): up to DECODE_EXTRA more presses until one was driven valid.
            attempts = DECODE_PRESSES + (DECODE_EXTRA if unit == DECODE_UNIT else 0)
            for i in range(attempts):
                if unit == DECODE_UNIT and i >= DECODE_PRESSES and (valid_at_decode_unit or decoded_at_decode_unit):
                    break
                device, code = f"slow{unit}-{i}", code_for(unit, i)
                before, runs = len(self.bodies(device)), self.status()["actions"][0]["runs"]
                timing = self.press(code, unit, repeats=DECODE_WORDS)
                try:
                    arrived = rig.wait_for("the press delivered", 15, lambda: len(self.bodies(device)) > before, 0.5)
                except TimeoutError:
                    arrived = False  # not decoded: counted, and asserted for DECODE_UNIT below
                time.sleep(settle)
                got = self.bodies(device)[before:]
                rings = self.status()["actions"][0]["runs"] - runs
                rig.log(f"slow press at T={unit} µs: {timing}; {len(got)} event(s), {rings} ring(s)"
                        + (f", T heard {got[0]['data'].get('time_unit_us')} µs" if got else ""))
                # Never ring twice: whatever the line did, one press is at most one event.
                self.assertLessEqual(len(got), 1, f"one press became {len(got)} events: {got}")
                self.assertEqual(rings, len(got), "one ring per delivered press, none for a press not decoded")
                if arrived:
                    decoded += 1
                    decoded_at_decode_unit += unit == DECODE_UNIT
                    self.assertEqual(got[0]["type"], "doorbell.pressed")
                    self.assertEqual(got[0]["data"]["code"], f"{code:06x}")
                # Two consecutive clean words (the decoder's confirmation; a damaged word between
                # resets it) make a valid press on the line.
                if unit == DECODE_UNIT and timing["clean_run"] >= 2:
                    valid_at_decode_unit += 1
                    if not arrived:
                        valid_missed.append(timing)
            results[unit] = f"{decoded}/{i + 1}"
            rig.log(f"slow press T={unit} µs: {decoded}/{i + 1} decoded, each one event")
        self.assertEqual(valid_missed, [], f"valid presses at T={DECODE_UNIT} µs not decoded; decoded per T: {results}")
        # clean_run is stricter than the decoder (CI, 2026-11-28: 5 of 6 presses at 4 ms decoded, none
        # with clean_run 2), so a decoded press proves the path as well as a clean one would.
        if not valid_at_decode_unit and not decoded_at_decode_unit:
            why = (f"the guest drove no valid press at T={DECODE_UNIT} µs in {DECODE_PRESSES + DECODE_EXTRA} tries "
                   f"and decoded none (every word had a level off by T/2 or more: the host is too loaded to keep "
                   f"the guest's time); decoded per T: {results}")
            if self.g.slowness() > 1:
                # The emulated board under a loaded host (2026-11-27, load 4-9: p90 level errors of
                # 2-3 T, no clean word in 21 presses). The PC guest, whose time keeps, must decode.
                self.skipTest(why)
            self.fail(why)
        self.assertEqual(self.status()["health"], "ok", self.status()["problems"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
