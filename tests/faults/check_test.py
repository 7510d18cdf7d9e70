#!/usr/bin/python3
"""Unit tests of the fault suite's checker (check.py) on small fixtures; run by ctest
(faults_checker_unit)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check.py")


def run_line(node, pid, fence, fire, start, end, ended=True):
    lines = [dict(ev="start", node=node, pid=pid, fence=fence, fire=fire, t=start)]
    t = start + 0.1
    while t < end:
        lines.append(dict(ev="hb", node=node, pid=pid, fence=fence, fire=fire, t=round(t, 3)))
        t += 0.1
    if ended:
        lines.append(dict(ev="end", node=node, pid=pid, fence=fence, fire=fire, t=end))
    return lines


def log_line(event, fence=0, time="2026-01-01T00:00:00Z", msg="", schedule="s"):
    d = {"time": time, "level": "info", "msg": msg, "event": event}
    if schedule:
        d["schedule"] = schedule
    if fence:
        d["fence"] = fence
    return d


FIRE = "2026-01-01T00:00:%02dZ"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


class CheckerTest(unittest.TestCase):
    def judge(self, runs, logs=None, **meta_extra):
        d = tempfile.mkdtemp(prefix="baton-check-test.")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "record.jsonl"), "w") as f:
            for run in runs:
                for line in run:
                    f.write(json.dumps(line) + "\n")
        log_files = {}
        for node, lines in (logs or {}).items():
            log_files[node] = node + ".log"
            with open(os.path.join(d, node + ".log"), "w") as f:
                f.write("not json: a zookeeper client line\n")
                for line in lines:
                    f.write(json.dumps(line) + "\n")
        meta = {"scenario": "t", "backend": "memory", "schedule": "s", "record": "record.jsonl",
                "logs": log_files, "period": 2, "fault": None, "bounds": {}, "strict": False}
        meta.update(meta_extra)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)
        p = subprocess.run([sys.executable, CHECK, "check", os.path.join(d, "meta.json")],
                           capture_output=True, text=True, timeout=60)
        result = json.loads(p.stdout)
        self.assertEqual(p.returncode, 0 if result["result"] == "pass" else 1)
        return result

    def rules(self, result):
        return sorted({v["rule"] for v in result["violations"]})

    def test_back_to_back_runs_pass(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5),
                        run_line("n1", 2, 1, FIRE % 2, T0 + 2, T0 + 2.5),
                        run_line("n2", 3, 2, FIRE % 4, T0 + 4, T0 + 4.5)])
        self.assertEqual(r["result"], "pass", r)
        self.assertEqual((r["runs"], r["overlaps"], r["fenced_overlaps"]), (3, 0, 0))

    def test_an_overlap_without_a_step_down_fails(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 3),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)],
                       logs={"n1": [log_line("lease.acquired", 1)], "n2": []})
        self.assertEqual(self.rules(r), ["overlap"])
        self.assertEqual((r["overlaps"], r["fenced_overlaps"]), (1, 0))

    def test_an_overlap_with_a_higher_fence_after_a_step_down_is_fenced(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 3),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)],
                       logs={"n1": [log_line("lease.acquired", 1),
                                    log_line("process.stalled", msg="the process stalled for 6000 ms"),
                                    log_line("lease.lost", 1)], "n2": []})
        self.assertEqual(r["result"], "pass", r)
        self.assertEqual((r["overlaps"], r["fenced_overlaps"]), (1, 1))

    def test_a_step_down_logged_after_the_later_run_started_is_not_fenced(self):
        # The old owner handed over while its job still ran, and stepped down only later.
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 5),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)],
                       logs={"n1": [log_line("lease.acquired", 1),
                                    log_line("lease.lost", 1, time="2026-01-01T00:00:04Z")],
                             "n2": []})
        self.assertEqual(self.rules(r), ["overlap"])
        self.assertEqual((r["overlaps"], r["fenced_overlaps"]), (1, 0))

    def test_a_frozen_node_whose_pause_covers_the_later_start_is_fenced(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 7),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 4, T0 + 4.5)],
                       logs={"n1": [log_line("lease.acquired", 1),
                                    log_line("process.stalled", time="2026-01-01T00:00:07Z",
                                             msg="the process stalled for 6000 ms", schedule=None),
                                    log_line("lease.expired", time="2026-01-01T00:00:07Z")],
                             "n2": []})
        self.assertEqual(r["result"], "pass", r)
        self.assertEqual((r["overlaps"], r["fenced_overlaps"]), (1, 1))

    def test_log_times_of_a_skewed_node_are_corrected_before_comparing(self):
        # n1's clock runs an hour ahead: its step-down at (log) 01:00:01 is true 00:00:01.
        runs = [run_line("n1", 1, 1, FIRE % 0, T0, T0 + 3),
                run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)]
        logs = {"n1": [log_line("lease.acquired", 1, time="2026-01-01T01:00:00Z"),
                       log_line("lease.expired", time="2026-01-01T01:00:01Z")], "n2": []}
        self.assertEqual(self.judge(runs, logs, skew={"n1": 3600.0})["fenced_overlaps"], 1)
        self.assertEqual(self.rules(self.judge(runs, logs)), ["overlap"])

    def test_an_overlap_with_a_lower_fence_is_never_fenced(self):
        r = self.judge([run_line("n1", 1, 5, FIRE % 0, T0, T0 + 3),
                        run_line("n2", 2, 4, FIRE % 2, T0 + 2, T0 + 2.5)],
                       logs={"n1": [log_line("lease.lost", 5)], "n2": []})
        self.assertEqual(self.rules(r), ["fence_order", "overlap"])

    def test_a_killed_node_has_passed_its_deadline(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 3, ended=False),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)], killed=["n1"])
        self.assertEqual((r["result"], r["fenced_overlaps"]), ("pass", 1))

    def test_strict_scenarios_allow_no_overlap_at_all(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 3),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)], killed=["n1"],
                       strict=True)
        self.assertEqual(self.rules(r), ["overlap"])

    def test_a_killed_run_ends_at_its_last_heartbeat(self):
        # n1's run has no end line: its interval ends at its last heartbeat (T0 + 1.0 or so)
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 1.05, ended=False),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)])
        self.assertEqual((r["result"], r["overlaps"]), ("pass", 0))

    def test_a_fire_time_run_twice_fails(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5),
                        run_line("n2", 2, 2, FIRE % 0, T0 + 1, T0 + 1.5)])
        self.assertEqual(self.rules(r), ["fire_twice"])

    def test_takeover_and_recovery_are_measured_against_their_bounds(self):
        runs = [run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5),
                run_line("n2", 2, 2, FIRE % 10, T0 + 10, T0 + 10.5),
                run_line("n2", 3, 2, FIRE % 12, T0 + 12, T0 + 12.5)]
        fault = {"kind": "kill9", "node": "n1", "t": T0 + 1, "healed": T0 + 1}
        r = self.judge(runs, fault=fault, killed=["n1"], end=T0 + 13,
                       bounds={"takeover": 12, "recovery": 12})
        self.assertEqual((r["result"], r["max_takeover_s"], r["recovery_s"]), ("pass", 9.0, 9.0))
        r = self.judge(runs, fault=fault, killed=["n1"], end=T0 + 13,
                       bounds={"takeover": 8, "recovery": 8})
        self.assertEqual(self.rules(r), ["recovery", "takeover"])

    def test_no_run_after_the_fault_heals_is_a_stall(self):
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5)],
                       fault={"kind": "restart", "node": None, "t": T0 + 1, "healed": T0 + 2},
                       end=T0 + 30, bounds={"recovery": 8})
        self.assertEqual(self.rules(r), ["recovery", "stall_after"])

    def test_fire_times_must_match_true_time(self):
        good = run_line("n1", 1, 1, FIRE % 0, T0 + 0.2, T0 + 0.5)
        ahead = run_line("n2", 2, 2, "2026-01-01T01:00:02Z", T0 + 2.1, T0 + 2.5)
        r = self.judge([good], bounds={"fire_match": 1.5})
        self.assertEqual(r["result"], "pass", r)
        r = self.judge([good, ahead], bounds={"fire_match": 1.5})
        self.assertEqual(self.rules(r), ["fire_match"])
        self.assertAlmostEqual(r["worst_fire_offset_s"], -3599.9, places=1)

    def test_the_pause_must_show_in_the_stopped_nodes_log(self):
        runs = [run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5)]
        r = self.judge(runs, logs={"n1": [log_line("process.stalled", schedule=None,
                                                   msg="the process stalled for 6012 ms (...)")]},
                       stall={"node": "n1", "min_ms": 5000})
        self.assertEqual((r["result"], r["stalls_logged"]), ("pass", 1))
        r = self.judge(runs, logs={"n1": []}, stall={"node": "n1", "min_ms": 5000})
        self.assertEqual(self.rules(r), ["stall_logged"])

    def test_a_step_down_after_another_node_acquired_fails_in_strict_scenarios(self):
        logs = {"n1": [log_line("lease.acquired", 1, "2026-01-01T00:00:00Z"),
                       log_line("lease.expired", 0, "2026-01-01T00:00:05Z")],
                "n2": [log_line("lease.acquired", 2, "2026-01-01T00:00:04Z")]}
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5)], logs=logs, strict=True)
        self.assertEqual(self.rules(r), ["given_up"])
        self.assertEqual(r["step_downs"], 1)
        logs["n2"][0]["time"] = "2026-01-01T00:00:06Z"
        r = self.judge([run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5)], logs=logs, strict=True)
        self.assertEqual(r["result"], "pass", r)

    def test_leader_and_runs_helpers(self):
        d = tempfile.mkdtemp(prefix="baton-check-test.")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "record.jsonl")
        with open(path, "w") as f:
            for run in (run_line("n1", 1, 1, FIRE % 0, T0, T0 + 0.5),
                        run_line("n2", 2, 2, FIRE % 2, T0 + 2, T0 + 2.5)):
                for line in run:
                    f.write(json.dumps(line) + "\n")
        out = lambda *a: subprocess.run([sys.executable, CHECK, *a], capture_output=True,
                                        text=True, check=True).stdout.strip()
        self.assertEqual(out("leader", path), "n2")
        self.assertEqual(out("runs", path), "2")
        self.assertEqual(out("runs", path, "--after", str(T0 + 1)), "1")
        self.assertEqual(out("runs", path, "--not-node", "n2"), "1")


class RecorderTest(unittest.TestCase):
    def test_a_run_records_start_heartbeats_and_end_with_true_time(self):
        import time
        d = tempfile.mkdtemp(prefix="baton-record-test.")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "record.jsonl")
        env = dict(os.environ, BATON_FENCING_TOKEN="7", BATON_FIRE_TIME="2026-01-01T00:00:00Z")
        env.pop("LD_PRELOAD", None)
        env.pop("FAKETIME", None)
        before = time.time()
        subprocess.run([sys.executable, os.path.join(HERE, "record.py"), path, "n1", "0.35"],
                       env=env, check=True, timeout=30)
        with open(path) as f:
            lines = [json.loads(l) for l in f]
        self.assertEqual(lines[0]["ev"], "start")
        self.assertEqual(lines[-1]["ev"], "end")
        self.assertGreaterEqual(sum(l["ev"] == "hb" for l in lines), 2)
        self.assertTrue(all(l["fence"] == 7 and l["node"] == "n1" for l in lines))
        self.assertGreaterEqual(lines[0]["t"], before - 1)

    def test_sigterm_writes_end(self):
        import signal
        import time
        d = tempfile.mkdtemp(prefix="baton-record-test.")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "record.jsonl")
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "record.py"), path, "n1", "30"])
        deadline = time.monotonic() + 20
        def text():
            if not os.path.exists(path):
                return ""
            with open(path) as f:
                return f.read()
        while time.monotonic() < deadline and "hb" not in text():
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=20), 0)
        last = json.loads(text().splitlines()[-1])
        self.assertEqual((last["ev"], last["how"]), ("end", "sigterm"))

    def test_it_refuses_to_run_under_libfaketime(self):
        d = tempfile.mkdtemp(prefix="baton-record-test.")
        self.addCleanup(shutil.rmtree, d, True)
        env = dict(os.environ, FAKETIME="+1h")
        p = subprocess.run([sys.executable, os.path.join(HERE, "record.py"),
                            os.path.join(d, "r"), "n1", "0.1"], env=env, capture_output=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
