"""The field rig with chrony instead of timesyncd (issue #27): chrony leaves no flag file, so the
agent must read the kernel's NTP state (adjtimex) under the shipped unit. The guest boots with a
stale clock; chrony's server (an NTP server on the host, 10.0.2.2) stays silent at first: the
press is held, and stays held; then the server answers, chrony synchronizes, and the hold lifts.

Its own guest image (build-rootfs.sh RIG_NTP=chrony), one boot; run by scripts/field-rig/run.sh.
"""
import os
import shutil
import time
import unittest

import rig
from test_field import DEB

CHRONY_CONF = """# The field rig's chrony (test_chrony.py): one server, the host; step the stale clock at once.
server 10.0.2.2 port {port} iburst minpoll -2 maxpoll 0
makestep 1 -1
driftfile /var/lib/chrony/chrony.drift
# As Debian's own chrony.conf: with it chronyd clears the kernel's "unsynchronized" flag once
# synchronized (the kernel's 11-minute mode); without it the flag stays set and the hold on.
rtcsync
"""


class ChronyImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(rig.WORK, "chrony-peers")
        shutil.rmtree(cls.dir, ignore_errors=True)
        os.makedirs(cls.dir)
        cls.ntp = rig.NTPServer()
        cls.receiver = rig.Receiver(cls.dir)
        cls.g = rig.Guest("chrony", rtc_base="2025-06-01T08:00:00", ntp="chrony")
        shutil.copy(DEB, cls.g.path("current.deb"))
        shutil.copy(cls.receiver.ca, cls.g.path("ca.pem"))
        with open(cls.g.path("chrony.conf"), "w") as f:
            f.write(CHRONY_CONF.format(port=cls.ntp.port))
        cls.g.boot()

    @classmethod
    def tearDownClass(cls):
        cls.g.shutdown()
        cls.receiver.stop()
        cls.ntp.stop()

    def status(self):
        return rig.agent_status(self.g)

    def wait_status(self, what, pred, seconds=60):
        def check():
            s = self.status()
            return s if s is not None and pred(s) else None
        return rig.wait_for(what, seconds, check, 1.0)

    def test_hold_lifts_only_once_chrony_is_synchronized(self):
        ntp = self.g.sh("dpkg-query -W -f='${Status} ${Version}' chrony; echo; dpkg-query -W -f='${db:Status-Status}' systemd-timesyncd 2>/dev/null | grep -qx installed || echo timesyncd-absent")
        self.assertIn("install ok installed", ntp)
        self.assertIn("timesyncd-absent", ntp)
        self.g.sh(f'''
install -m 0644 /rig/chrony.conf /etc/chrony/chrony.conf
systemctl restart chrony
dpkg -i /rig/current.deb
install -m 0640 -g doorbell-agent /rig/ca.pem /etc/doorbell-agent/rig-ca.pem
echo "{rig.SECRET}" > /etc/doorbell-agent/gateway.whsec
chgrp doorbell-agent /etc/doorbell-agent/gateway.whsec; chmod 0640 /etc/doorbell-agent/gateway.whsec
useradd --system -G doorbell-agent rig-installer
printf '#!/bin/sh\nexec sleep infinity\n' > /usr/local/bin/quiet-radio; chmod 0755 /usr/local/bin/quiet-radio
cat > /etc/doorbell-agent/agent.toml <<EOF
gateway_id = "gw-chrony-rig"
[radio.rtl433]
binary = "/usr/local/bin/quiet-radio"
[[device]]
id = "front-door"
match = {{ code = 1 }}
[uplink]
url = "{self.receiver.url}"
ca_file = "/etc/doorbell-agent/rig-ca.pem"
hmac_secret_file = "/etc/doorbell-agent/gateway.whsec"
retry_initial_ms = 500
EOF
chgrp doorbell-agent /etc/doorbell-agent/agent.toml; chmod 0640 /etc/doorbell-agent/agent.toml
systemctl restart doorbell-agent
''', 180)
        s = self.wait_status("the agent answers", lambda s: True)
        self.assertFalse(s["clock"]["synchronized"], s["clock"])
        self.assertIn("the kernel reports no NTP synchronization", s["clock"]["reason"], "adjtimex must be readable under the unit")
        self.g.sh("agentctl inject press --device front-door")
        self.wait_status("delivery held for the clock", lambda s: s["clock"]["delivery_held"])
        # chrony runs, its server is silent: the hold stays on.
        time.sleep(20)
        s = self.status()
        self.assertTrue(s["clock"]["delivery_held"], s["clock"])
        self.assertEqual(self.receiver.verified_bodies(), [], "nothing may leave with an unsynchronized clock")
        self.assertIn("Not synchronised", self.g.sh("chronyc tracking | grep 'Leap status'"))

        self.ntp.serving.set()
        rig.wait_for("chrony synchronized", 120, lambda: "Normal" in self.g.run("chronyc tracking | grep 'Leap status'", 30, check=False)[1], 2.0)
        s = self.wait_status("the agent sees the kernel synchronized", lambda s: s["clock"]["synchronized"], 90)
        self.assertIn("the kernel reports NTP synchronization", s["clock"]["reason"])
        self.assertIn("absent", self.g.sh("test -e /run/systemd/timesync/synchronized && echo present || echo absent"))
        rig.wait_for("the held press delivered", 90, lambda: self.receiver.verified_bodies(), 1.0)
        b = self.receiver.verified_bodies()
        self.assertEqual(len(b), 1, b)
        self.assertTrue(b[0]["clock_corrected"], b[0])
        rig.log(f"chrony: {self.ntp.answered} NTP answers")


if __name__ == "__main__":
    unittest.main(verbosity=2, failfast=False)
