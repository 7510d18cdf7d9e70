#!/usr/bin/python3
"""The fault suite's checker (scripts/faults.sh): judges one scenario x backend from its record.

usage: check.py check META.json        prints one JSON line (the result); exit 1 when a rule fails
       check.py leader RECORD          prints the node of the run started last (nothing: no run)
       check.py runs RECORD [--after T] [--not-node N]
                                       prints how many runs started after T (not on node N)

META.json (written by faults.sh; paths relative to its directory):
  scenario, backend, schedule, record (the job recorder's file), logs {node: daemon log (JSON
  lines)}, period (s), fault {kind, node (or null), t, healed (true time, s)}, end (true time the
  observation ended), bounds {takeover (s or null: not measured), recovery (s), fire_match (s or
  null: not checked)}, strict (true: any overlap fails, fenced or not), stall {node, min_ms} (or
  null: the stopped node's log must show a `process.stalled` of at least min_ms), killed [nodes
  killed by the fault: they passed their deadline by dying].

Rules (each failure names its rule):
  runs            at least one run, and one after the fault healed
  overlap         two runs overlap ([start, end or last heartbeat]) and the overlap is not fenced:
                  fenced = the later run has a higher fence and the earlier run's node had passed
                  its local deadline for that fence when the later run started (its log shows
                  `lease.lost` with that fence or `lease.expired` after the fence was acquired,
                  logged no later than the later start + 0.25 s (log times corrected by the
                  node's `skew`), or a `process.stalled` pause covering that start, or it was
                  killed); with strict, every overlap fails
  fence_order     fences never decrease in start order
  fire_twice      no BATON_FIRE_TIME runs twice
  takeover        fault -> first run of another node within bounds.takeover
  recovery        healed -> first run within bounds.recovery
  stall_after     the schedule ran within 2 periods + recovery bound before the end
  fire_match      |true start - BATON_FIRE_TIME| <= bounds.fire_match for every run
  stall_logged    the stopped node logged its pause (process.stalled >= stall.min_ms)
  given_up        no node's lease.expired (local step-down) came after another node acquired a
                  higher fence (log times; only in strict scenarios, where clocks are true)
"""
import datetime
import json
import os
import sys

STEP_DOWN_EVENTS = ("lease.expired",)
# Log lines are written after the decision they report; a step-down logged this long after the
# later run started still counts as before it.
LOG_SLACK = 0.25


def parse_time(text):
    """RFC 3339 UTC ("2026-01-01T00:00:00Z", fractions allowed) -> seconds since the epoch."""
    if not text:
        return None
    text = text.replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def read_runs(path):
    """Runs from the recorder's file: one per (node, pid), in start order."""
    runs = {}
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed writer cannot happen (one write), but be lenient
            key = (r.get("node"), r.get("pid"))
            run = runs.get(key)
            if run is None:
                run = runs[key] = {"node": r.get("node"), "pid": r.get("pid"),
                                   "fence": r.get("fence", 0), "fire": r.get("fire", ""),
                                   "start": None, "end": None, "last": None, "ended": False}
            t = r.get("t")
            if r.get("ev") == "start":
                run["start"] = t
            elif r.get("ev") == "end":
                run["end"] = t
                run["ended"] = True
            if t is not None and (run["last"] is None or t > run["last"]):
                run["last"] = t
    out = []
    for run in runs.values():
        if run["start"] is None:
            run["start"] = run["last"]
        if run["end"] is None:
            run["end"] = run["last"]
        out.append(run)
    out.sort(key=lambda r: (r["start"], r["node"] or ""))
    return out


def read_log(path):
    """The daemon's JSON log lines (other lines are skipped), in file order."""
    events = []
    if not path or not os.path.exists(path):
        return events
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    return events


