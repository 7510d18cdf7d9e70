#!/usr/bin/python3
"""bench/peers/peers.py: figure 5, the peers users would pick instead of baton, measured with
the same definitions as baton's C++ benchmarks:

  kazoo-lock      kazoo.recipe.lock.Lock                (backend zookeeper)
  kazoo-election  kazoo.recipe.election.Election        (backend zookeeper)
  redis-py-lock   redis.lock.Lock via Redis.lock(...)   (backend redis)

Figures: handover (owner releases -> the next contender in another process acquires), takeover
(SIGKILL of the owner process -> another process acquires), throughput_uncontended (lock+unlock
cycles/s from one thread), throughput_contended (8 processes on one lock: owner changes/s).

Run with Debian's python (python3-kazoo, python3-redis):

  BATON_TEST_ZOOKEEPER=127.0.0.1:PORT BATON_TEST_REDIS_URL=redis://127.0.0.1:PORT \\
      /usr/bin/python3 bench/peers/peers.py [--figures F,..] [--subjects S,..]

BATON_BENCH_QUICK=1: fewer samples. stdout: only JSON records, one per line; progress on stderr.
Exit status 0 on success; on any failure a message on stderr, child processes killed, exit 1.
"""
import argparse
import multiprocessing as mp
import os
import random
import signal
import sys
import time
import uuid

sys.dont_write_bytecode = True  # keep bench/peers/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402
from peerlib import Failure, SUBJECTS, emit, fmt_summary, log, now_ns, summarize  # noqa: E402

FIGURES = ["handover", "takeover", "throughput_uncontended", "throughput_contended"]
CONTENDERS = 8
HANDOVER_WARMUP = 3
GLOBAL_DEADLINE_S = 1200  # the whole script; every step has its own, shorter deadline

ctx = mp.get_context("spawn")


class Config(object):
    def __init__(self, quick):
        self.quick = quick
        self.handovers = 20 if quick else 200
        self.takeovers = 3 if quick else 10
        self.batches = 5 if quick else 25
        self.batch_s = 1.0
        self.warmup_s = 0.5
        self.contended_s = 3.0 if quick else 10.0
        self.window_s = 1.0


# ------------------------------------------------------------------------------- child processes


class Children(object):
    """Every child process started, so that a failure can kill them all (by pid)."""

    def __init__(self):
        self.procs = []

    def spawn(self, name, lifetime, role, *args):
        p = ctx.Process(target=peerlib.child_entry, args=(name, lifetime, role) + args,
                        name=name, daemon=True)
        p.start()
        self.procs.append(p)
        return p

    def check(self, procs, what):
        """Raises when one of procs exited with a non-zero status."""
        for p in procs:
            code = p.exitcode
            if code is not None and code != 0:
                how = ("was killed by signal %d" % -code) if code < 0 else (
                    "exited with status %d" % code)
                raise Failure("%s: child %s (pid %s) %s (see its messages above)"
                              % (what, p.name, p.pid, how))

    def wait(self, pred, timeout, what, procs=()):
        deadline = time.monotonic() + timeout
        while not pred():
            self.check(procs, what)
            if time.monotonic() > deadline:
                raise Failure("timed out after %.0fs waiting for %s" % (timeout, what))
            time.sleep(0.002)

    def join_all(self, procs, timeout, what):
        """Waits for procs to exit with status 0."""
        self.wait(lambda: all(p.exitcode is not None for p in procs), timeout, what, procs)
        self.check(procs, what)
        for p in procs:
            p.join(1)

    def get(self, q, procs, timeout, what):
        """One message from q, while watching the children that should send it."""
        import queue
        deadline = time.monotonic() + timeout
        while True:
            try:
                return q.get(timeout=0.2)
            except queue.Empty:
                pass
            self.check(procs, what)
            if all(p.exitcode is not None for p in procs):
                # They exited cleanly: the message may still be in the pipe.
                try:
                    return q.get(timeout=2)
                except queue.Empty:
                    raise Failure("%s: children exited without sending their results" % what)
            if time.monotonic() > deadline:
                raise Failure("timed out after %.0fs waiting for %s" % (timeout, what))

    def stop(self, p, timeout=10):
        """SIGTERM, then SIGKILL after timeout."""
        if p.exitcode is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.join(timeout)
        if p.exitcode is None:
            log("child %s (pid %d) did not stop on SIGTERM: SIGKILL" % (p.name, p.pid))
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.join(5)

    def kill_all(self):
        for p in self.procs:
            if p.exitcode is None and p.pid:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            if p.pid:
                p.join(2)


