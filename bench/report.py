#!/usr/bin/python3
"""bench/report.py: turns bench/results.json (one JSON record per line, written by bench/run.sh)
into the Markdown tables of bench/RESULTS.md, with every issue-6 target checked.

usage: bench/report.py results.json > RESULTS.md

Records: {"figure", "backend", "subject" ("baton", "floor" or a peer), "unit", "samples",
"median", "p99", "min", "max", "mean", extra string fields...}. A figure that is missing shows
as "not measured"; a benchmark that failed leaves a record with figure "error".
"""
import json
import sys

BACKENDS = ["sqlite", "postgresql", "mysql", "redis", "zookeeper"]
PEERS = {"zookeeper": ["kazoo-lock", "kazoo-election"], "redis": ["redis-py-lock"]}


def load(path):
    records = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except ValueError as e:
                sys.exit("report.py: %s:%d: not a JSON record: %s" % (path, n, e))
    return records


class Results(object):
    def __init__(self, records):
        self.records = records
        self.meta = next((r for r in records if r.get("figure") == "meta"), {})
        self.errors = [r.get("subject", "?") for r in records if r.get("figure") == "error"]
        self.by_key = {}
        for r in records:
            self.by_key[(r.get("figure"), r.get("backend"), r.get("subject"))] = r

    def get(self, figure, backend, subject="baton"):
        return self.by_key.get((figure, backend, subject))


def num(x, digits=3):
    if x is None:
        return "-"
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    return "%.*g" % (digits, x)


def verdict(ok):
    if ok is None:
        return "-"
    return "yes" if ok else "**no**"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def handover(res):
    rows, misses = [], []
    for b in BACKENDS:
        r, f = res.get("handover", b), res.get("handover", b, "floor")
        if not r:
            rows.append([b, "not measured"] + [""] * 8)
            continue
        ratio = r["median"] / f["median"] if f and f["median"] else None
        if f and "target_ms" in f:  # SQL: poll_interval + 2 statement round trips
            target = float(f["target_ms"])
            target_text = "<= %s ms (poll %s + 2 x %s)" % (
                num(target), f.get("poll_interval_ms"), num(f.get("acquire_median_ms")))
        elif f:  # notified backends: 3 floor round trips
            target = 3 * f["median"]
            target_text = "<= %s ms (3 x floor)" % num(target)
        else:
            target, target_text = None, "-"
        ok = None if target is None else r["median"] <= target
        if ok is False:
            misses.append("handover %s: median %s ms > %s ms" % (b, num(r["median"]), num(target)))
        rows.append([b, num(r["median"]), num(r["p99"]), r["samples"],
                     num(f["median"]) if f else "-", num(f["p99"]) if f else "-",
                     num(ratio) if ratio else "-", "%s: %s" % (target_text, verdict(ok))])
    return table(["backend", "baton median ms", "baton p99 ms", "samples", "floor median ms",
                  "floor p99 ms", "baton / floor", "target"], rows), misses


def takeover(res):
    rows, misses = [], []
    for b in BACKENDS:
        r = res.get("takeover", b)
        if not r:
            rows.append([b, "not measured"] + [""] * 5)
            continue
        bound = float(r.get("bound_ms", 0))
        limit = bound + 1000
        ok = r["max"] <= limit
        if not ok:
            misses.append("takeover %s: max %s ms > bound + 1 s = %s ms" % (b, num(r["max"]),
                                                                             num(limit)))
        rows.append([b, num(r["median"]), num(r["p99"]), num(r["max"]), r["samples"],
                     num(bound), "max <= %s ms: %s" % (num(limit), verdict(ok))])
    return table(["backend", "median ms", "p99 ms", "max ms", "samples", "configured bound ms",
                  "target (bound + 1 s)"], rows), misses


