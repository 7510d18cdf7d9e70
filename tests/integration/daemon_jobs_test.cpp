// The daemon's jobs as real processes: every process of a run ends when the daemon is stopped,
// killed, or loses its backend, whatever shape the job has; SIGHUP reloads the config (added,
// removed, changed and unchanged schedules; invalid configs and backend changes refused); a job
// gets TZ, its working directory, its user and group, and not the variables its config references
// (descriptors: job_tree_test.cpp); its output in the daemon's log is capped per run.
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/runtime.hpp"
#include "support/daemon.hpp"
#include "support/env.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
namespace fs = std::filesystem;
using baton::test::count_of;
using baton::test::daemon_path;
using baton::test::json_string;
using baton::test::process;
using baton::test::read_file;
using baton::test::wait_until;
using baton::test::write_file;
using ::testing::HasSubstr;
using ::testing::Not;
using steady = std::chrono::steady_clock;

constexpr milliseconds kill_grace{300};

// The job shapes people write; every process ignores SIGTERM, so each needs the SIGKILL.
struct shape {
  const char* name;
  const char* script;
  std::size_t processes;
};
const shape shapes[] = {
    {"direct_child", "trap '' TERM; exec sleep 60", 1},
    {"sh_c_grandchild", "trap '' TERM; sleep 60; true", 2},
    {"setsid_descendant", "trap '' TERM; setsid -f sleep 60; sleep 60", 3},
    {"double_fork", "trap '' TERM; (sleep 60 &); sleep 60", 3},
    {"nohup_background", "trap '' TERM; nohup sleep 60 >/dev/null 2>&1 & sleep 60", 3},
};

