#!/usr/bin/python3
"""Writes the fault suite's results (scripts/faults.sh): OUT/faults.md and OUT/faults.json from
the JSON lines of check.py.

usage: report.py RESULTS.jsonl OUT_DIR COMMAND_LINE WALL_SECONDS
"""
import datetime
import json
import os
import platform
import sys

FAULTS = {
    "kill9": "`kill -9` of the leader node (its job's supervisor ends the job within kill_grace)",
    "restart": "the backend server stopped and started again (same port and data)",
    "connkill": "every client connection killed by the server (PostgreSQL pg_terminate_backend, "
                "MariaDB KILL, Redis CLIENT KILL)",
    "sigstop": "the leader SIGSTOPped for twice its lease (ttl + transition), then SIGCONT",
    "cpu": "the leader pinned to CPU 0 with `stress-ng --cpu 4` on the same CPU for 10 s",
    "clock": "node1 `FAKETIME=+1h`, node2 `FAKETIME=-2m`, node3 true (libfaketime), cron "
             "`*/2 * * * * *`; `kill -9` of the leader in the middle",
    "netns": "the nodes in a network namespace, reaching the server through a proxy adding "
             "200 ms each way, with 10% packet loss each way (nftables numgen) inside it",
    "zk-leader-kill": "ZooKeeper ensemble: `kill -9` of the ensemble's leader server",
    "zk-quorum-loss": "ZooKeeper ensemble: 2 of 3 servers killed for longer than the session "
                      "timeout, then restarted",
    "sentinel-failover": "Redis Sentinel: `SENTINEL FAILOVER mymaster`",
    "sentinel-kill-master": "Redis Sentinel: `kill -9` of the master",
    "pg-promote": "PostgreSQL primary + standby: primary stopped, standby promoted",
}


def cell(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.1f" % v
    return str(v)


def main(argv):
    if len(argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    results = []
    with open(argv[1], encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                results.append(json.loads(line))
    os.makedirs(argv[2], exist_ok=True)
    meta = {"command": argv[3], "wall_seconds": int(float(argv[4])),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": "%s, %d CPUs" % (platform.platform(), os.cpu_count() or 0)}
    with open(os.path.join(argv[2], "faults.json"), "w", encoding="utf-8") as f:
        json.dump({"run": meta, "results": results}, f, indent=1)
        f.write("\n")
    passed = sum(r["result"] == "pass" for r in results)
    out = []
    out.append("# Fault suite results\n")
    out.append("Written by `scripts/faults.sh` (`%s`, %s, %s, %d s wall); every record is in "
               "[`faults.json`](faults.json). %d of %d scenario x backend rows pass.\n" % (
                   meta["command"], meta["date"], meta["host"], meta["wall_seconds"], passed,
                   len(results)))
    out.append("| fault | backend | runs | overlaps | fenced overlaps | max takeover (s) | "
               "recovery (s) | lease losses | stalls logged | result |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        why = "; ".join("%s: %s" % (v["rule"], v["detail"]) for v in r.get("violations", []))
        res = r["result"] if not why else "**%s** (%s)" % (r["result"], why.replace("|", "\\|"))
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["scenario"], r["backend"], cell(r.get("runs")), cell(r.get("overlaps")),
            cell(r.get("fenced_overlaps")), cell(r.get("max_takeover_s")),
            cell(r.get("recovery_s")), cell(r.get("lease_losses")),
            cell(r.get("stalls_logged")), res))
    out.append("")
    out.append(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md"),
                    encoding="utf-8").read().split("<!-- report -->", 1)[1].strip())
    out.append("\n## Faults\n")
    for k, v in FAULTS.items():
        out.append("- `%s`: %s" % (k, v))
    with open(os.path.join(argv[2], "faults.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
