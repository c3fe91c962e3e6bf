#!/usr/bin/env python3
"""A strict, scriptable stand-in for Apple's APNs provider API (HTTP/2 over TLS, token auth).

Built on `h2` directly (sans-IO) with asyncio + ssl so that RST_STREAM and GOAWAY are fully ours.

Usage:
  apns_test_server.py --cert server.pem --key server.key [--host 127.0.0.1] [--port 0]
      --ready-file PATH --team-id TEAMID --key-id KEYID --public-key key.pub.pem
      --topic com.example.doorbell [--script script.json] --log requests.jsonl
      [--max-concurrent-streams 100] [--idle-timeout 60] [--max-seconds 0]

Once listening it writes {"port": N} to --ready-file (temp file + rename) and prints the single
stdout line `LISTENING HOST:PORT`. Diagnostics go to stderr. SIGTERM/SIGINT exit with status 0.
TLS offers only ALPN "h2"; a connection that did not negotiate h2 is closed at once.

Requests: only `POST /3/device/<token>`. Checks run in this order; the first failure is answered
with its status and body {"reason": R} (every answer carries `apns-id`):
  :method != POST                                  405 MethodNotAllowed
  :path not /3/device/<token> (or has ? or /)      404 BadPath
  empty <token>                                    400 MissingDeviceToken
  a repeated authorization / apns-* header         400 DuplicateHeaders
  no authorization header                          403 MissingProviderToken
  not `bearer <JWS>`; JWS header alg != ES256 or kid != --key-id; iss != --team-id; iat not an
    integer; signature not 64 raw bytes r||s verifying with --public-key; iat > now + 60 s
                                                   403 InvalidProviderToken
  iat older than 3600 s (checked after the signature)
                                                   403 ExpiredProviderToken
  no apns-topic                                    400 MissingTopic
  apns-topic != --topic                            400 TopicDisallowed
  apns-push-type missing or not `alert`            400 InvalidPushType
  apns-priority present and not 1, 5 or 10         400 BadPriority  (Apple documents 1 too)
  apns-expiration present and not digits           400 BadExpirationDate
  apns-id present and not a canonical UUID         400 BadMessageId
  apns-collapse-id longer than 64 bytes            400 BadCollapseId
  <token> not 64..200 hex digits                   400 BadDeviceToken
  body over 4096 bytes                             413 PayloadTooLarge
  empty body                                       400 PayloadEmpty
  body not a JSON object with an object "aps"      400 InvalidPayload
    (APNs has no documented reason for this; ours is a deliberate, recognisable invention)
Then `expire_provider_token_first` (below), then the scripted outcome. Success is 200 with an
empty body, `apns-id` (the request's, else a new UUID) and a random `apns-unique-id`.

Script (JSON; re-read when its mtime/size/inode changes; a bad or missing file is reported on
stderr and the previous script stays in force; unknown keys are errors, to catch typos):
  {"tokens": {"<hex>": [OUTCOME, ...]},     consumed one per valid request; the last repeats
   "default": OUTCOME,                      for tokens without an entry (default {"status": 200})
   "expire_provider_token_first": N,        see below (default 0)
   "goaway_after_streams": N,               0 = never (default)
   "goaway_connections": K,                 default 1
   "delay_ms": D,                           wait before answering each request (default 0)
   "hold_ms": H,                            process at once, write the answer H ms later (default 0)
   "reject_first_jwt_after": K}             see below (default 0 = never)
  OUTCOME: {"status": 200} | {"status": S, "reason": R [, "timestamp_ms": N | "now"]} |
           {"reset": true}  (RST_STREAM INTERNAL_ERROR instead of an answer).
  A "timestamp_ms" puts "timestamp" (ms since the epoch) in the body, as APNs does for 410.
  Loading a new script resets all script state: token cursors, the expired-token count and first
  iat, and the count of connections sent a GOAWAY. Token keys match case-insensitively.
  expire_provider_token_first N: the first iat of a JWT that verified is remembered; until N
  answers were given, an otherwise valid request carrying that iat gets 403 ExpiredProviderToken
  (no scripted outcome is consumed), so only a client that refreshes its JWT gets through.
  reject_first_jwt_after K: the first JWT that verified (the exact token, not its iat) is accepted
  for K otherwise valid requests; every later request carrying it gets 403 ExpiredProviderToken
  (no scripted outcome is consumed), as when APNs revokes a token in the middle of a fan-out.
  hold_ms H: a complete request is processed (decided and logged: for APNs it is delivered) at
  once, but its answer is written H ms later, so a client that gives up waiting has been
  delivered all the same. delay_ms, by contrast, waits before processing.
  goaway_after_streams N: the first K connections to have answered N streams (answers of any
  status and resets count) send GOAWAY(NO_ERROR, last_stream_id L = highest answered stream).
  At that moment any request with a lower id that is still waiting is answered at once (one still
  receiving its body is answered when it completes), every stream above L is dropped and logged
  "unprocessed", and the connection closes once nothing <= L is left (client EOF or 1 s later).
  So every request is either answered and logged as processed, or not processed at all.

Log (--log, JSON lines, each flushed; time_ms is ms since the epoch):
  {"event":"connection","conn":C,"time_ms":T}
  {"event":"rejected","conn":C,"reason":"...","time_ms":T}             (no h2 via ALPN)
  {"event":"request","conn":C,"stream":S,"token":"..."|null,"status":N,"reason":R|null,
   "apns_id":"...","headers":{name: value},"payload":JSON|null,"payload_bytes":N,
   "jwt_iat":N|null,"jwt_id":"<16 hex digits of the JWT's SHA-256>"|null,"time_ms":T}
  {"event":"reset", same fields as "request" but without status/reason}
  {"event":"unprocessed","conn":C,"stream":S,"token":...,"why":W,"time_ms":T}
     W: goaway | client_reset | client_goaway | connection_closed | shutdown
  {"event":"goaway","conn":C,"last_stream_id":L,"time_ms":T}
  {"event":"closed","conn":C,"peak_concurrent_streams":P,"requests":R,"time_ms":T}
     (R counts answered and reset streams)
  {"event":"script","path":"...","error":null|"...","time_ms":T}     (each (re)load attempt)
  Header names are lower case (pseudo-headers included); repeated ones are joined with ", ";
  authorization is redacted to "bearer <iat>" ("bearer <unparsable>" if there is none).
  Connections idle (nothing read or written) for --idle-timeout seconds get
  GOAWAY(NO_ERROR, {"reason":"IdleTimeout"}) and are closed.
"""
import argparse, asyncio, base64, binascii, hashlib, json, os, re, signal, ssl, sys, time, traceback, uuid