std::string unique(const std::string& what) {
  static std::atomic<int> counter{0};
  return what + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

double ms_since(steady::time_point t) {
  return std::chrono::duration<double, std::milli>(steady::now() - t).count();
}

/// One daemon running one schedule per job shape, each run marked with its own variable.
class shape_node {
 public:
  /// `extra`: more keys for every schedule entry (", \"timeout\": \"1s\"").
  explicit shape_node(const std::string& backend_json, const std::string& extra = "")
      : dir_(baton::test::temp_dir("tree-node")) {
    std::string schedules;
    for (const auto& s : shapes) {
      const std::string mark = unique(s.name);
      marks_[s.name] = "BATON_TREE_MARK=" + mark;
      if (!schedules.empty()) schedules += ",\n";
      schedules += "{\"name\": " + json_string(unique(s.name)) +
                   ", \"every\": \"1h\", \"command\": [\"/bin/sh\", \"-c\", " +
                   json_string(s.script) +
                   "], \"env\": {\"BATON_TREE_MARK\": " + json_string(mark) + "}" + extra + "}";
    }
    write_file(dir_ / "baton.json",
               "{\"backend\": " + backend_json +
                   ",\n \"lease\": {\"ttl\": \"1s\", \"transition\": \"1s\", \"retry_period\": "
                   "\"200ms\", \"stop_grace\": \"800ms\"},\n \"kill_grace\": \"" +
                   std::to_string(kill_grace.count()) + "ms\",\n \"schedules\": [" + schedules +
                   "]}\n");
    node_ = std::make_unique<process>(
        std::vector<std::string>{daemon_path(), "run", "--config", (dir_ / "baton.json").string()},
        dir_ / "out", log());
  }
  bool all_up() const {
    for (const auto& s : shapes)
      if (baton::test::processes_with_env(marks_.at(s.name)).size() < s.processes) return false;
    return true;
  }
  /// Per shape: ms from `since` until its last process was gone (-1: still there after 10 s).
  std::map<std::string, double> gone_after(steady::time_point since) const {
    std::map<std::string, double> out;
    std::set<std::string> left;
    for (const auto& s : shapes) left.insert(s.name);
    wait_until(
        [&] {
          for (auto it = left.begin(); it != left.end();) {
            if (baton::test::processes_with_env(marks_.at(*it)).empty()) {
              out[*it] = ms_since(since);
              it = left.erase(it);
            } else {
              ++it;
            }
          }
          return left.empty();
        },
        10s);
    for (const auto& name : left) out[name] = -1;
    return out;
  }
  process& daemon() { return *node_; }
  fs::path log() const { return dir_ / "err"; }

 private:
  fs::path dir_;
  std::map<std::string, std::string> marks_;
  std::unique_ptr<process> node_;
};

void expect_all_gone(const std::map<std::string, double>& gone, const char* end, double bound_ms) {
  for (const auto& [name, ms] : gone) {
    std::cout << "[ tree ] " << name << " x " << end << ": last process gone " << ms
              << " ms after the run had to end (kill_grace " << kill_grace.count() << " ms)\n";
    EXPECT_GE(ms, 0) << name << ": processes outlived the run (" << end << ")";
    EXPECT_LE(ms, bound_ms) << name << " (" << end << ")";
  }
}

TEST(daemon_job_tree, sigterm_ends_every_process_of_every_run_and_reports_their_status) {
  const fs::path db = fs::path(baton::test::temp_dir("tree-db")) / "t.db";
  shape_node node("{\"type\": \"sqlite\", \"path\": " + json_string(db.string()) + "}");
  ASSERT_TRUE(wait_until([&] { return node.all_up(); }, 20s)) << read_file(node.log());
  const auto t = steady::now();
  node.daemon().signal(SIGTERM);
  const auto gone = node.gone_after(t);
  EXPECT_EQ(node.daemon().wait_exit(10s), std::optional<int>(0)) << read_file(node.log());
  expect_all_gone(gone, "daemon_sigterm", (kill_grace + 1s).count());
  // Each run's status is the command's own (sh or sleep, killed after ignoring SIGTERM).
  const auto log = read_file(node.log());
  EXPECT_EQ(count_of(log, "] killed by SIGKILL (stop requested)"), std::size(shapes)) << log;
}

TEST(daemon_job_tree, a_timeout_ends_every_process_of_every_run_and_reports_their_status) {
  const fs::path db = fs::path(baton::test::temp_dir("tree-db")) / "t.db";
  shape_node node("{\"type\": \"sqlite\", \"path\": " + json_string(db.string()) + "}",
                  ", \"timeout\": \"1s\"");
  ASSERT_TRUE(wait_until([&] { return node.all_up(); }, 20s)) << read_file(node.log());
  // Up well within the timeout: the runs must end 1 s after they started, plus kill_grace.
  const auto up = steady::now();
  expect_all_gone(node.gone_after(up), "timeout (from all up)", (1s + kill_grace + 1s).count());
  // The supervisor reports the command's status after the tree is gone: the last line may
  // follow the last process's exit by a moment.
  EXPECT_TRUE(wait_until(
      [&] {
        return count_of(read_file(node.log()), "] killed by SIGKILL (timeout)") ==
               std::size(shapes);
      },
      5s))
      << read_file(node.log());
  node.daemon().signal(SIGTERM);
  EXPECT_EQ(node.daemon().wait_exit(10s), std::optional<int>(0));
}

TEST(daemon_job_tree, sigkill_of_the_daemon_ends_every_process_within_kill_grace_plus_1s) {
  const fs::path db = fs::path(baton::test::temp_dir("tree-db")) / "t.db";
  shape_node node("{\"type\": \"sqlite\", \"path\": " + json_string(db.string()) + "}");
  ASSERT_TRUE(wait_until([&] { return node.all_up(); }, 20s)) << read_file(node.log());
  const auto t = steady::now();
  node.daemon().signal(SIGKILL);
  ASSERT_TRUE(node.daemon().wait_exit(5s));
  expect_all_gone(node.gone_after(t), "daemon_sigkill", (kill_grace + 1s).count());
}

TEST(daemon_job_tree, losing_the_backend_ends_every_process_before_the_lease_ends) {
  // A Redis server of this test's own, killed to take the backend away.
  const fs::path dir = baton::test::temp_dir("tree-redis");
  const int port = baton::test::unused_loopback_port();
  auto redis = std::make_unique<process>(
      std::vector<std::string>{"/usr/bin/redis-server", "--port", std::to_string(port), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                               dir.string()},
      dir / "redis.out", dir / "redis.err");
  ASSERT_TRUE(wait_until([&] { return baton::test::accepts_on_loopback(port); }, 10s))
      << read_file(dir / "redis.out");
  shape_node node("{\"type\": \"redis\", \"url\": \"redis://127.0.0.1:" + std::to_string(port) +
                  "\"}");
  ASSERT_TRUE(wait_until([&] { return node.all_up(); }, 20s)) << read_file(node.log());
  const auto cut = steady::now();
  redis->signal(SIGKILL);
  ASSERT_TRUE(redis->wait_exit(5s));
  // The runs are asked to stop stop_grace (800 ms) before the local lease (2 s) ends, and are
  // gone kill_grace later: all before any other node could take the lease.
  const auto gone = node.gone_after(cut);
  expect_all_gone(gone, "backend_lost (from the cut)", 2000.0);
  const auto log = read_file(node.log());
  EXPECT_THAT(log, HasSubstr("asking the run fired at")) << log;
  node.daemon().signal(SIGTERM);
  EXPECT_TRUE(node.daemon().wait_exit(15s)) << log;
}

// ---------------------------------------------------------------------------------------------
// SIGHUP

/// One `baton run` node on SQLite whose config the test rewrites.
class reload_node {
 public:
  reload_node() : dir_(baton::test::temp_dir("reload")) {
    backend_ = "{\"type\": \"sqlite\", \"path\": " + json_string((dir_ / "r.db").string()) + "}";
    write_file(
        dir_ / "job.sh",
        "#!/bin/sh\necho \"$BATON_SCHEDULE $BATON_FENCING_TOKEN $BATON_FIRE_TIME\" >> \"$1\"\n"
        "[ -n \"$2\" ] && exec sleep \"$2\"\nexit 0\n",
        true);
  }
  /// A schedule entry running job.sh every `every`; a job of `seconds` when given.
  std::string schedule(const std::string& name, const std::string& every,
                       const std::string& seconds = "") const {
    return "{\"name\": " + json_string(name) + ", \"every\": " + json_string(every) +
           ", \"command\": [\"./job.sh\", " + json_string(runs().string()) +
           (seconds.empty() ? "" : ", " + json_string(seconds)) + "]}";
  }
  void write(const std::vector<std::string>& schedules, const std::string& backend = "") const {
    std::string list;
    for (const auto& s : schedules) list += (list.empty() ? "" : ",\n  ") + s;
    write_file(dir_ / "baton.json", "{\"backend\": " + (backend.empty() ? backend_ : backend) +
                                        ",\n \"lease\": {\"ttl\": \"2s\", \"transition\": \"2s\"},"
                                        "\n \"kill_grace\": \"300ms\",\n \"schedules\": [\n  " +
                                        list + "]}\n");
  }
  void start() {
    node_ = std::make_unique<process>(
        std::vector<std::string>{daemon_path(), "run", "--config", (dir_ / "baton.json").string()},
        dir_ / "out", log());
  }
  process& daemon() { return *node_; }
  fs::path log() const { return dir_ / "err"; }
  fs::path runs() const { return dir_ / "runs.log"; }
  /// Lines "<schedule> <fence> <fire time>" the jobs wrote, for one schedule.
  std::vector<std::pair<std::uint64_t, std::string>> runs_of(const std::string& name) const {
    std::vector<std::pair<std::uint64_t, std::string>> out;
    std::istringstream in(read_file(runs()));
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string s, fire;
      std::uint64_t fence = 0;
      if (f >> s >> fence >> fire && s == name) out.emplace_back(fence, fire);
    }
    return out;
  }
  bool log_has(const std::string& text) const {
    return read_file(log()).find(text) != std::string::npos;
  }
  std::size_t log_count(const std::string& text) const { return count_of(read_file(log()), text); }
  /// `baton status` output for the current config.
  std::string status() const {
    process p({daemon_path(), "status", "--config", (dir_ / "baton.json").string()},
              dir_ / "status.out", dir_ / "status.err");
    p.wait_exit(30s);
    const auto out = read_file(dir_ / "status.out");
    fs::remove(dir_ / "status.out");
    return out;
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
  std::string backend_;
  std::unique_ptr<process> node_;
};

TEST(daemon_reload, sighup_adds_removes_and_changes_schedules_and_keeps_unchanged_leases) {
  reload_node n;
  n.write(
      {n.schedule("keep", "500ms"), n.schedule("gone", "1h", "60"), n.schedule("change", "1h")});
  n.start();
  ASSERT_TRUE(wait_until(
      [&] {
        return n.runs_of("keep").size() >= 2 && !n.runs_of("gone").empty() &&
               !n.runs_of("change").empty();
      },
      20s))
      << read_file(n.log());
  const auto keep_fence = n.runs_of("keep").back().first;
  const auto change_fence = n.runs_of("change").back().first;
  const auto gone_job = baton::test::processes_with_env("BATON_SCHEDULE=gone");
  ASSERT_EQ(gone_job.size(), 1u);

  n.write({n.schedule("keep", "500ms"), n.schedule("change", "700ms"), n.schedule("added", "1h")});
  const auto keep_runs_before = n.runs_of("keep").size();
  n.daemon().signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return n.log_has("reload of "); }, 20s)) << read_file(n.log());
  EXPECT_TRUE(n.log_has("1 added, 1 removed, 1 changed, 1 unchanged")) << read_file(n.log());
  EXPECT_TRUE(n.log_has("[gone] reload: removed"));
  EXPECT_TRUE(n.log_has("[change] reload: changed"));
  EXPECT_TRUE(n.log_has("[added] reload: added"));
  // The removed schedule's job is gone and its mutex released.
  EXPECT_TRUE(wait_until(
      [&] { return baton::test::processes_with_env("BATON_SCHEDULE=gone").empty(); }, 5s));
  // The added one fires; the changed one fires on its new cadence (700 ms after the recorded
  // last fire), under a new fence (it was restarted).
  ASSERT_TRUE(wait_until(
      [&] { return !n.runs_of("added").empty() && n.runs_of("change").size() >= 2; }, 20s))
      << read_file(n.log());
  EXPECT_GT(n.runs_of("change").back().first, change_fence);
  // The unchanged one kept its lease: same fence, never released, cadence on.
  ASSERT_TRUE(wait_until([&] { return n.runs_of("keep").size() >= keep_runs_before + 3; }, 10s));
  for (const auto& [fence, fire] : n.runs_of("keep")) EXPECT_EQ(fence, keep_fence) << fire;
  EXPECT_EQ(n.log_count("[keep] '"), 1u) << "keep lost or re-took its lease\n"
                                         << read_file(n.log());
  std::set<std::string> fires;
  for (const auto& [fence, fire] : n.runs_of("keep"))
    EXPECT_TRUE(fires.insert(fire).second) << "fire " << fire << " ran twice";
  // `baton status` with the old schedule list: 'gone' is released.
  n.write({n.schedule("gone", "1h")});
  EXPECT_THAT(n.status(), HasSubstr("owner:      none (last fence"));

  n.daemon().signal(SIGTERM);
  EXPECT_EQ(n.daemon().wait_exit(15s), std::optional<int>(0));
}

