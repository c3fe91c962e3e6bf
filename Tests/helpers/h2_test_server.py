#!/usr/bin/env python3
"""An HTTPS server that speaks HTTP/2 (hypercorn, ALPN h2 + http/1.1), for the uplink's tests.

Answers every POST with 200 and logs one JSON line per request with the HTTP version the
client negotiated. Writes {"port": N} to --ready-file once listening; exits after --max-seconds.
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
args = p.parse_args()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    with open(args.log, "a") as f:
        f.write(json.dumps({"http_version": scope["http_version"], "method": scope["method"], "bytes": len(body)}) + "\n")
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"status":"accepted"}'})


async def main():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile, config.keyfile = args.cert, args.key
    config.alpn_protocols = ["h2", "http/1.1"]
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
