// baton on a three-member ZooKeeper ensemble (BATON_TEST_ZOOKEEPER_ENSEMBLE, started by the test
// script): `baton run` daemons whose job appends (fence, start, end, node) to a shared file while
// members are killed: the ZooKeeper leader, the member an owner is connected to, a quorum. Also
// a multi-host connection string with a chroot end to end, and a node whose wall clock is an
// hour ahead (libfaketime) refusing to lead under max_clock_offset. Every test leaves the three
// members running (they are shared by the tests, which run serially).
#if __has_include("baton/backends/zookeeper/detail.hpp")  // a build with the ZooKeeper backend
#ifndef THREADED
#define THREADED  // the synchronous C API is declared only with THREADED
#endif
#include <signal.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon.hpp"
#include "support/env.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using baton::test::json_string;
using baton::test::read_file;
using baton::test::wait_until;
using baton::test::write_file;

constexpr auto session_timeout = 6s;  // requested and (ticks of 500 ms) negotiated
constexpr auto tick = 1s;             // the schedules fire every second

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One run of the job, from the shared file: "S fence start node" when it starts, "E fence
// start end node [TERM]" when it ends (TERM: it got SIGTERM).
struct run {
  std::uint64_t fence = 0;
  long long start = 0, end = 0;  // wall ns; end 0: no end line (killed or still running)
  std::string node;
  bool terminated = false;
};

std::vector<run> read_runs(const fs::path& file) {
  std::vector<run> runs;
  std::istringstream in(read_file(file));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    run r;
    words >> kind >> r.fence >> r.start;
    if (kind == "S") {
      words >> r.node;
      runs.push_back(r);
    } else if (kind == "E") {
      std::string term;
      words >> r.end >> r.node >> term;
      for (auto& s : runs)
        if (s.node == r.node && s.start == r.start) {
          s.end = r.end;
          s.terminated = term == "TERM";
        }
    }
  }
  std::sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.start < b.start; });
  return runs;
}

// Overlapping pairs (a run that starts before the previous one ended) and fence decreases.
struct history_check {
  int overlaps = 0, fence_decreases = 0, fence_changes = 0;
};
history_check check_history(const std::vector<run>& runs) {
  history_check c;
  long long last_end = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i > 0) {
      if (runs[i].fence < runs[i - 1].fence) ++c.fence_decreases;
      if (runs[i].fence != runs[i - 1].fence) ++c.fence_changes;
    }
    if (runs[i].start < last_end) ++c.overlaps;
    last_end = std::max(last_end, runs[i].end == 0 ? runs[i].start : runs[i].end);
  }
  return c;
}

std::string shell_output(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, p)) out += buffer;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string servers_sh() { return std::string(BATON_SOURCE_DIR) + "/scripts/servers.sh"; }

// 1..3: the member whose srvr says Mode: leader (baton_zookeeper_ensemble_leader); 0 if none.
int ensemble_leader() {
  auto out =
      shell_output("bash -c 'source " + servers_sh() + " && baton_zookeeper_ensemble_leader'");
  return out.size() == 1 && out[0] >= '1' && out[0] <= '3' ? out[0] - '0' : 0;
}

std::vector<int> member_ports() {
  std::vector<int> ports;
  std::string hosts = baton::test::require_env("BATON_TEST_ZOOKEEPER_ENSEMBLE");
  std::istringstream in(hosts);
  std::string entry;
  while (std::getline(in, entry, ','))
    ports.push_back(std::stoi(entry.substr(entry.rfind(':') + 1)));
  return ports;
}

// 1..3: the member with a client connection that has a session (4lw `cons`), 0 if none: with a
// single client on the ensemble, the member it is connected to.
int member_with_session() {
  const auto ports = member_ports();
  for (std::size_t i = 0; i < ports.size(); ++i) {
    auto cons = shell_output("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(ports[i]) +
                             " && printf cons >&3 && timeout 2 cat <&3'");
    if (cons.find("sid=0x") != std::string::npos) return static_cast<int>(i) + 1;
  }
  return 0;
}