def passed_deadline(events, schedule, fence, killed, before=None, skew=0.0):
    """True when the node's log shows it gave up (or lost) the leadership with `fence` by true
    time `before` (None: at any time), or it was frozen then (a `process.stalled` pause that
    covers `before`), or it was killed. `skew`: how far the node's log clock runs ahead of true
    time (s)."""
    if killed:
        return True
    holding = False
    for e in events:
        ev = e.get("event", "")
        t = parse_time(e.get("time"))
        t = t - skew if t is not None else None
        if ev == "process.stalled":
            pause = stall_ms([e]) / 1000.0
            if before is None or (t is not None and t - pause <= before <= t + LOG_SLACK):
                if holding:
                    return True
            continue
        if e.get("schedule") not in (None, schedule):
            continue
        in_time = before is None or (t is not None and t <= before + LOG_SLACK)
        if ev in ("lease.acquired", "mutex.acquired") and e.get("fence") == fence:
            holding = True
        elif ev in ("lease.lost", "mutex.released") and e.get("fence") == fence:
            return in_time
        elif holding and ev in STEP_DOWN_EVENTS:
            return in_time
    return False


def stall_ms(events):
    best = 0
    for e in events:
        if e.get("event") == "process.stalled":
            msg = e.get("msg", "")
            try:
                best = max(best, int(msg.split("stalled for ")[1].split(" ms")[0]))
            except (IndexError, ValueError):
                best = max(best, 1)
    return best