def takeover_jitter(res):
    """Issue 19: crash takeover with 8 waiters per lapse_jitter window (figure takeover_jitter,
    one record per backend and window)."""
    recs = [r for r in res.records if r.get("figure") == "takeover_jitter"]
    recs.sort(key=lambda r: (BACKENDS.index(r["backend"]) if r["backend"] in BACKENDS else 99,
                             int(r.get("lapse_jitter_ms", 0))))
    rows = []
    for r in recs:
        rows.append([r["backend"], r.get("waiters", "?"), r.get("lapse_jitter_ms", "?"),
                     num(r["median"]), num(r["p99"]), num(r["max"]), r["samples"],
                     r.get("bound_ms", "?"), r.get("above_bound", "?")])
    if not rows:
        rows.append(["not measured"] + [""] * 8)
    return table(["backend", "waiters", "lapse_jitter ms", "median ms", "p99 ms", "max ms",
                  "samples", "configured bound ms", "above bound"], rows), []


def throughput(res):
    rows, misses = [], []
    for b in BACKENDS:
        r, f = res.get("throughput_uncontended", b), res.get("throughput_uncontended", b, "floor")
        c = res.get("throughput_contended", b)
        if not r:
            rows.append([b, "not measured"] + [""] * 7)
            continue
        ratio = r["median"] / f["median"] if f and f["median"] else None
        ok = None
        target = "-"
        if b == "redis" and ratio is not None:
            ok = ratio >= 0.8
            target = ">= 0.8 x floor: %s" % verdict(ok)
            if not ok:
                misses.append("redis lock+unlock: %.3f of the floor (< 0.8)" % ratio)
        rows.append([b, num(r["median"]), num(r.get("latency_median_us")),
                     num(f["median"]) if f else "-", "%.2f" % ratio if ratio else "-", target,
                     num(c["median"]) if c else "-", num(c["p99"]) if c else "-",
                     c.get("overlaps", "-") if c else "-"])
    return table(["backend", "uncontended cycles/s (median)", "cycle median us",
                  "floor cycles/s (median)", "baton / floor", "target",
                  "contended handoffs/s (median of 1 s windows, 8 processes)", "p99 (of windows)",
                  "overlapping sections"], rows), misses


SCALE_LIMITS = {
    # figure suffix: (label, limit, comparison)
    "threads": ("threads", 16),
    "rss": ("resident MiB", 128),
    "idle_cpu": ("idle CPU % of one core", 5),
}


def connection_limit(backend):
    return {"redis": 2, "zookeeper": 1}.get(backend)


def scale(res, part):
    rows, misses = [], []
    for b in BACKENDS:
        fig = "scale_" + part
        t = res.get(fig + "_threads", b)
        if not t:
            rows.append([b, "not measured"] + [""] * 8)
            continue
        row = [b]
        for suffix in ("threads", "rss", "idle_cpu"):
            r = res.get(fig + "_" + suffix, b)
            label, limit = SCALE_LIMITS[suffix]
            value = r["median"] if r else None
            ok = None if value is None else (value <= limit if suffix != "idle_cpu"
                                             else value < limit)
            if part == "mutexes" and ok is False:
                misses.append("scale %s: %s %s (limit %s)" % (b, label, num(value), limit))
            row.append("%s%s" % (num(value), "" if part != "mutexes" or ok is None
                                 else (" ok" if ok else " **over**")))
        conn = res.get(fig + "_connections", b)
        limit = connection_limit(b)
        cval = conn["median"] if conn else None
        cok = None if limit is None or cval is None else cval <= limit
        if part == "mutexes" and cok is False:
            misses.append("scale %s: %s connections (limit %s)" % (b, num(cval), limit))
        row.append("%s %s%s" % (num(cval), "(" + conn["unit"] + ")" if conn else "",
                                "" if part != "mutexes" or cok is None
                                else (" ok" if cok else " **over**")))
        own = res.get(fig + "_requests", b)
        srv = res.get(fig + "_server_requests", b)
        row.append(num(own["median"]) if own else "-")
        row.append(num(srv["median"]) if srv else "-")
        row.append(t.get("all_owned_after_s", "-")[:5] if t.get("all_owned_after_s") else "-")
        stop = res.get(fig + "_stop", b)
        failed = res.get(fig + "_stop_failures", b)
        row.append(num(stop["median"]) if stop else "-")
        row.append(num(failed["median"]) if failed else "-")
        rows.append(row)
    header = ["backend", "threads", "resident MiB", "idle CPU %", "backend connections",
              "requests/s (this process)", "requests/s (server, all clients)",
              "settled after s", "stop all s", "requests failed at stop"]
    return table(header, rows), misses


