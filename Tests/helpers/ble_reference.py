#!/usr/bin/env python3
"""Reference decodes of BLE adverts with the PyPI parsers Home Assistant uses (ibeacon-ble,
bthome-ble), for the agent's differential tests and benchmark.

Input: JSON lines {"address": "C0:..", "data_hex": "<AD structures>", "bindkey_hex": optional}.
Output: one JSON line per input: {"ibeacon": {uuid, major, minor, power} | null,
"bthome": {"packet_id", "battery", "buttons": [[index, event], ...], "encrypted_ok"} | null}.
With --bench N: decode the corpus N times and print {"adverts_per_s": ...} instead."""
import argparse, json, sys, time, logging

logging.disable(logging.CRITICAL)
from bthome_ble import BTHomeBluetoothDeviceData  # noqa: E402
from habluetooth.models import BluetoothServiceInfoBleak  # noqa: E402
from ibeacon_ble import iBeaconParser  # noqa: E402


def ad_to_dicts(data):
    """AD structures → the manufacturer/service data dicts BlueZ/bleak hand to Home Assistant."""
    mfr, svc, i = {}, {}, 0
    while i < len(data):
        n = data[i]
        if n == 0 or i + 1 + n > len(data):
            break
        t, body = data[i + 1], data[i + 2:i + 1 + n]
        if t == 0xFF and len(body) >= 2:
            mfr[body[0] | body[1] << 8] = bytes(body[2:])
        elif t == 0x16 and len(body) >= 2:
            svc["0000%04x-0000-1000-8000-00805f9b34fb" % (body[0] | body[1] << 8)] = bytes(body[2:])
        i += 1 + n
    return mfr, svc


def decode(entry, ib):
    data = bytes.fromhex(entry["data_hex"])
    mfr, svc = ad_to_dicts(data)
    info = BluetoothServiceInfoBleak(name="", address=entry["address"], rssi=-60, manufacturer_data=mfr, service_data=svc,
                                     service_uuids=list(svc), source="local", device=None, advertisement=None,
                                     connectable=False, time=time.monotonic(), tx_power=None)
    out = {"ibeacon": None, "bthome": None}
    try:
        b = ib.parse(info)
    except Exception as e:  # ibeacon-ble indexes Apple data without a length check
        out["ibeacon"] = {"exception": type(e).__name__}
        b = None
    if b is not None:
        out["ibeacon"] = {"uuid": str(b.uuid).upper(), "major": b.major, "minor": b.minor, "power": b.power}
    if "0000fcd2-0000-1000-8000-00805f9b34fb" in svc:
        key = bytes.fromhex(entry["bindkey_hex"]) if entry.get("bindkey_hex") else None
        parser = BTHomeBluetoothDeviceData(bindkey=key)
        try:
            update = parser.update(info)
        except Exception as e:  # the reference crashing on an input is itself a finding
            out["bthome"] = {"exception": type(e).__name__}
            return out
        values = {k.key: v.native_value for k, v in update.entity_values.items()}
        buttons = []
        for k, ev in update.events.items():
            if k.key == "button":
                buttons.append([0, ev.event_type])
            elif k.key.startswith("button_"):
                buttons.append([int(k.key[7:]) - 1, ev.event_type])
        if values or buttons:
            # A repeated object gets numbered keys (battery_1, battery_2): the first is the device's.
            def first(k):
                return values.get(k, values.get(k + "_1"))
            out["bthome"] = {"packet_id": first("packet_id"), "battery": first("battery"),
                             "buttons": sorted(buttons), "encrypted_ok": parser.bindkey_verified if key else None}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--theengs", action="store_true", help="with --bench: TheengsDecoder's decodeBLE instead")
    a = ap.parse_args()
    entries = [json.loads(line) for line in open(a.corpus) if line.strip()]
    ib = iBeaconParser()
    import asyncio
    asyncio.run(ib.async_setup())  # loads the OUI table it names vendors from
    if a.bench and a.theengs:
        from TheengsDecoder import decodeBLE
        inputs = []
        for e in entries:
            mfr, svc = ad_to_dicts(bytes.fromhex(e["data_hex"]))
            j = {"id": e["address"], "rssi": -60}
            for cid, body in mfr.items():
                j["manufacturerdata"] = "%02x%02x" % (cid & 0xFF, cid >> 8) + body.hex()
            for u, body in svc.items():
                j["servicedatauuid"] = "0x" + u[4:8]
                j["servicedata"] = body.hex()
            inputs.append(json.dumps(j))
        t0 = time.perf_counter()
        decoded = 0
        for _ in range(a.bench):
            for j in inputs:
                if decodeBLE(j):
                    decoded += 1
        dt = time.perf_counter() - t0
        print(json.dumps({"adverts": a.bench * len(inputs), "seconds": dt, "adverts_per_s": a.bench * len(inputs) / dt,
                          "decoded_per_round": decoded // a.bench}))
        return
    if a.bench:
        t0 = time.perf_counter()
        for _ in range(a.bench):
            for e in entries:
                decode(e, ib)
        dt = time.perf_counter() - t0
        print(json.dumps({"adverts": a.bench * len(entries), "seconds": dt, "adverts_per_s": a.bench * len(entries) / dt}))
        return
    for e in entries:
        sys.stdout.write(json.dumps(decode(e, ib)) + "\n")


if __name__ == "__main__":
    main()
