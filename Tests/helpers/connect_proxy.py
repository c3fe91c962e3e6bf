#!/usr/bin/env python3
"""A minimal HTTP CONNECT proxy on 127.0.0.1 for the uplink's proxy test (stdlib only).

Logs every CONNECT target as a line to --log; refuses targets outside loopback."""
import argparse, json, os, select, socket, threading

p = argparse.ArgumentParser()
p.add_argument("--log", required=True)
p.add_argument("--ready-file", required=True)
p.add_argument("--max-seconds", type=float, default=60)
args = p.parse_args()


def pump(a, b):
    try:
        while True:
            r, _, _ = select.select([a, b], [], [], 30)
            if not r:
                return
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return
    finally:
        a.close()
        b.close()


def handle(client):
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 8192:
        chunk = client.recv(4096)
        if not chunk:
            client.close()
            return
        head += chunk
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    method, target, _ = line.split(" ", 2)
    host, port = target.rsplit(":", 1)
    with open(args.log, "a") as f:
        f.write(json.dumps({"method": method, "target": target}) + "\n")
    if method != "CONNECT" or host not in ("127.0.0.1", "localhost", "::1"):
        client.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
        client.close()
        return
    upstream = socket.create_connection((host, int(port)))
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    pump(client, upstream)


server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(16)
tmp = args.ready_file + ".tmp"
with open(tmp, "w") as f:
    json.dump({"port": server.getsockname()[1]}, f)
os.rename(tmp, args.ready_file)
threading.Timer(args.max_seconds, lambda: os._exit(0)).start()
while True:
    c, _ = server.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