def peers(res):
    rows, misses = [], []
    figures = [("handover", "ms", False), ("takeover", "ms", False),
               ("throughput_uncontended", "cycles/s", True),
               ("throughput_contended", "handoffs/s", True)]
    for backend, subjects in sorted(PEERS.items()):
        for subject in subjects:
            for fig, unit, higher_better in figures:
                p, b = res.get(fig, backend, subject), res.get(fig, backend)
                if not p:
                    continue
                ahead = None
                if b:
                    ahead = b["median"] > p["median"] if higher_better else b["median"] < p["median"]
                    if not ahead:
                        misses.append("peers: %s %s median %s %s vs baton %s" % (
                            subject, fig, num(p["median"]), unit, num(b["median"])))
                rows.append([fig, backend, subject, "%s %s" % (num(p["median"]), unit),
                             num(p["p99"]), p["samples"],
                             "%s %s" % (num(b["median"]), unit) if b else "-", verdict(ahead)])
    return table(["figure", "backend", "peer", "peer median", "peer p99", "samples",
                  "baton median", "baton ahead"], rows), misses


def history(res):
    rows = []
    for b in BACKENDS:
        r, f = res.get("history_write", b), res.get("history_write", b, "floor")
        if not r:
            rows.append([b, "not measured"] + [""] * 5)
            continue
        ratio = r["median"] / f["median"] if f and f["median"] else None
        rows.append([b, num(r["median"]), num(r.get("p90")), num(f["median"]) if f else "-",
                     num(f.get("p90")) if f else "-", "%.2f" % ratio if ratio else "-",
                     r["samples"]])
    return table(["backend", "append median ms", "append p90 ms", "floor (write_state) median ms",
                  "floor p90 ms", "append / floor", "samples"], rows), []


def metrics(res):
    rows = []
    for b in ["memory"] + BACKENDS:
        on, off = res.get("metrics_cost", b), res.get("metrics_cost", b, "floor")
        if not on or not off:
            rows.append([b, "not measured"] + [""] * 5)
            continue
        rows.append([b, num(on["median"]), num(off["median"]), on.get("ratio_on_off", "-"),
                     num(on["p99"]), num(off["p99"]), on["samples"]])
    out = table(["backend", "metrics on median us/cycle", "metrics off median us/cycle",
                 "on / off", "on p99", "off p99", "blocks each"], rows)
    on, off = res.get("metrics_hook", "hook"), res.get("metrics_hook", "hook", "floor")
    if on and off:
        out += ("\n\nThe hook alone (two `steady_clock` reads and `record_backend_request`, as "
                "each backend request pays it): %s ns per request with metrics on, %s ns off "
                "(medians of %d blocks of 1,000,000)." % (num(on["median"]), num(off["median"]),
                                                         on["samples"]))
    return out, []


def console(res):
    """Issue 20: the lease path with and without a client polling the web console's API."""
    rows = []
    for subject, unit in (("lock_unlock", "us/cycle"), ("handover", "ms")):
        w, wo = (res.get("console_cost_" + subject, "sqlite"),
                 res.get("console_cost_" + subject, "sqlite", "floor"))
        if not w or not wo:
            rows.append([subject.replace("_", "+"), "not measured"] + [""] * 6)
            continue
        rows.append([subject.replace("_", "+"), unit, num(w["median"]), num(wo["median"]),
                     w.get("ratio_with_without", "-"), num(w["p99"]), num(wo["p99"]),
                     w["samples"]])
    out = table(["figure (SQLite)", "unit", "with polling median", "without median",
                 "with / without", "with p99", "without p99", "samples each"], rows)
    w = res.get("console_cost_lock_unlock", "sqlite")
    if w:
        out += ("\n\nThe client: %s polls of GET /api/v1/schedules (10 schedules), median %s ms, "
                "p99 %s ms, %s failed." % (w.get("polls", "-"), w.get("poll_median_ms", "-"),
                                            w.get("poll_p99_ms", "-"), w.get("poll_failures", "-")))
    return out, []


BALANCE_EVENTS = ["start", "drain", "undrain", "leave", "join"]