# ---------------------------------------------------------------------------------- the figures


class Bench(object):
    def __init__(self, cfg, zk_hosts, redis_url):
        self.cfg = cfg
        self.zk_hosts = zk_hosts
        self.redis_url = redis_url
        self.run_id = "%s-%d" % (uuid.uuid4().hex[:12], os.getpid())
        self.zk_root = "/baton-bench-peers/" + self.run_id
        self.redis_prefix = "baton-bench-peers:" + self.run_id + ":"
        self.children = Children()
        self.info = {}
        self.versions = peerlib.library_versions()

    def spec(self, subject, figure):
        return {"subject": subject, "zk_hosts": self.zk_hosts, "redis_url": self.redis_url,
                "zk_path": "%s/%s-%s" % (self.zk_root, figure, subject),
                "redis_key": "%s%s:%s" % (self.redis_prefix, figure, subject)}

    def common_extra(self, subject):
        backend = SUBJECTS[subject][0]
        e = {"library": subject, "library_version": peerlib.library_version(subject),
             "python": "%d.%d.%d" % sys.version_info[:3], "quick": "1" if self.cfg.quick else "0",
             "processes": "multiprocessing spawn"}
        if backend == "zookeeper":
            e["server_version"] = "ZooKeeper " + self.info.get("zk_version", "?")
            e["session_timeout_ms"] = self.info.get("zk_session_timeout_ms", "?")
            if SUBJECTS[subject][1] == "election":
                e["options"] = ("KazooClient(hosts, timeout=2.0); Election(client, path, id)"
                                ".run(func); release = func returns")
            else:
                e["options"] = ("KazooClient(hosts, timeout=2.0); Lock(client, path, id)"
                                ".acquire(timeout=T) / .release()")
        else:
            e["server_version"] = "Redis " + self.info.get("redis_version", "?")
            e["sleep_s"] = self.info.get("redis_lock_sleep_s", "?")
            e["options"] = ("Redis.from_url(url, socket_timeout=10); client.lock(key, "
                            "timeout=2.0) with the defaults sleep=%s, thread_local=True; "
                            ".acquire(blocking_timeout=T) / .release()"
                            % self.info.get("redis_lock_sleep_s", "?"))
        return e

    # -------------------------------------------------------------------------------- probe

    def probe(self):
        q = ctx.Queue()
        p = self.children.spawn("probe", 60, "probe", self.spec("kazoo-lock", "probe"),
                                self.spec("redis-py-lock", "probe"), q)
        self.info = self.children.get(q, [p], 45, "connecting to ZooKeeper and Redis (probe)")
        self.children.join_all([p], 15, "probe")
        log("servers: ZooKeeper %s (session timeout %s ms granted for 2000 requested), Redis %s; "
            "kazoo %s, redis-py %s (Lock sleep %s s)" % (
                self.info.get("zk_version"), self.info.get("zk_session_timeout_ms"),
                self.info.get("redis_version"), self.versions["kazoo"],
                self.versions["redis-py"], self.info.get("redis_lock_sleep_s")))

    def cleanup(self):
        q = ctx.Queue()
        p = self.children.spawn("cleanup", 60, "cleanup", self.zk_hosts, self.zk_root,
                                self.redis_url, self.redis_prefix, q)
        self.children.get(q, [p], 45, "cleanup")
        self.children.join_all([p], 15, "cleanup")

    # ----------------------------------------------------------------------------- handover

    def handover(self, subject):
        backend, kind = SUBJECTS[subject]
        n = self.cfg.handovers
        total = n + HANDOVER_WARMUP
        rnd = ctx.RawValue("q", -1)
        ready = ctx.RawValue("q", -1)
        acq = ctx.RawArray("q", total + 1)
        rel = ctx.RawArray("q", total + 1)
        spec = self.spec(subject, "handover")
        budget = 90 + total * 1.0
        procs = [self.children.spawn("handover-%s-%d" % (subject, w), budget + 30, "handover",
                                     spec, w, total, rnd, ready, acq, rel) for w in (0, 1)]
        started = time.monotonic()
        deadline = started + budget
        last = -1
        while any(p.exitcode is None for p in procs):
            self.children.check(procs, "handover %s" % subject)
            if time.monotonic() > deadline:
                raise Failure("handover %s: not done after %.0fs (round %d of %d)"
                              % (subject, budget, rnd.value, total))
            if rnd.value >= last + 50:
                last = rnd.value
                log("handover %s: round %d/%d" % (subject, last, total))
            time.sleep(0.05)
        self.children.join_all(procs, 10, "handover %s" % subject)
        if rnd.value != total:
            raise Failure("handover %s: ended at round %d of %d" % (subject, rnd.value, total))
        ms = [(acq[k] - rel[k - 1]) / 1e6 for k in range(HANDOVER_WARMUP + 1, total + 1)]
        if min(ms) < 0:
            raise Failure("handover %s: an acquisition before the release (%.3f ms)"
                          % (subject, min(ms)))
        s = summarize(ms)
        extra = self.common_extra(subject)
        extra["warmup_discarded"] = str(HANDOVER_WARMUP)
        extra["processes_pingpong"] = "2"
        if backend == "redis":
            extra["method"] = ("2 processes ping-pong; the owner waits until the other has made "
                               "one failed attempt, then a uniform random delay in [0, sleep) "
                               "(random phase vs the waiter's polling); released = just before "
                               "release(), acquired = acquire() returned")
        elif kind == "election":
            extra["method"] = ("2 processes ping-pong; the leader's func waits until the other "
                               "contender watches its predecessor, then returns; released = "
                               "func about to return, acquired = first statement of the next "
                               "leader's func")
        else:
            extra["method"] = ("2 processes ping-pong; the owner waits until the other contender "
                               "watches its predecessor; released = just before release(), "
                               "acquired = acquire() returned")
        emit("handover", backend, subject, "ms", s, extra)
        log("handover %s: %d samples, ms: %s (%.1fs)" % (subject, s["samples"], fmt_summary(s),
                                                         time.monotonic() - started))

    # ----------------------------------------------------------------------------- takeover

    def takeover(self, subject):
        backend, kind = SUBJECTS[subject]
        spec = self.spec(subject, "takeover")
        n = self.cfg.takeovers
        lifetime = 120 + n * 30
        started = time.monotonic()
        rng = random.Random()
        seq = [0]

        def new_holder():
            h = {"up": ctx.RawValue("q", 0), "go": ctx.RawValue("q", 0),
                 "ready": ctx.RawValue("q", 0), "acquired": ctx.RawValue("q", 0)}
            seq[0] += 1
            h["proc"] = self.children.spawn(
                "takeover-%s-%d" % (subject, seq[0]), lifetime + 30, "holder", spec, h["up"],
                h["go"], h["ready"], h["acquired"], float(lifetime))
            return h

        # Redis: the dead owner's lease end, from the key's PTTL read just before the kill, so
        # that the takeover also compares "after the lapse" (the kill's phase against the
        # owner's renewals decides the rest, and the peers renew on their own cadence).
        pttl_client = None
        if backend == "redis":
            import redis
            pttl_client = redis.Redis.from_url(self.redis_url, socket_timeout=10)
        after_lapse = []
        owner = new_holder()
        owner["go"].value = 1
        self.children.wait(lambda: owner["acquired"].value != 0, 90,
                           "the first %s owner to acquire" % subject, [owner["proc"]])
        spare = new_holder()
        ms = []
        for i in range(n):
            w = spare
            self.children.wait(lambda: w["up"].value != 0, 90, "a %s contender to connect"
                               % subject, [w["proc"], owner["proc"]])
            w["go"].value = 1
            self.children.wait(lambda: w["ready"].value != 0, 30, "the %s contender to wait"
                               % subject, [w["proc"], owner["proc"]])
            # Random phase of the kill against the owner's renewals (redis-py: every 1 s) or
            # the kazoo client's pings (about every 2/3 of the session timeout, minus jitter).
            time.sleep(rng.uniform(0.0, 1.0))
            self.children.check([owner["proc"], w["proc"]], "takeover %s" % subject)
            lease_end = None
            if pttl_client is not None:
                t0 = now_ns()
                pttl = pttl_client.pttl(spec["redis_key"])
                t1 = now_ns()
                if pttl is not None and pttl >= 0:
                    lease_end = (t0 + t1) // 2 + pttl * 1_000_000
            t_kill = now_ns()
            os.kill(owner["proc"].pid, signal.SIGKILL)
            self.children.wait(lambda: w["acquired"].value != 0, 30,
                               "%s takeover %d after SIGKILL of the owner" % (subject, i + 1),
                               [w["proc"]])
            ms.append((w["acquired"].value - t_kill) / 1e6)
            if lease_end is not None:
                after_lapse.append((w["acquired"].value - lease_end) / 1e6)
            owner["proc"].join(10)
            if owner["proc"].exitcode != -signal.SIGKILL:
                raise Failure("takeover %s: the killed owner ended with status %s"
                              % (subject, owner["proc"].exitcode))
            log("takeover %s %d/%d: %.1f ms" % (subject, i + 1, n, ms[-1]))
            owner = w
            spare = new_holder() if i + 1 < n else None
        self.children.stop(owner["proc"])
        if spare is not None:
            self.children.stop(spare["proc"])
        s = summarize(ms)
        extra = self.common_extra(subject)
        extra["bound_ms"] = "2000"
        extra["kill_phase"] = "uniform random 0-1 s after the next contender is queued"
        if after_lapse:
            lapse = summarize(after_lapse)
            extra["after_lapse_median_ms"] = "%.3f" % lapse["median"]
            extra["after_lapse_p99_ms"] = "%.3f" % lapse["p99"]
            extra["after_lapse"] = ("takeover minus the time from the kill to the lease end (the "
                                    "key's PTTL read just before the kill)")
        if backend == "redis":
            extra["lease_ms"] = "2000"
            extra["renew_interval_ms"] = str(int(peerlib.REDIS_RENEW_S * 1000))
            extra["bound"] = ("lock timeout 2 s (PX 2000), renewed by the owner with "
                              "Lock.reacquire() every 1 s (baton's bench: ttl 1 s + transition "
                              "1 s): the key expires 1-2 s after the kill; the waiter sees it "
                              "at its next poll, up to sleep (0.1 s) later, so the worst case "
                              "is 2000 ms + sleep")
        else:
            extra["bound"] = ("session timeout 2 s (KazooClient timeout=2.0, granted 2000 "
                              "ms): the server expires the dead owner's session 2 s after the "
                              "last packet it got from it, rounded up to its next tickTime "
                              "bucket (tickTime 500 ms here: up to +500 ms), deletes its "
                              "ephemeral node and the waiter's watch fires. The idle client "
                              "pings every 0.27-0.67 s (read timeout 2/3 of the session "
                              "timeout, halved, minus 0-0.4 s jitter), so a takeover lands "
                              "at about 1.33-2.5 s after the kill; 2000 ms is the nominal "
                              "bound, the session timeout")
        emit("takeover", backend, subject, "ms", s, extra)
        log("takeover %s: %d samples, ms: %s (%.1fs)" % (subject, s["samples"], fmt_summary(s),
                                                         time.monotonic() - started))

    # --------------------------------------------------------------------------- throughput

    def throughput_uncontended(self, subject):
        backend, kind = SUBJECTS[subject]
        cfg = self.cfg
        q = ctx.Queue()
        budget = 60 + cfg.batches * cfg.batch_s * 2 + cfg.warmup_s
        started = time.monotonic()
        p = self.children.spawn("uncontended-%s" % subject, budget + 30, "uncontended",
                                self.spec(subject, "uncontended"), cfg.batches, cfg.batch_s,
                                cfg.warmup_s, q)
        r = self.children.get(q, [p], budget, "throughput_uncontended %s" % subject)
        self.children.join_all([p], 15, "throughput_uncontended %s" % subject)
        s = summarize(r["rates"])
        lat = r["lat_us"]
        extra = self.common_extra(subject)
        extra.update({
            "batches": str(len(r["rates"])), "batch_s": str(cfg.batch_s),
            "warmup_s": str(cfg.warmup_s), "cycles": str(r["cycles"]),
            "cycle_latency_us_median": "%.1f" % lat["median"],
            "cycle_latency_us_p99": "%.1f" % lat["p99"],
            "cycle_latency_us_max": "%.1f" % lat["max"],
        })
        if kind == "election":
            extra["cycle"] = ("Election.run(no-op func) on one Election object: elected "
                              "(lock acquire) + func + lock release")
        else:
            extra["cycle"] = "acquire() + release() on one Lock object"
        emit("throughput_uncontended", backend, subject, "cycles/s", s, extra)
        log("throughput_uncontended %s: cycles/s %s; cycle latency us median %.0f p99 %.0f "
            "(%.1fs)" % (subject, fmt_summary(s), lat["median"], lat["p99"],
                         time.monotonic() - started))

    def throughput_contended(self, subject):
        backend, kind = SUBJECTS[subject]
        cfg = self.cfg
        spec = self.spec(subject, "contended")
        q = ctx.Queue()
        up = ctx.RawArray("q", CONTENDERS)
        start = ctx.RawValue("q", 0)
        end = ctx.RawValue("q", 0)
        owner = ctx.RawValue("q", -1)
        violations = ctx.RawValue("q", 0)
        lifetime = 240 + cfg.contended_s
        started = time.monotonic()
        procs = [self.children.spawn("contended-%s-%d" % (subject, w), lifetime, "contended",
                                     spec, w, up, start, end, owner, violations, q)
                 for w in range(CONTENDERS)]
        self.children.wait(lambda: all(up[w] for w in range(CONTENDERS)), 120,
                           "%d %s contenders to connect" % (CONTENDERS, subject), procs)
        t0 = now_ns() + int(0.2e9)
        end.value = t0 + int(cfg.contended_s * 1e9)
        start.value = t0
        results = {}
        for _ in range(CONTENDERS):
            wid, c, a, b = self.children.get(q, procs, cfg.contended_s + 90,
                                          "throughput_contended %s results" % subject)
            results[wid] = (c, a, b)
        self.children.join_all(procs, 30, "throughput_contended %s" % subject)
        if violations.value:
            raise Failure("throughput_contended %s: %d mutual exclusion violations"
                          % (subject, violations.value))
        from array import array
        cycles = []
        acquire_waits = []
        for wid in sorted(results):
            c, a, b = array("q"), array("q"), array("q")
            c.frombytes(results[wid][0])
            a.frombytes(results[wid][1])
            b.frombytes(results[wid][2])
            cycles.extend((a[i], b[i], wid) for i in range(len(a)))
            acquire_waits.extend((a[i] - c[i]) / 1e6 for i in range(len(a))
                                 if t0 <= a[i] < end.value)
        cycles.sort()
        t_end = end.value
        for i in range(1, len(cycles)):
            if cycles[i][0] < cycles[i - 1][1]:
                raise Failure("throughput_contended %s: overlapping ownership (acquired %d ns "
                              "before the previous release)" % (subject,
                                                                cycles[i - 1][1] - cycles[i][0]))
        windows = int(round(cfg.contended_s / cfg.window_s))
        counts = [0] * windows
        waits = []
        gaps = []
        total_cycles = 0
        handoffs = 0
        for i in range(len(cycles)):
            ta, tr, w = cycles[i]
            if ta < t0 or ta >= t_end:
                continue
            total_cycles += 1
            if i == 0:
                continue
            pa, pr, pw = cycles[i - 1]
            gaps.append((ta - pr) / 1e6)
            if pw != w:
                handoffs += 1
                waits.append((ta - pr) / 1e6)
                counts[min(windows - 1, int((ta - t0) // int(cfg.window_s * 1e9)))] += 1
        rates = [c / cfg.window_s for c in counts]
        s = summarize(rates)
        ws = summarize(waits)
        gs = summarize(gaps)
        aws = summarize(acquire_waits)
        in_window = [0] * CONTENDERS
        for ta, tr, w in cycles:
            if t0 <= ta < t_end:
                in_window[w] += 1
        extra = self.common_extra(subject)
        extra.update({
            "contenders": str(CONTENDERS), "duration_s": str(cfg.contended_s),
            "window_s": str(cfg.window_s),
            "handoffs": str(handoffs),
            "handoffs_per_s_overall": "%.1f" % (handoffs / cfg.contended_s),
            "cycles": str(total_cycles),
            "cycles_per_s_overall": "%.1f" % (total_cycles / cfg.contended_s),
            "cycles_per_process": " ".join(str(c) for c in in_window),
            "wait_ms_median": "%.3f" % ws["median"], "wait_ms_p99": "%.3f" % ws["p99"],
            "wait_ms_max": "%.3f" % ws["max"],
            "wait": "handoffs only: release by one process -> acquisition by another",
            "gap_ms_median": "%.3f" % gs["median"], "gap_ms_p99": "%.3f" % gs["p99"],
            "gap": "every release -> the next acquisition by anyone (same process included)",
            "acquire_wait_ms_median": "%.3f" % aws["median"],
            "acquire_wait_ms_p99": "%.3f" % aws["p99"], "acquire_wait_ms_max": "%.3f" % aws["max"],
            "acquire_wait": "acquire() called -> acquired, per cycle (every process)",
            "samples_are": "handoffs per %.0f s window" % cfg.window_s,
        })
        if kind == "election":
            extra["cycle"] = "Election.run(func); func stamps and returns"
        emit("throughput_contended", backend, subject, "handoffs/s", s, extra)
        log("throughput_contended %s: handoffs/s %s; %d handoffs, %d cycles (per process %s); "
            "wait ms median %.3f p99 %.3f; acquire wait ms median %.3f p99 %.3f max %.1f "
            "(%.1fs)" % (subject, fmt_summary(s), handoffs, total_cycles,
                         extra["cycles_per_process"], ws["median"], ws["p99"], aws["median"],
                         aws["p99"], aws["max"], time.monotonic() - started))


# ---------------------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figures", default=",".join(FIGURES),
                    help="comma list of: " + ", ".join(FIGURES))
    ap.add_argument("--subjects", default=",".join(SUBJECTS),
                    help="comma list of: " + ", ".join(SUBJECTS))
    args = ap.parse_args()
    figures = [f for f in args.figures.split(",") if f]
    subjects = [s for s in args.subjects.split(",") if s]
    for f in figures:
        if f not in FIGURES:
            ap.error("unknown figure %r" % f)
    for s in subjects:
        if s not in SUBJECTS:
            ap.error("unknown subject %r" % s)

    zk = os.environ.get("BATON_TEST_ZOOKEEPER", "")
    url = os.environ.get("BATON_TEST_REDIS_URL", "")
    if not zk or not url:
        log("FAILED: BATON_TEST_ZOOKEEPER and BATON_TEST_REDIS_URL must be set (source "
            "scripts/servers.sh and start the servers, or run bench/run.sh)")
        return 1
    quick = os.environ.get("BATON_BENCH_QUICK", "0") not in ("", "0")
    cfg = Config(quick)
    bench = Bench(cfg, zk, url)

    def on_signal(signum, frame):
        if signum == signal.SIGALRM:
            raise Failure("the whole run exceeded its deadline of %ds" % GLOBAL_DEADLINE_S)
        raise Failure("received signal %d" % signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(GLOBAL_DEADLINE_S)

    started = time.monotonic()
    log("run %s: quick=%d, figures %s, subjects %s" % (bench.run_id, quick, ",".join(figures),
                                                        ",".join(subjects)))
    try:
        bench.probe()
        for f in figures:
            for s in subjects:
                getattr(bench, f)(s)
        bench.cleanup()
    except (Failure, KeyboardInterrupt, Exception) as e:
        import traceback
        if not isinstance(e, Failure):
            traceback.print_exc()
        log("FAILED: %s" % (e,))
        signal.alarm(0)
        bench.children.kill_all()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    signal.alarm(0)
    log("done in %.1fs" % (time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