import h2.config, h2.connection, h2.events, h2.exceptions, h2.settings
from h2.errors import ErrorCodes
from h2.settings import SettingCodes
from hyperframe.frame import GoAwayFrame
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

MAX_PAYLOAD = 4096
JWT_MAX_AGE = 3600
JWT_MAX_SKEW = 60
GOAWAY_DRAIN_SECONDS = 10.0  # longest wait for streams <= last_stream_id after a GOAWAY
CLOSE_GRACE_SECONDS = 1.0    # let the client close first: closing with unread input sends a TCP RST
WRITE_TIMEOUT_SECONDS = 30.0
DUPLICATE_CHECKED = ("authorization", "apns-topic", "apns-push-type", "apns-priority",
                     "apns-expiration", "apns-id", "apns-collapse-id")
TOKEN_RE = re.compile(r"[0-9a-fA-F]{64,200}")
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")


def warn(msg):
    print(f"apns_test_server: {msg}", file=sys.stderr, flush=True)


def now_ms():
    return int(time.time() * 1000)


def b64url_decode(s):
    # JWS uses unpadded base64url; anything else (padding, '+', '/') is a malformed token.
    if not B64URL_RE.fullmatch(s):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


# ---------------------------------------------------------------- script

SCRIPT_KEYS = {"tokens", "default", "expire_provider_token_first", "goaway_after_streams",
               "goaway_connections", "delay_ms", "hold_ms", "reject_first_jwt_after"}


