#!/usr/bin/python3
"""The web console in a real browser: two `baton run` nodes share a SQLite file; headless
Chromium, driven through chromedriver's WebDriver API (plain HTTP + JSON, no client library),
opens node A's page, checks that it lists every schedule with the leader the API names, that a
job's stderr holding `<script>` shows as text (no script element is created, nothing runs),
enters the token, clicks pause on one schedule, and sees it paused on A's page and on B's. It
keeps screenshots (desktop and phone width) as artifacts. Run by ctest (console_browser):

    console_browser_test.py --baton build/daemon/baton --artifacts build/test-artifacts

Needs Debian's `chromium` and `chromium-driver` (scripts/deps.sh installs them).
"""
import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402
from cluster import TOKEN, get_json, wait_for  # noqa: E402

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C WebDriver element key


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    """The few WebDriver commands the test needs, over urllib."""

    def __init__(self, driver, browser, profile):
        self.port = free_port()
        self.log = open(os.path.join(profile, "chromedriver.log"), "wb")
        self.proc = subprocess.Popen([driver, "--port=%d" % self.port], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for("chromedriver ready", lambda: self.call("GET", "/status")["ready"], timeout=30)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": browser, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--window-size=1280,1000",
                "--user-data-dir=" + os.path.join(profile, "chromium")]}}}}
        self.session = self.call("POST", "/session", caps, timeout=90)["sessionId"]

    def call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json; charset=utf-8"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return json.loads(res.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise AssertionError("webdriver %s %s: %s" % (method, path, e.read()[:2000])) from e

    def cmd(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def go(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def click(self, element):
        self.cmd("POST", "/element/%s/click" % element[ELEMENT], {})

    def type(self, element, text):
        self.cmd("POST", "/element/%s/value" % element[ELEMENT], {"text": text})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.cmd("GET", "/screenshot")))

    def window(self, width, height):
        self.cmd("POST", "/window/rect", {"width": width, "height": height})

    def quit(self):
        try:
            self.call("DELETE", "/session/" + self.session, timeout=30)
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log.close()


# What the page shows of each schedule: {name: {state, leader, stderr}} (text only).
PAGE_STATE = """
const out = {};
for (const a of document.querySelectorAll('article.schedule')) {
  const dds = {};
  const dts = a.querySelectorAll('dt');
  for (const dt of dts) dds[dt.textContent] = dt.nextElementSibling.textContent;
  const pre = a.querySelector('pre.stderr');
  out[a.dataset.name] = {state: a.querySelector('.state').textContent,
                         leader: dds['leader'] || '', runs: a.querySelectorAll('.run').length,
                         stderr: pre ? pre.textContent : null,
                         buttons: [...a.querySelectorAll('.controls button')].map(b => b.textContent)};
}
return out;
"""


