#!/usr/bin/env python3
"""Drain after heal (#27): how long presses wait behind a backlog once the receiver is back.

A bounded measurement, not a test. The stdlib HTTPS receiver (Tests/helpers/https_test_server.py)
fails 30 % of requests with 500, answers 10 % with 429 + Retry-After 5 s and stores 5 % but loses
the answer (connection reset after storing); the agent has retry_max_ms = 30 s. The receiver is
down (every connection reset) while --events presses are made, stays down --outage-s more seconds,
then heals (with the failures above). From the heal on, a press every --press-every-s seconds:
"presses made while up". Prints one JSON line: drain time (heal → empty outbox), requests/s,
429s, and the presses' waits (press → first stored copy at the receiver) p50/p90/max, with the
1-minute load average at the start and the end, and the three slowest presses' attempts.
Everything stops after --max-s seconds.

  scripts/bench-drain-after-heal.py --agent .build/debug/doorbell-agent --agentctl .build/debug/agentctl
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
p = argparse.ArgumentParser()
p.add_argument("--agent", default=os.path.join(root, ".build/debug/doorbell-agent"))
p.add_argument("--agentctl", default=os.path.join(root, ".build/debug/agentctl"))
p.add_argument("--events", type=int, default=139)
p.add_argument("--outage-s", type=float, default=20)
p.add_argument("--press-every-s", type=float, default=3)
p.add_argument("--max-s", type=float, default=300, help="the whole drain phase stops after this")
p.add_argument("--seed", type=int, default=5)
p.add_argument("--label", default="")
args = p.parse_args()

work = tempfile.mkdtemp(prefix="drain-after-heal-")
procs = []


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def ctl(*a, timeout=10):
    r = subprocess.run([args.agentctl, *a, "--socket", f"{work}/control.sock"], capture_output=True, text=True, timeout=timeout)
    return r


def status():
    try:
        r = ctl("status", "--json")
        return json.loads(r.stdout) if r.returncode in (0, 1) else None
    except (subprocess.TimeoutExpired, ValueError):
        return None


def requests():
    try:
        with open(f"{work}/requests.jsonl") as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []


def stop():
    for pr in procs:
        if pr.poll() is None:
            pr.send_signal(signal.SIGTERM)
            try:
                pr.wait(10)
            except subprocess.TimeoutExpired:
                pr.kill()


try:
    load_start = load()
    subprocess.run(["bash", f"{root}/scripts/make-test-pki.sh", f"{work}/pki"], check=True, capture_output=True)
    down = f"{work}/down"
    open(down, "w").close()
    procs.append(subprocess.Popen([sys.executable, f"{root}/Tests/helpers/https_test_server.py", "--cert", f"{work}/pki/server.pem",
                                   "--key", f"{work}/pki/server.key", "--log", f"{work}/requests.jsonl", "--ready-file", f"{work}/ready.json",
                                   "--max-seconds", str(args.max_s + 200), "--script", "200", "--fail-rate", "0.3", "--fail-status", "500",
                                   "--rate-429", "0.1", "--retry-after", "5", "--lose-rate", "0.05", "--down-file", down,
                                   "--seed", str(args.seed)]))
    for _ in range(200):
        if os.path.exists(f"{work}/ready.json"):
            break
        time.sleep(0.1)
    port = json.load(open(f"{work}/ready.json"))["port"]
    with open(f"{work}/g.whsec", "w") as f:
        f.write("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
    with open(f"{work}/quiet.sh", "w") as f:
        f.write("#!/bin/sh\nexec sleep 100000\n")
    os.chmod(f"{work}/quiet.sh", 0o755)
    with open(f"{work}/agent.toml", "w") as f:
        f.write(f"""gateway_id = "gw-drain"