def parse_outcome(o, where):
    if not isinstance(o, dict):
        raise ValueError(f"{where}: an outcome must be an object, got {o!r}")
    if o.get("reset") is True:
        if set(o) != {"reset"}:
            raise ValueError(f"{where}: a reset outcome takes no other keys: {o!r}")
        return {"reset": True}
    unknown = set(o) - {"status", "reason", "timestamp_ms"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    status = o.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 200 <= status <= 599:
        raise ValueError(f"{where}: status must be an integer 200..599, got {status!r}")
    reason = o.get("reason")
    if status != 200 and not (isinstance(reason, str) and reason):
        raise ValueError(f"{where}: status {status} needs a non-empty string reason")
    ts = o.get("timestamp_ms")
    if ts is not None and ts != "now" and (not isinstance(ts, int) or isinstance(ts, bool) or ts < 0):
        raise ValueError(f"{where}: timestamp_ms must be a non-negative integer or \"now\", got {ts!r}")
    return {"status": status, "reason": reason if status != 200 else None, "timestamp_ms": ts}


def parse_script(text):
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("the script must be a JSON object")
    unknown = set(raw) - SCRIPT_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} (known: {sorted(SCRIPT_KEYS)})")
    tokens = raw.get("tokens", {})
    if not isinstance(tokens, dict):
        raise ValueError("tokens must be an object of token -> list of outcomes")
    script = {"tokens": {}}
    for token, outcomes in tokens.items():
        if not isinstance(outcomes, list) or not outcomes:
            raise ValueError(f"tokens[{token!r}] must be a non-empty list of outcomes")
        script["tokens"][token.lower()] = [parse_outcome(o, f"tokens[{token!r}][{i}]")
                                           for i, o in enumerate(outcomes)]
    script["default"] = parse_outcome(raw.get("default", {"status": 200}), "default")
    for key, default in (("expire_provider_token_first", 0), ("goaway_after_streams", 0),
                         ("goaway_connections", 1), ("delay_ms", 0), ("hold_ms", 0),
                         ("reject_first_jwt_after", 0)):
        value = raw.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{key} must be a non-negative integer, got {value!r}")
        script[key] = value
    return script


# ---------------------------------------------------------------- server-wide state