TEST(daemon_reload, an_invalid_config_is_refused_with_its_errors_and_the_running_one_stays) {
  reload_node n;
  n.write({n.schedule("keep", "500ms")});
  n.start();
  ASSERT_TRUE(wait_until([&] { return n.runs_of("keep").size() >= 2; }, 20s)) << read_file(n.log());
  const auto fence = n.runs_of("keep").back().first;
  n.write({n.schedule("keep", "5x"), "{\"name\": \"bad\", \"every\": \"1s\", \"command\": []}"});
  n.daemon().signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return n.log_has("the running config stays"); }, 20s));
  const std::string file = (n.dir() / "baton.json").string();
  // The same messages as `baton validate`: file and JSON path.
  EXPECT_TRUE(n.log_has("reload rejected: " + file + ": /schedules/0/every: invalid duration"))
      << read_file(n.log());
  EXPECT_TRUE(n.log_has("reload rejected: " + file + ": /schedules/1/command: is empty"));
  EXPECT_TRUE(n.log_has("reload rejected: 2 errors in " + file));
  const auto before = n.runs_of("keep").size();
  ASSERT_TRUE(wait_until([&] { return n.runs_of("keep").size() >= before + 2; }, 10s));
  EXPECT_EQ(n.runs_of("keep").back().first, fence);
  n.daemon().signal(SIGTERM);
  EXPECT_EQ(n.daemon().wait_exit(15s), std::optional<int>(0));
}

