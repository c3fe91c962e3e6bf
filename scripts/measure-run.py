#!/usr/bin/env python3
"""One run of a command, its stdout to a file: prints wall seconds, peak RSS (wait4's ru_maxrss,
KiB), exit status and CPU seconds (user + system: what the load of a shared machine disturbs
least). Usage: measure-run.py OUT COMMAND... (stderr goes to OUT.err).

Stdlib os/sys/time only, so it also runs in the field rig's guests (python3-minimal)."""
import os
import sys
import time

out, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    err = os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t0, usage.ru_maxrss, os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime)
