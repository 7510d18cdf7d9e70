// The operator's command line as real processes: per-command help, pause/resume/trigger/history
// argument errors, --json documents (parsed), and two or three `baton run` nodes on one backend
// driven from the command line: a failing command's exit status shows in status and history,
// pause stops runs and resume restarts them, trigger runs once, both survive a SIGKILL of the
// leader, and retries are recorded attempt by attempt.
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "support/daemon.hpp"
#include "support/env.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using baton::test::count_of;
using baton::test::daemon_path;
using baton::test::json_string;
using baton::test::process;
using baton::test::read_file;
using baton::test::run_baton_command;
using baton::test::wait_until;
using baton::test::write_file;

// The JSON document a command printed; a test failure (and null) when it is not one.
json parse_output(const baton::test::command_result& r) {
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "):\n" << r.out << "\nstderr:\n" << r.err;
    return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// command line: help, argument errors, --json of validate and calendar (no backend contacted)

TEST(daemon_ops_cli, each_command_has_its_own_help_and_help_cmd_prints_the_same) {
  const auto run = run_baton_command({"run", "--help"});
  const auto status = run_baton_command({"status", "--help"});
  EXPECT_EQ(run.status, 0);
  EXPECT_EQ(status.status, 0);
  EXPECT_NE(run.out, status.out);
  EXPECT_THAT(run.out, AllOf(HasSubstr("Usage: baton run --config FILE"), HasSubstr("SIGHUP"),
                             Not(HasSubstr("--json"))));
  EXPECT_THAT(status.out, AllOf(HasSubstr("Usage: baton status"), HasSubstr("--json")));
  for (const char* cmd : {"run", "validate", "status", "history", "pause", "resume", "trigger",
                          "drain", "calendar"}) {
    const auto help = run_baton_command({"help", cmd});
    const auto dash = run_baton_command({cmd, "--help"});
    EXPECT_EQ(help.status, 0) << cmd;
    EXPECT_EQ(help.out, dash.out) << cmd;
    EXPECT_THAT(help.out, HasSubstr(std::string("Usage: baton ") + cmd)) << cmd;
  }
  const auto pause = run_baton_command({"help", "pause"});
  EXPECT_THAT(pause.out, HasSubstr("--reason TEXT"));
  const auto history = run_baton_command({"history", "--help"});
  EXPECT_THAT(history.out, AllOf(HasSubstr("--limit N"), HasSubstr("--json")));
  // The list of commands: `baton help`, `baton --help`.
  const auto list = run_baton_command({"help"});
  EXPECT_EQ(list.status, 0);
  EXPECT_EQ(list.out, run_baton_command({"--help"}).out);
  for (const char* cmd : {"baton pause NAME", "baton trigger NAME", "baton history NAME",
                          "baton resume NAME", "baton help [CMD]"})
    EXPECT_THAT(list.out, HasSubstr(cmd));
}

TEST(daemon_ops_cli, bad_arguments_exit_2_naming_the_argument) {
  struct bad {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad> cases{
      {{"help", "nope"}, "help: unknown command 'nope'"},
      {{"pause"}, "pause: missing the schedule name"},
      {{"trigger", "--config", "x.json"}, "trigger: missing the schedule name"},
      {{"resume", "a", "b", "--config", "x.json"}, "resume: unexpected argument 'b'"},
      {{"history", "a"}, "history: --config FILE is required"},
      {{"history", "a", "--config", "x.json", "--limit", "0"}, "--limit: '0' is not a number"},
      {{"history", "a", "--config", "x.json", "--limit", "ten"}, "--limit: 'ten'"},
      {{"history", "a", "--config", "x.json", "--limit", "-3"}, "--limit: '-3'"},
      {{"history", "a", "--config", "x.json", "--limit"}, "--limit needs a value"},
      {{"pause", "a", "--config", "x.json", "--json"}, "pause: --json is not an option of pause"},
      {{"status", "--config", "x.json", "--reason", "r"}, "status: --reason is not an option"},
      {{"run", "--config", "x.json", "--json"}, "run: --json is not an option of run"},
      {{"calendar", "0 3 * * *", "--limit", "3"}, "calendar: --limit is not an option"},
      {{"calendar", "0 3 * * *", "--config", "x.json"}, "calendar: --config is not used here"},
      {{"history", "a", "--config", "x.json", "--count", "3"}, "belong to calendar"},
  };
  for (const auto& c : cases) {
    const auto r = run_baton_command(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << joined;
  }
}

TEST(daemon_ops_cli, an_unknown_schedule_exits_2_naming_it_and_the_known_ones) {
  const fs::path dir = baton::test::temp_dir("daemon-ops-unknown");
  write_file(dir / "baton.json", R"({"backend": {"type": "sqlite", "path": "state.db"},
    "schedules": [{"name": "alpha", "every": "1h", "command": ["/bin/true"]},
                  {"name": "beta", "every": "1h", "command": ["/bin/true"]}]})");
  const std::string config = (dir / "baton.json").string();
  for (const char* cmd : {"pause", "resume", "trigger", "history"}) {
    const auto r = run_baton_command({cmd, "nope", "--config", config});
    EXPECT_EQ(r.status, 2) << cmd;
    EXPECT_THAT(r.err, AllOf(HasSubstr("no schedule 'nope'"), HasSubstr("alpha, beta"))) << cmd;
  }
  // Nothing was created on the backend for it.
  EXPECT_FALSE(fs::exists(dir / "state.db"));
}

TEST(daemon_ops_cli, validate_json_is_one_document_with_schema_1) {
  const fs::path dir = baton::test::temp_dir("daemon-ops-validate-json");
  write_file(dir / "baton.json", R"({"backend": {"type": "sqlite", "path": "state.db"},
    "schedules": [
      {"name": "beat", "every": "5s", "command": ["/bin/true", "x"], "retries": 2,
       "retry_backoff": "3s", "history": 7},
      {"name": "never", "cron": "0 0 31 4 *", "command": ["/bin/true"]},
      {"name": "leap", "cron": "0 0 29 2 *", "time_zone": "Europe/Berlin",
       "command": ["/bin/true"]}]})");
  const auto r =
      run_baton_command({"validate", "--config", (dir / "baton.json").string(), "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  const json doc = parse_output(r);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["backend"]["type"], "sqlite");
  ASSERT_EQ(doc["schedules"].size(), 3u);
  const auto& beat = doc["schedules"][0];
  EXPECT_EQ(beat["name"], "beat");
  EXPECT_EQ(beat["path"], "/schedules/0");
  EXPECT_EQ(beat["trigger"]["kind"], "every");
  EXPECT_EQ(beat["trigger"]["period_ms"], 5000);
  EXPECT_EQ(beat["command"], json::array({"/bin/true", "x"}));
  EXPECT_EQ(beat["next_fires"].size(), 3u);
  EXPECT_TRUE(beat["lease"]["ttl_ms"].is_number_integer());
  EXPECT_EQ(beat["history"], 7);
  EXPECT_EQ(beat["history_output"], 4096);
  EXPECT_EQ(beat["retries"], 2);
  EXPECT_EQ(beat["retry_backoff_ms"], 3000);
  const auto& never = doc["schedules"][1];
  EXPECT_EQ(never["history"], 50);
  EXPECT_EQ(never["retries"], 0);
  EXPECT_EQ(never["trigger"]["never_fires"], true);
  EXPECT_TRUE(never["next_fires"].empty());
  // 29 February fires (leap years): no warning for it, one for 31 April.
  const auto& leap = doc["schedules"][2];
  EXPECT_EQ(leap["trigger"]["never_fires"], false);
  EXPECT_EQ(leap["next_fires"].size(), 3u);
  ASSERT_EQ(doc["warnings"].size(), 1u) << doc["warnings"].dump();
  EXPECT_EQ(doc["warnings"][0]["path"], "/schedules/1/cron");
  EXPECT_THAT(r.err, HasSubstr("/schedules/1/cron: warning: '0 0 31 4 *' can never fire"));
  EXPECT_THAT(r.err, Not(HasSubstr("/schedules/2")));
}

TEST(daemon_ops_cli, calendar_json_lists_the_fire_times_and_warns_when_it_never_fires) {
  const auto r = run_baton_command({"calendar", "--json", "--from", "2026-03-27T00:00:00Z",
                                    "--count", "2", "--time-zone", "Europe/Berlin", "0 3 * * *"});
  EXPECT_EQ(r.status, 0) << r.err;
  const json doc = parse_output(r);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["expression"], "0 3 * * *");
  EXPECT_EQ(doc["time_zone"], "Europe/Berlin");
  EXPECT_EQ(doc["from"], "2026-03-27T00:00:00Z");
  EXPECT_EQ(doc["never_fires"], false);
  ASSERT_EQ(doc["fire_times"].size(), 2u);
  EXPECT_EQ(doc["fire_times"][0]["utc"], "2026-03-27T02:00:00Z");
  EXPECT_EQ(doc["fire_times"][0]["local"], "2026-03-27 03:00:00 CET (+01:00)");
  EXPECT_TRUE(doc["warnings"].empty());

  for (const char* never : {"0 0 30 2 *", "0 0 31 4 *", "0 0 31 4,6,9,11 *"}) {
    const auto n = run_baton_command({"calendar", "--json", "--", never});
    EXPECT_EQ(n.status, 0) << never;
    EXPECT_THAT(n.err, HasSubstr("can never fire")) << never;
    const json d = parse_output(n);
    EXPECT_EQ(d["never_fires"], true) << never;
    EXPECT_TRUE(d["fire_times"].empty()) << never;
    EXPECT_EQ(d["warnings"].size(), 1u) << never;
  }
  // 29 February fires every leap year: no warning.
  const auto leap = run_baton_command(
      {"calendar", "--from", "2025-01-01T00:00:00Z", "--count", "2", "0 0 29 2 *"});
  EXPECT_EQ(leap.status, 0);
  EXPECT_EQ(leap.out, "2028-02-29T00:00:00Z\n2032-02-29T00:00:00Z\n");
  EXPECT_EQ(leap.err, "");
}

// ---------------------------------------------------------------------------------------------
// several nodes on one backend, driven from the command line

// Every backend this build has, except the in-process memory one.
std::vector<std::string> cluster_backends() {
  std::vector<std::string> out;
  for (const auto& t : baton::available_backends())
    if (t != "memory") out.push_back(t);
  return out;
}

// `baton run` nodes n1..nN in one directory, each with its own config file (the same content),
// running one schedule; the command line (status, history, pause, ...) is run with any node's.
class ops_cluster {
 public:
  /// `schedule_keys`: the schedule's JSON keys after its name ("every": ..., "command": ...).
  ops_cluster(const std::string& type, const std::string& schedule_keys, int nodes = 3)
      : nodes_count_(nodes) {
    static std::atomic<int> counter{0};
    dir_ = baton::test::temp_dir("daemon-ops-" + type);
    name_ = "ops-" + type + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    const auto backend = baton::test::backend_config_for(type);
    std::string b = "{\"type\": " + json_string(type);
    for (const auto& [k, v] : backend.params) b += ", " + json_string(k) + ": " + json_string(v);
    b += "}";
    std::string keys = schedule_keys;
    for (std::size_t p; (p = keys.find("@DIR@")) != std::string::npos;)
      keys.replace(p, 5, dir_.string());
    for (int n = 1; n <= nodes; ++n)
      write_file(config(n), "{\"backend\": " + b +
                                ",\n \"lease\": {\"ttl\": \"1s\", \"transition\": \"1s\", "
                                "\"retry_period\": \"200ms\", \"poll_interval\": \"100ms\"},\n"
                                " \"log_level\": \"debug\",\n"
                                " \"schedules\": [{\"name\": " +
                                json_string(name_) + ", " + keys + "}]}\n");
  }

  std::string config(int n) const { return (dir_ / ("n" + std::to_string(n) + ".json")).string(); }
  fs::path log(int n) const { return dir_ / ("n" + std::to_string(n) + ".log"); }
  const std::string& name() const { return name_; }
  const fs::path& dir() const { return dir_; }

  void start_all() {
    for (int n = 1; n <= nodes_count_; ++n) start(n);
  }
  void start(int n) {
    nodes_[n] = std::make_unique<process>(
        std::vector<std::string>{daemon_path(), "run", "--config", config(n)},
        dir_ / ("n" + std::to_string(n) + ".out"), log(n));
  }
  process& node(int n) { return *nodes_.at(n); }

  /// `baton args... --config <node n's config>`.
  baton::test::command_result cli(std::vector<std::string> args, int n = 1) const {
    args.push_back("--config");
    args.push_back(config(n));
    return run_baton_command(args, 60s);
  }
  /// The parsed `history NAME --json --limit 1000` (null on failure).
  json history(int n = 1) const {
    const auto r = cli({"history", name_, "--json", "--limit", "1000"}, n);
    if (r.status != 0) return nullptr;
    try {
      return json::parse(r.out)["records"];
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  /// The parsed `status --json`'s entry of the schedule (null on failure).
  json status(int n = 1) const {
    const auto r = cli({"status", "--json"}, n);
    if (r.status != 0) return nullptr;
    try {
      return json::parse(r.out)["schedules"][0];
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  /// History records matching `pred`.
  std::size_t count_records(const std::function<bool(const json&)>& pred, int n = 1) const {
    const json h = history(n);
    if (!h.is_array()) return 0;
    return static_cast<std::size_t>(std::count_if(h.begin(), h.end(), pred));
  }
  /// The node (1..N) whose contender id is `owner_id` ("counter:PID@host"); 0 if none.
  int node_of(const std::string& owner_id) const {
    for (const auto& [n, p] : nodes_)
      if (p && owner_id.find(":" + std::to_string(p->pid()) + "@") != std::string::npos) return n;
    return 0;
  }
  /// The node leading now by status (0: none).
  int leader() const {
    const json s = status();
    if (!s.is_object() || !s["owner"].is_object()) return 0;
    return node_of(s["owner"]["id"].get<std::string>());
  }
  /// Lines of dir/jobs.log (the jobs append one per run).
  std::size_t job_runs() const { return count_of(read_file(dir_ / "jobs.log"), "\n"); }

  std::string diagnostics() const {
    std::string out = "jobs.log:\n" + read_file(dir_ / "jobs.log");
    const auto h = cli({"history", name_, "--limit", "30"});
    out += "\nhistory:\n" + h.out + h.err;
    for (const auto& [n, p] : nodes_) {
      auto text = read_file(log(n));
      if (text.size() > 5000) text = "..." + text.substr(text.size() - 5000);
      out += "\n--- n" + std::to_string(n) + " ---\n" + text;
    }
    return out;
  }

 private:
  int nodes_count_;
  fs::path dir_;
  std::string name_;
  std::map<int, std::unique_ptr<process>> nodes_;
};

bool outcome_is(const json& r, const char* outcome) { return r["outcome"] == outcome; }

class daemon_ops : public ::testing::TestWithParam<std::string> {};

TEST_P(daemon_ops, a_failing_command_shows_its_exit_status_in_status_and_history_on_any_node) {
  ops_cluster c(
      GetParam(),
      R"("every": "500ms", "command": ["/bin/sh", "-c", "echo boom-$BATON_FENCING_TOKEN >&2; exit 3"])",
      2);
  c.start_all();
  ASSERT_TRUE(wait_until(
      [&] { return c.count_records([](const json& r) { return outcome_is(r, "failed"); }) >= 2; },
      30s))
      << c.diagnostics();
  for (int n : {1, 2}) {
    SCOPED_TRACE("node " + std::to_string(n) + "'s config");
    const json h = c.history(n);
    ASSERT_TRUE(h.is_array());
    const json& newest = h[0];
    EXPECT_EQ(newest["outcome"], "failed");
    EXPECT_EQ(newest["exit_status"], 3);
    EXPECT_EQ(newest["schedule"], c.name());
    EXPECT_EQ(newest["attempt"], 1);
    EXPECT_GT(newest["fence"].get<std::uint64_t>(), 0u);
    EXPECT_THAT(newest["output"].get<std::string>(), HasSubstr("boom-"));
    EXPECT_GT(newest["seq"].get<std::uint64_t>(), h[1]["seq"].get<std::uint64_t>());

    const auto text = c.cli({"history", c.name(), "--limit", "5"}, n);
    EXPECT_EQ(text.status, 0) << text.err;
    EXPECT_THAT(text.out, AllOf(HasSubstr("failed (exit status 3)"), HasSubstr("boom-")));

    const json s = c.status(n);
    ASSERT_TRUE(s.is_object());
    EXPECT_EQ(s["last_run"]["outcome"], "failed");
    EXPECT_EQ(s["last_run"]["exit_status"], 3);
    EXPECT_GE(s["consecutive_failures"].get<int>(), 2);
    EXPECT_EQ(s["paused"], false);
    EXPECT_TRUE(s["owner"].is_object());
    const auto st = c.cli({"status"}, n);
    EXPECT_EQ(st.status, 0) << st.err;
    EXPECT_THAT(st.out, AllOf(HasSubstr("last run:   failed (exit status 3)"),
                              HasSubstr(" in a row"), HasSubstr("paused:     no")));
  }
}

// Pause from the command line with a node that does not lead; fires become skipped_paused and no
// job runs; resume restarts them.
TEST_P(daemon_ops, pause_stops_runs_and_resume_restarts_them) {
  ops_cluster c(GetParam(),
                R"("every": "500ms", "command": ["/bin/sh", "-c", "echo run >> @DIR@/jobs.log"])",
                2);
  c.start_all();
  ASSERT_TRUE(wait_until([&] { return c.job_runs() >= 2; }, 30s)) << c.diagnostics();
  const int leader = c.leader();
  ASSERT_NE(leader, 0) << c.diagnostics();
  const int other = leader == 1 ? 2 : 1;
  const auto p = c.cli({"pause", c.name(), "--reason", "maintenance window"}, other);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("paused"));
  EXPECT_THAT(p.err, Not(HasSubstr("no node leads")));
  // Skipped fires are recorded; once two are, no run started after the first.
  ASSERT_TRUE(wait_until(
      [&] {
        return c.count_records([](const json& r) { return outcome_is(r, "skipped_paused"); }) >= 3;
      },
      20s))
      << c.diagnostics();
  const auto runs_paused = c.job_runs();
  ASSERT_TRUE(wait_until(
      [&] {
        return c.count_records([](const json& r) { return outcome_is(r, "skipped_paused"); }) >= 6;
      },
      20s))
      << c.diagnostics();
  EXPECT_EQ(c.job_runs(), runs_paused) << c.diagnostics();
  const json s = c.status(other);
  EXPECT_EQ(s["paused"], true);
  EXPECT_EQ(s["controls"]["reason"], "maintenance window");
  EXPECT_THAT(c.cli({"status"}).out, HasSubstr("paused:     yes"));

  const auto r = c.cli({"resume", c.name()}, other);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("resumed"));
  EXPECT_TRUE(wait_until([&] { return c.job_runs() >= runs_paused + 2; }, 20s)) << c.diagnostics();
  EXPECT_EQ(c.status()["paused"], false);
}

// A schedule that would not fire for a year runs once per trigger, recorded as manual.
TEST_P(daemon_ops, trigger_runs_once_within_one_wake_up) {
  ops_cluster c(
      GetParam(),
      R"("cron": "0 0 1 1 *", "command": ["/bin/sh", "-c", "echo run >> @DIR@/jobs.log"])", 2);
  c.start_all();
  ASSERT_TRUE(wait_until([&] { return c.leader() != 0; }, 30s)) << c.diagnostics();
  const int other = c.leader() == 1 ? 2 : 1;
  const auto t = c.cli({"trigger", c.name()}, other);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("manual run requested (request 1"));
  // poll_interval is 100ms: "within one wake-up" is well inside 5 s on any backend.
  EXPECT_TRUE(wait_until([&] { return c.job_runs() >= 1; }, 5s)) << c.diagnostics();
  ASSERT_TRUE(wait_until(
      [&] { return c.count_records([](const json& r) { return r["trigger"] == "manual"; }) >= 1; },
      10s))
      << c.diagnostics();
  // A second request: a second run, and still one per request.
  ASSERT_EQ(c.cli({"trigger", c.name()}).status, 0);
  ASSERT_TRUE(wait_until(
      [&] { return c.count_records([](const json& r) { return r["trigger"] == "manual"; }) >= 2; },
      10s))
      << c.diagnostics();
  EXPECT_EQ(c.job_runs(), 2u) << c.diagnostics();
  const json h = c.history();
  EXPECT_EQ(h[0]["outcome"], "succeeded");
  EXPECT_EQ(c.status()["controls"]["trigger_requests"], 2);
}

// The leader is SIGKILLed while the schedule is paused and a manual run is pending: the new
// leader keeps it paused (skipped_paused under its own fence) and runs the manual request once.
TEST_P(daemon_ops, pause_and_trigger_survive_a_sigkill_of_the_leader) {
  ops_cluster c(GetParam(),
                R"("every": "500ms", "command": ["/bin/sh", "-c", "echo run >> @DIR@/jobs.log"])",
                3);
  c.start_all();
  ASSERT_TRUE(wait_until([&] { return c.job_runs() >= 1; }, 30s)) << c.diagnostics();
  ASSERT_EQ(c.cli({"pause", c.name()}).status, 0);
  ASSERT_TRUE(wait_until(
      [&] {
        return c.count_records([](const json& r) { return outcome_is(r, "skipped_paused"); }) >= 1;
      },
      20s))
      << c.diagnostics();
  const int leader = c.leader();
  ASSERT_NE(leader, 0) << c.diagnostics();
  const auto old_fence = c.status()["fence"].get<std::uint64_t>();
  const auto runs_paused = c.job_runs();
  c.node(leader).signal(SIGKILL);
  ASSERT_TRUE(c.node(leader).wait_exit(10s));
  // The new leader (higher fence) records its own skipped fires.
  ASSERT_TRUE(wait_until(
      [&] {
        return c.count_records([&](const json& r) {
          return outcome_is(r, "skipped_paused") && r["fence"].get<std::uint64_t>() > old_fence;
        }) >= 2;
      },
      30s))
      << c.diagnostics();
  EXPECT_EQ(c.job_runs(), runs_paused) << c.diagnostics();
  EXPECT_EQ(c.status()["paused"], true);
  // Resume; then a manual request that the leader cannot take (it is stopped, SIGSTOP) before
  // it is killed: the next leader runs it, once.
  const int second = c.leader();
  ASSERT_NE(second, 0) << c.diagnostics();
  ASSERT_NE(second, leader);
  const int survivor = 6 - leader - second;
  ASSERT_EQ(c.cli({"resume", c.name()}, survivor).status, 0);
  ASSERT_TRUE(wait_until([&] { return c.job_runs() >= runs_paused + 1; }, 20s)) << c.diagnostics();
  const auto second_fence = c.status()["fence"].get<std::uint64_t>();
  c.node(second).signal(SIGSTOP);
  ASSERT_EQ(c.cli({"trigger", c.name()}, survivor).status, 0);
  c.node(second).signal(SIGKILL);
  ASSERT_TRUE(c.node(second).wait_exit(10s));
  auto manual = [](const json& r) { return r["trigger"] == "manual"; };
  ASSERT_TRUE(wait_until([&] { return c.count_records(manual) >= 1; }, 30s)) << c.diagnostics();
  // Two more scheduled runs after it, and still one manual run.
  ASSERT_TRUE(wait_until(
      [&] {
        const json h = c.history();
        return h.is_array() && h.size() >= 3 && h[0]["trigger"] != "manual" &&
               h[1]["trigger"] != "manual";
      },
      20s))
      << c.diagnostics();
  const json h = c.history();
  EXPECT_EQ(std::count_if(h.begin(), h.end(), manual), 1) << h.dump(2);
  for (const auto& r : h)
    if (manual(r)) {
      EXPECT_GT(r["fence"].get<std::uint64_t>(), second_fence);
      EXPECT_EQ(c.node_of(r["node"].get<std::string>()), survivor);
    }
}

// retries: 2 gives attempts 1, 2 and 3 of one fire, the later ones recorded as retry.
TEST_P(daemon_ops, retries_are_recorded_as_attempts_2_and_up) {
  ops_cluster c(GetParam(),
                R"("every": "1h", "retries": 2, "retry_backoff": "200ms",
                   "command": ["/bin/sh", "-c", "echo try >> @DIR@/jobs.log; exit 3"])",
                2);
  c.start_all();
  ASSERT_TRUE(wait_until(
      [&] { return c.count_records([](const json& r) { return r["attempt"] == 3; }) >= 1; }, 30s))
      << c.diagnostics();
  const json h = c.history();
  ASSERT_GE(h.size(), 3u);
  // Newest first: attempts 3, 2, 1 of the same planned fire.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h[i]["attempt"], 3 - i) << h.dump(2);
    EXPECT_EQ(h[i]["trigger"], i < 2 ? "retry" : "schedule") << h.dump(2);
    EXPECT_EQ(h[i]["outcome"], "failed");
    EXPECT_EQ(h[i]["exit_status"], 3);
    EXPECT_EQ(h[i]["planned"], h[2]["planned"]);
  }
  EXPECT_EQ(c.job_runs(), 3u);
  EXPECT_GE(c.status()["consecutive_failures"].get<int>(), 3);
}

INSTANTIATE_TEST_SUITE_P(backends, daemon_ops, ::testing::ValuesIn(cluster_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