// Wall ns of every JSON log line with event `event` ("time":"2026-01-02T03:04:05.678Z").
std::vector<long long> event_times(const std::string& log, const std::string& event) {
  std::vector<long long> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"event\":\"" + event + "\"") == std::string::npos) continue;
    auto at = line.find("\"time\":\"");
    if (at == std::string::npos) continue;
    std::tm tm{};
    int ms = 0;
    if (std::sscanf(line.c_str() + at + 8, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
      continue;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    out.push_back((static_cast<long long>(::timegm(&tm)) * 1000 + ms) * 1'000'000);
  }
  return out;
}

bool member(const std::string& action, int n) {
  return baton::test::server_ctl(action, "zookeeper-" + std::to_string(n));
}

// A `baton run` daemon on the ensemble with one schedule, every second, whose job records its
// runs in `runs_file`.
class node {
 public:
  node(const std::string& name, const std::string& hosts, const std::string& schedule,
       const fs::path& runs_file, const std::string& job_seconds)
      : dir_(baton::test::temp_dir("zk-ensemble-" + name)) {
    const std::string job =
        "s=$(date +%s%N); f=" + runs_file.string() + "; echo \"S $BATON_FENCING_TOKEN $s " + name +
        "\" >>$f; trap 'echo \"E $BATON_FENCING_TOKEN $s $(date +%s%N) " + name +
        " TERM\" >>$f; exit 143' TERM; sleep " + job_seconds + " & wait $!; echo \"E " +
        "$BATON_FENCING_TOKEN $s $(date +%s%N) " + name + "\" >>$f";
    write_file(dir_ / "baton.json",
               "{\"backend\": {\"type\": \"zookeeper\", \"hosts\": " + json_string(hosts) +
                   ", \"session_timeout\": \"" + std::to_string(session_timeout.count()) +
                   "s\"},\n \"lease\": {\"stop_grace\": \"500ms\"},\n \"kill_grace\": \"300ms\",\n"
                   " \"log_format\": \"json\",\n \"schedules\": [{\"name\": " +
                   json_string(schedule) +
                   ", \"every\": \"1s\", \"command\": [\"/bin/sh\", \"-c\", " + json_string(job) +
                   "]}]}\n");
    daemon_ = std::make_unique<baton::test::process>(
        std::vector<std::string>{baton::test::daemon_path(), "run", "--config",
                                 (dir_ / "baton.json").string()},
        dir_ / "out", dir_ / "err");
  }
  ~node() { stop(); }
  void stop() {
    if (!daemon_) return;
    daemon_->signal(SIGTERM);
    daemon_->wait_exit(15s);
    daemon_.reset();
  }
  std::string log() const { return read_file(dir_ / "err"); }

 private:
  fs::path dir_;
  std::unique_ptr<baton::test::process> daemon_;
};

class zookeeper_ensemble : public ::testing::Test {
 protected:
  void SetUp() override {
    hosts_ = baton::test::require_env("BATON_TEST_ZOOKEEPER_ENSEMBLE");
    dir_ = baton::test::temp_dir("zk-ensemble");
    runs_ = dir_ / "runs";
    schedule_ = baton::test::unique_name("ens");
    ASSERT_NE(ensemble_leader(), 0) << "the ensemble has no leader at the start of the test";
  }
  void TearDown() override {
    nodes_.clear();  // stop the daemons before the ensemble changes again
    // Restore the ensemble for the next test: every member running and serving.
    for (int n = 1; n <= 3; ++n) EXPECT_TRUE(member("start", n)) << "zookeeper-" << n;
  }
  node& add_node(const std::string& name, const std::string& job_seconds = "0.3") {
    nodes_.push_back(std::make_unique<node>(name, hosts_, schedule_, runs_, job_seconds));
    return *nodes_.back();
  }
  // Waits until `count` runs have ended (more than were there before).
  bool wait_runs_ended(std::size_t count, std::chrono::milliseconds timeout) {
    return wait_until(
        [&] {
          auto runs = read_runs(runs_);
          return static_cast<std::size_t>(std::count_if(
                     runs.begin(), runs.end(), [](const run& r) { return r.end != 0; })) >= count;
        },
        timeout);
  }
  std::size_t ended_runs() {
    auto runs = read_runs(runs_);
    return std::count_if(runs.begin(), runs.end(), [](const run& r) { return r.end != 0; });
  }

