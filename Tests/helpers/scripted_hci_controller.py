#!/usr/bin/env python3
"""A minimal scripted HCI controller over H4/TCP, for what Bumble cannot arrange: several events
in one write. Answers every command with a Command Complete (status 0; version 5.0, no extended
scanning). The answer to LE Set Scan Enable goes out in the same write as --reports LE
Advertising Report events (one non-connectable advert each, distinct addresses), so a host that
reads them in one read(2) must keep the packets that follow the answer it waited for.

Writes {"port": N} to --ready-file once listening; serves one connection; exits after --max-seconds.
"""
import argparse, json, os, socket, struct, time

p = argparse.ArgumentParser()
p.add_argument("--ready-file", required=True)
p.add_argument("--reports", type=int, default=5)
p.add_argument("--max-seconds", type=float, default=60)
args = p.parse_args()

RETURN = {
    0x1001: bytes([0x09, 0x00, 0x00, 0x09, 0x5F, 0x00, 0x00, 0x00]),  # HCI 5.0, manufacturer 0x005F
    0x1002: bytes(64),  # no LE extended scan commands
}


def command_complete(opcode):
    params = bytes([0x01]) + struct.pack("<H", opcode) + bytes([0x00]) + RETURN.get(opcode, b"")
    return bytes([0x04, 0x0E, len(params)]) + params


def advertising_report(i):
    address = bytes([i & 0xFF, 0x44, 0x33, 0x22, 0x11, 0xC0])  # C0:11:22:33:44:ii, little-endian
    data = bytes([0x02, 0x01, 0x06, 0x05, 0xFF, 0xFF, 0xFF, i & 0xFF, 0x01])
    params = bytes([0x02, 0x01, 0x03, 0x00]) + address + bytes([len(data)]) + data + bytes([0xC4])  # RSSI -60
    return bytes([0x04, 0x3E, len(params)]) + params


server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
with open(args.ready_file + ".tmp", "w") as f:
    json.dump({"port": server.getsockname()[1]}, f)
os.rename(args.ready_file + ".tmp", args.ready_file)
deadline = time.monotonic() + args.max_seconds
server.settimeout(max(0.1, deadline - time.monotonic()))
try:
    conn, _ = server.accept()
except socket.timeout:
    raise SystemExit(0)
buffer = b""
while time.monotonic() < deadline:
    conn.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        chunk = conn.recv(4096)
    except socket.timeout:
        break
    if not chunk:
        break
    buffer += chunk
    while len(buffer) >= 4 and buffer[0] == 0x01 and len(buffer) >= 4 + buffer[3]:
        opcode = struct.unpack("<H", buffer[1:3])[0]
        buffer = buffer[4 + buffer[3]:]
        out = command_complete(opcode)
        if opcode == 0x200C:
            out += b"".join(advertising_report(i) for i in range(args.reports))
        conn.sendall(out)
    if buffer and buffer[0] != 0x01:
        buffer = b""  # not a command: ignore
