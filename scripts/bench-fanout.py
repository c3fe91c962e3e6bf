#!/usr/bin/env python3
"""bench-fanout.py CLOUD WORKDIR [N]: the fan-out rate of a real `doorbell-cloud serve` (build it
with -c release) pushing one doorbell press to N phones (default 10000) through APNs over
HTTP/2, against the APNs test server (Tests/helpers/apns_test_server.py, which checks every
provider token's ES256 signature), everything on loopback.

Run with the venv's python (scripts/venv.sh): the APNs test server needs h2 and cryptography;
this script itself uses only the standard library.

Two runs, each with a fresh database, APNs test server and receiver:
  concurrent  --apns-concurrency 100 (--concurrency), N phones
  serial      --apns-concurrency 1, min(N, 1000) phones (the naive one-at-a-time sender,
              without its 400 ms sleeps)
Setup (not timed): an owner (`doorbell-cloud account create`), a gateway enrolled with a
whsec_ secret, the phones registered with PUT /phones/<token> over kept-alive HTTPS
connections. Timed: from the POST of one v1-signed doorbell.pressed event until
GET /events/<id>/deliveries (as the owner) shows no pending delivery, polled every --poll-ms (50).
That GET costs the receiver about 25 µs of CPU per delivery row (~250 ms at 10000) and holds its
database lock meanwhile, so by default (--poll log) the poll watches the APNs test server's log
and asks the receiver once every push was answered (and every 10 s in case something is stuck);
--poll api GETs the deliveries at every poll.
Then (cloud issue #17) ingest under fan-out, on SQLite and, when DOORBELL_CLOUD_TEST_POSTGRES is
set (cloud/scripts/with-test-postgres.sh), on PostgreSQL: --ingest-gateways gateways of an account
without phones POST v1-signed events at once, each on its own kept-alive connection, first
--ingest-events each with nothing else running, then continuously while one press fans out to the
N phones (until the APNs test server has every push); POST → 200 latency p50/p99 of each.
Checked: every delivery delivered, and the APNs log holds exactly N 200s for N distinct tokens.
CPU (utime+stime from /proc/PID/stat) of both processes over that window, and doorbell-cloud's
VmHWM at the end.

Prints TSV rows `name<TAB>value<TAB>unit<TAB>method` on stdout (what scripts/bench.sh reads),
progress on stderr. --perf-record FILE samples doorbell-cloud with `perf record -e cpu-clock`
during the concurrent run's fan-out (for a profile; not part of make bench).
Every child is stopped on exit (SIGTERM, then SIGKILL); every wait is bounded.
"""
import argparse, base64, hashlib, hmac, http.client, json, os, secrets, signal, ssl, subprocess, sys
import threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "com.example.doorbell"
TEAM_ID = "BENCHTEAM1"
KEY_ID = "BENCHKEY01"
GATEWAY = "gw-bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"bench-fanout: {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


class Children:
    """Processes to stop on exit: SIGTERM, a bounded wait, then SIGKILL."""

    def __init__(self):
        self.procs = []

    def start(self, argv, **kwargs):
        proc = subprocess.Popen(argv, **kwargs)
        self.procs.append(proc)
        return proc

    def stop(self, proc, sig=signal.SIGTERM, grace=5.0):
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    log(f"pid {proc.pid} did not die after SIGKILL")
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self):
        for proc in reversed(list(self.procs)):
            self.stop(proc)