  std::string hosts_;
  fs::path dir_, runs_;
  std::string schedule_;
  std::vector<std::unique_ptr<node>> nodes_;
};

}  // namespace

TEST_F(zookeeper_ensemble,
       killing_the_zookeeper_leader_moves_leadership_at_most_once_without_overlap) {
  add_node("a");
  add_node("b");
  add_node("c");
  ASSERT_TRUE(wait_runs_ended(3, 30s)) << "no runs on the ensemble";
  const int leader = ensemble_leader();
  ASSERT_NE(leader, 0);
  const auto before = read_runs(runs_);
  const std::string owner = before.back().node;
  const long long killed_at = wall_ns();
  ASSERT_TRUE(member("kill", leader));
  // Runs go on with two members (a quorum): ask for a few after the kill.
  const auto ended_at_kill = ended_runs();
  ASSERT_TRUE(wait_runs_ended(ended_at_kill + 5, session_timeout + 15s))
      << "runs did not resume after the ZooKeeper leader was killed";
  const int new_leader = ensemble_leader();
  EXPECT_NE(new_leader, 0);
  EXPECT_NE(new_leader, leader);
  ASSERT_TRUE(member("start", leader));
  ASSERT_TRUE(wait_runs_ended(ended_runs() + 2, 15s));
  // The nodes stop one after the other: each stop hands the schedule to the next node, which
  // may fire before its own SIGTERM comes (on a loaded machine it did). Those are not moves.
  const long long stopping_at = wall_ns();
  for (auto& n : nodes_) n->stop();

  const auto runs = read_runs(runs_);
  const auto c = check_history(runs);
  EXPECT_EQ(c.overlaps, 0);
  EXPECT_EQ(c.fence_decreases, 0);
  int moves = 0;
  long long gap = 0;
  for (std::size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].start < killed_at || runs[i].start >= stopping_at) continue;
    if (runs[i].fence != runs[i - 1].fence) ++moves;
    gap = std::max(gap, runs[i].start - runs[i - 1].start);
  }
  EXPECT_LE(moves, 1) << "leadership moved more than once after the ZooKeeper leader was killed";
  std::cout << "[ measured ] zookeeper ensemble leader kill: baton leadership moves " << moves
            << " (owner " << owner << "), longest gap between run starts ms " << gap / 1'000'000
            << ", runs " << runs.size() << "\n";
}

