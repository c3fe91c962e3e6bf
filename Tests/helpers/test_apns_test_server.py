#!/usr/bin/env python3
"""Self-test for apns_test_server.py: run it with the project's venv python; exits non-zero on failure.

Makes a throwaway CA, server certificate and ES256 key pair, starts the server as a subprocess,
and talks to it with a small h2 client (and once with curl --http2, when curl is installed).
"""
import asyncio, base64, json, os, shutil, signal, ssl, subprocess, sys, tempfile, time, uuid, datetime, ipaddress

import h2.config, h2.connection, h2.events, h2.exceptions
from cryptography import x509
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "apns_test_server.py")
TEAM, KID, TOPIC = "TEAM123456", "KEY1234567", "com.example.doorbell"
TOKENS = {name: (name.encode().hex() * 64)[:64] for name in ("ok", "gone", "reset", "later", "retry", "other")}
PASSED, FAILED = [], []


def check(name, cond, detail=""):
    (PASSED if cond else FAILED).append(name)
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)


# ---------------------------------------------------------------- keys and certificates

def write_pem(path, data):
    with open(path, "wb") as f:
        f.write(data)


def make_pki(d):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "apns test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    write_pem(f"{d}/ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    write_pem(f"{d}/server.pem", cert.public_bytes(serialization.Encoding.PEM))
    write_pem(f"{d}/server.key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
    signing = ec.generate_private_key(ec.SECP256R1())
    write_pem(f"{d}/key.pub.pem", signing.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return signing


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(key, iat, kid=KID, iss=TEAM, der=False):
    header = b64url(json.dumps({"alg": "ES256", "kid": kid}).encode())
    claims = b64url(json.dumps({"iss": iss, "iat": iat}).encode())
    sig = key.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
    if not der:
        r, s = decode_dss_signature(sig)
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{header}.{claims}.{b64url(sig)}"


# ---------------------------------------------------------------- a minimal h2 client

class Client:
    """One HTTP/2 connection; requests may run concurrently and respect MAX_CONCURRENT_STREAMS."""

    async def open(self, port, cafile, alpn=("h2",)):
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.set_alpn_protocols(list(alpn))
        self.reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1"), 5)
        self.alpn = self.writer.get_extra_info("ssl_object").selected_alpn_protocol()
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.h2.initiate_connection()
        self.results, self.futures = {}, {}
        self.goaway_last = None
        self.changed = asyncio.Event()
        self.settings = asyncio.Event()
        self.flush()
        self.task = asyncio.ensure_future(self.read_loop())
        await asyncio.wait_for(self.settings.wait(), 5)
        return self

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)

    def finish(self, sid, result):
        fut = self.futures.pop(sid, None)
        if fut and not fut.done():
            fut.set_result(result)
        self.changed.set()

    async def read_loop(self):
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                for ev in self.h2.receive_data(data):
                    if isinstance(ev, h2.events.RemoteSettingsChanged):
                        self.settings.set()
                    elif isinstance(ev, h2.events.ResponseReceived):
                        self.results[ev.stream_id] = {"status": int(dict(ev.headers)[":status"]),
                                                      "headers": dict(ev.headers), "body": b""}
                    elif isinstance(ev, h2.events.DataReceived):
                        self.results[ev.stream_id]["body"] += ev.data
                        self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        self.finish(ev.stream_id, self.results.pop(ev.stream_id))
                    elif isinstance(ev, h2.events.StreamReset):
                        self.finish(ev.stream_id, {"reset": ev.error_code})
                    elif isinstance(ev, h2.events.ConnectionTerminated):
                        self.goaway_last = ev.last_stream_id
                        for sid in [s for s in self.futures if s > ev.last_stream_id]:
                            self.finish(sid, {"unprocessed": True})
                self.flush()
        except (ConnectionError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass  # h2 refuses frames after a GOAWAY; the streams left are settled below
        finally:
            for sid in list(self.futures):
                self.finish(sid, {"closed": True})

    async def request(self, token, headers=None, body=b'{"aps":{"alert":"hi"}}', method="POST", path=None):
        while self.h2.open_outbound_streams >= self.h2.remote_settings.max_concurrent_streams:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 10)
        sid = self.h2.get_next_available_stream_id()
        hdrs = [(":method", method), (":scheme", "https"), (":authority", "127.0.0.1"),
                (":path", path or f"/3/device/{token}")] + list(headers or [])
        fut = asyncio.get_running_loop().create_future()
        self.futures[sid] = fut
        self.h2.send_headers(sid, hdrs, end_stream=not body)
        if body:
            self.h2.send_data(sid, body, end_stream=True)
        self.flush()
        result = await asyncio.wait_for(fut, 15)
        result["stream"] = sid
        return result

    async def close(self):
        try:
            self.h2.close_connection()
            self.flush()
        except Exception:
            pass
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 3)
        except Exception:
            pass
        self.task.cancel()


