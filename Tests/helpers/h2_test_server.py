#!/usr/bin/env python3
"""An HTTPS server that speaks HTTP/2 (hypercorn, ALPN h2 + http/1.1), for the uplink's tests.

Answers every POST with 200, or with the status --answers gives for the event's sequence (the
first request for that sequence only; later ones get 200). Logs one JSON line per request: the
HTTP version the client negotiated, the connection (client port), the event's sequence and id,
the answer, and how many requests were in flight on the server when it arrived (`in_flight`).

--gather N holds the answers to the requests after the first (which a client sends alone to
learn whether the connection multiplexes) until N of them are in flight at once (or
--gather-seconds pass): a client that sends them together sees them answered; one that sends
one at a time waits out the timeout, and the log shows `in_flight` 1. No timing is asserted on.

Writes {"port": N} to --ready-file once listening; exits after --max-seconds.
"""
import argparse, asyncio, json, os, socket

from hypercorn.asyncio import serve
from hypercorn.config import Config

p = argparse.ArgumentParser()
p.add_argument("--cert", required=True)
p.add_argument("--key", required=True)
p.add_argument("--log", required=True)
p.add_argument("--ready-file", required=True)
p.add_argument("--max-seconds", type=float, default=60)
p.add_argument("--answers", default="", help="SEQUENCE:STATUS,... answered once each (e.g. 5:500,9:400)")
p.add_argument("--gather", type=int, default=0, help="hold the first answers until this many requests are in flight")
p.add_argument("--gather-seconds", type=float, default=10)
p.add_argument("--h1-only", action="store_true", help="offer only http/1.1 by ALPN")
p.add_argument("--max-requests", type=int, default=1_000_000,
               help="requests per connection before the server closes it (hypercorn's default, 1000, "
                    "closes it with streams still unanswered)")
args = p.parse_args()

answers = {}
for item in filter(None, args.answers.split(",")):
    seq, status = item.split(":")
    answers[int(seq)] = int(status)
state = {"in_flight": 0, "gathering": args.gather > 0, "requests": 0}
gathered = asyncio.Event()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return
    if scope["type"] != "http":
        return
    state["in_flight"] += 1
    state["requests"] += 1
    in_flight, first = state["in_flight"], state["requests"] == 1
    try:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if state["gathering"] and not first:
            if state["in_flight"] >= args.gather:
                gathered.set()
            try:
                await asyncio.wait_for(gathered.wait(), args.gather_seconds)
            except asyncio.TimeoutError:
                pass
            state["gathering"] = False
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        sequence, event_id = None, headers.get("webhook-id")
        try:
            sequence = json.loads(body).get("sequence")
        except ValueError:
            pass
        status = answers.pop(sequence, 200) if sequence is not None else 200
        with open(args.log, "a") as f:
            f.write(json.dumps({"http_version": scope["http_version"], "method": scope["method"], "bytes": len(body),
                                "connection": scope["client"][1] if scope.get("client") else None,
                                "sequence": sequence, "id": event_id, "answer": status, "in_flight": in_flight}) + "\n")
        payload = json.dumps({"status": status}).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})
    finally:
        state["in_flight"] -= 1


async def main():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile, config.keyfile = args.cert, args.key
    config.alpn_protocols = ["http/1.1"] if args.h1_only else ["h2", "http/1.1"]
    config.keep_alive_max_requests = args.max_requests
    config.accesslog = None
    config.errorlog = None
    shutdown = asyncio.Event()
    server = asyncio.ensure_future(serve(app, config, shutdown_trigger=shutdown.wait))
    await asyncio.sleep(0.5)
    tmp = args.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"port": port}, f)
    os.rename(tmp, args.ready_file)
    await asyncio.sleep(args.max_seconds)
    shutdown.set()
    await server


asyncio.run(main())