TEST(daemon_reload, a_changed_backend_is_refused_because_it_needs_a_restart) {
  reload_node n;
  n.write({n.schedule("keep", "500ms")});
  n.start();
  ASSERT_TRUE(wait_until([&] { return n.runs_of("keep").size() >= 2; }, 20s)) << read_file(n.log());
  const auto fence = n.runs_of("keep").back().first;
  n.write({n.schedule("keep", "500ms")},
          "{\"type\": \"sqlite\", \"path\": " + json_string((n.dir() / "other.db").string()) + "}");
  n.daemon().signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return n.log_has("the running config stays"); }, 20s));
  EXPECT_TRUE(n.log_has("/backend changed")) << read_file(n.log());
  EXPECT_TRUE(n.log_has("needs a restart"));
  const auto before = n.runs_of("keep").size();
  ASSERT_TRUE(wait_until([&] { return n.runs_of("keep").size() >= before + 2; }, 10s));
  EXPECT_EQ(n.runs_of("keep").back().first, fence);
  n.daemon().signal(SIGTERM);
  EXPECT_EQ(n.daemon().wait_exit(15s), std::optional<int>(0));
}

// ---------------------------------------------------------------------------------------------
// the job's environment

TEST(daemon_job_environment, tz_working_directory_user_group_and_only_fds_0_1_2) {
  const fs::path dir = baton::test::temp_dir("job-env");
  const fs::path work = dir / "work";
  fs::create_directories(work);
  fs::permissions(dir, fs::perms::all);
  fs::permissions(work, fs::perms::all);
  const bool root = ::geteuid() == 0;
  // Every second (6-field cron) in Tokyo; the job writes what it sees into its working dir.
  const std::string script =
      "echo \"TZ=$TZ\" > env.txt; echo \"PWD=$(pwd)\" >> env.txt; "
      "echo \"UID=$(id -u) GID=$(id -g) USER=$USER\" >> env.txt; echo done >> env.txt";
  write_file(
      dir / "baton.json",
      "{\"backend\": {\"type\": \"sqlite\", \"path\": " + json_string((dir / "e.db").string()) +
          "},\n \"schedules\": [{\"name\": \"env\", \"cron\": \"* * * * * *\", "
          "\"time_zone\": \"Asia/Tokyo\", \"working_directory\": \"work\"" +
          (root ? std::string(", \"user\": \"nobody\", \"group\": \"nogroup\"") : "") +
          ", \"command\": [\"/bin/sh\", \"-c\", " + json_string(script) + "]}]}\n");
  process node({daemon_path(), "run", "--config", (dir / "baton.json").string()}, dir / "out",
               dir / "err");
  ASSERT_TRUE(wait_until(
      [&] { return read_file(work / "env.txt").find("done") != std::string::npos; }, 20s))
      << read_file(dir / "err");
  node.signal(SIGTERM);
  EXPECT_EQ(node.wait_exit(15s), std::optional<int>(0));
  const auto env = read_file(work / "env.txt");
  EXPECT_THAT(env, HasSubstr("TZ=Asia/Tokyo\n"));
  EXPECT_THAT(env, HasSubstr("PWD=" + work.string() + "\n"));
  if (root) {
    EXPECT_THAT(env, HasSubstr("UID=65534 GID=65534 USER=nobody\n")) << env;
  } else {
    EXPECT_THAT(env, HasSubstr("UID=" + std::to_string(::geteuid()))) << env;
  }
}