# ---------------------------------------------------------------- the tests

class Env:
    def __init__(self, d, key):
        self.d, self.key = d, key
        self.script_path, self.log_path = f"{d}/script.json", f"{d}/requests.jsonl"
        self.ca = f"{d}/ca.pem"

    def set_script(self, script):
        # Atomic replace, as a test of ours should do it.
        tmp = self.script_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(script, f)
        os.replace(tmp, self.script_path)

    def headers(self, iat=None, topic=TOPIC, apns_id=None, **extra):
        h = [("authorization", f"bearer {make_jwt(self.key, int(time.time()) if iat is None else iat)}"),
             ("apns-push-type", "alert")]
        if topic is not None:
            h.append(("apns-topic", topic))
        if apns_id:
            h.append(("apns-id", apns_id))
        h += [(k.replace("_", "-"), v) for k, v in extra.items()]
        return h

    def events(self):
        with open(self.log_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    async def wait_event(self, pred, timeout=5):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.events() if pred(e)]
            if found:
                return found
            await asyncio.sleep(0.05)
        return []


def reason(r):
    try:
        return json.loads(r["body"])["reason"]
    except Exception:
        return None


async def run_tests(env, port):
    c = await Client().open(port, env.ca)
    check("ALPN h2 negotiated", c.alpn == "h2", c.alpn)

    # Valid pushes.
    aid = str(uuid.uuid4())
    r = await c.request(TOKENS["ok"], env.headers(apns_id=aid, apns_priority="10", apns_expiration="0",
                                                   apns_collapse_id="door"))
    check("valid push -> 200, apns-id echoed, apns-unique-id, empty body",
          r.get("status") == 200 and r["headers"].get("apns-id") == aid and "apns-unique-id" in r["headers"]
          and r["body"] == b"", r)
    r = await c.request(TOKENS["ok"], env.headers())
    check("valid push without apns-id -> generated UUID",
          r.get("status") == 200 and len(r["headers"].get("apns-id", "")) == 36, r)
    ev = [e for e in env.events() if e["event"] == "request" and e.get("apns_id") == aid]
    check("request logged with redacted authorization and parsed payload",
          len(ev) == 1 and ev[0]["headers"]["authorization"].startswith("bearer ")
          and ev[0]["headers"]["authorization"][7:].isdigit() and ev[0]["payload"] == {"aps": {"alert": "hi"}}
          and ev[0]["status"] == 200 and ev[0]["token"] == TOKENS["ok"], ev)

    # Validation failures.
    other_key = ec.generate_private_key(ec.SECP256R1())
    now = int(time.time())
    bad_sig = [("authorization", f"bearer {make_jwt(other_key, now)}"), ("apns-topic", TOPIC), ("apns-push-type", "alert")]
    der_sig = [("authorization", f"bearer {make_jwt(env.key, now, der=True)}"), ("apns-topic", TOPIC),
               ("apns-push-type", "alert")]
    wrong_kid = [("authorization", f"bearer {make_jwt(env.key, now, kid='OTHER')}"), ("apns-topic", TOPIC),
                 ("apns-push-type", "alert")]
    cases = [
        ("bad JWT signature", dict(headers=bad_sig), 403, "InvalidProviderToken"),
        ("DER (not raw r||s) JWT signature", dict(headers=der_sig), 403, "InvalidProviderToken"),
        ("wrong kid", dict(headers=wrong_kid), 403, "InvalidProviderToken"),
        ("iat older than an hour", dict(headers=env.headers(iat=now - 3700)), 403, "ExpiredProviderToken"),
        ("iat in the future", dict(headers=env.headers(iat=now + 300)), 403, "InvalidProviderToken"),
        ("no authorization", dict(headers=[("apns-topic", TOPIC), ("apns-push-type", "alert")]), 403,
         "MissingProviderToken"),
        ("missing topic", dict(headers=env.headers(topic=None)), 400, "MissingTopic"),
        ("foreign topic", dict(headers=env.headers(topic="com.example.other")), 400, "TopicDisallowed"),
        ("bad priority", dict(headers=env.headers(apns_priority="7")), 400, "BadPriority"),
        ("bad apns-id", dict(headers=env.headers(apns_id="not-a-uuid")), 400, "BadMessageId"),
        ("long collapse id", dict(headers=env.headers(apns_collapse_id="x" * 65)), 400, "BadCollapseId"),
        ("bad expiration", dict(headers=env.headers(apns_expiration="soon")), 400, "BadExpirationDate"),
        ("non-hex token", dict(headers=env.headers(), path="/3/device/" + "z" * 64), 400, "BadDeviceToken"),
        ("5000-byte payload", dict(headers=env.headers(), body=b'{"aps":{"alert":"' + b"x" * 4980 + b'"}}'), 413,
         "PayloadTooLarge"),
        ("empty payload", dict(headers=env.headers(), body=b""), 400, "PayloadEmpty"),
        ("invalid JSON payload", dict(headers=env.headers(), body=b"{nope"), 400, "InvalidPayload"),
        ("GET", dict(headers=env.headers(), method="GET", body=b""), 405, "MethodNotAllowed"),
        ("bad path", dict(headers=env.headers(), path="/3/other/x"), 404, "BadPath"),
    ]
    for name, kw, status, why in cases:
        r = await c.request(TOKENS["ok"], **kw)
        check(f"{name} -> {status} {why}", r.get("status") == status and reason(r) == why, r)

    # Scripted outcomes: 410 with timestamp, reset, sequences; and re-reading the script.
    env.set_script({"tokens": {TOKENS["gone"]: [{"status": 410, "reason": "Unregistered", "timestamp_ms": 1700000000000},
                                                {"status": 200}],
                               TOKENS["reset"]: [{"reset": True}, {"status": 200}],
                               TOKENS["later"]: [{"status": 429, "reason": "TooManyRequests"},
                                                 {"status": 500, "reason": "InternalServerError"}, {"status": 200}]}})
    r = await c.request(TOKENS["gone"], env.headers())
    check("410 Unregistered with timestamp", r.get("status") == 410
          and json.loads(r["body"]) == {"reason": "Unregistered", "timestamp": 1700000000000}, r)
    r = await c.request(TOKENS["gone"], env.headers())
    check("next outcome for that token -> 200", r.get("status") == 200, r)
    r = await c.request(TOKENS["reset"], env.headers())
    check("scripted reset -> RST_STREAM INTERNAL_ERROR", r.get("reset") == 2, r)
    check("reset logged", bool(await env.wait_event(lambda e: e["event"] == "reset" and e["stream"] == r["stream"])))
    r = await c.request(TOKENS["reset"], env.headers())
    check("after the reset -> 200 on the same connection", r.get("status") == 200, r)
    r = await c.request(TOKENS["later"], env.headers(iat=now - 4000))
    check("expired JWT to a scripted token -> 403", r.get("status") == 403, r)
    got = [(await c.request(TOKENS["later"], env.headers())).get("status") for _ in range(4)]
    check("429, 500, then 200 repeating; the 403 consumed nothing", got == [429, 500, 200, 200], got)

    env.set_script({"tokens": {TOKENS["gone"]: [{"status": 410, "reason": "Unregistered", "timestamp_ms": "now"}]}})
    before = int(time.time() * 1000)
    r = await c.request(TOKENS["gone"], env.headers())
    body = json.loads(r.get("body") or b"{}")
    check("script re-read after modification (410 timestamp now)",
          r.get("status") == 410 and before - 1000 <= body.get("timestamp", 0) <= int(time.time() * 1000) + 1000, r)
    with open(env.script_path, "w") as f:
        f.write("{ this is not json")
    r = await c.request(TOKENS["gone"], env.headers())
    check("bad script ignored, previous one kept", r.get("status") == 410, r)

    env.set_script({"expire_provider_token_first": 2})
    old, fresh = now - 30, now - 5
    got = [(await c.request(TOKENS["ok"], env.headers(iat=i))).get("status") for i in (old, fresh, old, old)]
    check("expire_provider_token_first: first iat refused twice, refreshed JWT accepted", got == [403, 200, 403, 200], got)

    env.set_script({"reject_first_jwt_after": 2})
    first, second = env.headers(iat=now - 5), env.headers(iat=now - 5)  # same iat, distinct JWTs
    got = [(await c.request(TOKENS["ok"], h)).get("status") for h in (first, first, first, second, first)]
    check("reject_first_jwt_after: the first JWT accepted twice, then refused; another with the same iat accepted",
          got == [200, 200, 403, 200, 403], got)
    ids = {e.get("jwt_id") for e in [e for e in env.events() if e["event"] == "request"][-5:]}
    check("jwt_id tells the two JWTs apart", len(ids) == 2 and None not in ids, ids)

    env.set_script({"hold_ms": 400})
    started = time.monotonic()
    aid = str(uuid.uuid4())
    r = await c.request(TOKENS["ok"], env.headers(apns_id=aid))
    logged = [e for e in env.events() if e["event"] == "request" and e.get("apns_id") == aid]
    check("hold_ms: processed and logged, answered later",
          r.get("status") == 200 and time.monotonic() - started >= 0.35 and len(logged) == 1
          and logged[0]["time_ms"] <= int(time.time() * 1000) - 300, (r, logged))
    await c.close()

    # GOAWAY after 3 streams with 10 requests in flight on one connection.
    env.set_script({"goaway_after_streams": 3, "goaway_connections": 1, "delay_ms": 300})
    c = await Client().open(port, env.ca)
    tokens = [TOKENS["retry"][:-2] + f"{i:02x}" for i in range(10)]
    ids = [str(uuid.uuid4()) for _ in tokens]
    results = await asyncio.gather(*(c.request(t, env.headers(apns_id=i)) for t, i in zip(tokens, ids)))
    answered = {r["stream"] for r in results if r.get("status") == 200}
    unanswered = {r["stream"] for r in results if r.get("unprocessed")}
    check("GOAWAY: 3 answered, 7 unprocessed, nothing else", len(answered) == 3 and len(unanswered) == 7, results)
    check("GOAWAY last_stream_id is the highest answered stream", c.goaway_last == max(answered, default=-1),
          (c.goaway_last, answered))
    await c.close()
    conn_ids = {e["conn"] for e in env.events() if e["event"] == "request" and e.get("apns_id") in ids}
    check("GOAWAY requests all on one connection", len(conn_ids) == 1, conn_ids)
    conn = conn_ids.pop() if len(conn_ids) == 1 else None
    await env.wait_event(lambda e: e["event"] == "closed" and e["conn"] == conn)
    evs = [e for e in env.events() if e.get("conn") == conn]
    logged = {e["stream"] for e in evs if e["event"] == "request"}
    unproc = {e["stream"] for e in evs if e["event"] == "unprocessed"}
    goaways = [e for e in evs if e["event"] == "goaway"]
    check("log: exactly the answered streams processed, the rest unprocessed",
          logged == answered and unproc == unanswered, (logged, unproc))
    check("log: one goaway event with the same last_stream_id",
          len(goaways) == 1 and goaways[0]["last_stream_id"] == c.goaway_last, goaways)
    retry = [(t, i) for t, i, r in zip(tokens, ids, results) if r.get("unprocessed")]
    c = await Client().open(port, env.ca)
    again = await asyncio.gather(*(c.request(t, env.headers(apns_id=i)) for t, i in retry))
    check("unprocessed requests succeed on a new connection (no second GOAWAY)",
          all(r.get("status") == 200 for r in again) and c.goaway_last is None, again)
    await c.close()

    # 200 concurrent streams on one connection.
    env.set_script({"delay_ms": 50})
    c = await Client().open(port, env.ca)
    limit = c.h2.remote_settings.max_concurrent_streams
    ids = [str(uuid.uuid4()) for _ in range(200)]
    t0 = time.monotonic()
    results = await asyncio.gather(*(c.request(TOKENS["ok"], env.headers(apns_id=i)) for i in ids))
    check(f"200 concurrent requests all answered (in {time.monotonic() - t0:.2f} s)",
          all(r.get("status") == 200 for r in results), [r for r in results if r.get("status") != 200][:3])
    await c.close()
    conn = {e["conn"] for e in env.events() if e["event"] == "request" and e.get("apns_id") in ids}
    closed = await env.wait_event(lambda e: e["event"] == "closed" and e["conn"] in conn)
    check("closed event: 200 requests, peak concurrency at the advertised limit",
          len(conn) == 1 and len(closed) == 1 and closed[0]["requests"] == 200
          and 1 < closed[0]["peak_concurrent_streams"] <= limit, (limit, closed))

    # Connections without h2 are refused.
    ctx = ssl.create_default_context(cafile=env.ca)
    ctx.set_alpn_protocols(["http/1.1"])
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    try:
        data = await asyncio.wait_for(reader.read(100), 5)
    except (ConnectionError, ssl.SSLError):
        data = b""
    writer.close()
    check("http/1.1-only ALPN refused", data == b"" and bool(await env.wait_event(lambda e: e["event"] == "rejected")))


