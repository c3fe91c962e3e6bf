#!/usr/bin/env python3
"""Checks a recorded LE Secure Connections Just Works pairing (Tests/DoorbellCoreTests/Fixtures/
smp-just-works.transcript, written by SMPResponderTests) with Bumble: its SMP PDU parser reads
the air bytes, bumble.crypto (least significant octet first, as Bumble works) recomputes the
responder's confirm, both DHKey checks and the LTK, and `cryptography` checks both public keys
are on P-256. Exits 1 when anything disagrees.

    smp_reference.py [TRANSCRIPT]
"""
import os
import sys

from bumble import crypto, smp
from cryptography.hazmat.primitives.asymmetric import ec

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "DoorbellCoreTests", "Fixtures", "smp-just-works.transcript")


def main(path):
    t = {}
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            name, value = line.split()
            t[name] = bytes.fromhex(value)
    pdu = {name: smp.SMP_Command.from_bytes(value) for name, value in t.items()
           if name not in ("initiator_address", "responder_address", "dhkey", "ltk")}
    req, res = pdu["pairing_request"], pdu["pairing_response"]
    pka, pkb = pdu["public_key_initiator"], pdu["public_key_responder"]
    na, nb = pdu["random_initiator"].random_value, pdu["random_responder"].random_value
    le = lambda b: bytes(reversed(b))  # the transcript's MSB-first values → Bumble's order
    a, b, w = le(t["initiator_address"]), le(t["responder_address"]), le(t["dhkey"])
    checks = {}
    for name, key in (("initiator", pka), ("responder", pkb)):
        try:
            ec.EllipticCurvePublicNumbers(int.from_bytes(key.public_key_x, "little"), int.from_bytes(key.public_key_y, "little"),
                                          ec.SECP256R1()).public_key()
            checks[f"{name} public key on P-256"] = True
        except ValueError:
            checks[f"{name} public key on P-256"] = False
    checks["responder confirm Cb = f4(PKbx, PKax, Nb, 0)"] = \
        crypto.f4(pkb.public_key_x, pka.public_key_x, nb, bytes([0])) == pdu["pairing_confirm"].confirm_value
    mac_key, ltk = crypto.f5(w, na, nb, a, b)
    io_a = bytes([req.io_capability, req.oob_data_flag, req.auth_req])  # Bumble: LSB first
    io_b = bytes([res.io_capability, res.oob_data_flag, res.auth_req])
    checks["initiator check Ea"] = crypto.f6(mac_key, na, nb, bytes(16), io_a, a, b) == pdu["dhkey_check_initiator"].dhkey_check
    checks["responder check Eb"] = crypto.f6(mac_key, nb, na, bytes(16), io_b, b, a) == pdu["dhkey_check_responder"].dhkey_check
    checks["LTK"] = le(ltk) == t["ltk"]
    checks["responder: Just Works, SC + bonding, asks only the identity key"] = \
        (res.io_capability, int(res.auth_req), res.initiator_key_distribution, res.responder_key_distribution) == (3, 0x09, 0x02, 0)
    for name, ok in checks.items():
        print(("ok   " if ok else "FAIL ") + name)
    return all(checks.values())


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT) else 1)