TEST(daemon_job_environment, variables_the_config_references_are_withheld_unless_inherit_env) {
  const fs::path dir = baton::test::temp_dir("job-secrets");
  // Each job writes what it sees to NAME.env, atomically, in the config's directory.
  auto dump_env = [&](const std::string& name) {
    return "\"command\": [\"/bin/sh\", \"-c\", \"env > " + name + ".tmp && mv " + name + ".tmp " +
           name + ".env\"], \"working_directory\": " + json_string(dir.string());
  };
  write_file(dir / "baton.json",
             "{\"backend\": {\"type\": \"sqlite\", \"path\": \"${JOBENV_DB}\"},\n"
             " \"schedules\": [\n"
             "  {\"name\": \"plain\", \"cron\": \"* * * * * *\", \"time_zone\": "
             "\"${JOBENV_ZONE}\", \"env\": {\"PGPASSWORD\": \"${JOBENV_SECRET}\"}, " +
                 dump_env("plain") +
                 "},\n"
                 "  {\"name\": \"inherits\", \"every\": \"1h\", \"inherit_env\": true, " +
                 dump_env("inherits") + "}]}\n");
  process node({"/usr/bin/env", "JOBENV_DB=" + (dir / "e.db").string(),
                "JOBENV_SECRET=Pg-Secret-77", "JOBENV_ZONE=Asia/Tokyo", "JOBENV_PLAIN=visible",
                daemon_path(), "run", "--config", (dir / "baton.json").string()},
               dir / "out", dir / "err");
  ASSERT_TRUE(wait_until(
      [&] { return fs::exists(dir / "plain.env") && fs::exists(dir / "inherits.env"); }, 20s))
      << read_file(dir / "err");
  node.signal(SIGTERM);
  EXPECT_EQ(node.wait_exit(15s), std::optional<int>(0));

  // Lines start after a newline: the first one too.
  const auto plain = "\n" + read_file(dir / "plain.env");
  EXPECT_THAT(plain, HasSubstr("\nJOBENV_PLAIN=visible\n"));     // not referenced: passed on
  EXPECT_THAT(plain, HasSubstr("\nPGPASSWORD=Pg-Secret-77\n"));  // the schedule's env
  EXPECT_THAT(plain, HasSubstr("\nTZ=Asia/Tokyo\n"));
  EXPECT_THAT(plain, HasSubstr("\nBATON_SCHEDULE=plain\n"));
  EXPECT_THAT(plain, HasSubstr("\nBATON_FENCING_TOKEN="));
  for (const char* withheld : {"JOBENV_SECRET=", "JOBENV_DB=", "JOBENV_ZONE="})
    EXPECT_THAT(plain, Not(HasSubstr("\n" + std::string(withheld)))) << plain;
  EXPECT_EQ(count_of(plain, "Pg-Secret-77"), 1u) << plain;

  const auto inherits = "\n" + read_file(dir / "inherits.env");
  for (const char* seen : {"\nJOBENV_SECRET=Pg-Secret-77\n", "\nJOBENV_ZONE=Asia/Tokyo\n",
                           "\nJOBENV_PLAIN=visible\n", "\nBATON_SCHEDULE=inherits\n"})
    EXPECT_THAT(inherits, HasSubstr(seen));
  EXPECT_THAT(inherits, HasSubstr("\nJOBENV_DB=" + (dir / "e.db").string() + "\n"));
}