def balance(res):
    """Issue 18: moves and settle per event (figure balance_moves_<event>_<N>n_rate<R>, with
    balance_settle_... beside it), and run lateness (balance_lateness_<N>n)."""
    rows, misses = [], []
    moves = [r for r in res.records if str(r.get("figure", "")).startswith("balance_moves_")]

    def order(r):
        return (BACKENDS.index(r["backend"]) if r["backend"] in BACKENDS else 99,
                int(r.get("nodes", 0)), float(r.get("handoff_rate", 0)),
                BALANCE_EVENTS.index(r["event"]) if r.get("event") in BALANCE_EVENTS else 99)
    for r in sorted(moves, key=order):
        settle = res.get(r["figure"].replace("balance_moves_", "balance_settle_"), r["backend"])
        minimum = float(r.get("minimum", 0))
        ratio = r["median"] / minimum if minimum else None
        if ratio is not None and r.get("event") in ("drain", "leave", "join") and ratio > 1.25:
            misses.append("balance %s %s nodes %s: %s moves, %.2f x the minimum %s" % (
                r["backend"], r.get("nodes"), r.get("event"), num(r["median"]), ratio,
                num(minimum)))
        if r.get("unsettled", "0") != "0":
            misses.append("balance %s %s nodes rate %s %s: %s sample(s) did not settle" % (
                r["backend"], r.get("nodes"), r.get("handoff_rate"), r.get("event"),
                r["unsettled"]))
        rows.append([r["backend"], r.get("nodes", "-"), r.get("handoff_rate", "-"),
                     r.get("event", "-"), num(r["median"]), num(minimum) if minimum else "-",
                     "%.2f" % ratio if ratio else "-", r.get("handoffs", "-"),
                     num(settle["median"]) if settle else "-",
                     num(settle["max"]) if settle else "-", r["samples"],
                     r.get("leads_after", "-"),
                     r.get("fewest_led", "-") if r.get("event") != "start" else "-"])
    out = table(["backend", "nodes", "handoff_rate /s", "event", "moves (median)", "minimum",
                 "moves / minimum", "graceful handoffs", "settle median s", "settle max s",
                 "samples", "leads after", "fewest led at once"], rows)
    late_rows = []
    for b in BACKENDS:
        for n in ("3", "1"):
            r = res.get("balance_lateness_%sn" % n, b)
            if not r:
                continue
            within = float(r.get("within_1s", 0))
            if n == "3" and r["p99"] > 1000:
                misses.append("balance %s: 3 nodes, 10,000 schedules every minute: p99 lateness "
                              "%s ms > 1,000 ms" % (b, num(r["p99"])))
            logged = r.get("warnings_window", "none")
            warnings = 0 if logged == "none" else sum(
                int(x.split("=")[1]) for x in logged.split(",") if "=" in x)
            late_rows.append([b, n, r.get("expected", "-"), r.get("started", "-"),
                              r.get("duplicates", "-"), num(r["median"]), num(r["p99"]),
                              num(r["max"]), "%.1f %%" % (100 * within),
                              r.get("settle_s", "-"), r.get("shares", "-"), num(warnings)])
    if late_rows:
        out += "\n\n" + table(["backend", "nodes", "runs expected", "started", "duplicates",
                                "lateness p50 ms", "p99 ms", "max ms", "started within 1 s",
                                "settled after s", "shares", "warnings in the window"],
                               late_rows)
    return out, misses


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/report.py results.json > RESULTS.md")
    res = Results(load(sys.argv[1]))
    m = res.meta
    out = ["# baton benchmark results", "",
           "Written by `bench/run.sh` (then `bench/report.py`) from `bench/results.json`, one run:",
           "%s, commit `%s`, %s CPUs (%s), kernel %s%s." % (
               m.get("date", "?"), m.get("commit", "?"), m.get("cpus", "?"),
               m.get("cpu_model", "?"), m.get("kernel", "?"),
               ", **quick run (few samples, not for committing)**" if m.get("quick") == "1"
               else ""),
           "All servers on loopback, started by `scripts/servers.sh` as for the tests. Medians "
           "and p99 (nearest rank) over the samples named; floors are measured in the same run "
           "with the same client library issuing the same requests by hand. Every record, with "
           "its definitions and settings, is in `results.json`.", ""]
    misses = []
    sections = [
        ("1. Graceful handover", "Owner process calls `stop()` -> the other process's "
         "`on_acquired`. Floor: one notification (Redis PUBLISH, ZooKeeper watch, PostgreSQL "
         "NOTIFY) plus one acquire round trip; SQLite/MySQL waiters poll, so their floor is one "
         "acquire statement and the target allows one poll_interval.", handover(res)),
        ("2. Crash takeover", "SIGKILL of the owner process -> another process's `on_acquired`. "
         "Lease ttl 1 s + transition 1 s (SQL, Redis); ZooKeeper session timeout 2 s.",
         takeover(res)),
        ("2b. Crash takeover with 8 waiters: the lapse jitter", "As in 2, with 8 waiting "
         "processes; the first to acquire counts. A waiter asks for a lapsed lease at a random "
         "point of [0, `lapse_jitter`) after it lapses (default 100 ms); 0 lets all 8 ask at "
         "once.", takeover_jitter(res)),
        ("3. Locker throughput", "Uncontended: `baton::locker` lock+unlock cycles from one "
         "thread, beside the same requests issued raw (floor). Contended: 8 processes on one "
         "mutex, owner changes per second.", throughput(res)),
        ("4a. Scale: one process, 10,000 mutexes", "5,000 owned, 5,000 waiting on another "
         "process; figures over an idle window after everything settled. Targets: <= 16 threads, "
         "<= 128 MiB, idle CPU < 5 %, <= 2 Redis connections / 1 ZooKeeper session.",
         scale(res, "mutexes")),
        ("4b. Scale: the daemon with 1,000 schedules", "`baton run` owning 1,000 cron schedules "
         "that do not fire during the window.", scale(res, "daemon")),
        ("5. Peers on the same servers", "python3-kazoo Lock and Election, python3-redis Lock; "
         "same definitions and the same machine, same run.", peers(res)),
        ("6. History write per run", "The owner appends one run record (the scheduler's JSON, "
         "~1.3 KiB with 0.9 KiB of stderr) with `keep` = 50 (history already full, so every "
         "append also prunes), beside the floor: the lease-guarded state write the scheduler "
         "already makes per fire (`contend_service::async_write_state`), interleaved in the same "
         "run on the same mutex.", history(res)),
        ("7. Cost of metrics on the lock path", "`baton::locker` lock+unlock cycles from one "
         "thread on an uncontended mutex, in blocks with metrics on and off "
         "(`baton::set_metrics_enabled`) alternating in the same run; a sample is one block's "
         "mean cycle time.", metrics(res)),
        ("8. Balance: moves, settle and run lateness", "(a) N in-process nodes (each its own "
         "runtime and backend connections) share 1,000 schedules that do not fire during the "
         "run; per event the moves (fence changes summed over every schedule), the minimum (the "
         "share that had to move), the graceful handoffs among them and the time from the event "
         "to the last lead-count change, after which every node is within max(1, 10 %) of its "
         "assigned share and nothing moves for 2 s. Heartbeat 1 s. Settle times at the default "
         "handoff_rate (5/s per node) are dominated by that rate; 50/s shows the floor. "
         "(b) 10,000 schedules firing every minute (cron `* * * * *`) whose job returns at once, "
         "on 3 nodes (child processes) and on 1: start time minus planned fire time of every run "
         "of the fires measured after settle; a fire not run counts as late.", balance(res)),
        ("9. Cost of the web console on the lease path", "A `baton run` node with the console "
         "on shares the SQLite file with the measuring process; blocks with and without a client "
         "polling the node's `GET /api/v1/schedules` every 100 ms alternate in the same run. "
         "lock+unlock: `baton::locker` on an uncontended mutex, a sample is one block's mean "
         "cycle; handover: two contender processes, release -> the other's `on_acquired`.",
         console(res)),
    ]
    for title, text, (tab, miss) in sections:
        out += ["## " + title, "", text, "", tab, ""]
        misses += miss
    out += ["## Targets missed", ""]
    if res.errors:
        misses += ["benchmark failed: %s" % e for e in res.errors]
    out += ["- " + x for x in misses] if misses else ["None."]
    out.append("")
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
