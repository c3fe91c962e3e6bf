#!/usr/bin/env python3
"""Reference decodes of Eddystone adverts with PyPI's beacontools (an independent parser built on
`construct`), for the agent's differential test.

Input: JSON lines {"data_hex": "<AD structures>"}.
Output: one JSON line per input: {"frame": "uid" | "eid" | "tlm" | "etlm" | "url" | null, ...fields}
with namespace/instance (hex), tx_power, eid (hex), voltage, temperature, adv_count,
seconds_since_boot (as beacontools names them: the raw 0.1 s count), url."""
import json
import sys

from beacontools import (parse_packet, EddystoneUIDFrame, EddystoneURLFrame, EddystoneTLMFrame,
                         EddystoneEncryptedTLMFrame, EddystoneEIDFrame)


def decode(data: bytes) -> dict:
    try:
        f = parse_packet(data)
    except Exception as e:  # the reference failing on an input is itself a finding
        return {"frame": None, "exception": type(e).__name__}
    if isinstance(f, EddystoneUIDFrame):
        return {"frame": "uid", "namespace": f.namespace, "instance": f.instance, "tx_power": f.tx_power}
    if isinstance(f, EddystoneEIDFrame):
        return {"frame": "eid", "eid": f.eid.hex(), "tx_power": f.tx_power}
    if isinstance(f, EddystoneTLMFrame):
        return {"frame": "tlm", "voltage": f.voltage, "temperature": f.temperature,
                "adv_count": f.advertising_count, "seconds_since_boot": f.seconds_since_boot}
    if isinstance(f, EddystoneEncryptedTLMFrame):
        return {"frame": "etlm"}
    if isinstance(f, EddystoneURLFrame):
        return {"frame": "url", "url": f.url, "tx_power": f.tx_power}
    return {"frame": None}


def main():
    for line in open(sys.argv[1]):
        if line.strip():
            print(json.dumps(decode(bytes.fromhex(json.loads(line)["data_hex"]))))


if __name__ == "__main__":
    main()