// ---------------------------------------------------------------------------------------------
// the job's output in the daemon's log

TEST(daemon_job_output, a_run_logs_at_most_log_output_per_stream_and_says_what_it_dropped) {
  const fs::path dir = baton::test::temp_dir("job-output");
  // 10 MiB of 100-byte lines on stdout, then the error on stderr and a failed exit.
  const std::string chatty =
      "yes " + std::string(99, 'x') + " | head -c 10485760; echo 'the real error' >&2; exit 3";
  write_file(
      dir / "baton.json",
      "{\"backend\": {\"type\": \"sqlite\", \"path\": " + json_string((dir / "o.db").string()) +
          "},\n \"schedules\": [\n"
          "  {\"name\": \"chatty\", \"every\": \"1h\", \"command\": [\"/bin/sh\", "
          "\"-c\", " +
          json_string(chatty) +
          "]},\n"
          "  {\"name\": \"quiet\", \"every\": \"1h\", \"log_output\": \"0B\", "
          "\"command\": [\"/bin/echo\", \"hello\"]}]}\n");
  process node({daemon_path(), "run", "--config", (dir / "baton.json").string()}, dir / "out",
               dir / "err");
  ASSERT_TRUE(wait_until(
      [&] {
        const auto log = read_file(dir / "err");
        return log.find("[chatty] exited with status 3") != std::string::npos &&
               log.find("[quiet] exited with status 0") != std::string::npos;
      },
      30s))
      << read_file(dir / "err").substr(0, 4096);
  node.signal(SIGTERM);
  EXPECT_EQ(node.wait_exit(15s), std::optional<int>(0));

  const auto log = read_file(dir / "err");
  std::cout << "[ output ] 10 MiB of job stdout -> daemon log of " << log.size() << " bytes\n";
  // 64 KiB of output, its line prefixes (~50 bytes per 100-byte line) and the daemon's own lines.
  EXPECT_LT(log.size(), 160u * 1024);
  EXPECT_EQ(count_of(log, "[chatty] stdout: "), 656u);  // 655 lines and the start of one more
  EXPECT_THAT(log, HasSubstr("[chatty] log_output (64KiB) reached on stdout: the rest of this "
                             "run's stdout is not logged\n"));
  EXPECT_THAT(log, HasSubstr("[chatty] stdout of the run: 10485760 bytes, 65536 logged, "
                             "10420224 dropped (log_output 64KiB)\n"));
  EXPECT_THAT(log, HasSubstr("[chatty] stderr: the real error\n"));
  EXPECT_THAT(log, Not(HasSubstr("[chatty] stderr of the run")));
  EXPECT_THAT(log, HasSubstr("[chatty] exited with status 3 after"));
  // log_output 0B: nothing of the output, one line of how much there was.
  EXPECT_THAT(log, Not(HasSubstr("[quiet] stdout: hello")));
  EXPECT_THAT(log, HasSubstr("[quiet] stdout of the run: 6 bytes, 0 logged, 6 dropped "
                             "(log_output 0B)\n"));
}