def run(argv, **kwargs):
    """A short command; its output, or a Failure with its stderr."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)
    if result.returncode != 0:
        raise Failure(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def wait_ready(path, proc, what, errfile, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure(f"{what} exited ({proc.returncode}): {tail(errfile)}")
        try:
            with open(path) as f:
                return json.load(f)["port"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    raise Failure(f"{what} not ready after {timeout:.0f} s: {tail(errfile)}")


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def vm_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise Failure(f"no {key} in /proc/{pid}/status")


class AnswerCounter:
    """Counts the APNs test server's answers ("request" lines) as its log grows."""

    def __init__(self, path):
        self.path, self.offset, self.answers, self.last_ms, self.rest = path, 0, 0, 0, b""
        self.lock = threading.Lock()  # the ingest workers all ask

    def count(self):
        with self.lock:
            return self._count()

    def _count(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return self.answers
        self.offset += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            if line.startswith(b'{"event": "request"'):
                self.answers += 1
                self.last_ms = max(self.last_ms, json.loads(line)["time_ms"])
        return self.answers


def uuid7():
    ms = time.time_ns() // 1_000_000
    raw = bytearray(ms.to_bytes(6, "big") + secrets.token_bytes(10))
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class API:
    """The receiver's app API over one kept-alive HTTPS connection (one per thread)."""

    def __init__(self, port, ca, token):
        self.port, self.token = port, token
        self.context = ssl.create_default_context(cafile=ca)
        self.conn = None
        self.last = 0.0

    def call(self, method, path, body=None, headers=None, token=True):
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        h = {"Content-Type": "application/json"}
        if token:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        if self.conn is not None and time.monotonic() - self.last > 5:
            # doorbell-cloud closes a connection idle for --header-timeout-seconds (10 s): a POST
            # on it would fail (and is not retried), so open a new one first.
            self.conn.close()
            self.conn = None
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=30)
            try:
                self.conn.request(method, path, body=data, headers=h)
                response = self.conn.getresponse()
                raw = response.read()
                break
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2 or method == "POST":
                    raise
        self.last = time.monotonic()
        if response.will_close:
            self.conn.close()
            self.conn = None
        if not 200 <= response.status < 300:
            raise Failure(f"{method} {path} answered {response.status}: {raw[:500].decode(errors='replace')}")
        return raw

    def close(self):
        if self.conn is not None:
            self.conn.close()


