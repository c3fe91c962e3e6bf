#!/usr/bin/env python3
"""The Python peer of `doorbell-agent replay CAPTURE.btsnoop` for `make bench`: a btsnoop capture
through the pipeline Home Assistant runs for raw adverts (what habluetooth does with an advert from a
Bluetooth proxy: bluetooth_data_tools.parse_advertisement_data_bytes into a BluetoothServiceInfoBleak,
then the integrations' parsers: ibeacon-ble, and bthome-ble with one BTHomeBluetoothDeviceData per
address, whose packet-id filter drops repeats), printing one JSON line per button event, as the
agent prints its events. The capture is read record by record (no list of it in memory), so both
sides stream. Usage: ble_replay_reference.py CAPTURE.btsnoop > events.jsonl; counts on stderr."""
import json
import logging
import struct
import sys
from datetime import datetime, timezone

logging.disable(logging.CRITICAL)
from bluetooth_data_tools import int_to_bluetooth_address, parse_advertisement_data_bytes  # noqa: E402
from bthome_ble import BTHomeBluetoothDeviceData  # noqa: E402
from habluetooth.models import BluetoothServiceInfoBleak  # noqa: E402
from ibeacon_ble import iBeaconParser  # noqa: E402

BTHOME = "0000fcd2-0000-1000-8000-00805f9b34fb"
EPOCH_OFFSET = 0x00DCDDB30F2F8000  # btsnoop counts microseconds from year 0


def records(f):
    header = f.read(16)
    if header[:8] != b"btsnoop\0":
        raise SystemExit("not a btsnoop file")
    unpack = struct.Struct(">IIIIq").unpack
    while True:
        head = f.read(24)
        if len(head) < 24:
            return
        _, included, flags, _, ts = unpack(head)
        yield flags, ts - EPOCH_OFFSET, f.read(included)


def main():
    import asyncio
    ib = iBeaconParser()
    asyncio.run(ib.async_setup())  # loads the OUI table it names vendors from, as Home Assistant does
    parsers = {}
    adverts = events = beacons = 0
    out = sys.stdout
    with open(sys.argv[1], "rb") as f:
        for flags, micros, packet in records(f):
            # Received H4 event, LE Meta, legacy advertising report.
            if not flags & 1 or len(packet) < 5 or packet[0] != 0x04 or packet[1] != 0x3E or packet[3] != 0x02:
                continue
            i, count = 5, packet[4]
            for _ in range(count):
                addr = int_to_bluetooth_address(int.from_bytes(packet[i + 2:i + 8], "little"))
                length = packet[i + 8]
                raw = packet[i + 9:i + 9 + length]
                rssi = struct.unpack("b", packet[i + 9 + length:i + 10 + length])[0]
                i += 10 + length
                adverts += 1
                name, uuids, service_data, manufacturer_data, tx_power = parse_advertisement_data_bytes(raw)
                info = BluetoothServiceInfoBleak(name=name or addr, address=addr, rssi=rssi, manufacturer_data=manufacturer_data,
                                                 service_data=service_data, service_uuids=uuids, source="replay", device=None,
                                                 advertisement=None, connectable=False, time=micros / 1e6, tx_power=tx_power)
                try:
                    if ib.parse(info) is not None:
                        beacons += 1
                except Exception:  # ibeacon-ble indexes Apple data without a length check
                    pass
                if BTHOME not in service_data:
                    continue
                parser = parsers.get(addr)
                if parser is None:
                    parser = parsers[addr] = BTHomeBluetoothDeviceData()
                try:
                    update = parser.update(info)
                except Exception:
                    continue
                for key, ev in update.events.items():
                    if not key.key.startswith("button"):
                        continue
                    events += 1
                    values = {k.key: v.native_value for k, v in update.entity_values.items()}
                    out.write(json.dumps({
                        "sequence": events, "type": "doorbell.pressed",
                        "occurred_at": datetime.fromtimestamp(micros / 1e6, timezone.utc).isoformat(),
                        "device": {"id": addr, "name": "BTHome " + addr, "radio": "ble"},
                        "data": {"button": int(key.key[7:]) - 1 if key.key != "button" else 0, "event": ev.event_type,
                                 "address": addr, "packet_id": values.get("packet_id"), "battery_pct": values.get("battery"),
                                 "rssi_db": rssi, "encrypted": parser.encryption_scheme.value != "none"},
                    }, separators=(",", ":")) + "\n")
    print(f"peer: {adverts} adverts, {beacons} iBeacon, {events} events", file=sys.stderr)


if __name__ == "__main__":
    main()
