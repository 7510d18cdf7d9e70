#!/usr/bin/python3
"""The web console's JSON API against two real `baton run` nodes sharing a SQLite file: the
documents parse and have `status --json` / `history --json`'s schema (one code path), /node,
the answers 401, 403, 404, 405, 413 and 429, the security headers, control actions seen on both
nodes and logged with the caller's address, the token never logged, and the config's rules
(exit 2 naming the place). Run by ctest (console_api):

    console_api_test.py --baton build/daemon/baton
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402
from cluster import TOKEN, get_json, request, wait_for  # noqa: E402

BATON = None
BACKEND = "sqlite"


def baton_json(*args):
    r = subprocess.run([BATON, *args, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class console_api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = cluster.Cluster(BATON, "console-api", BACKEND).__enter__()
        cls.a, cls.b = cls.cluster.a, cls.cluster.b

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def auth(self, token=TOKEN):
        return {"Authorization": "Bearer " + token}

    def test_schedules_have_the_status_json_schema_on_every_node(self):
        doc = self.cluster.wait_led(self.a)
        self.assertEqual(doc["schema"], 1)
        self.assertEqual([s["name"] for s in doc["schedules"]], ["alpha", "beta", "gamma"])
        cli = baton_json("status", "--config", self.a.config)
        self.assertEqual(set(doc.keys()), set(cli.keys()))
        for api_s, cli_s in zip(doc["schedules"], cli["schedules"]):
            self.assertEqual(set(api_s.keys()), set(cli_s.keys()), api_s["name"])
            for key in ("owner", "fence", "waiting", "paused", "next_fire", "last_run"):
                self.assertIn(key, api_s)
            self.assertEqual(set(api_s["owner"].keys()),
                             {"id", "fence", "acquired_at", "ttl_at", "transition_at"})
        # Any node serves the whole cluster's view: B shows the same leaders and both nodes.
        doc_b = self.cluster.wait_led(self.b)
        ids = {n["id"] for n in doc_b["nodes"]}
        self.assertEqual(ids, {"node-a", "node-b"})
        wait_for("A and B agree on the leaders", lambda: [
            s["owner"]["id"] for s in get_json(self.a.port, "/api/v1/schedules")["schedules"]] == [
            s["owner"]["id"] for s in get_json(self.b.port, "/api/v1/schedules")["schedules"]])

    def test_history_has_the_history_json_schema_and_keeps_markup_as_data(self):
        def failed_runs():
            h = get_json(self.b.port, "/api/v1/schedules/beta/history?limit=5")
            return h if any(r["outcome"] == "failed" for r in h["records"]) else None
        h = wait_for("a failed run of beta", failed_runs)
        self.assertEqual(h["schedule"], "beta")
        self.assertEqual(h["limit"], 5)
        self.assertLessEqual(len(h["records"]), 5)
        run = next(r for r in h["records"] if r["outcome"] == "failed")
        self.assertIn(cluster.HOSTILE, run["output"])
        self.assertEqual(run["exit_status"], 3)
        cli = baton_json("history", "beta", "--config", self.b.config, "--limit", "5")
        self.assertEqual(set(h.keys()), set(cli.keys()))
        self.assertEqual(set(run.keys()), set(cli["records"][0].keys()))
        status, _, body = request(self.a.port, "GET", "/api/v1/schedules/beta/history?limit=0")
        self.assertEqual(status, 400, body)

    def test_node_names_itself_its_version_backend_and_clock_offset(self):
        node = get_json(self.a.port, "/api/v1/node")
        self.assertEqual(node["id"], "node-a")
        self.assertEqual(node["backend"]["type"], BACKEND)
        self.assertIn("clock_offset_ms", node)
        self.assertTrue(node["version"])
        self.assertTrue(node["console"]["allow_control"])
        self.assertFalse(get_json(self.b.port, "/api/v1/node")["console"]["allow_control"])

    def test_404_and_405(self):
        for path in ("/api/v1/schedules/nope/history", "/api/v1/nothing", "/api/v2/schedules"):
            status, headers, body = request(self.a.port, "GET", path)
            self.assertEqual(status, 404, path)
            self.assertIn("error", json.loads(body))
        status, _, _ = request(self.a.port, "POST", "/api/v1/schedules/nope/pause",
                               headers=self.auth())
        self.assertEqual(status, 404)
        status, headers, _ = request(self.a.port, "DELETE", "/api/v1/schedules")
        self.assertEqual((status, headers.get("allow")), (405, "GET, HEAD"))
        status, headers, _ = request(self.a.port, "GET", "/api/v1/schedules/alpha/pause")
        self.assertEqual((status, headers.get("allow")), (405, "POST"))
        status, headers, _ = request(self.a.port, "POST", "/metrics")
        self.assertEqual((status, headers.get("allow")), (405, "GET, HEAD"))

    def test_401_without_or_with_a_wrong_token_and_403_when_control_is_off(self):
        cases = [({}, "Bearer realm=\"baton\""),
                 ({"Authorization": "Basic dXNlcjpwYXNz"}, "Bearer realm=\"baton\""),
                 ({"Authorization": "Bearer"}, "Bearer realm=\"baton\""),
                 (self.auth("x" + TOKEN), "Bearer realm=\"baton\", error=\"invalid_token\""),
                 (self.auth(TOKEN[:-1]), "Bearer realm=\"baton\", error=\"invalid_token\"")]
        for headers, challenge in cases:
            status, h, body = request(self.a.port, "POST", "/api/v1/schedules/alpha/trigger",
                                      headers=headers)
            self.assertEqual(status, 401, (headers, body))
            self.assertEqual(h.get("www-authenticate"), challenge)
        status, _, body = request(self.b.port, "POST", "/api/v1/schedules/alpha/trigger",
                                  headers=self.auth())
        self.assertEqual(status, 403, body)
        self.assertIn("allow_control", json.loads(body)["error"])
        log = self.a.text()
        self.assertIn("refused (401)", log)
        self.assertNotIn(TOKEN, log + self.b.text())

    def test_421_for_a_name_in_host_from_this_machine(self):
        # DNS rebinding guard: a local client must name an address, not a host name.
        status, _, body = request(self.a.port, "GET", "/api/v1/schedules",
                                  headers={"Host": "evil.example:%d" % self.a.port})
        self.assertEqual(status, 421, body)
        for host in ("localhost:%d" % self.a.port, "127.0.0.1", "[::1]:80"):
            status, _, body = request(self.a.port, "GET", "/api/v1/node", headers={"Host": host})
            self.assertEqual(status, 200, (host, body))
        # /metrics is not the console's.
        status, _, _ = request(self.a.port, "GET", "/metrics", headers={"Host": "evil.example"})
        self.assertEqual(status, 200)

    def test_413_for_a_large_body(self):
        status, _, _ = request(self.a.port, "POST", "/api/v1/schedules/alpha/pause",
                               headers=self.auth(), body="x" * 4096)
        self.assertEqual(status, 413)

    def test_pause_on_a_is_seen_on_b_and_logged_with_the_address(self):
        status, _, body = request(self.a.port, "POST", "/api/v1/schedules/gamma/pause",
                                  headers=dict(self.auth(), **{"Content-Type": "application/json"}),
                                  body=json.dumps({"reason": "api test"}))
        self.assertEqual(status, 200, body)
        answer = json.loads(body)
        self.assertEqual((answer["schedule"], answer["action"]), ("gamma", "pause"))
        self.assertTrue(answer["controls"]["paused"])
        self.assertEqual(answer["controls"]["reason"], "api test")
        self.assertTrue(answer["controls"]["changed_by"].startswith("console 127.0.0.1"))

        def paused_on_b():
            doc = get_json(self.b.port, "/api/v1/schedules")
            return next(s for s in doc["schedules"] if s["name"] == "gamma")["paused"]
        wait_for("gamma paused on B", paused_on_b)
        self.assertRegex(self.a.text(), r"console: pause 'gamma' from 127\.0\.0\.1:[0-9]+ applied")
        status, _, body = request(self.a.port, "POST", "/api/v1/schedules/gamma/resume",
                                  headers=self.auth())
        self.assertEqual(status, 200, body)
        self.assertFalse(json.loads(body)["controls"]["paused"])
        status, _, body = request(self.a.port, "POST", "/api/v1/schedules/gamma/trigger",
                                  headers=self.auth())
        self.assertEqual(status, 200, body)
        self.assertGreaterEqual(json.loads(body)["controls"]["trigger_requests"], 1)

    def test_page_and_assets_are_embedded_with_a_strict_policy(self):
        status, headers, page = request(self.a.port, "GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/html"))
        csp = headers["content-security-policy"]
        for part in ("default-src 'none'", "script-src 'self'", "style-src 'self'",
                     "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"):
            self.assertIn(part, csp)
        self.assertEqual(headers["x-content-type-options"], "nosniff")
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertIn('<script src="/console.js" defer></script>', page)
        self.assertEqual(page.count("<script"), 1, "no inline script")
        self.assertNotIn("http://", page.replace("http.token", ""))
        self.assertNotIn("https://", page)
        self.assertNotIn(TOKEN, page)
        for path, kind in (("/console.js", "text/javascript"), ("/console.css", "text/css")):
            status, headers, body = request(self.a.port, "GET", path)
            self.assertEqual(status, 200, path)
            self.assertTrue(headers["content-type"].startswith(kind), headers)
            self.assertNotIn("https://", body)
        _, _, js = request(self.a.port, "GET", "/console.js")
        # Data reaches the page as text only: no HTML parsing of strings anywhere in the script.
        self.assertIsNone(re.search(r"\.(inner|outer)HTML\b|insertAdjacentHTML|document\.write|eval\(",
                                    js))
        status, headers, _ = request(self.a.port, "GET", "/api/v1/node")
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertEqual(headers["content-type"], "application/json")

    def test_z_429_beyond_the_rate_limit_then_serves_again(self):
        # Last (z): it empties 127.0.0.1's bucket. Bounded: the bucket holds 60 and refills 20/s.
        seen = None
        for i in range(2000):
            status, headers, _ = request(self.b.port, "GET", "/api/v1/node")
            if status == 429:
                seen = (i, headers.get("retry-after"))
                break
            self.assertEqual(status, 200)
        self.assertIsNotNone(seen, "no 429 after 2000 requests")
        self.assertEqual(seen[1], "1")
        # /metrics is not rate limited; the console serves again once the bucket refilled.
        self.assertEqual(request(self.b.port, "GET", "/metrics")[0], 200)
        wait_for("the console serving again",
                 lambda: request(self.b.port, "GET", "/api/v1/node")[0] == 200)


class console_config(unittest.TestCase):
    """The console's settings: errors name the file and the JSON path (exit 2)."""

    def write_config(self, http, files=None):
        d = tempfile.mkdtemp(prefix="baton-console-config-")
        self.addCleanup(shutil.rmtree, d, True)
        for name, (text, mode) in (files or {}).items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(d, name), mode)
        config = os.path.join(d, "baton.json")
        with open(config, "w") as f:
            json.dump({"backend": {"type": "sqlite", "path": os.path.join(d, "x.db")},
                       "http": http,
                       "schedules": [{"name": "a", "every": "1s", "command": ["/bin/true"]}]}, f)
        return config, d

    def run_with(self, http, env=None, files=None):
        config, d = self.write_config(http, files)
        e = dict(os.environ)
        e.pop(cluster.TOKEN_ENV, None)
        e.update(env or {})
        r = subprocess.run([BATON, "run", "--config", config], capture_output=True, text=True,
                           env=e, timeout=60, stdin=subprocess.DEVNULL)
        return r, config, d

    def test_bad_values_name_the_place(self):
        cases = [({"listen": "127.0.0.1:0", "console": "yes"}, "/http/console: expected true or false"),
                 ({"listen": "127.0.0.1:0", "allow_control": True, "token_env": "T"},
                  "/http/allow_control: needs \"console\": true"),
                 ({"listen": "127.0.0.1:0", "console": True, "allow_control": True},
                  "/http/allow_control: needs a token"),
                 ({"listen": "127.0.0.1:0", "console": True, "token_env": "1X"},
                  "/http/token_env: expected the name of an environment variable"),
                 ({"listen": "127.0.0.1:0", "console": True, "token_env": "A", "token_file": "f"},
                  "/http/token_file: set one of token_env and token_file"),
                 ({"listen": "127.0.0.1:0", "consol": True}, "/http/consol")]
        for http, message in cases:
            r, config, _ = self.run_with(http)
            self.assertEqual(r.returncode, 2, (http, r.stderr))
            self.assertIn(config + ": " + message if message.startswith("/") else message,
                          r.stderr, http)

    def test_token_sources_are_checked_before_anything_is_contacted(self):
        base = {"listen": "127.0.0.1:0", "console": True, "allow_control": True}
        r, config, _ = self.run_with(dict(base, token_env="BATON_NO_SUCH_TOKEN"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(config + ": /http/token_env: the variable BATON_NO_SUCH_TOKEN is not set",
                      r.stderr)
        r, config, _ = self.run_with(dict(base, token_env="SHORT_TOKEN"), env={"SHORT_TOKEN": "abc"})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("/http/token_env: the token is 3 bytes; at least 16", r.stderr)
        self.assertNotIn("abc\n", r.stderr)
        secret = "s3cret-" + os.urandom(12).hex()
        r, config, d = self.run_with(dict(base, token_file="token"),
                                     files={"token": (secret + "\n", 0o644)})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(config + ": /http/token_file: '" + os.path.join(d, "token") +
                      "' has mode 0644: group and others must have no access", r.stderr)
        self.assertNotIn(secret, r.stderr)

    def test_console_without_a_listener_is_logged(self):
        config, d = self.write_config({"console": True})
        with open(config) as f:
            c = json.load(f)
        c["schedules"][0]["every"] = "1h"
        with open(config, "w") as f:
            json.dump(c, f)
        log = os.path.join(d, "run.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen([BATON, "run", "--config", config], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            def logged():
                with open(log, errors="replace") as f:
                    return "/http/console is on but nothing listens" in f.read()
            wait_for("the warning", logged)
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(30), 0)

    def test_validate_shows_the_console(self):
        config, _ = self.write_config({"listen": "127.0.0.1:9464", "console": True,
                                       "allow_control": True, "token_env": "BATON_TOKEN"})
        doc = baton_json("validate", "--config", config)
        self.assertEqual(doc["http"], {"listen": "127.0.0.1:9464", "console": True,
                                       "allow_control": True, "token_env": "BATON_TOKEN",
                                       "token_file": None})
        text = subprocess.run([BATON, "validate", "--config", config], capture_output=True,
                              text=True, timeout=60).stdout
        self.assertIn("console: on (the page at /, the read-only API at /api/v1; controls allowed "
                      "with the token in $BATON_TOKEN)", text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", required=True)
    parser.add_argument("--backend", default="sqlite",
                        help="sqlite (a file; ctest's), or postgresql, mysql, redis, zookeeper: "
                             "the servers of scripts/servers.sh, named by BATON_TEST_*")
    args, rest = parser.parse_known_args()
    BATON = os.path.abspath(args.baton)
    BACKEND = args.backend
    unittest.main(argv=[sys.argv[0], "-v", *rest])
