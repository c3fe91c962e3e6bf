#!/usr/bin/env python3
"""The plain Python peers `make bench` holds the agent's uplink against (issue #28), same receiver,
same run. CPython stdlib (http.client, ssl, hmac, sqlite3) plus `cryptography` (pinned in
requirements.txt) for Ed25519.

  drain OUTBOX URL CA WHSEC KEY   POST every body of a prefilled outbox (doorbell-bench prefill)
                                  over one kept-alive HTTPS connection, signed before the clock
                                  starts (both signatures), storing nothing: {"events_per_s", ...}
  presses OUTBOX URL CA WHSEC KEY N INTERVAL
                                  one press every INTERVAL s: sign (both signatures) + POST, not
                                  durable; prints {"t_press": [...]} (wall times) for the bench
                                  to match with the receiver's log
  outbox DIR N                    a Python sqlite3 outbox (WAL, synchronous=FULL, one transaction
                                  per press, a row deleted at its delivery): bytes written per
                                  press from /proc/self/io
  radio N INTERVAL FILE           an rtl_433 stand-in for the agent: N presses, one every INTERVAL
                                  s, two codes alternating, the wall time of each line to FILE
"""
import base64, hashlib, hmac, http.client, json, os, sqlite3, ssl, sys, time, urllib.parse


def signer(whsec_file, key_file):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    secret = base64.b64decode(open(whsec_file).read().strip()[len("whsec_"):])
    key = Ed25519PrivateKey.from_private_bytes(open(key_file, "rb").read())

    def sign(event_id, body):
        ts = str(int(time.time()))
        content = f"{event_id}.{ts}.".encode() + body
        v1 = base64.b64encode(hmac.new(secret, content, hashlib.sha256).digest()).decode()
        v1a = base64.b64encode(key.sign(content)).decode()
        return {"Content-Type": "application/json", "webhook-id": event_id, "webhook-timestamp": ts,
                "webhook-signature": f"v1,{v1} v1a,{v1a}", "doorbell-gateway-id": "gw-bench", "User-Agent": "uplink-peer"}
    return sign


def rows(outbox):
    db = sqlite3.connect(outbox)
    return db.execute("SELECT id, body FROM events ORDER BY sequence").fetchall()


def connect(url, ca):
    u = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=ca)
    return http.client.HTTPSConnection(u.hostname, u.port, context=ctx), u.path


def post(conn, path, body, headers):
    conn.request("POST", path, body=body, headers=headers)
    r = conn.getresponse()
    r.read()
    if not 200 <= r.status < 300:
        sys.exit(f"uplink_peer: the receiver answered {r.status}")


def drain(outbox, url, ca, whsec, key):
    sign = signer(whsec, key)
    s0 = time.process_time()
    signed = [(bytes(body), sign(event_id, bytes(body))) for event_id, body in rows(outbox)]
    sign_s = time.process_time() - s0
    conn, path = connect(url, ca)
    t0, c0 = time.monotonic(), time.process_time()
    for body, headers in signed:
        post(conn, path, body, headers)
    seconds = time.monotonic() - t0
    cpu = time.process_time() - c0
    print(json.dumps({"events": len(signed), "seconds": seconds, "events_per_s": len(signed) / seconds,
                      "cpu_us_per_event": cpu * 1e6 / len(signed), "sign_us_per_event": sign_s * 1e6 / len(signed)}))


def presses(outbox, url, ca, whsec, key, n, interval):
    sign = signer(whsec, key)
    events = rows(outbox)[:n]
    conn, path = connect(url, ca)
    started = time.time()  # what the receiver logs from here on is the peer's
    post(conn, path, bytes(events[0][1]), sign(events[0][0], bytes(events[0][1])))  # the handshake, as the agent's kept-alive connection
    stamps, direct = [], []
    for event_id, body in events[1:]:
        time.sleep(interval)
        t = time.time()
        post(conn, path, bytes(body), sign(event_id, bytes(body)))
        stamps.append(t)
        direct.append(time.time() - t)
    print(json.dumps({"t_start": started, "t_press": stamps, "press_to_2xx_s": direct}))


def write_bytes():
    for line in open("/proc/self/io"):
        if line.startswith("write_bytes:"):
            return int(line.split()[1])


def outbox_peer(directory, n):
    path = os.path.join(directory, "peer-outbox.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS outbox (id TEXT PRIMARY KEY, sequence INTEGER NOT NULL, body BLOB NOT NULL)")
    body = b'{"type":"doorbell.pressed","device":{"id":"front-door","name":"Front door","radio":"rtl433"}}' + b" " * 240
    before = write_bytes()
    for i in range(n):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO outbox VALUES (?, ?, ?)", (f"0190{i:012x}-7abc-8def-0123456789ab", i, body))
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM outbox WHERE id = ?", (f"0190{i:012x}-7abc-8def-0123456789ab",))
        db.execute("COMMIT")
    print(json.dumps({"bytes_per_press": (write_bytes() - before) / n}))


def radio(n, interval, file):
    with open(file, "w") as out:
        for i in range(n):
            time.sleep(interval)
            code = 0x5A3C91 + i % 2
            t = time.time()
            sys.stdout.write(f'{{"model" : "EV1527", "code" : {code}}}\n')
            sys.stdout.flush()
            out.write(f"{t}\n")
            out.flush()
    time.sleep(100000)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["drain"]:
        drain(*a[1:6])
    elif a[:1] == ["presses"]:
        presses(*a[1:6], int(a[6]), float(a[7]))
    elif a[:1] == ["outbox"]:
        outbox_peer(a[1], int(a[2]))
    elif a[:1] == ["radio"]:
        radio(int(a[1]), float(a[2]), a[3])
    else:
        sys.exit(__doc__)