def curl_check(env, port):
    if not shutil.which("curl"):
        print("skip curl check: curl not installed")
        return
    env.set_script({})
    out = subprocess.run(
        ["curl", "--http2", "-sS", "--max-time", "10", "--cacert", env.ca, "-o", "/dev/null",
         "-w", "%{http_code} %{http_version}", "-H", f"authorization: bearer {make_jwt(env.key, int(time.time()))}",
         "-H", f"apns-topic: {TOPIC}", "-H", "apns-push-type: alert", "--data-binary", '{"aps":{"alert":"curl"}}',
         f"https://127.0.0.1:{port}/3/device/{TOKENS['ok']}"], capture_output=True, text=True, timeout=20)
    check("curl --http2 push -> 200 over HTTP/2", out.stdout == "200 2", (out.stdout, out.stderr))


def main():
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        key = make_pki(d)
        env = Env(d, key)
        env.set_script({})
        ready = f"{d}/ready.json"
        stderr = open(f"{d}/stderr.txt", "w+")
        proc = subprocess.Popen(
            [sys.executable, SERVER, "--cert", f"{d}/server.pem", "--key", f"{d}/server.key", "--ready-file", ready,
             "--team-id", TEAM, "--key-id", KID, "--public-key", f"{d}/key.pub.pem", "--topic", TOPIC,
             "--script", env.script_path, "--log", env.log_path, "--max-seconds", "120"],
            stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            deadline = time.monotonic() + 15
            while not os.path.exists(ready):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not become ready")
                time.sleep(0.05)
            with open(ready) as f:
                port = json.load(f)["port"]
            asyncio.run(asyncio.wait_for(run_tests(env, port), 45))
            curl_check(env, port)
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=10)
            check("SIGTERM -> exit status 0", proc.returncode == 0, proc.returncode)
            check("stdout is exactly the LISTENING line", out == f"LISTENING 127.0.0.1:{port}\n", repr(out))
        except Exception as e:
            import traceback
            traceback.print_exc()
            FAILED.append(f"exception: {e!r}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            if FAILED:
                stderr.seek(0)
                print("--- server stderr ---\n" + stderr.read(), file=sys.stderr)
            stderr.close()
    print(f"{len(PASSED)} passed, {len(FAILED)} failed ({time.monotonic() - t0:.1f} s)")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