class Reject(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


class State:
    def __init__(self, args, public_key):
        self.args = args
        self.public_key = public_key
        self.log_file = open(args.log, "a", encoding="utf-8")
        self.script = parse_script("{}")
        self.script_key = None
        self.reset_script_state()
        self.next_conn = 1
        self.conn_tasks = set()

    def reset_script_state(self):
        self.cursors = {}
        self.first_iat = None
        self.expired_answers = 0
        self.first_jwt = None
        self.first_jwt_answers = 0
        self.goaway_slots_used = 0

    def log(self, event, **fields):
        if self.log_file.closed:  # a connection still closing after shutdown
            return
        self.log_file.write(json.dumps({"event": event, **fields, "time_ms": now_ms()}) + "\n")
        self.log_file.flush()

    def maybe_reload(self):
        path = self.args.script
        if not path:
            return
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError as e:
            key = ("missing", str(e))
        if key == self.script_key:
            return
        # stat before reading: if a writer is mid-way, the next stat differs and we read again.
        self.script_key = key
        try:
            with open(path, encoding="utf-8") as f:
                new = parse_script(f.read())
        except (OSError, ValueError) as e:
            warn(f"cannot use script {path}: {e}; keeping the previous script")
            self.log("script", path=path, error=str(e))
            return
        self.script = new
        self.reset_script_state()
        self.log("script", path=path, error=None)

    def take_goaway_slot(self):
        if self.goaway_slots_used < self.script["goaway_connections"]:
            self.goaway_slots_used += 1
            return True
        return False

    def check_jwt(self, value, now):
        """Returns (claimed iat or None, failure reason or None)."""
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None, "InvalidProviderToken"
        parts = token.strip().split(".")
        if len(parts) != 3:
            return None, "InvalidProviderToken"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, RecursionError, binascii.Error):
            return None, "InvalidProviderToken"
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return None, "InvalidProviderToken"
        iat = claims.get("iat")
        iat = iat if isinstance(iat, int) and not isinstance(iat, bool) else None
        if (header.get("alg") != "ES256" or header.get("kid") != self.args.key_id
                or claims.get("iss") != self.args.team_id or iat is None):
            return iat, "InvalidProviderToken"
        # JWS ES256 is raw r||s (32 bytes each); a DER signature is a classic client bug.
        if len(signature) != 64:
            return iat, "InvalidProviderToken"
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        try:
            self.public_key.verify(der, f"{parts[0]}.{parts[1]}".encode("ascii"), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return iat, "InvalidProviderToken"
        if now - iat > JWT_MAX_AGE:
            return iat, "ExpiredProviderToken"
        if iat - now > JWT_MAX_SKEW:
            return iat, "InvalidProviderToken"
        return iat, None

    def evaluate(self, st):
        """Decides one complete request. Returns a dict: kind (response|reset), status, reason,
        body, apns_id, jwt_iat, payload."""
        self.maybe_reload()
        d = {"kind": "response", "status": 200, "reason": None, "body": b"", "apns_id": None,
             "jwt_iat": None, "jwt_id": None, "payload": None}
        if st.body_len <= MAX_PAYLOAD:
            try:
                d["payload"] = json.loads(bytes(st.body))
            except (ValueError, RecursionError):
                pass
        h = st.header_lists
        single = {name: values[0] for name, values in h.items()}
        jwt = self.check_jwt(single["authorization"], int(time.time())) if "authorization" in single else (None, None)
        d["jwt_iat"] = jwt[0]
        if "authorization" in single:
            d["jwt_id"] = hashlib.sha256(single["authorization"].partition(" ")[2].strip().encode()).hexdigest()[:16]
        apns_id = single.get("apns-id")
        d["apns_id"] = apns_id if apns_id is not None and UUID_RE.fullmatch(apns_id) else str(uuid.uuid4())
        try:
            outcome = self.validate(st, single, jwt)
        except Reject as r:
            outcome = {"status": r.status, "reason": r.reason, "timestamp_ms": None}
        if outcome.get("reset"):
            d["kind"] = "reset"
            return d
        d["status"], d["reason"] = outcome["status"], outcome["reason"]
        if outcome["status"] != 200:
            body = {"reason": outcome["reason"]}
            ts = outcome.get("timestamp_ms")
            if ts is not None:
                body["timestamp"] = now_ms() if ts == "now" else ts
            d["body"] = json.dumps(body, separators=(",", ":")).encode()
        return d

    def validate(self, st, single, jwt):
        if st.method != "POST":
            raise Reject(405, "MethodNotAllowed")
        if not st.path.startswith("/3/device/") or "?" in st.path or "/" in st.path[len("/3/device/"):]:
            raise Reject(404, "BadPath")
        token = st.token
        if not token:
            raise Reject(400, "MissingDeviceToken")
        if any(len(st.header_lists.get(name, ())) > 1 for name in DUPLICATE_CHECKED):
            raise Reject(400, "DuplicateHeaders")
        if "authorization" not in single:
            raise Reject(403, "MissingProviderToken")
        iat, failure = jwt
        if failure:
            raise Reject(403, failure)
        if self.first_iat is None:
            self.first_iat = iat
        jws = single["authorization"].partition(" ")[2].strip()
        if self.first_jwt is None:
            self.first_jwt = jws
        topic = single.get("apns-topic")
        if topic is None:
            raise Reject(400, "MissingTopic")
        if topic != self.args.topic:
            raise Reject(400, "TopicDisallowed")
        if single.get("apns-push-type") != "alert":
            raise Reject(400, "InvalidPushType")
        if "apns-priority" in single and single["apns-priority"] not in ("1", "5", "10"):
            raise Reject(400, "BadPriority")
        if "apns-expiration" in single and not re.fullmatch(r"[0-9]+", single["apns-expiration"]):
            raise Reject(400, "BadExpirationDate")
        if "apns-id" in single and not UUID_RE.fullmatch(single["apns-id"]):
            raise Reject(400, "BadMessageId")
        if len(single.get("apns-collapse-id", "").encode()) > 64:
            raise Reject(400, "BadCollapseId")
        if not TOKEN_RE.fullmatch(token):
            raise Reject(400, "BadDeviceToken")
        if st.body_len > MAX_PAYLOAD:
            raise Reject(413, "PayloadTooLarge")
        if st.body_len == 0:
            raise Reject(400, "PayloadEmpty")
        try:
            payload = json.loads(bytes(st.body))
        except (ValueError, RecursionError):
            payload = None
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            raise Reject(400, "InvalidPayload")
        # Only now is the request "otherwise valid".
        limit = self.script["reject_first_jwt_after"]
        if limit > 0 and jws == self.first_jwt:
            if self.first_jwt_answers >= limit:
                raise Reject(403, "ExpiredProviderToken")
            self.first_jwt_answers += 1
        if iat == self.first_iat and self.expired_answers < self.script["expire_provider_token_first"]:
            self.expired_answers += 1
            raise Reject(403, "ExpiredProviderToken")
        outcomes = self.script["tokens"].get(token.lower())
        if outcomes is None:
            return self.script["default"]
        i = self.cursors.get(token.lower(), 0)
        self.cursors[token.lower()] = i + 1
        return outcomes[min(i, len(outcomes) - 1)]


# ---------------------------------------------------------------- one connection

class Stream:
    def __init__(self, sid, headers):
        self.id = sid
        self.header_lists = {}
        for name, value in headers:
            name = name.decode("utf-8", "replace").lower()
            self.header_lists.setdefault(name, []).append(value.decode("utf-8", "replace"))
        self.method = self.header_lists.get(":method", [""])[0]
        self.path = self.header_lists.get(":path", [""])[0]
        prefix = "/3/device/"
        self.token = self.path[len(prefix):] if self.path.startswith(prefix) else None
        self.body = bytearray()
        self.body_len = 0
        self.complete = False
        self.timer = None

    def logged_headers(self, jwt_iat):
        out = {name: ", ".join(values) for name, values in self.header_lists.items()}
        if "authorization" in out:
            out["authorization"] = f"bearer {jwt_iat}" if jwt_iat is not None else "bearer <unparsable>"
        return out


class Conn:
    def __init__(self, state, cid, reader, writer):
        self.state, self.cid, self.reader, self.writer = state, cid, reader, writer
        self.loop = asyncio.get_running_loop()
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        # Replacing the settings before initiate_connection makes them the ones we announce.
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            SettingCodes.MAX_CONCURRENT_STREAMS: state.args.max_concurrent_streams,
            SettingCodes.MAX_HEADER_LIST_SIZE: 65536})
        self.streams = {}  # open streams we have neither answered nor given up on
        self.answered = 0
        self.max_answered_id = 0
        self.peak = 0
        self.goaway_last = None
        self.goaway_deadline = None
        self.close_at = None
        self.finished = False
        self.wake = asyncio.Event()
        self.last_activity = self.loop.time()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)
            self.last_activity = self.loop.time()

    def drop(self, st, why):
        if st.timer:
            st.timer.cancel()
        self.streams.pop(st.id, None)
        self.state.log("unprocessed", conn=self.cid, stream=st.id, token=st.token, why=why)

    async def run(self):
        read_task = None
        why_closed = "connection_closed"
        try:
            self.h2.initiate_connection()
            self.flush()
            while not self.finished:
                if read_task is None:
                    read_task = asyncio.ensure_future(self.reader.read(65536))
                wake_task = asyncio.ensure_future(self.wake.wait())
                timeout = max(0.0, self.deadline() - self.loop.time())
                done, _ = await asyncio.wait({read_task, wake_task}, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                wake_task.cancel()
                self.wake.clear()
                if read_task in done:
                    data = read_task.result()
                    read_task = None
                    if not data:
                        break
                    self.last_activity = self.loop.time()
                    self.on_data(data)
                await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT_SECONDS)
                self.check_deadlines()
        except asyncio.CancelledError:
            why_closed = "shutdown"
            self.try_goaway(b'{"reason":"Shutdown"}')
        except h2.exceptions.ProtocolError as e:
            warn(f"conn {self.cid}: HTTP/2 protocol error from the client, closing: {e!r}")
            self.flush()  # h2 queued a GOAWAY with the error code
        except (ConnectionError, ssl.SSLError, asyncio.TimeoutError, OSError) as e:
            warn(f"conn {self.cid}: connection lost: {e!r}")
        finally:
            if read_task is not None:
                read_task.cancel()
            for st in sorted(self.streams.values(), key=lambda s: s.id):
                self.drop(st, why_closed)
            self.writer.close()
            try:
                await asyncio.wait_for(self.writer.wait_closed(), 2)
            except (Exception, asyncio.CancelledError):
                pass  # the peer may already be gone; nothing left to do for it
            self.state.log("closed", conn=self.cid, peak_concurrent_streams=self.peak, requests=self.answered)

    def deadline(self):
        if self.goaway_last is not None:
            return self.close_at if self.close_at is not None else self.goaway_deadline
        return self.last_activity + self.state.args.idle_timeout

    def check_deadlines(self):
        now = self.loop.time()
        if self.goaway_last is not None:
            if any(sid <= self.goaway_last for sid in self.streams):
                if now >= self.goaway_deadline:
                    warn(f"conn {self.cid}: streams <= {self.goaway_last} still incomplete "
                         f"{GOAWAY_DRAIN_SECONDS:.0f} s after GOAWAY; closing")
                    self.finished = True
            elif self.close_at is None:
                self.close_at = now + CLOSE_GRACE_SECONDS
            elif now >= self.close_at:
                self.finished = True
        elif now - self.last_activity >= self.state.args.idle_timeout:
            self.try_goaway(b'{"reason":"IdleTimeout"}')
            self.finished = True

    def try_goaway(self, debug):
        try:
            self.h2.close_connection(ErrorCodes.NO_ERROR, debug, last_stream_id=self.max_answered_id)
            self.flush()
        except Exception:  # already closed by either side: nothing to announce
            pass

    def on_data(self, data):
        events = self.h2.receive_data(data)
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                st = Stream(ev.stream_id, ev.headers)
                if self.goaway_last is not None:
                    # Arrived after our GOAWAY: never processed.
                    self.state.log("unprocessed", conn=self.cid, stream=st.id, token=st.token, why="goaway")
                    continue
                self.streams[st.id] = st
                self.peak = max(self.peak, len(self.streams))
            elif isinstance(ev, h2.events.DataReceived):
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                st = self.streams.get(ev.stream_id)
                if st is not None:
                    st.body_len += len(ev.data)
                    room = MAX_PAYLOAD + 1 - len(st.body)  # keep no more than we could ever accept
                    if room > 0:
                        st.body += ev.data[:room]
            elif isinstance(ev, h2.events.StreamEnded):
                st = self.streams.get(ev.stream_id)
                if st is not None:
                    st.complete = True
                    self.schedule(st)
            elif isinstance(ev, h2.events.StreamReset):
                st = self.streams.get(ev.stream_id)
                if st is not None:
                    self.drop(st, "client_reset")
            elif isinstance(ev, h2.events.ConnectionTerminated):
                # h2 can send nothing more after a peer's GOAWAY, so pending requests die here.
                for st in sorted(self.streams.values(), key=lambda s: s.id):
                    self.drop(st, "client_goaway")
                self.finished = True
        self.flush()

    def schedule(self, st):
        self.state.maybe_reload()
        delay = self.state.script["delay_ms"] / 1000.0
        hold = self.state.script["hold_ms"] / 1000.0
        if self.goaway_last is None and hold > 0:
            self.answer(st, hold=hold)
        elif self.goaway_last is not None or delay <= 0:
            self.answer(st)
        else:
            st.timer = self.loop.call_later(delay, self.answer, st)

    def answer(self, st, hold=0.0):
        """Processes and answers one complete request, all in one synchronous step (or, with a
        hold, processes now and writes the answer `hold` seconds later)."""
        st.timer = None
        if st.id not in self.streams:
            return
        del self.streams[st.id]
        try:
            d = self.state.evaluate(st)
            fields = dict(conn=self.cid, stream=st.id, token=st.token)
            common = dict(apns_id=d["apns_id"], headers=st.logged_headers(d["jwt_iat"]), payload=d["payload"],
                          payload_bytes=st.body_len, jwt_iat=d["jwt_iat"], jwt_id=d["jwt_id"])
            if hold > 0 and d["kind"] != "reset":
                self.state.log("request", **fields, status=d["status"], reason=d["reason"], **common)
                self.loop.call_later(hold, self.write_held, st, d)
                return
            if d["kind"] == "reset":
                self.state.log("reset", **fields, **common)
                self.h2.reset_stream(st.id, ErrorCodes.INTERNAL_ERROR)
            else:
                self.state.log("request", **fields, status=d["status"], reason=d["reason"], **common)
                self.write_answer(st, d)
        except Exception:
            warn(f"conn {self.cid} stream {st.id}: failed to answer:\n{traceback.format_exc()}")
            try:
                self.h2.reset_stream(st.id, ErrorCodes.INTERNAL_ERROR)
            except Exception:
                pass
        self.answered += 1
        self.max_answered_id = max(self.max_answered_id, st.id)
        n = self.state.script["goaway_after_streams"]
        if self.goaway_last is None and n > 0 and self.answered == n and self.state.take_goaway_slot():
            self.send_goaway()
        self.flush()
        self.wake.set()

    def write_held(self, st, d):
        """The answer of a request processed `hold_ms` ago; the stream may be gone by now."""
        try:
            self.write_answer(st, d)
        except Exception:  # the client reset the stream or closed the connection meanwhile
            pass
        self.answered += 1
        self.max_answered_id = max(self.max_answered_id, st.id)
        self.flush()
        self.wake.set()

    def write_answer(self, st, d):
        headers = [(":status", str(d["status"])), ("apns-id", d["apns_id"])]
        if d["status"] == 200:
            headers.append(("apns-unique-id", str(uuid.uuid4())))
            self.h2.send_headers(st.id, headers, end_stream=True)
        else:
            headers += [("content-type", "application/json"), ("content-length", str(len(d["body"])))]
            self.h2.send_headers(st.id, headers)
            self.h2.send_data(st.id, d["body"], end_stream=True)

    def send_goaway(self):
        last = self.max_answered_id
        self.goaway_last = last
        self.goaway_deadline = self.loop.time() + GOAWAY_DRAIN_SECONDS
        for st in sorted(self.streams.values(), key=lambda s: s.id):
            if st.id > last:
                self.drop(st, "goaway")
            elif st.complete:
                if st.timer:
                    st.timer.cancel()
                self.answer(st)  # waiting for its delay: answer now, before the GOAWAY
            # else: still receiving its body; schedule() answers it without delay
        self.flush()
        # Written by hand rather than with h2's close_connection: that would put h2 in its CLOSED
        # state, where it can neither send the answers still owed nor parse the client's frames.
        self.writer.write(GoAwayFrame(0, last_stream_id=last, error_code=ErrorCodes.NO_ERROR).serialize())
        self.state.log("goaway", conn=self.cid, last_stream_id=last)


