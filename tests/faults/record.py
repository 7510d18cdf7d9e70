#!/usr/bin/python3 -S
"""The fault suite's job (scripts/faults.sh): records one run in a shared file.

usage: record.py FILE NODE SECONDS

Appends JSON lines to FILE: `start`, then a heartbeat `hb` every ~100 ms, and `end` when the run
finishes after SECONDS or gets SIGTERM (SIGKILL leaves the last heartbeat as the run's end). Each
line holds the fence (BATON_FENCING_TOKEN), NODE, the planned fire time (BATON_FIRE_TIME), the
pid and `t`, the host's true wall clock in seconds. Start it through `env -u LD_PRELOAD -u
FAKETIME` so that a node under libfaketime still records true time; the script also refuses to
run with libfaketime loaded. Every line is one write(2) on a descriptor opened with O_APPEND, so
lines of concurrent runs never interleave.
"""
import json
import os
import signal
import sys
import time


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    path, node, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if "faketime" in os.environ.get("LD_PRELOAD", "") or "FAKETIME" in os.environ:
        sys.stderr.write("record.py: libfaketime is loaded: start it with env -u LD_PRELOAD -u FAKETIME\n")
        return 2
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    base = {
        "fence": int(os.environ.get("BATON_FENCING_TOKEN", "0") or 0),
        "node": node,
        "fire": os.environ.get("BATON_FIRE_TIME", ""),
        "pid": os.getpid(),
    }

    def write(ev, **extra):
        line = dict(base, ev=ev, t=round(time.time(), 4), **extra)
        os.write(fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())

    def on_term(signum, frame):
        write("end", how="sigterm")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    write("start")
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(0.1, left))
        write("hb")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    write("end", how="exit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
