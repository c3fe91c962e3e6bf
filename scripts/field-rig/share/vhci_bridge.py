#!/usr/bin/env python3
"""In the guest: makes a Bumble controller on the host appear to the kernel as hciN.

/dev/vhci speaks H4 one packet per read/write; the host's controller speaks H4 as a byte stream
over TCP (10.0.2.2 is the host under user-mode networking). Stdlib only. Exits when either side
closes; --max-seconds bounds it.
"""
import argparse, os, select, signal, socket, sys, time

p = argparse.ArgumentParser()
p.add_argument("--host", default="10.0.2.2")
p.add_argument("--port", type=int, required=True)
p.add_argument("--max-seconds", type=float, default=1800)
p.add_argument("--ready-file")
a = p.parse_args()
signal.alarm(int(a.max_seconds) + 5)

sock = socket.create_connection((a.host, a.port), timeout=20)
sock.settimeout(None)
vhci = os.open("/dev/vhci", os.O_RDWR)
os.write(vhci, bytes([0xFF, 0x00]))          # vendor packet: create a primary (BR/EDR+LE) controller
resp = os.read(vhci, 8)                       # 0xFF, opcode, index (le16)
index = resp[2] | resp[3] << 8
print(f"vhci: hci{index}", flush=True)
if a.ready_file:
    with open(a.ready_file + ".tmp", "w") as f:
        f.write(f"hci{index}\n")
    os.rename(a.ready_file + ".tmp", a.ready_file)

HEADER = {0x01: (3, 2, 1), 0x02: (4, 2, 2), 0x03: (3, 2, 1), 0x04: (2, 1, 1), 0x05: (4, 2, 2)}  # type: (header len, len offset, len size)
buf = b""
end = time.monotonic() + a.max_seconds
while time.monotonic() < end:
    r, _, _ = select.select([sock, vhci], [], [], 1.0)
    if vhci in r:
        pkt = os.read(vhci, 4096)
        if not pkt:
            break
        sock.sendall(pkt)
    if sock in r:
        data = sock.recv(65536)
        if not data:
            break
        buf += data
        while buf:
            t = buf[0]
            if t not in HEADER:
                sys.exit(f"vhci: bad H4 type {t:#x} from the controller")
            hl, off, size = HEADER[t]
            if len(buf) < 1 + hl:
                break
            n = int.from_bytes(buf[1 + off:1 + off + size], "little")
            if t == 0x05:
                n &= 0x3FFF
            if len(buf) < 1 + hl + n:
                break
            os.write(vhci, buf[:1 + hl + n])
            buf = buf[1 + hl + n:]
print("vhci: closed", flush=True)
