"""Guest side of the GPIO scenario (test_gpio.py; python3-minimal only, it runs in the guest).

  gpio_sim.py press PULL_PATH --code HEX --unit MICROS [--protocol 1|2] [--repeats N] [--bits 24] [--hold-pid PID]
  gpio_sim.py watch VALUE_PATH --seconds S

press plays a fixed-code remote's press on a gpio-sim input line by writing pull-up / pull-down
to its sim_gpioN/pull, as a 433 MHz receiver module's DATA pin would swing, and says how well it
kept time. watch samples an output line's sim_gpioN/value (what the chip's consumer drives) about
every millisecond and prints each change with its time and the longest gap between two samples
(a change is seen at most that late): the chime relay's pulse, level and length.

The waveform is rc-switch's protocol table (ratios only, as OOKDecoder.swift has it); protocol 1
is EV1527's: sync 1T high 31T low, then each bit 1T/3T (0) or 3T/1T (1). Each level is held for its
planned time from its own write: sleep until shortly before, then spin on the monotonic clock.
Prints one JSON line: the pulses planned, how far the writes landed from the plan (the write's
own timing; the kernel stamps the edge right after it), how many words were clean (every level
within T/2 of its plan) and the longest run of consecutive clean words. With --hold-pid the process is
stopped (SIGSTOP) just before the first edge and continued right after the last, so the stall is
the press itself, not this interpreter's start-up under emulation; held_ms says how long."""
import signal
import os
import sys
import time

PROTOCOLS = {  # sync high, sync low, zero high, zero low, one high, one low (in T)
    1: (1, 31, 1, 3, 3, 1),
    2: (1, 10, 1, 2, 2, 1),
}


SPIN_NS = int(os.environ.get("GPIO_SIM_SPIN_US", "200")) * 1000


def dumps(v):
    """JSON for numbers, strings, lists and dicts (python3-minimal has no json module)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f'"{k}": {dumps(x)}' for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(dumps(x) for x in v) + "]"
    return f'"{v}"' if isinstance(v, str) else repr(v)


def waveform(code, bits, protocol, repeats):
    """(high?, duration in T) for the whole burst: sync then bits, per word."""
    sh, sl, zh, zl, oh, ol = PROTOCOLS[protocol]
    out = []
    for _ in range(repeats):
        out += [(True, sh), (False, sl)]
        for i in reversed(range(bits)):
            one = (code >> i) & 1
            out += [(True, oh if one else zh), (False, ol if one else zl)]
    # A final sync ends the last word the way the next word's sync would (PT2262 sends it there).
    out += [(True, sh), (False, sl)]
    return out


def press(argv):
    args = dict(zip(argv[1::2], argv[2::2]))
    path = argv[0]
    code = int(args["--code"], 16)
    unit = int(args["--unit"])
    protocol = int(args.get("--protocol", "1"))
    repeats = int(args.get("--repeats", "8"))
    bits = int(args.get("--bits", "24"))
    plan = waveform(code, bits, protocol, repeats)
    fd = os.open(path, os.O_WRONLY)
    levels = {True: b"pull-up", False: b"pull-down"}
    os.pwrite(fd, levels[False], 0)
    time.sleep(0.05)
    writes = []
    hold = int(args["--hold-pid"]) if "--hold-pid" in args else None
    if hold:
        os.kill(hold, signal.SIGSTOP)
    held_from = time.monotonic_ns()
    try:
        drive(fd, plan, unit, writes)
    finally:
        if hold:
            os.kill(hold, signal.SIGCONT)
    held_ms = round((time.monotonic_ns() - held_from) / 1e6) if hold else 0
    os.close(fd)
    # writes has one more entry than plan: the idle low that ends the last level.
    planned = [units * unit for _, units in plan]
    actual = [(b - a) / 1000 for a, b in zip(writes, writes[1:])]
    errors = [abs(a - p) for a, p in zip(actual, planned)]
    # A word is clean when every level of it landed within T/2 of its plan: then its bits are
    # unambiguous to any decoder (1T and 3T split at 2T) and its sync is a sync. A loaded host can
    # stretch a guest's levels by whole time units; such a word was never valid on the line.
    per_word = 2 + 2 * bits
    clean = [all(e < unit / 2 for e in errors[w * per_word:(w + 1) * per_word]) for w in range(repeats)]
    # A decoder confirms a code on two identical consecutive words; a damaged word between resets it.
    clean_run, run = 0, 0
    for c in clean:
        run = run + 1 if c else 0
        clean_run = max(clean_run, run)
    print(dumps({"pulses": len(plan), "unit_us": unit, "protocol": protocol,
                      "error_us_p50_p90_max": [round(sorted(errors)[len(errors) // 2]), round(sorted(errors)[len(errors) * 9 // 10]), round(max(errors))], "over_quarter_unit": sum(e > unit / 4 for e in errors),
                      "clean_words": sum(clean), "clean_run": clean_run, "duration_ms": round((writes[-2] - writes[0]) / 1e6), "held_ms": held_ms}))


def drive(fd, plan, unit, writes):
    """Writes each level of the plan on its time, then the idle low."""
    levels = {True: b"pull-up", False: b"pull-down"}
    at = time.monotonic_ns() + 2_000_000
    for high, units in plan:
        # Sleep while more than SPIN remains (the agent reads its edges meanwhile, on the guest's
        # one CPU), spin after: run under SCHED_FIFO, the wake-up takes the CPU back at once.
        while True:
            left = at - time.monotonic_ns()
            if left <= 0:
                break
            if left > SPIN_NS:
                time.sleep((left - SPIN_NS) / 1e9)
        os.pwrite(fd, levels[high], 0)
        now = time.monotonic_ns()
        writes.append(now)
        # Each level lasts its planned time from when it was really written: a stall stretches
        # the one pulse it hit, instead of squeezing the ones after it into glitches.
        at = now + units * unit * 1000
    while time.monotonic_ns() < at:
        time.sleep(0.001)
    os.pwrite(fd, levels[False], 0)
    writes.append(time.monotonic_ns())


def watch(argv):
    args = dict(zip(argv[1::2], argv[2::2]))
    fd = os.open(argv[0], os.O_RDONLY)
    start = time.monotonic_ns()
    end = start + int(float(args["--seconds"]) * 1e9)
    level = os.pread(fd, 8, 0).strip().decode()
    changes = [(0.0, level)]
    samples = 0
    last = start
    max_gap = 0
    while time.monotonic_ns() < end:
        now = os.pread(fd, 8, 0).strip().decode()
        samples += 1
        t = time.monotonic_ns()
        max_gap = max(max_gap, t - last)
        last = t
        if now != level:
            level = now
            changes.append((round((time.monotonic_ns() - start) / 1e6, 1), level))
        time.sleep(0.001)
    os.close(fd)
    print(dumps({"changes": changes, "samples": samples, "max_gap_ms": round(max_gap / 1e6, 1), "seconds": round((time.monotonic_ns() - start) / 1e9, 1)}))


if __name__ == "__main__":
    {"press": press, "watch": watch}[sys.argv[1]](sys.argv[2:])
