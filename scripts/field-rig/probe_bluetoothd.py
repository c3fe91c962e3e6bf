"""Evidence for issue #15's bluetoothd question: presses through hci0 while BlueZ, beside the
agent, scans and powers the controller off and on. Prints what was pressed, what arrived and
what `agentctl status` said; the numbers are in the board READMEs. Not a test (test_field.py's
test_3b is): `probe_bluetoothd.py raw` shows what the shared raw channel loses.
Usage: ../../.venv/bin/python probe_bluetoothd.py [user|raw]"""
import json, os, shutil, sys, time
import rig, test_field

channel = sys.argv[1] if len(sys.argv) > 1 else "user"
d = os.path.join(rig.WORK, "probe-peers"); shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
presses = [{"t": 2.0 + 4 * i, "id": "button", "action": "press", "duration": 1.0, "event": "press"} for i in range(10)]
scenario = {"name": "bluetoothd", "advertisers": [{"id": "button", "kind": "bthome_button", "address": "C0:11:22:33:44:02", "battery": 90,
                                                   "initial_packet_id": 1}], "events": presses}
rcv = rig.Receiver(d)
radio = rig.VirtualRadio(d, scenario, name="bt-radio")
g = rig.Guest("probe")
shutil.copy(test_field.DEB, g.path("current.deb")); shutil.copy(rcv.ca, g.path("ca.pem"))
actions = [(6, "bluetoothctl --timeout 4 scan on"), (14, "bluetoothctl scan off"), (22, "bluetoothctl power off"), (28, "bluetoothctl power on")]
try:
    g.boot()
    print(g.sh(f'''dpkg -i /rig/current.deb >/dev/null
install -m 0640 -g doorbell-agent /rig/ca.pem /etc/doorbell-agent/rig-ca.pem
echo "{rig.SECRET}" > /etc/doorbell-agent/gateway.whsec; chgrp doorbell-agent /etc/doorbell-agent/gateway.whsec; chmod 0640 /etc/doorbell-agent/gateway.whsec
date -s @{time.time():.0f}; mkdir -p /run/systemd/timesync; touch /run/systemd/timesync/synchronized
cat > /etc/doorbell-agent/agent.toml <<CONF
gateway_id = "gw-probe"
[radio.ble]
transport = "hci"
device = "hci0"
channel = "{channel}"
[[device]]
id = "side-door"
radio = "ble"
match = {{ address = "C0:11:22:33:44:02" }}
[tracker.button]
cooldown_ms = 500
[uplink]
url = "{rcv.url}"
ca_file = "/etc/doorbell-agent/rig-ca.pem"
hmac_secret_file = "/etc/doorbell-agent/gateway.whsec"
CONF
systemctl stop doorbell-agent
modprobe hci_vhci; systemd-run --unit rig-vhci python3 /rig/bin/vhci_bridge.py --port {radio.port} --ready-file /run/rig-vhci
for i in $(seq 1 60); do hciconfig hci0 2>/dev/null | grep -q UP && break; sleep 1; done; hciconfig hci0; bluetoothctl show | head -5
systemctl start doorbell-agent''', 120))
    time.sleep(5)
    print(g.run("agentctl status; journalctl -u doorbell-agent --no-pager | tail -8", 30, check=False)[1])
    start = rig.wait_for("scenario start", 60, lambda: next((t["wall"] for t in radio.truth() if t["action"] == "scenario_start"), None), 0.2)
    for at, cmd in actions:
        time.sleep(max(0, start + at - time.time()))
        rc, out = g.run(cmd + " 2>&1 | tail -3", 30, check=False)
        print(f"t={time.time() - start:5.1f} {cmd}: rc {rc} {out.strip()[-200:]!r}")
    time.sleep(max(0, start + 46 - time.time()))
    truth = [(t["packet_id"], round(t["t"], 1)) for t in radio.truth() if t["action"] == "press"]
    got = [b["data"]["packet_id"] for b in rcv.verified_bodies()]
    print("pressed :", truth)
    print("received:", got)
    print("lost    :", [p for p in truth if p[0] not in got])
    print(g.run("agentctl status; journalctl -u doorbell-agent --no-pager | grep -v uplink | tail -25; journalctl -u bluetooth --no-pager | tail -15", 30, check=False)[1])
finally:
    g.shutdown(); radio.stop(); rcv.stop()
