#!/usr/bin/env python3
"""One run of a command, its stdout to a file: prints wall seconds, peak RSS (KiB), exit status and
CPU seconds (user + system: what the load of a shared machine disturbs least).
Usage: measure-run.py OUT COMMAND... (stderr goes to OUT.err).

Peak RSS is wait4's ru_maxrss. The field rig's guests have only python3-minimal, without the
`resource` module wait4 needs: there the child's VmHWM (a high-water mark, so only growth in the
last 20 ms can be missed) is read every 20 ms until it exits, and CPU comes from os.times()."""
import os
import sys
import time

out, argv = sys.argv[1], sys.argv[2:]
try:
    import resource  # noqa: F401 (os.wait4 needs it)
    have_rusage = True
except ImportError:
    have_rusage = False
cpu0 = os.times()
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    err = os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.execv(argv[0], argv)
if have_rusage:
    _, status, usage = os.wait4(pid, 0)
    print(time.perf_counter() - t0, usage.ru_maxrss, os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime)
    sys.exit(0)
hwm, status = 0, None
while status is None:
    try:
        with open(f"/proc/{pid}/status") as f:
            hwm = max([hwm] + [int(line.split()[1]) for line in f if line.startswith("VmHWM:")])
    except OSError:
        pass
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
    else:
        time.sleep(0.02)
cpu1 = os.times()
print(time.perf_counter() - t0, hwm, os.waitstatus_to_exitcode(status),
      (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system))
