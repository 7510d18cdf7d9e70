"""Helpers of the web console's tests: `baton run` nodes with the console on, sharing one SQLite
file, an HTTP client, and waiting for a condition with a deadline (no fixed sleeps)."""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

TOKEN_ENV = "BATON_TEST_CONSOLE_TOKEN"
TOKEN = "t0ken-" + os.urandom(16).hex()
# The job of schedule `beta`: fails, and its stderr tail holds markup that must stay text.
HOSTILE = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"


class Timeout(AssertionError):
    pass


def wait_for(what, check, timeout=30.0, interval=0.1):
    """Returns check()'s first truthy value; raises Timeout naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while True:  # bounded by the deadline
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - the last error is reported
            last = e
        if time.monotonic() >= deadline:
            raise Timeout("timed out after %.0f s waiting for %s%s" %
                          (timeout, what, " (last error: %r)" % last if last else ""))
        time.sleep(interval)


def request(port, method, path, headers=None, body=None, timeout=10):
    """(status, headers with lower-case names, body text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        data = res.read().decode("utf-8", "replace")
        return res.status, {k.lower(): v for k, v in res.getheaders()}, data
    finally:
        conn.close()


def get_json(port, path, **kw):
    status, headers, body = request(port, "GET", path, **kw)
    if status != 200:
        raise AssertionError("GET %s: %d %s" % (path, status, body))
    return json.loads(body)


class Node:
    """One `baton run` with http.listen 127.0.0.1:0 and the console on."""

    def __init__(self, baton, workdir, name, backend, allow_control, extra_http=None):
        self.baton, self.name = baton, name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.config = os.path.join(self.dir, "baton.json")
        self.log = os.path.join(self.dir, "baton.log")
        http_conf = {"listen": "127.0.0.1:0", "console": True, "allow_control": allow_control}
        if allow_control:
            http_conf["token_env"] = TOKEN_ENV
        http_conf.update(extra_http or {})
        config = {
            "backend": backend,
            "lease": {"ttl": "2s", "transition": "2s", "retry_period": "200ms",
                      "poll_interval": "100ms"},
            "node": {"id": name},
            "http": http_conf,
            "history": 50,
            "schedules": [
                {"name": "alpha", "every": "1s", "command": ["/bin/true"]},
                {"name": "beta", "every": "1s",
                 "command": ["/bin/sh", "-c", "printf '%s\\n' \"$0\" >&2; exit 3", HOSTILE]},
                {"name": "gamma", "every": "2s", "command": ["/bin/sh", "-c", "exit 0"]},
            ],
        }
        with open(self.config, "w") as f:
            json.dump(config, f, indent=1)
        self.proc = None
        self.port = None

    def start(self):
        env = dict(os.environ)
        env[TOKEN_ENV] = TOKEN
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen([self.baton, "run", "--config", self.config],
                                     stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, env=env)

    def wait_listening(self):
        pattern = re.compile(r"http: listening on 127\.0\.0\.1:([0-9]+)")

        def found():
            if self.proc.poll() is not None:
                raise AssertionError("%s exited %s: %s" % (self.name, self.proc.returncode,
                                                          self.text()))
            m = pattern.search(self.text())
            return int(m.group(1)) if m else None

        self.port = wait_for(self.name + " listening", found)
        return self.port

    def text(self):
        with open(self.log, "r", errors="replace") as f:
            return f.read()

    def stop(self):
        """SIGTERM; the exit status (None if it had to be killed after 30 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.logf.close()


def backend_for(kind, workdir):
    """The backend object of a config: a SQLite file in `workdir`, or a test server named by the
    environment scripts/servers.sh exports (BATON_TEST_*), as tests/support/env.cpp reads it."""
    if kind == "sqlite":
        return {"type": "sqlite", "path": os.path.join(workdir, "shared.db")}
    env = {"postgresql": ("connection", "BATON_TEST_POSTGRES"),
           "mysql": ("connection", "BATON_TEST_MYSQL"),
           "redis": ("url", "BATON_TEST_REDIS_URL"),
           "zookeeper": ("hosts", "BATON_TEST_ZOOKEEPER")}
    key, var = env[kind]
    if not os.environ.get(var):
        raise AssertionError("%s is not set (scripts/servers.sh sets it)" % var)
    return {"type": kind, key: os.environ[var]}


class Cluster:
    """Two nodes on one backend (by default a SQLite file): A with the controls (token in
    TOKEN_ENV), B read-only."""

    def __init__(self, baton, hint, backend="sqlite"):
        self.workdir = tempfile.mkdtemp(prefix="baton-%s-" % hint)
        b = backend_for(backend, self.workdir)
        self.a = Node(baton, self.workdir, "node-a", b, allow_control=True)
        self.b = Node(baton, self.workdir, "node-b", b, allow_control=False)

    def __enter__(self):
        self.a.start()
        self.a.wait_listening()
        self.b.start()
        self.b.wait_listening()
        return self

    def __exit__(self, *exc):
        codes = [self.a.stop(), self.b.stop()]
        if exc[0] is None:
            assert codes == [0, 0], "nodes exited %s\n--- A\n%s\n--- B\n%s" % (
                codes, self.a.text(), self.b.text())
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            print("logs kept in", self.workdir)
        return False

    def wait_led(self, node):
        """Waits until every schedule has a leader, as `node`'s API shows them; the document."""
        def led():
            doc = get_json(node.port, "/api/v1/schedules")
            return doc if all(s["owner"] for s in doc["schedules"]) else None
        return wait_for("every schedule led", led)