TEST_F(zookeeper_ensemble,
       an_owner_keeps_its_job_and_fence_when_its_member_dies_and_the_session_survives) {
  // One daemon: the only session on the ensemble, so `cons` shows the member it is on. The job
  // runs 6 s: the kill lands in the middle of a run.
  auto& a = add_node("a", "6");
  ASSERT_TRUE(wait_until([&] { return !read_runs(runs_).empty(); }, 30s));
  const int connected_to = member_with_session();
  ASSERT_NE(connected_to, 0) << "no member has the daemon's session";
  const auto running = read_runs(runs_).back();
  std::this_thread::sleep_for(500ms);  // well inside the run
  ASSERT_TRUE(member("kill", connected_to));
  // The run ends on its own (about 6 s after it began), and the next one starts with the same
  // fence.
  ASSERT_TRUE(wait_until(
      [&] {
        auto runs = read_runs(runs_);
        return runs.size() >= 2 && runs.front().end != 0;
      },
      20s));
  ASSERT_TRUE(member("start", connected_to));
  a.stop();
  const auto runs = read_runs(runs_);
  const auto& first = runs.front();
  EXPECT_EQ(first.start, running.start);
  EXPECT_FALSE(first.terminated) << "the job got SIGTERM although the session survived";
  EXPECT_GE(first.end - first.start, 5'500'000'000LL);
  EXPECT_EQ(runs[1].fence, first.fence) << "the lease continued: same ownership, same fence";
  const auto log = a.log();
  EXPECT_NE(log.find("\"event\":\"lease.disconnected\""), std::string::npos) << log;
  EXPECT_EQ(log.find("\"event\":\"lease.lost\""), std::string::npos) << log;
  EXPECT_EQ(log.find("\"event\":\"lease.expired\""), std::string::npos) << log;
  std::cout << "[ measured ] zookeeper member of the owner killed mid-run: run of "
            << (first.end - first.start) / 1'000'000 << " ms finished, fence " << first.fence
            << " kept\n";
}

TEST_F(zookeeper_ensemble, without_quorum_owners_step_down_in_time_and_ownership_resumes_after) {
  add_node("a");
  add_node("b");
  ASSERT_TRUE(wait_runs_ended(3, 30s));
  const int leader = ensemble_leader();
  ASSERT_NE(leader, 0);
  const int other = leader == 1 ? 2 : 1;
  const long long lost_at = wall_ns();
  ASSERT_TRUE(member("kill", leader));
  ASSERT_TRUE(member("kill", other));
  // Longer than the session timeout without a quorum.
  std::this_thread::sleep_for(session_timeout + 2s);
  const long long restore_at = wall_ns();
  const auto no_quorum = read_runs(runs_);
  ASSERT_TRUE(member("start", other));  // returns once the two members serve: quorum
  const long long quorum_at = wall_ns();
  ASSERT_TRUE(wait_until(
      [&] {
        auto runs = read_runs(runs_);
        return !runs.empty() && runs.back().start > quorum_at;
      },
      session_timeout + tick + 10s))
      << "no run after the quorum was restored";
  const auto runs = read_runs(runs_);
  for (auto& n : nodes_) n->stop();

  const long long deadline = lost_at + std::chrono::nanoseconds(session_timeout).count();
  for (const auto& r : no_quorum) {
    if (r.start < lost_at) continue;
    EXPECT_LT(r.start, deadline) << "a run started after the owner's local deadline without quorum";
    EXPECT_NE(r.end, 0) << "a run started without quorum did not end";
    EXPECT_LE(r.end, deadline) << "a run outlived its owner's local deadline";
  }
  for (const auto& r : no_quorum) {
    if (r.start < restore_at) {
      EXPECT_LE(r.end == 0 ? restore_at : r.end, deadline)
          << "every run ended before the owner's local deadline (fence " << r.fence << ")";
    }
  }
  long long resumed = 0;
  for (const auto& r : runs)
    if (r.start > quorum_at) {
      resumed = r.start;
      break;
    }
  const auto c = check_history(runs);
  EXPECT_EQ(c.overlaps, 0);
  EXPECT_EQ(c.fence_decreases, 0);
  const auto resumed_ms = (resumed - quorum_at) / 1'000'000;
  EXPECT_LE(resumed_ms, std::chrono::milliseconds(session_timeout + tick).count())
      << "ownership resumed later than session timeout + one tick after the quorum returned";
  // The owner steps down (lease.expired) before its session could have expired on the servers:
  // at the latest `session_timeout` after the last answer it had, which came before the kill.
  int step_downs = 0;
  for (auto& n : nodes_) {
    for (auto t : event_times(n->log(), "lease.expired")) {
      if (t < lost_at || t > restore_at) continue;
      ++step_downs;
      EXPECT_LE(t, deadline + 1'000'000) << "stepped down after the session could have expired";
      std::cout << "[ measured ] zookeeper quorum loss: owner stepped down ms after the kill "
                << (t - lost_at) / 1'000'000 << " (session timeout "
                << std::chrono::milliseconds(session_timeout).count() << ")\n";
    }
  }
  EXPECT_EQ(step_downs, 1) << "the owner did not log its step-down (lease.expired) exactly once";
  std::cout << "[ measured ] zookeeper quorum loss: runs without quorum "
            << std::count_if(no_quorum.begin(), no_quorum.end(),
                             [&](const run& r) { return r.start >= lost_at; })
            << ", ownership resumed ms after quorum " << resumed_ms << " (bound "
            << std::chrono::milliseconds(session_timeout + tick).count() << ")\n";
}

TEST_F(zookeeper_ensemble, several_hosts_and_a_chroot_work_end_to_end) {
  // Two of the three members and a chroot that does not exist yet (baton creates it).
  const auto ports = member_ports();
  const std::string chroot = "/" + baton::test::unique_name("chroot") + "/team";
  hosts_ =
      "127.0.0.1:" + std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]) + chroot;
  add_node("a");
  add_node("b");
  ASSERT_TRUE(wait_runs_ended(2, 30s));
  for (auto& n : nodes_) n->stop();
  const auto c = check_history(read_runs(runs_));
  EXPECT_EQ(c.overlaps, 0);
  // The schedule's mutex folder is under the chroot, not at the root.
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh = zookeeper_init(baton::test::require_env("BATON_TEST_ZOOKEEPER_ENSEMBLE").c_str(),
                                 nullptr, 10'000, nullptr, nullptr, 0);
  ASSERT_NE(zh, nullptr);
  ASSERT_TRUE(wait_until([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s));
  Stat stat{};
  EXPECT_EQ(zoo_exists(zh, (chroot + "/baton/" + schedule_).c_str(), 0, &stat), ZOK);
  EXPECT_EQ(zoo_exists(zh, ("/baton/" + schedule_).c_str(), 0, &stat), ZNONODE);
  zookeeper_close(zh);
}

namespace {

// baton_zk_holder under libfaketime: its wall clock follows the offset in `clock_file` ("+1h",
// "+0"), its monotonic clock is left alone. Its log (stderr) goes to `log`.
baton::test::child_process faked_holder(const std::string& hosts, const std::string& mutex,
                                        const fs::path& clock_file, const fs::path& log,
                                        const std::string& max_offset_ms) {
  std::string preload;
  for (const auto& assignment : baton::test::faketime_env()) preload += "'" + assignment + "' ";
  const std::string command =
      "exec env " + preload + "FAKETIME_TIMESTAMP_FILE=" + clock_file.string() +
      " FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 " +
      baton::test::program_path("zk_holder") + " --hosts " + hosts + " --mutex " + mutex +
      " --session-timeout 2s --max-clock-offset " + max_offset_ms + " 2>>" + log.string();
  return baton::test::child_process({"/bin/sh", "-c", command});
}

long long clock_offset_ms(const std::string& line) {  // "CLOCK offset refused ns"
  std::istringstream in(line);
  std::string word;
  long long offset = 0;
  in >> word >> offset;
  return offset;
}

}  // namespace

TEST_F(zookeeper_ensemble, a_node_an_hour_ahead_refuses_to_lead_under_max_clock_offset) {
  const auto mutex = baton::test::unique_name("clock");
  const auto clock_file = dir_ / "faketime";
  write_file(clock_file, "+1h\n");
  // Limit 10 s: refuses, never acquires, and reports the offset (about -1 h).
  auto refused = faked_holder(hosts_, mutex, clock_file, dir_ / "refused.log", "10000");
  auto line = refused.wait_line("CLOCK", 20s);
  ASSERT_TRUE(line) << refused.describe();
  EXPECT_NEAR(clock_offset_ms(*line), -3'600'000, 5'000) << *line;
  EXPECT_NE(line->find(" 1 "), std::string::npos) << "not refused: " << *line;
  EXPECT_FALSE(refused.wait_line("ACQUIRED", 5s)) << "a refused node acquired";
  EXPECT_NE(read_file(dir_ / "refused.log").find("refusing to lead"), std::string::npos);

  // Without a limit another node with the same clock leads, and logs the offset.
  auto free = faked_holder(hosts_, mutex, dir_ / "faketime", dir_ / "free.log", "0");
  ASSERT_TRUE(free.wait_line("ACQUIRED", 20s)) << free.describe();
  EXPECT_NE(read_file(dir_ / "free.log").find("off the backend's"), std::string::npos)
      << "no clock.offset line";
  free.signal(SIGTERM);
  EXPECT_EQ(free.wait_exit(15s), 0);

  // The clock comes back: the refused node measures again (every session timeout) and joins.
  write_file(clock_file, "+0\n");
  ASSERT_TRUE(refused.wait_line("ACQUIRED", 20s)) << "the node did not join once within bounds";
  refused.signal(SIGTERM);
  EXPECT_EQ(refused.wait_exit(15s), 0);
  EXPECT_NE(read_file(dir_ / "refused.log").find("back within max_clock_offset"),
            std::string::npos);
}

#endif  // __has_include(baton/backends/zookeeper/detail.hpp)
