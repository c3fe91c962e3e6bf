"""The board's figures (issue #25, item 6), host side: boots one field-rig guest per platform, hands
it the package, a prefilled outbox and a btsnoop capture over the 9p share, runs
bench_board_guest.sh there against the rig's HTTPS receiver on the host, and prints its rows.

Usage: bench_board.py WORKDIR OUTBOX CAPTURE ADVERTS BACKLOG RUNS PLATFORM=DEB...
  PLATFORM is arch-dist (arm64-trixie, amd64-bookworm); one guest after the other (2 cores).
Prints one JSON object per platform: {"platform", "rows": [[name, value, unit, method]...],
"host_load": [at boot, at the end], "seconds"}. Run by scripts/bench-board.sh.
"""
import json
import os
import shutil
import sys
import time

import rig


def measure(platform, deb, work, outbox, capture, adverts, backlog, runs):
    arch, dist = platform.split("-")
    dirpath = os.path.join(work, platform)
    os.makedirs(dirpath, exist_ok=True)
    receiver = rig.Receiver(dirpath, max_seconds=7200)
    g = rig.Guest("bench-" + platform, arch=arch, dist=dist)
    try:
        shutil.copy(deb, g.path("current.deb"))
        shutil.copy(receiver.ca, g.path("ca.pem"))
        shutil.copy(outbox, g.path("outbox.sqlite"))
        shutil.copy(capture, g.path("capture.btsnoop"))
        with open(g.path("capture.adverts"), "w") as f:
            f.write(str(adverts))
        for tool in (os.path.join(rig.REPO, "scripts", "measure-run.py"), os.path.join(rig.HERE, "bench_board_guest.sh")):
            shutil.copy(tool, g.path(os.path.basename(tool)))
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        g.boot()
        g.sh(f"bash /rig/bench_board_guest.sh {receiver.url} {backlog} {runs} /rig/out/rows.tsv", timeout=7200)
        rows = [line.split("\t") for line in rig.read(g.path("out", "rows.tsv")).splitlines() if line.strip()]
        return {"platform": platform, "deb": os.path.basename(deb), "rows": rows, "host_load": [load0, os.getloadavg()[0]],
                "seconds": round(time.monotonic() - t0), "accepted": len(receiver.requests())}
    finally:
        g.shutdown()
        receiver.stop()


def main():
    work, outbox, capture, adverts, backlog, runs = sys.argv[1:7]
    for spec in sys.argv[7:]:
        platform, deb = spec.split("=", 1)
        rig.log(f"bench-board: {platform} with {os.path.basename(deb)}")
        print(json.dumps(measure(platform, deb, work, outbox, capture, int(adverts), int(backlog), int(runs))), flush=True)


if __name__ == "__main__":
    main()