# ---------------------------------------------------------------- main

def load_public_key(path):
    with open(path, "rb") as f:
        key = serialization.load_pem_public_key(f.read())
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError(f"{path}: not an EC P-256 public key (ES256 needs one)")
    return key


def make_tls_context(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # RFC 7540 9.2.2: with TLS 1.2, HTTP/2 needs ephemeral key exchange and an AEAD cipher.
    ctx.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
    ctx.options |= ssl.OP_NO_COMPRESSION
    ctx.set_alpn_protocols(["h2"])
    return ctx


async def main(args):
    loop = asyncio.get_running_loop()
    public_key = load_public_key(args.public_key)
    ctx = make_tls_context(args)
    state = State(args, public_key)
    state.maybe_reload()

    def on_loop_error(_loop, context):
        exc = context.get("exception")
        warn(f"{context.get('message')}: {exc!r}" if exc else str(context.get("message")))
    loop.set_exception_handler(on_loop_error)

    async def handle(reader, writer):
        cid = state.next_conn
        state.next_conn += 1
        ssl_object = writer.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object else None
        if alpn != "h2":
            state.log("rejected", conn=cid, reason=f"ALPN negotiated {alpn!r}, not 'h2'")
            warn(f"conn {cid}: refused: the client did not negotiate h2 via ALPN")
            writer.close()
            return
        task = asyncio.current_task()
        state.conn_tasks.add(task)
        state.log("connection", conn=cid)
        try:
            await Conn(state, cid, reader, writer).run()
        finally:
            state.conn_tasks.discard(task)

    stop = asyncio.Event()
    # Swift's Foundation.Process starts children with most signals blocked; unblock ours or
    # SIGTERM from the test never arrives.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(handle, args.host, args.port, ssl=ctx, ssl_handshake_timeout=10)
    port = server.sockets[0].getsockname()[1]
    tmp = f"{args.ready_file}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"port": port}, f)
    os.replace(tmp, args.ready_file)
    print(f"LISTENING {args.host}:{port}", flush=True)

    if args.max_seconds > 0:
        loop.call_later(args.max_seconds, stop.set)
    await stop.wait()
    server.close()
    tasks = list(state.conn_tasks)
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=3)
    state.log_file.close()