[paths]
state_dir = "{work}/state"
control_socket = "{work}/control.sock"
[log]
level = "warning"
[clock]
require_sync = false
[radio.rtl433]
binary = "{work}/quiet.sh"
[[device]]
id = "front-door"
name = "Front door"
match = {{ code = 1 }}
[tracker.button]
cooldown_ms = 0
repeat_gap_ms = 20
[uplink]
url = "https://127.0.0.1:{port}/events"
ca_file = "{work}/pki/ca.pem"
hmac_secret_file = "{work}/g.whsec"
retry_max_ms = 30000
""")
    procs.append(subprocess.Popen([args.agent, "run", "--config", f"{work}/agent.toml"], stdout=subprocess.DEVNULL,
                                  stderr=open(f"{work}/agent.err", "w")))
    for _ in range(300):
        if status():
            break
        time.sleep(0.1)
    # The backlog, made while the receiver is down.
    for _ in range(args.events):
        ctl("inject", "press", "--device", "front-door")
        time.sleep(0.03)
    time.sleep(args.outage_s)
    waiting = (status() or {}).get("outbox", {}).get("depth")
    os.remove(down)
    heal = time.time()
    presses = []  # (sequence, made at)
    next_press = heal
    drained_at = None
    while time.time() - heal < args.max_s:
        now = time.time()
        if now >= next_press:
            made = time.time()
            if ctl("inject", "press", "--device", "front-door").returncode == 0:
                s = status()
                if s:
                    presses.append((s["outbox"]["last_sequence"], made))
            next_press += args.press_every_s
        s = status()
        if s and s["outbox"]["depth"] == 0 and drained_at is None and time.time() - heal > 1:
            drained_at = time.time()
        if drained_at and len(presses) >= 10:
            break
        time.sleep(0.2)
    log = requests()
    stored = {}
    for r in log:
        if r.get("answer") in ("200", "reset-after") and r.get("sequence") is not None:
            stored.setdefault(r["sequence"], r["t"])
    waits = sorted(stored[s] - made for s, made in presses if s in stored)
    first_try = {}
    for r in log:
        if r.get("sequence") is not None:
            first_try.setdefault(r["sequence"], r["t"])
    # Press → its first request (what the uplink decides; the rest is the receiver's answers).
    firsts = sorted(first_try[s] - made for s, made in presses if s in first_try)
    # Why the slowest presses waited: each attempt's time after the press and the answer, and
    # what the receiver answered in between (its Retry-After pauses are respected).
    slowest = sorted(((stored[s] - made, s, made) for s, made in presses if s in stored), reverse=True)[:3]
    why = [{"wait_s": round(w, 2), "attempts": [(round(r["t"] - made, 2), r["answer"]) for r in log if r.get("sequence") == s],
            "answers_meanwhile": {a: sum(1 for r in log if made <= r["t"] <= made + w and r["answer"] == a and r.get("sequence") != s)
                                  for a in ("200", "429", "500", "reset-after", "reset-before")}} for w, s, made in slowest]
    during = [r for r in log if r["t"] >= heal and (drained_at is None or r["t"] <= drained_at)]

    def pct(q):
        return round(waits[min(len(waits) - 1, int(q * len(waits)))], 2) if waits else None

    span = (drained_at or time.time()) - heal
    print(json.dumps({
        "label": args.label, "waiting_at_heal": waiting, "drain_s": round(drained_at - heal, 1) if drained_at else None,
        "requests_per_s": round(len(during) / span, 2) if span > 0 else None,
        "answers_during_drain": {a: sum(1 for r in during if r["answer"] == a) for a in sorted({r["answer"] for r in during})},
        "presses_while_up": len(presses), "presses_delivered": len(waits),
        "press_wait_s": {"p50": pct(0.5), "p90": pct(0.9), "max": round(waits[-1], 2) if waits else None},
        "press_first_request_s": {"p50": round(firsts[len(firsts) // 2], 2) if firsts else None,
                                  "p90": round(firsts[min(len(firsts) - 1, int(0.9 * len(firsts)))], 2) if firsts else None,
                                  "max": round(firsts[-1], 2) if firsts else None},
        "slowest": why, "load_start": load_start, "load_end": load(),
        "lost": sorted(set(range(1, max(stored) + 1)) - set(stored)) if stored and drained_at else None,
    }))
finally:
    stop()
    shutil.rmtree(work, ignore_errors=True)
