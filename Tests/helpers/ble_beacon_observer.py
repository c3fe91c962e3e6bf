#!/usr/bin/env python3
"""A host-facing virtual controller (H4 over TCP, from ble/virtual_radio.py beside this file) plus
a second virtual controller on the same Bumble link that only scans: every advertisement the
agent's controller puts on the air is written as a JSON line to --out, so a test can check the
base station's own iBeacon byte for byte.

  ble_beacon_observer.py --ready-file R --out ADVERTS.jsonl --max-seconds 30
Ready file: {"port": N}. Exits after --max-seconds."""
import argparse, asyncio, importlib.util, json, logging, os, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "virtual_radio", os.path.join(HERE, "ble", "virtual_radio.py"))
vr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vr)

from bumble import hci, ll  # noqa: E402
from bumble.controller import Controller  # noqa: E402
from bumble.device import Device  # noqa: E402
from bumble.host import Host  # noqa: E402
from bumble.transport.common import AsyncPipeSink  # noqa: E402


async def run(a):
    loop = asyncio.get_running_loop()
    link = vr.HarnessLink()
    air = vr.Air(1, default_rssi=-50)
    host_facing = vr.HostFacingController("host-facing", link=link, public_address="F0:F0:F0:00:00:01",
                                          air=air, loop_t0=loop.time())
    server = vr.H4TcpServer(host_facing, "127.0.0.1", 0, True, lambda what, **kw: None)

    # Stock Bumble's legacy advertiser puts only ADV_IND on the air (virtual_radio README,
    # gotcha 9) and reads the interval in ms; its receivers only take ADV_IND and AdvExtInd PDUs.
    # A real controller sends what the host asked for: a non-connectable advert (carried here as
    # Bumble's generic AdvExtInd, as the harness's own advertisers do) every interval × 0.625 ms.
    legacy = host_facing.le_legacy_advertiser
    def send_advertising_data():
        if not legacy.enabled:
            return
        pdu = ll.AdvExtInd if legacy.advertising_type == 3 else ll.AdvInd
        host_facing.send_advertising_pdu(pdu(advertiser_address=legacy.address, data=legacy.advertising_data))
    def on_timer():
        send_advertising_data()
        legacy.timer_handle = asyncio.get_running_loop().call_later(legacy.advertising_interval_min * 0.000625, on_timer)
    legacy.send_advertising_data = send_advertising_data
    legacy._on_timer_fired = on_timer

    observer_ctrl = Controller("observer", link=link, public_address="F0:F0:F0:00:00:02")
    observer = Device(name="observer", address=hci.Address("F0:F0:F0:00:00:02"),
                      host=Host(observer_ctrl, AsyncPipeSink(observer_ctrl)))
    await observer.power_on()
    out = open(a.out, "a", buffering=1)

    def on_advertisement(adv):
        out.write(json.dumps({"wall": time.time(), "address": str(adv.address).split("/")[0],
                              "data_hex": bytes(adv.data_bytes).hex()}) + "\n")

    observer.on("advertisement", on_advertisement)
    await observer.start_scanning(active=False, filter_duplicates=False)
    port = await server.start()
    with open(a.ready_file + ".tmp", "w") as f:
        json.dump({"port": port, "pid": os.getpid()}, f)
    os.replace(a.ready_file + ".tmp", a.ready_file)
    await asyncio.sleep(a.max_seconds)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-seconds", type=float, default=30)
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    return asyncio.run(run(a))


if __name__ == "__main__":
    sys.exit(main())