def check(meta_path):
    base = os.path.dirname(os.path.abspath(meta_path))
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    rel = lambda p: p if os.path.isabs(p) else os.path.join(base, p)
    schedule = meta.get("schedule")
    runs = read_runs(rel(meta["record"]))
    logs = {node: read_log(rel(p)) for node, p in meta.get("logs", {}).items()}
    fault = meta.get("fault") or {}
    bounds = meta.get("bounds") or {}
    killed = set(meta.get("killed") or [])
    skew = meta.get("skew") or {}
    strict = bool(meta.get("strict"))
    period = float(meta.get("period", 2))
    violations = []

    def fail(rule, text):
        violations.append({"rule": rule, "detail": text})

    # runs
    if not runs:
        fail("runs", "no run recorded")
    # overlaps
    overlaps = fenced = 0
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if b["start"] >= a["end"]:
                continue
            overlaps += 1
            span = round(a["end"] - b["start"], 3)
            is_fenced = b["fence"] > a["fence"] and passed_deadline(
                logs.get(a["node"], []), schedule, a["fence"], a["node"] in killed,
                before=b["start"], skew=float(skew.get(a["node"], 0.0)))
            if is_fenced and not strict:
                fenced += 1
                continue
            if is_fenced:
                fenced += 1
            fail("overlap", "%s fence %s [%s pid %s] overlaps %s fence %s [%s pid %s] by %.3f s%s" % (
                a["node"], a["fence"], a["fire"], a["pid"], b["node"], b["fence"], b["fire"], b["pid"],
                span, " (fenced, but this scenario allows no overlap)" if is_fenced else ""))
    # fence order
    for a, b in zip(runs, runs[1:]):
        if b["fence"] < a["fence"]:
            fail("fence_order", "fence %s (%s, started %.3f) after fence %s (%s, started %.3f)" % (
                b["fence"], b["node"], b["start"], a["fence"], a["node"], a["start"]))
    # fire times run twice
    seen = {}
    for r in runs:
        if r["fire"]:
            seen.setdefault(r["fire"], []).append(r)
    dup = {k: v for k, v in seen.items() if len(v) > 1}
    for fire, rs in sorted(dup.items())[:5]:
        fail("fire_twice", "%s ran %d times (%s)" % (fire, len(rs), ", ".join(
            "%s fence %s" % (r["node"], r["fence"]) for r in rs)))
    if len(dup) > 5:
        fail("fire_twice", "... %d fire times ran more than once in all" % len(dup))
    # takeover
    takeover = None
    t_fault = fault.get("t")
    if bounds.get("takeover") is not None and t_fault is not None:
        after = [r for r in runs if r["start"] >= t_fault and r["node"] != fault.get("node")]
        if after:
            takeover = round(after[0]["start"] - t_fault, 3)
            if takeover > bounds["takeover"]:
                fail("takeover", "%.1f s from the fault to %s's first run (bound %.1f s)" % (
                    takeover, after[0]["node"], bounds["takeover"]))
        else:
            fail("takeover", "no other node ran after the fault (bound %.1f s)" % bounds["takeover"])
    # recovery
    recovery = None
    healed = fault.get("healed")
    if healed is not None:
        after = [r for r in runs if r["start"] >= healed]
        if after:
            recovery = round(after[0]["start"] - healed, 3)
            if bounds.get("recovery") is not None and recovery > bounds["recovery"]:
                fail("recovery", "first run %.1f s after the fault healed (bound %.1f s)" % (
                    recovery, bounds["recovery"]))
        else:
            fail("recovery", "no run after the fault healed")
    end = meta.get("end")
    if end is not None and runs and healed is not None:
        last = max(r["start"] for r in runs)
        limit = 2 * period + float(bounds.get("recovery") or 0)
        if end - last > limit:
            fail("stall_after", "no run in the last %.1f s of the observation (bound %.1f s)" % (
                end - last, limit))
    # fire times vs true time
    worst_fire = None
    if bounds.get("fire_match") is not None:
        bad = []
        for r in runs:
            ft = parse_time(r["fire"])
            if ft is None:
                continue
            d = r["start"] - ft
            if worst_fire is None or abs(d) > abs(worst_fire):
                worst_fire = round(d, 3)
            if abs(d) > bounds["fire_match"]:
                bad.append((r, d))
        if bad:
            r, d = max(bad, key=lambda x: abs(x[1]))
            fail("fire_match", "%d run(s) started away from their fire time, worst %s fence %s: "
                 "fire %s, started %+.1f s from it (bound %.1f s)" % (
                     len(bad), r["node"], r["fence"], r["fire"], d, bounds["fire_match"]))
    # the pause shows in the log
    stall = meta.get("stall")
    if stall:
        got = stall_ms(logs.get(stall["node"], []))
        if got < stall["min_ms"]:
            fail("stall_logged", "%s logged no process.stalled of at least %d ms (longest: %d)" % (
                stall["node"], stall["min_ms"], got))
    # local step-down before another node acquired (true clocks only)
    lease_losses = 0
    stalls_logged = 0
    acquired = []  # (time, node, fence)
    expired = []  # (time, node)
    for node, events in logs.items():
        for e in events:
            ev = e.get("event")
            if ev in ("lease.lost", "lease.expired"):
                lease_losses += ev == "lease.lost"
            if ev == "process.stalled":
                stalls_logged += 1
            t = parse_time(e.get("time"))
            if t is None or e.get("schedule") not in (None, schedule):
                continue
            if ev == "lease.acquired":
                acquired.append((t, node, e.get("fence", 0)))
            elif ev == "lease.expired":
                expired.append((t, node))
    step_downs = len(expired)
    if strict:
        for t_exp, node in expired:
            # the fence this node held at t_exp: its latest acquisition before it
            mine = [f for (t, n, f) in acquired if n == node and t <= t_exp]
            if not mine:
                continue
            held = mine[-1]
            early = [(t, n, f) for (t, n, f) in acquired if n != node and f > held and t < t_exp]
            if early:
                t, n, f = early[0]
                fail("given_up", "%s stepped down at %.3f, after %s acquired fence %s at %.3f" % (
                    node, t_exp, n, f, t))
    result = {
        "scenario": meta.get("scenario"), "backend": meta.get("backend"),
        "runs": len(runs), "overlaps": overlaps, "fenced_overlaps": fenced,
        "fire_twice": len(dup),
        "max_takeover_s": takeover, "recovery_s": recovery,
        "lease_losses": lease_losses, "step_downs": step_downs, "stalls_logged": stalls_logged,
        "worst_fire_offset_s": worst_fire,
        "result": "pass" if not violations else "fail",
        "violations": violations,
    }
    print(json.dumps(result, separators=(", ", ": ")))
    return 0 if not violations else 1


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) >= 3 and argv[1] == "leader":
        runs = read_runs(argv[2])
        if runs:
            print(runs[-1]["node"])
        return 0
    if len(argv) >= 3 and argv[1] == "runs":
        after, not_node = None, None
        args = argv[3:]
        while args:
            if args[0] == "--after" and len(args) > 1:
                after = float(args[1])
            elif args[0] == "--not-node" and len(args) > 1:
                not_node = args[1]
            else:
                sys.stderr.write("check.py runs: unknown argument %s\n" % args[0])
                return 2
            args = args[2:]
        n = sum(1 for r in read_runs(argv[2])
                if (after is None or r["start"] >= after) and r["node"] != not_node)
        print(n)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
