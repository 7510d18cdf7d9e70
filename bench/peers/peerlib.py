"""Helpers for bench/peers/peers.py: statistics, JSON records, the peer subjects and the roles
that run in child processes (started by peers.py with multiprocessing's 'spawn' method).

Every child process writes only to stderr (its stdout is redirected there), runs a watchdog
thread that ends it when its parent disappears or its lifetime deadline passes, and reports
through shared memory (RawValue/RawArray) or a multiprocessing queue.

Timestamps are time.clock_gettime_ns(CLOCK_MONOTONIC): comparable across processes.
"""
import json
import logging
import math
import os
import random
import signal
import sys
import threading
import time
import traceback
from array import array

# subject -> (backend, kind)
SUBJECTS = {
    "kazoo-lock": ("zookeeper", "lock"),
    "kazoo-election": ("zookeeper", "election"),
    "redis-py-lock": ("redis", "lock"),
}

ZK_SESSION_TIMEOUT_S = 2.0  # KazooClient(hosts, timeout=2.0)
REDIS_LEASE_S = 2.0  # redis-py Lock(timeout=2): PX 2000 (baton's bench: ttl 1 s + transition 1 s)
REDIS_RENEW_S = 1.0  # the takeover owner renews (Lock.reacquire) this often, like baton at ttl 1 s
REDIS_SOCKET_TIMEOUT_S = 10.0


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def log(msg):
    sys.stderr.write("peers.py[%d] %s: %s\n" % (os.getpid(), time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


class Failure(Exception):
    """A measurement failed: the message says what and where."""


# ---------------------------------------------------------------------------------- statistics


def summarize(values):
    """samples, median (mean of the two middle values for even counts), nearest-rank p99, min,
    max, mean; the same definitions as bench/common.cpp."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        return {"samples": 0, "median": 0.0, "p99": 0.0, "min": 0.0, "max": 0.0, "mean": 0.0}
    rank = int(math.ceil(0.99 * n))
    p99 = v[min(n - 1, 0 if rank == 0 else rank - 1)]
    median = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0
    return {"samples": n, "median": float(median), "p99": float(p99), "min": float(v[0]),
            "max": float(v[-1]), "mean": float(sum(v)) / n}


def _num(x):
    if x is None or not math.isfinite(x):
        return None
    return float("%.6g" % x)


def emit(figure, backend, subject, unit, summary, extra=None):
    """One JSON record on stdout (the only thing peers.py writes there)."""
    rec = {"figure": figure, "backend": backend, "subject": subject, "unit": unit,
           "samples": int(summary["samples"])}
    for k in ("median", "p99", "min", "max", "mean"):
        rec[k] = _num(summary[k])
    for k in sorted(extra or {}):
        rec[k] = str(extra[k])
    sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fmt_summary(s, digits=3):
    f = "%%.%dg" % digits
    return "median %s p99 %s min %s max %s" % (f % s["median"], f % s["p99"], f % s["min"],
                                              f % s["max"])


# ------------------------------------------------------------------------------------ subjects


class AcquireTimeout(Failure):
    pass


class _WatchProbe(object):
    """Wraps a KazooClient for a kazoo Lock: calls on_wait() once a get() with a watch returned,
    i.e. once the contender watches its predecessor (it is queued and waiting). Everything else
    is delegated unchanged."""

    def __init__(self, client, on_wait):
        self._client = client
        self._on_wait = on_wait

    def __getattr__(self, name):
        return getattr(self._client, name)

    def get(self, path, watch=None):
        result = self._client.get(path, watch)
        if watch is not None:
            self._on_wait()
        return result


def _probed_redis_lock_class():
    import redis.lock

    class ProbedLock(redis.lock.Lock):
        """redis-py's Lock, unchanged, except that on_wait() is called after each failed
        acquisition attempt (the contender is waiting and polls every `sleep` seconds)."""
        on_wait = None

        def do_acquire(self, token):
            got = super(ProbedLock, self).do_acquire(token)
            if not got and self.on_wait is not None:
                self.on_wait()
            return got

    return ProbedLock


class Contender(object):
    """One contender of `subject` for spec["key"], in this process. cycle(body, timeout):
    acquire (or get elected), run body(), release (or return from the leader function)."""

    def __init__(self, spec, on_wait=None, identifier=None):
        self.subject = spec["subject"]
        self.backend, self.kind = SUBJECTS[self.subject]
        if self.backend == "zookeeper":
            from kazoo.client import KazooClient
            from kazoo.recipe.election import Election
            from kazoo.recipe.lock import Lock
            self.client = KazooClient(hosts=spec["zk_hosts"], timeout=ZK_SESSION_TIMEOUT_S)
            self.client.start(timeout=15)
            path = spec["zk_path"]
            lock_client = _WatchProbe(self.client, on_wait) if on_wait else self.client
            ident = identifier or ("pid-%d" % os.getpid())
            if self.kind == "election":
                self.election = Election(self.client, path, ident)
                # Election.run() is `with self.lock: func()`; the lock gets the probe.
                self.election.lock = Lock(lock_client, path, ident)
            else:
                self.lock = Lock(lock_client, path, ident)
        else:
            import redis
            self.client = redis.Redis.from_url(spec["redis_url"],
                                               socket_timeout=REDIS_SOCKET_TIMEOUT_S,
                                               socket_connect_timeout=REDIS_SOCKET_TIMEOUT_S)
            self.client.ping()
            kw = {}
            if on_wait:
                kw["lock_class"] = _probed_redis_lock_class()
            # Library defaults (sleep=0.1, thread_local=True) apart from the lease.
            self.lock = self.client.lock(spec["redis_key"], timeout=REDIS_LEASE_S, **kw)
            if on_wait:
                self.lock.on_wait = on_wait

    def cycle(self, body, timeout=None):
        """Acquire within `timeout` seconds (None: no deadline of its own; the process's
        watchdog and the parent's deadlines still apply), run body, release. Raises
        AcquireTimeout when the acquisition did not happen in time."""
        if self.kind == "election":
            ran = []

            def leader():
                ran.append(True)
                body()

            timer = None
            if timeout is not None:
                timer = threading.Timer(timeout, self.election.cancel)
                timer.daemon = True
                timer.start()
            try:
                self.election.run(leader)
            finally:
                if timer is not None:
                    timer.cancel()
            if not ran:
                raise AcquireTimeout("%s: not elected within %ss" % (self.subject, timeout))
            return
        if self.backend == "zookeeper":
            from kazoo.exceptions import LockTimeout
            try:
                got = self.lock.acquire(timeout=timeout)
            except LockTimeout:
                got = False
        else:
            got = self.lock.acquire(blocking_timeout=timeout)
        if not got:
            raise AcquireTimeout("%s: lock not acquired within %ss" % (self.subject, timeout))
        try:
            body()
        finally:
            self.lock.release()

    def renew(self):
        """For the takeover owner: redis-py's lease does not renew itself (Lock.reacquire resets
        the PX to `timeout`); kazoo's session is kept alive by the client's own pings."""
        if self.backend == "redis":
            self.lock.reacquire()

    def close(self):
        try:
            if self.backend == "zookeeper":
                self.client.stop()
                self.client.close()
            else:
                self.client.close()
        except Exception as e:  # best effort at the end of a child
            log("closing the client: %r" % (e,))


def library_versions():
    import kazoo
    import redis
    return {"kazoo": getattr(kazoo, "__version__", "?"), "redis-py": redis.__version__}


def library_version(subject):
    v = library_versions()
    return ("kazoo " + v["kazoo"]) if SUBJECTS[subject][0] == "zookeeper" else (
        "redis-py " + v["redis-py"])


# -------------------------------------------------------------------------------- child plumbing


def wait_until(pred, timeout, what, interval=0.0005):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise Failure("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def _watchdog(parent_pid, lifetime):
    deadline = time.monotonic() + lifetime
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            log("parent %d is gone: exiting" % parent_pid)
            os._exit(3)
        if time.monotonic() > deadline:
            log("lifetime deadline of %.0fs passed: exiting" % lifetime)
            os._exit(4)


def child_entry(name, lifetime, role, *args):
    """Target of every child process: stdout -> stderr, watchdog, run the role; on an error print
    it and exit 1 (the parent sees the exit code and stops the run)."""
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="peers.py child " + name + " %(levelname)s %(name)s: %(message)s")
    t = threading.Thread(target=_watchdog, args=(os.getppid(), lifetime), daemon=True)
    t.start()
    try:
        ROLES[role](*args)
    except BaseException as e:  # noqa: B902 - report whatever it was
        log("child %s FAILED: %s\n%s" % (name, e, traceback.format_exc()))
        sys.stderr.flush()
        os._exit(1)


# ---------------------------------------------------------------------------------- child roles


def role_probe(spec_zk, spec_redis, q):
    """Connects to both servers (early, clear failure), reads the server versions and the
    negotiated ZooKeeper session timeout."""
    info = {}
    c = Contender(spec_zk)
    try:
        srvr = c.client.command(b"srvr")
        for line in srvr.splitlines():
            if line.startswith("Zookeeper version:"):
                v = line.split(":", 1)[1].strip().split(",")[0]
                info["zk_version"] = v.split("-$")[0]  # Debian: "3.8.0-${mvngit.commit.id}"
        sid = "0x%x" % c.client.client_id[0]
        cons = c.client.command(b"cons")
        for line in cons.splitlines():
            if ("sid=%s," % sid) in line:
                for part in line.split(","):
                    if part.startswith("to="):
                        info["zk_session_timeout_ms"] = part[3:]
    finally:
        c.close()
    r = Contender(spec_redis)
    try:
        info["redis_version"] = r.client.info("server").get("redis_version", "?")
        info["redis_lock_sleep_s"] = repr(r.lock.sleep)
    finally:
        r.close()
    q.put(info)


def role_handover(spec, wid, total, rnd, ready, acq, rel):
    """Two of these ping-pong one lock. Round k is acquired by worker k % 2; its owner waits
    until the other worker is queued (kazoo: watching its predecessor; redis-py: one failed
    attempt made), then (redis-py only) a uniform random delay in [0, sleep) so that the
    release falls at a random phase of the waiter's polling, stamps rel[k] and releases. The
    other worker stamps acq[k+1] right after its acquisition returns. Handover k = acq[k+1] -
    rel[k]."""
    target = [wid]
    c = Contender(spec, on_wait=lambda: setattr(ready, "value", target[0]))
    polling = c.backend == "redis"
    poll_sleep = c.lock.sleep if polling else 0.0
    rng = random.Random(os.getpid())

    def body():
        t = now_ns()
        k = target[0]
        if rnd.value != k - 1:
            raise Failure("mutual exclusion/order violated: acquired round %d while round is %d"
                          % (k, rnd.value))
        acq[k] = t
        rnd.value = k
        if k == total:
            return
        wait_until(lambda: ready.value >= k + 1, 20, "the other worker to wait for round %d"
                   % (k + 1))
        if polling:
            time.sleep(rng.uniform(0, poll_sleep))
        rel[k] = now_ns()

    if wid == 1:
        wait_until(lambda: rnd.value >= 0, 120, "worker 0 to acquire round 0")
    while target[0] <= total:
        k = target[0]
        c.cycle(body, timeout=30)
        if k == total:
            break
        wait_until(lambda: rnd.value >= k + 1, 30, "the other worker to acquire round %d"
                   % (k + 1))
        target[0] = k + 2
    c.close()


def role_holder(spec, up, go, ready, acquired, stop_after):
    """Takeover: connects, sets up=1, waits for go, contends; once owner, stamps acquired and
    holds (redis-py: renews every REDIS_RENEW_S) until SIGTERM (then releases and exits) or
    SIGKILL (the measured crash)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    c = Contender(spec, on_wait=lambda: setattr(ready, "value", 1))
    up.value = 1
    deadline = time.monotonic() + stop_after
    while not go.value:
        if stop.is_set():
            c.close()
            return
        if time.monotonic() > deadline:
            raise Failure("no go signal within %.0fs" % stop_after)
        time.sleep(0.002)

    def body():
        acquired.value = now_ns()
        while not stop.wait(REDIS_RENEW_S):
            c.renew()
            if time.monotonic() > deadline:
                raise Failure("still holding after %.0fs" % stop_after)

    c.cycle(body, timeout=120)
    c.close()


def role_uncontended(spec, batches, batch_s, warmup_s, q):
    """One thread, one lock, nobody else: lock+unlock cycles per second per batch, and the
    latency of each cycle."""
    c = Contender(spec)
    timeout = None if c.kind == "election" else 10

    def noop():
        pass

    end = now_ns() + int(warmup_s * 1e9)
    while now_ns() < end:
        c.cycle(noop, timeout)
    rates = []
    lat = array("q")
    for _ in range(batches):
        t0 = now_ns()
        end = t0 + int(batch_s * 1e9)
        n = 0
        while True:
            s = now_ns()
            c.cycle(noop, timeout)
            e = now_ns()
            lat.append(e - s)
            n += 1
            if e >= end:
                break
        rates.append(n / ((e - t0) / 1e9))
    c.close()
    q.put({"rates": rates, "lat_us": summarize([x / 1e3 for x in lat]), "cycles": len(lat)})


def role_contended(spec, wid, up, start, end, owner, violations, q):
    """One of N processes looping lock -> unlock on one lock between start and end; sends back
    its (acquire called, acquired, released) timestamps."""
    c = Contender(spec)
    up[wid] = 1
    wait_until(lambda: start.value != 0, 180, "the start signal", interval=0.002)
    while now_ns() < start.value:
        time.sleep(0.0005)
    calls = array("q")
    acqs = array("q")
    rels = array("q")

    def body():
        t = now_ns()
        if owner.value != -1:
            violations.value += 1
        owner.value = wid
        acqs.append(t)
        owner.value = -1
        rels.append(now_ns())

    while now_ns() < end.value:
        timeout = None
        if c.kind != "election":
            timeout = max(0.0, (end.value - now_ns()) / 1e9) + 15
        calls.append(now_ns())
        n = len(acqs)
        try:
            c.cycle(body, timeout)
        except AcquireTimeout:
            if now_ns() >= end.value:
                calls.pop()
                break
            raise
        if len(acqs) != n + 1:
            raise Failure("a cycle ended without running its body")
    c.close()
    q.put((wid, calls.tobytes(), acqs.tobytes(), rels.tobytes()))


def role_cleanup(zk_hosts, zk_root, redis_url, redis_prefix, q):
    """Removes this run's znodes and keys."""
    from kazoo.client import KazooClient
    import redis
    zk = KazooClient(hosts=zk_hosts, timeout=ZK_SESSION_TIMEOUT_S)
    zk.start(timeout=15)
    try:
        if zk.exists(zk_root):
            zk.delete(zk_root, recursive=True)
        parent = zk_root.rsplit("/", 1)[0]
        try:
            if parent and zk.exists(parent) and not zk.get_children(parent):
                zk.delete(parent)
        except Exception:
            pass  # another run may use it
    finally:
        zk.stop()
        zk.close()
    r = redis.Redis.from_url(redis_url, socket_timeout=REDIS_SOCKET_TIMEOUT_S,
                             socket_connect_timeout=REDIS_SOCKET_TIMEOUT_S)
    n = 0
    for key in r.scan_iter(match=redis_prefix + "*"):
        n += r.delete(key)
    r.close()
    q.put({"redis_keys_deleted": n})


ROLES = {
    "probe": role_probe,
    "handover": role_handover,
    "holder": role_holder,
    "uncontended": role_uncontended,
    "contended": role_contended,
    "cleanup": role_cleanup,
}
