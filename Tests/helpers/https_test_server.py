#!/usr/bin/env python3
"""A scriptable HTTPS server for the uplink's tests (stdlib only).

Answers each POST with the next status from --script (the last one repeats), or hangs without
answering for "hang". Logs every request as a JSON line (method, path, headers, body as latin-1,
connection number) to --log, writes {"port": N} to --ready-file once listening, and exits by
itself after --max-seconds.
"""
import argparse, http.server, json, os, random, ssl, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=0)
p.add_argument("--cert", required=True)
p.add_argument("--key", required=True)
p.add_argument("--script", default="200")
p.add_argument("--log", required=True)
p.add_argument("--ready-file", required=True)
p.add_argument("--max-seconds", type=float, default=60)
p.add_argument("--retry-after", default="7", help="Retry-After value sent with 429/503")
p.add_argument("--fail-rate", type=float, default=0.0, help="answer this fraction of POSTs with --fail-status (seeded)")
p.add_argument("--fail-status", default="503", help="the status --fail-rate answers with")
p.add_argument("--rate-429", type=float, default=0.0, help="answer this fraction of POSTs with 429 and Retry-After (seeded)")
p.add_argument("--lose-rate", type=float, default=0.0, help="store this fraction of POSTs but lose the answer (reset-after; seeded)")
p.add_argument("--poison", default="", help="comma-separated event sequences always answered 500")
p.add_argument("--spare-from", type=int, default=0, help="events with this sequence or higher are never failed at random")
p.add_argument("--down-file", help="while this file exists, every connection is reset without an answer (an outage)")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--kill-pid-file", help="the script's 'kill' SIGKILLs the process whose pid this file holds, then resets (a crash right after the send)")
p.add_argument("--client-ca", help="require a client certificate signed by this CA (mTLS)")
args = p.parse_args()

script = args.script.split(",")
poison = {int(s) for s in args.poison.split(",") if s}
rng = random.Random(args.seed)
lock = threading.Lock()
state = {"requests": 0, "connections": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle + delayed ACK make
        # every kept-alive request wait ~40 ms, and the server, not the client, is what we'd measure.
        import socket as _s
        self.connection.setsockopt(_s.IPPROTO_TCP, _s.TCP_NODELAY, 1)
        with lock:
            state["connections"] += 1
            self.connection_number = state["connections"]

    def log_message(self, *a):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        with lock:
            n = state["requests"]
            state["requests"] += 1
            action = script[min(n, len(script) - 1)]
            try:
                sequence = json.loads(body).get("sequence")
            except ValueError:
                sequence = None
            spared = isinstance(sequence, int) and args.spare_from and sequence >= args.spare_from
            if args.down_file and os.path.exists(args.down_file):
                action = "reset-before"
            elif sequence in poison:
                action = "500"
            elif action == "200" and not spared:
                draw = rng.random()
                if draw < args.fail_rate:
                    action = args.fail_status
                elif draw < args.fail_rate + args.rate_429:
                    action = "429"
                elif draw < args.fail_rate + args.rate_429 + args.lose_rate:
                    action = "reset-after"
            with open(args.log, "a") as f:
                f.write(json.dumps({"t": time.time(), "answer": action, "sequence": sequence, "method": "POST", "path": self.path, "headers": dict(self.headers.items()),
                                    "body": body.decode("latin-1"), "connection": self.connection_number}) + "\n")
        if action == "kill":
            import signal as _signal
            with open(args.kill_pid_file) as f:
                os.kill(int(f.read().strip()), _signal.SIGKILL)
            action = "reset-before"
        if action == "hang":
            time.sleep(args.max_seconds)
            return
        if action in ("reset-before", "reset-after"):
            # Drop the connection without an answer: "before" = not stored, "after" = stored but
            # the acknowledgement was lost (the log says which, the test decides what was stored).
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return
        status = int(action)
        payload = json.dumps({"status": status}).encode()
        self.send_response(status)
        if status in (301, 302, 307, 308):
            self.send_header("Location", "https://127.0.0.1:1/elsewhere")
        if status in (429, 503):
            self.send_header("Retry-After", args.retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
server.daemon_threads = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(args.cert, args.key)
if args.client_ca:
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(args.client_ca)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
tmp = args.ready_file + ".tmp"
with open(tmp, "w") as f:
    json.dump({"port": server.server_address[1]}, f)
os.rename(tmp, args.ready_file)
threading.Timer(args.max_seconds, lambda: os._exit(0)).start()
server.serve_forever()