def register_phones(port, ca, token, tokens, threads):
    errors = []

    def worker(chunk):
        api = API(port, ca, token)
        try:
            for t in chunk:
                # Each phone's own installation secret (docs/protocol.md), made from its token here.
                api.call("PUT", f"/phones/{t}", {"environment": "sandbox", "bundle_id": TOPIC,
                                                 "installation_secret": "installation-" + t})
        except Exception as e:  # reported below; the other threads finish their share
            errors.append(e)
        finally:
            api.close()

    workers = [threading.Thread(target=worker, args=(tokens[i::threads],), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
        if w.is_alive():
            raise Failure("registering phones took over 10 minutes")
    if errors:
        raise Failure(f"registering phones: {errors[0]}")


def signed_press(secret, event_id, gateway=GATEWAY):
    body = json.dumps({
        "id": event_id, "sequence": 1, "type": "doorbell.pressed", "gateway_id": gateway,
        "occurred_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()), "clock_synced": True,
        "test": False, "device": {"id": "front-door", "name": "Front door", "radio": "rtl433"},
        "data": {"code": "91568f", "model": "EV1527"}, "agent": {"version": "bench"},
    }, separators=(",", ":")).encode()
    ts = str(int(time.time()))
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, f"{event_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    headers = {"webhook-id": event_id, "webhook-timestamp": ts,
               "webhook-signature": "v1," + base64.b64encode(mac).decode(), "doorbell-gateway-id": gateway}
    return body, headers


class Receiver:
    """A fresh APNs test server and `doorbell-cloud serve` on `db`, an owner with a gateway and
    `phones` registered phones."""

    def __init__(self, args, children, name, db, phones, concurrency):
        work = os.path.join(args.workdir, name)
        os.makedirs(work, exist_ok=True)
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        pki = os.path.join(args.workdir, "pki")
        self.ca, cert, key = (os.path.join(pki, f) for f in ("ca.pem", "server.pem", "server.key"))
        self.apns_log = os.path.join(work, "apns.jsonl")
        apns_err = os.path.join(work, "apns.err")
        apns_ready = os.path.join(work, "apns-ready.json")
        self.apns = children.start(
            [sys.executable, os.path.join(ROOT, "Tests/helpers/apns_test_server.py"), "--cert", cert, "--key", key,
             "--port", "0", "--ready-file", apns_ready, "--team-id", TEAM_ID, "--key-id", KEY_ID,
             "--public-key", os.path.join(args.workdir, "apns.pub.pem"), "--topic", TOPIC, "--log", self.apns_log,
             "--max-concurrent-streams", "1000", "--max-seconds", str(args.timeout + 1200)],
            stdout=subprocess.DEVNULL, stderr=open(apns_err, "w"))
        apns_url = f"https://127.0.0.1:{wait_ready(apns_ready, self.apns, 'the APNs test server', apns_err)}"

        self.db = db or os.path.join(work, "cloud.sqlite")
        owner = json.loads(run([args.cloud, "account", "create", "--db", self.db, "--name", "Bench owner"]))
        self.cloud_err = os.path.join(work, "cloud.err")
        cloud_ready = os.path.join(work, "cloud-ready.json")
        self.cloud = children.start(
            [args.cloud, "serve", "--host", "127.0.0.1", "--port", "0", "--ready-file", cloud_ready,
             "--tls-cert", cert, "--tls-key", key, "--db", self.db,
             "--apns-key", os.path.join(args.workdir, "apns.p8"), "--apns-key-id", KEY_ID, "--apns-team-id", TEAM_ID,
             "--apns-topic", TOPIC, "--apns-sandbox-url", apns_url, "--apns-production-url", apns_url,
             "--apns-ca", self.ca, "--apns-concurrency", str(concurrency)] + args.serve_arg,
            stdout=open(os.path.join(work, "cloud.out"), "w"), stderr=open(self.cloud_err, "w"))
        self.port = wait_ready(cloud_ready, self.cloud, "doorbell-cloud serve", self.cloud_err)

        self.api = API(self.port, self.ca, owner["token"])
        self.secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        self.api.call("POST", "/gateways", {"id": GATEWAY, "secret": self.secret})
        self.tokens = [secrets.token_hex(32) for _ in range(phones)]
        t = time.monotonic()
        register_phones(self.port, self.ca, owner["token"], self.tokens, args.threads)
        log(f"{name}: {phones} phones registered in {time.monotonic() - t:.1f} s "
            f"({args.threads} kept-alive connections)")


def fan_out(args, children, name, phones, concurrency, perf_out=None):
    """One run: fresh APNs test server and receiver, `phones` phones, one press. A dict of figures."""
    r = Receiver(args, children, name, None, phones, concurrency)
    apns, cloud, api, secret, tokens, apns_log, cloud_err = r.apns, r.cloud, r.api, r.secret, r.tokens, r.apns_log, r.cloud_err
    event_id = uuid7()
    body, headers = signed_press(secret, event_id)
    perf = None
    if perf_out:
        # DWARF unwinding: frame pointers stop at the system libsqlite3 and glibc.
        perf = children.start(["perf", "record", "-e", "cpu-clock", "-F", "499", "--call-graph", "dwarf,16384",
                               "-o", perf_out,
                               "-p", str(cloud.pid)], stdout=subprocess.DEVNULL, stderr=open(perf_out + ".err", "w"))
        time.sleep(1.0)  # perf attaches asynchronously
    cloud0, apns0, self0 = cpu_ticks(cloud.pid), cpu_ticks(apns.pid), os.times()
    start, wall_start = time.monotonic(), time.time()
    answer = json.loads(api.call("POST", "/events", body, headers=headers, token=False))
    if answer.get("pushes") != phones:
        raise Failure(f"{name}: POST /events queued {answer.get('pushes')} pushes, expected {phones}: {answer}")
    polls = 0
    path = f"/events/{event_id}/deliveries"
    answered = AnswerCounter(apns_log)
    last_poll = start
    while True:
        # --poll log: ask the receiver only once the APNs test server has answered every push (or
        # every 10 s regardless), so that the measuring does not load what is measured.
        now = time.monotonic()
        if args.poll == "api" or answered.count() >= phones or now - last_poll >= 10.0:
            raw = api.call("GET", path)
            polls += 1
            last_poll = now
            if b'"pending"' not in raw:
                break
        if time.monotonic() - start > args.timeout:
            raise Failure(f"{name}: deliveries still pending after {args.timeout:.0f} s: {tail(cloud_err)}")
        time.sleep(args.poll_ms / 1000)
    seconds = time.monotonic() - start
    cloud1, apns1, self1 = cpu_ticks(cloud.pid), cpu_ticks(apns.pid), os.times()
    if perf:
        children.stop(perf, signal.SIGINT, grace=60)
    hwm = vm_kib(cloud.pid, "VmHWM")

    # What one poll costs the receiver (its answer grows with N): a few more, measured alone.
    p0 = cpu_ticks(cloud.pid)
    t = time.monotonic()
    extra = 10
    for _ in range(extra):
        api.call("GET", path)
    poll_ms = (cpu_ticks(cloud.pid) - p0) * 1000 / CLK_TCK / extra
    poll_wall_ms = (time.monotonic() - t) * 1000 / extra
    api.close()

    rows = json.loads(raw)["deliveries"]
    states = {}
    for r in rows:
        states[r["state"]] = states.get(r["state"], 0) + 1
    if len(rows) != phones or states.get("delivered") != phones:
        raise Failure(f"{name}: deliveries {states}, expected {phones} delivered")
    children.stop(cloud)
    children.stop(apns)
    ok, other = [], 0
    with open(apns_log) as f:
        for line in f:
            entry = json.loads(line)
            if entry["event"] == "request":
                if entry["status"] == 200:
                    ok.append(entry["token"])
                else:
                    other += 1
            elif entry["event"] in ("reset", "unprocessed"):
                other += 1
    if len(ok) != phones or len(set(ok)) != phones or set(ok) != set(tokens):
        raise Failure(f"{name}: the APNs log has {len(ok)} 200s for {len(set(ok))} distinct tokens, expected {phones}")
    answered.count()
    log(f"{name}: {phones} pushes in {seconds:.2f} s ({phones / seconds:.0f}/s; last APNs answer at "
        f"{answered.last_ms / 1000 - wall_start:.2f} s), {polls} GET deliveries, {other} non-200 answers; "
        f"one GET deliveries costs the receiver {poll_ms:.1f} ms CPU ({poll_wall_ms:.1f} ms wall)")
    return {
        "phones": phones, "seconds": seconds, "last_answer_s": answered.last_ms / 1000 - wall_start,
        "rate": phones / seconds, "polls": polls, "poll_cpu_ms": poll_ms,
        "cloud_cpu_ms": (cloud1 - cloud0) * 1000 / CLK_TCK, "apns_cpu_ms": (apns1 - apns0) * 1000 / CLK_TCK,
        "self_cpu_ms": (self1.user + self1.system - self0.user - self0.system) * 1000, "hwm_mib": hwm / 1024,
        "non200": other,
    }


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def ingest_under_fan_out(args, children, backend, db):
    """Issue #17's load: --ingest-gateways gateways POST events (each its own kept-alive
    connection, one event after another) first alone, then while one press fans out to N phones.
    Their events ring no phone (their owner has none), so what is measured is ingest: verify,
    deduplicate, store, answer. A dict of figures."""
    name = f"ingest-{backend}"
    r = Receiver(args, children, name, db, args.pushes, args.concurrency)
    ingest_owner = json.loads(run([args.cloud, "account", "create", "--db", r.db, "--name", "Ingest"]))
    other = API(r.port, r.ca, ingest_owner["token"])
    gateways = [f"gw-ingest-{i:03d}" for i in range(args.ingest_gateways)]
    for g in gateways:
        other.call("POST", "/gateways", {"id": g, "secret": r.secret})
    other.close()

    def load(until, per_gateway=None):
        latencies, errors = [], []

        def worker(gateway):
            api = API(r.port, r.ca, "")
            try:
                sent = 0
                while not until() and (per_gateway is None or sent < per_gateway):
                    body, headers = signed_press(r.secret, uuid7(), gateway)
                    t = time.perf_counter()
                    api.call("POST", "/events", body, headers=headers, token=False)
                    latencies.append((time.perf_counter() - t) * 1000)
                    sent += 1
            except Exception as e:  # reported below
                errors.append(e)
            finally:
                api.close()

        threads = [threading.Thread(target=worker, args=(g,), daemon=True) for g in gateways]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.timeout)
        if errors:
            raise Failure(f"{name}: POST /events failed: {errors[0]}")
        return latencies

    idle_load = [os.getloadavg()[0]]
    idle = load(lambda: False, per_gateway=args.ingest_events)
    idle_load.append(os.getloadavg()[0])
    answered = AnswerCounter(r.apns_log)
    event_id = uuid7()
    body, headers = signed_press(r.secret, event_id)
    start = time.monotonic()
    answer = json.loads(r.api.call("POST", "/events", body, headers=headers, token=False))
    if answer.get("pushes") != args.pushes:
        raise Failure(f"{name}: the press queued {answer.get('pushes')} pushes, expected {args.pushes}")
    busy_load = [os.getloadavg()[0]]
    busy = load(lambda: answered.count() >= args.pushes or time.monotonic() - start > args.timeout)
    busy_load.append(os.getloadavg()[0])
    fan_out_s = time.monotonic() - start
    path = f"/events/{event_id}/deliveries"
    while b'"pending"' in r.api.call("GET", path):
        if time.monotonic() - start > args.timeout:
            raise Failure(f"{name}: deliveries still pending after {args.timeout:.0f} s: {tail(r.cloud_err)}")
        time.sleep(0.2)
    r.api.close()
    children.stop(r.cloud)
    children.stop(r.apns)
    figures = {"idle": idle, "busy": busy, "fan_out_s": fan_out_s, "idle_load": idle_load, "busy_load": busy_load}
    log(f"{name}: ingest p50/p99 {percentile(idle, .5):.1f}/{percentile(idle, .99):.1f} ms alone "
        f"({len(idle)} events, load average {idle_load[0]:.2f} → {idle_load[1]:.2f}), "
        f"{percentile(busy, .5):.1f}/{percentile(busy, .99):.1f} ms during the "
        f"{args.pushes}-phone fan-out ({len(busy)} events in {fan_out_s:.1f} s, load average "
        f"{busy_load[0]:.2f} → {busy_load[1]:.2f})")
    return figures


