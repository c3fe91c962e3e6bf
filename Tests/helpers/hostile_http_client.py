#!/usr/bin/env python3
"""Hostile HTTP/1.1 clients against doorbell-cloud serve (tests only; 127.0.0.1).

  hostile_http_client.py --port N --ca ca.pem MODE [--count C] [--seconds S]

Modes (each prints one JSON line on stdout; `stall-body` prints {"sent": true} first):
  declare-length  POST /events declaring content-length 99999999999, no body; {"status": S|null, "elapsed": T}
  stall-body      POST /events declaring 1000 bytes, sends 10, stalls; {"closed": bool, "elapsed": T}
  half-headers    half a request head, then nothing; {"closed": bool, "elapsed": T}
  idle            C TLS connections that send nothing; {"closed": K, "elapsed": T} (K closed by the server)
  cap             C idle TLS connections, then one more; {"extra_closed": bool, "held_open": K}
  chunked         POST /events with a 1 MiB body sent chunked (no content-length), stopping once
                  the server answers; {"status": S|null, "body": the answer's JSON or null}
Every wait is bounded by --seconds (default 30).
"""
import argparse, json, select, socket, ssl, sys, time


def connect(args):
    raw = socket.create_connection(("127.0.0.1", args.port), timeout=args.seconds)
    ctx = ssl.create_default_context(cafile=args.ca)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def closed_within(sock, seconds):
    """Reads until EOF (or a reset); True if that happened within `seconds`."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except (ssl.SSLError, OSError):
            return True
    return False


def head(length):
    return (f"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {length}\r\n\r\n").encode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("mode", choices=["declare-length", "stall-body", "half-headers", "idle", "cap", "chunked"])
    args = p.parse_args()
    started = time.monotonic()
    out = {}
    if args.mode == "declare-length":
        s = connect(args)
        s.sendall(head(99999999999))
        s.settimeout(args.seconds)
        try:
            data = s.recv(4096)
            out["status"] = int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else None
        except (socket.timeout, ssl.SSLError, OSError, ValueError, IndexError):
            out["status"] = None
    elif args.mode == "stall-body":
        s = connect(args)
        s.sendall(head(1000) + b'{"id":"019')
        print(json.dumps({"sent": True}), flush=True)
        out["closed"] = closed_within(s, args.seconds)
    elif args.mode == "half-headers":
        s = connect(args)
        s.sendall(b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        out["closed"] = closed_within(s, args.seconds)
    elif args.mode == "idle":
        socks = [connect(args) for _ in range(args.count)]
        deadline = time.monotonic() + args.seconds
        open_socks = list(socks)
        while open_socks and time.monotonic() < deadline:
            readable, _, _ = select.select(open_socks, [], [], 0.2)
            for s in readable:
                try:
                    if s.recv(4096) == b"":
                        open_socks.remove(s)
                except (ssl.SSLError, OSError):
                    open_socks.remove(s)
        out["closed"] = len(socks) - len(open_socks)
    elif args.mode == "cap":
        socks = [connect(args) for _ in range(args.count)]
        try:
            extra = connect(args)
            out["extra_closed"] = closed_within(extra, 5)
        except (ssl.SSLError, OSError):
            out["extra_closed"] = True
        out["held_open"] = sum(1 for s in socks if not closed_within(s, 0.05))
    elif args.mode == "chunked":
        s = connect(args)
        s.sendall(b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                  b"transfer-encoding: chunked\r\n\r\n")
        chunk = b"a" * 16384
        answer = b""
        try:
            for _ in range(64):  # 1 MiB at most
                if select.select([s], [], [], 0)[0]:
                    break  # the server answered before the whole body: stop sending
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            else:
                s.sendall(b"0\r\n\r\n")
        except (ssl.SSLError, OSError):
            pass  # the server may close while we send; its answer may still be readable
        s.settimeout(args.seconds)
        try:
            while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) == 0:
                data = s.recv(65536)
                if not data:
                    break
                answer += data
        except (socket.timeout, ssl.SSLError, OSError):
            pass
        out["status"] = int(answer.split(b" ")[1]) if answer.startswith(b"HTTP/1.1 ") else None
        body = answer.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in answer else b""
        try:
            out["body"] = json.loads(body.split(b"\n")[0]) if body else None
        except ValueError:
            out["body"] = body.decode("utf-8", "replace")
    out["elapsed"] = round(time.monotonic() - started, 3)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