// Issue 19: the daemon's threads do not grow with the commands running at once (a pool thread
// only starts a run; one thread watches them all), and a stop releases every lease it holds.
TEST(daemon_scale,
     many_commands_running_at_once_need_no_thread_each_and_stop_releases_every_lease) {
  constexpr std::size_t schedules = 120;
  const fs::path dir = baton::test::temp_dir("many-runs");
  const fs::path db = dir / "t.db";
  const std::string mark = unique("many-runs");
  std::string list;
  for (std::size_t i = 0; i < schedules; ++i)
    list += std::string(i ? ",\n" : "") + "{\"name\": \"many-" + std::to_string(i) +
            "\", \"every\": \"1h\", \"command\": [\"/bin/sh\", \"-c\", \"exec sleep 60\"], "
            "\"env\": {\"BATON_MANY_MARK\": " +
            json_string(mark) + "}}";
  write_file(dir / "baton.json",
             "{\"backend\": {\"type\": \"sqlite\", \"path\": " + json_string(db.string()) +
                 "},\n \"schedules\": [" + list + "]}\n");
  process daemon({daemon_path(), "run", "--config", (dir / "baton.json").string()}, dir / "out",
                 dir / "err");
  // Every schedule fires at once on acquisition (every 1h, no initial delay): 120 sleeps.
  auto sleeping = [&] {
    std::size_t n = 0;
    for (pid_t pid : baton::test::processes_with_env("BATON_MANY_MARK=" + mark))
      if (read_file("/proc/" + std::to_string(pid) + "/comm") == "sleep\n") ++n;
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return sleeping() == schedules; }, 60s))
      << sleeping() << " running\n"
      << read_file(dir / "err");
  long threads = 0;
  {
    std::ifstream status("/proc/" + std::to_string(daemon.pid()) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Threads:", 0) == 0) threads = std::stol(line.substr(8));
  }
  EXPECT_GT(threads, 0);
  EXPECT_LE(threads, 32) << "threads with " << schedules << " commands running at once";

  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_exit(60s), std::optional<int>(0)) << read_file(dir / "err");
  EXPECT_TRUE(wait_until([&] { return sleeping() == 0; }, 10s));
  baton::runtime rt;
  auto backend = baton::make_backend({"sqlite", {{"path", db.string()}}}, rt);
  int held = 0;
  for (std::size_t i = 0; i < schedules; ++i)
    if (!backend->read_owner("many-" + std::to_string(i)).owner_id.empty()) ++held;
  EXPECT_EQ(held, 0) << "leases still held after the daemon stopped\n" << read_file(dir / "err");
}

}  // namespace