def postgres_database(conninfo, name):
    """A fresh database on the test PostgreSQL server (`cloud/scripts/with-test-postgres.sh`); its URL."""
    fields = dict(part.split("=", 1) for part in conninfo.split())
    run(["psql", "-q", "-v", "ON_ERROR_STOP=1", conninfo, "-c", f"DROP DATABASE IF EXISTS {name}",
         "-c", f"CREATE DATABASE {name}"])
    return f"postgresql://{fields.get('user', 'postgres')}@{fields['host']}:{fields['port']}/{name}"


def sig3(x):
    return f"{x:.3g}" if x < 100 else str(round(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cloud", help="the doorbell-cloud binary (release build)")
    p.add_argument("workdir", help="scratch directory (PKI, databases, logs)")
    p.add_argument("pushes", nargs="?", type=int, default=10000, help="phones for the concurrent run (default 10000)")
    p.add_argument("--concurrency", type=int, default=100, help="--apns-concurrency of the concurrent run (default 100)")
    p.add_argument("--serial-pushes", type=int, help="phones for the one-at-a-time run (default min(N, 1000); 0 skips it)")
    p.add_argument("--threads", type=int, default=4, help="connections registering phones (default 4)")
    p.add_argument("--poll-ms", type=float, default=50, help="poll every this many ms (default 50)")
    p.add_argument("--poll", choices=("log", "api"), default="log",
                   help="log (default): watch the APNs log, GET deliveries once it has every answer (and each "
                        "10 s); api: GET deliveries at every poll, which costs the receiver CPU and its "
                        "database lock in proportion to N")
    p.add_argument("--timeout", type=float, default=300, help="longest fan-out, seconds (default 300)")
    p.add_argument("--perf-record", metavar="FILE", help="perf record doorbell-cloud during the concurrent fan-out")
    p.add_argument("--ingest-gateways", type=int, default=20,
                   help="gateways posting events at once for the ingest-under-fan-out figures (default 20; 0 skips)")
    p.add_argument("--ingest-events", type=int, default=25,
                   help="events per gateway for the ingest figures without a fan-out (default 25)")
    p.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="one more argument for doorbell-cloud serve (repeat), e.g. --serve-arg=--fan-out-niceness=0")
    p.add_argument("--ingest-only", action="store_true",
                   help="only the ingest-under-fan-out figures (skips the concurrent and serial fan-out runs)")
    args = p.parse_args()
    if args.pushes < 1:
        p.error("N must be at least 1")
    serial = min(args.pushes, 1000) if args.serial_pushes is None else args.serial_pushes
    args.cloud = os.path.abspath(args.cloud)
    args.workdir = os.path.abspath(args.workdir)
    os.makedirs(args.workdir, exist_ok=True)

    children = Children()
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run([os.path.join(ROOT, "scripts/make-test-pki.sh"), os.path.join(args.workdir, "pki")])
        p8 = os.path.join(args.workdir, "apns.p8")
        ec = run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout"])
        run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-out", p8], input=ec)
        run(["openssl", "ec", "-in", p8, "-pubout", "-out", os.path.join(args.workdir, "apns.pub.pem")])

        fast = None if args.ingest_only else fan_out(args, children, "concurrent", args.pushes, args.concurrency,
                                                      args.perf_record)
        slow = fan_out(args, children, "serial", serial, 1) if serial > 0 and fast else None
        ingest = {}
        if args.ingest_gateways > 0:
            ingest["SQLite"] = ingest_under_fan_out(args, children, "sqlite", None)
            conninfo = os.environ.get("DOORBELL_CLOUD_TEST_POSTGRES")
            if conninfo:
                ingest["PostgreSQL"] = ingest_under_fan_out(args, children, "postgres",
                                                            postgres_database(conninfo, "bench_ingest"))
            else:
                log("no DOORBELL_CLOUD_TEST_POSTGRES (run under cloud/scripts/with-test-postgres.sh): "
                    "ingest figures on SQLite only")
    except (Failure, OSError, subprocess.SubprocessError) as e:
        log(f"FAILED: {e}")
        sys.exit(1)
    finally:
        children.stop_all()
        signal.signal(signal.SIGTERM, previous)

    n, c = args.pushes, args.concurrency
    build = "debug" if "/debug/" in args.cloud else "release"
    where = (f"{build} doorbell-cloud → APNs test server (Python h2, checks each ES256 token) over one TLS HTTP/2 "
             f"connection on loopback, {c} streams in flight")
    polled = (f"GET deliveries every {args.poll_ms:g} ms" if args.poll == "api" else
              f"APNs log watched every {args.poll_ms:g} ms, then GET deliveries")
    rows = [] if not fast else [
        ("fanout_pushes_per_s", round(fast["rate"]), "pushes/s",
         f"one doorbell.pressed to {n} phones: {where}; POST /events → no pending delivery "
         f"({fast['seconds']:.2f} s; {polled}), all {n} delivered, {n} 200s to {n} distinct tokens"),
    ]
    if slow:
        rows.append(("fanout_one_at_a_time_per_s", round(slow["rate"]), "pushes/s",
                     f"same to {slow['phones']} phones with --apns-concurrency 1 (the naive sender without its "
                     f"400 ms sleeps): concurrency {c} is {fast['rate'] / slow['rate']:.1f}× faster"))
    rows += [] if not fast else [
        ("fanout_cloud_cpu_ms_per_push", sig3(fast["cloud_cpu_ms"] / n), "ms",
         f"doorbell-cloud utime+stime over the {n}-push fan-out / {n}: {fast['cloud_cpu_ms'] / 1000:.2f} s CPU in "
         f"{fast['seconds']:.2f} s = {fast['cloud_cpu_ms'] / 10 / fast['seconds']:.0f}% of a core, incl. "
         f"{fast['polls']} GET deliveries of {n} rows ≈ {fast['poll_cpu_ms']:.0f} ms each"),
        ("fanout_apns_server_cpu_ms_per_push", sig3(fast["apns_cpu_ms"] / n), "ms",
         f"APNs test server (CPython, one thread) utime+stime / {n}: {fast['apns_cpu_ms'] / 1000:.2f} s CPU = "
         f"{fast['apns_cpu_ms'] / 10 / fast['seconds']:.0f}% of a core (the poller: "
         f"{fast['self_cpu_ms'] / 10 / fast['seconds']:.0f}%; {os.cpu_count()} cores)"),
        ("cloud_rss_peak_fanout", round(fast["hwm_mib"]), "MiB",
         f"VmHWM of doorbell-cloud ({build}) after registering {n} phones and fanning one event out to them"),
    ]
    for backend, f in ingest.items():
        key = backend.lower()
        for label, values, during, load in (
                ("alone", f["idle"], "with no fan-out running", f["idle_load"]),
                ("fanout", f["busy"], f"while one press fans out to {n} phones "
                                      f"({f['fan_out_s']:.1f} s until APNs had every push)", f["busy_load"])):
            for q in (0.5, 0.99):
                rows.append((f"ingest_{key}_{label}_p{int(q * 100)}", sig3(percentile(values, q)), "ms",
                             f"POST /events → 200 on {backend} ({build} doorbell-cloud), {args.ingest_gateways} "
                             f"gateways at once on their own kept-alive TLS connections, {len(values)} events "
                             f"{during}; each event stored and deduplicated, ringing no phone; load average "
                             f"(1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end ({os.cpu_count()} cores)"
                             + (f"; serve {' '.join(args.serve_arg)}" if args.serve_arg else "")))
    for name, value, unit, method in rows:
        print(f"{name}\t{value}\t{unit}\t{method}", flush=True)


if __name__ == "__main__":
    main()