def parse_args():
    p = argparse.ArgumentParser(description="Strict local APNs (HTTP/2 provider API) test server.")
    p.add_argument("--cert", required=True, help="server certificate chain (PEM)")
    p.add_argument("--key", required=True, help="server private key (PEM)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ready-file", required=True, help='written as {"port": N} once listening')
    p.add_argument("--team-id", required=True, help="expected JWT iss")
    p.add_argument("--key-id", required=True, help="expected JWT kid")
    p.add_argument("--public-key", required=True, help="ES256 (P-256) public key, PEM SubjectPublicKeyInfo")
    p.add_argument("--topic", required=True, help="the only accepted apns-topic")
    p.add_argument("--script", help="scripted outcomes (JSON), re-read when it changes")
    p.add_argument("--log", required=True, help="JSON-lines event log")
    p.add_argument("--max-concurrent-streams", type=int, default=100)
    p.add_argument("--idle-timeout", type=float, default=60.0, help="close connections idle this long (s)")
    p.add_argument("--max-seconds", type=float, default=0.0, help="exit by itself after this long; 0 = never")
    args = p.parse_args()
    if args.max_concurrent_streams < 1:
        p.error("--max-concurrent-streams must be at least 1")
    return args


if __name__ == "__main__":
    arguments = parse_args()
    try:
        asyncio.run(main(arguments))
    except (OSError, ValueError, ssl.SSLError) as e:
        warn(f"cannot start: {e}")
        sys.exit(1)
    sys.exit(0)