def page(driver):
    return driver.js(PAGE_STATE)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", required=True)
    parser.add_argument("--artifacts", required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--chromedriver",
                        default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    args = parser.parse_args()
    for tool in (args.chromium, args.chromedriver):
        if not os.access(tool, os.X_OK):
            print("console_browser: %s not found: install chromium and chromium-driver "
                  "(scripts/deps.sh --test)" % tool, file=sys.stderr)
            return 1
    os.makedirs(args.artifacts, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="baton-console-browser-")
    with cluster.Cluster(os.path.abspath(args.baton), "console-browser") as c:
        api = c.wait_led(c.a)
        driver = WebDriver(args.chromedriver, args.chromium, profile)
        try:
            run(driver, c, api, args.artifacts)
        finally:
            driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
    print("console_browser: passed")
    return 0


def run(driver, c, api, artifacts):
    url_a = "http://127.0.0.1:%d/" % c.a.port
    url_b = "http://127.0.0.1:%d/" % c.b.port
    driver.go(url_a)
    names = [s["name"] for s in api["schedules"]]

    # Every schedule is listed with the leader the API names (by node id and contender id).
    def listed_with_leaders():
        shown = page(driver)
        doc = get_json(c.a.port, "/api/v1/schedules")
        ids = {n["contender_id"]: n["id"] for n in doc["nodes"]}
        if sorted(shown) != sorted(names):
            return None
        for s in doc["schedules"]:
            owner = s["owner"]["id"] if s["owner"] else None
            want = "%s (%s)" % (ids[owner], owner) if owner in ids else owner
            if not owner or shown[s["name"]]["leader"] != want:
                return None
            if not shown[s["name"]]["state"].startswith("leading: "):
                return None
        return shown
    shown = wait_for("A's page listing every schedule with its leader", listed_with_leaders)
    print("page of node A:", json.dumps({k: v["state"] for k, v in shown.items()}))

    # The stderr tail of beta holds <script>...: shown as text; no element made, nothing ran.
    shown = wait_for("beta's stderr and timeline on the page", lambda: (lambda p: p if (
        p["beta"]["stderr"] and p["beta"]["runs"] > 0 and p["alpha"]["runs"] > 0) else None)(
        page(driver)))
    assert cluster.HOSTILE in shown["beta"]["stderr"], shown["beta"]
    probe = driver.js("return {scripts: document.getElementsByTagName('script').length,"
                      " imgs: document.getElementsByTagName('img').length,"
                      " pwned: window.__pwned === undefined ? null : window.__pwned,"
                      " text: document.body.textContent.includes('<script>window.__pwned=1')};")
    assert probe == {"scripts": 1, "imgs": 0, "pwned": None, "text": True}, probe

    # Node A has the controls; enter the token and pause alpha.
    assert shown["alpha"]["buttons"] == ["pause", "resume", "trigger"], shown["alpha"]
    token = driver.js("return document.getElementById('token');")
    driver.type(token, TOKEN)
    button = driver.js("return [...document.querySelectorAll('article.schedule')]"
                       ".find(a => a.dataset.name === 'alpha').querySelector('button.pause');")
    driver.click(button)
    wait_for("alpha paused on A's page", lambda: page(driver)["alpha"]["state"] == "paused")
    status = driver.js("return document.getElementById('status').textContent;")
    assert "pause alpha: done" in status or "paused" in page(driver)["alpha"]["state"], status
    path = os.path.join(artifacts, "console.png")
    driver.screenshot(path)
    print("console_browser: screenshot of node A's page:", os.path.abspath(path))

    # Node B's page (read-only: no controls) shows it paused too.
    driver.go(url_b)
    wait_for("alpha paused on B's page", lambda: page(driver).get("alpha", {}).get("state") ==
             "paused")
    shown_b = page(driver)
    assert shown_b["alpha"]["buttons"] == [], shown_b["alpha"]
    assert shown_b["beta"]["state"] != "paused", shown_b["beta"]
    path_b = os.path.join(artifacts, "console-node-b.png")
    driver.screenshot(path_b)
    print("console_browser: screenshot of node B's page:", os.path.abspath(path_b))

    # Readable on a phone: nothing wider than the viewport.
    driver.window(390, 844)
    driver.go(url_a)
    wait_for("A's page at phone width", lambda: len(page(driver)) == len(names))
    overflow = driver.js("return document.documentElement.scrollWidth - window.innerWidth;")
    assert overflow <= 0, "the page is %s px wider than a phone's viewport" % overflow
    path_p = os.path.join(artifacts, "console-phone.png")
    driver.screenshot(path_p)
    print("console_browser: phone-width screenshot:", os.path.abspath(path_p))

    # Both nodes' logs name the caller of the pause; the token is in neither.
    assert "console: pause 'alpha' from 127.0.0.1:" in c.a.text(), c.a.text()[-3000:]
    assert TOKEN not in c.a.text() + c.b.text()


if __name__ == "__main__":
    sys.exit(main())
