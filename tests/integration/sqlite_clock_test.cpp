// SQLite lease times on the host's monotonic clock: no node's wall clock can extend or shorten
// another's lease. Real `baton run` nodes on one file, some under libfaketime (+1 h, -2 min);
// the file's clock bookkeeping (older files converted, times of another boot count as past).
#include <signal.h>
#include <soci/soci.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "baton/backends/factory.hpp"
#include "baton/mutex/lease_store.hpp"
#include "support/blocking_store.hpp"
#include "support/daemon.hpp"
#include "support/env.hpp"
#include "support/run_log.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using baton::test::daemon_path;
using baton::test::json_string;
using baton::test::process;
using baton::test::wall_ns;

namespace {

// Lease of the nodes: ttl 2 s + transition 1 s; nobody may take over a silent owner earlier.
constexpr auto ttl = 2000ms;
constexpr auto transition = 1000ms;
constexpr long long lease_ns = std::chrono::nanoseconds(ttl + transition).count();

double seconds(long long ns) { return static_cast<double>(ns) / 1e9; }

// `baton run` nodes on one SQLite file, each optionally under libfaketime, and their job log.
class sqlite_nodes {
 public:
  sqlite_nodes() {
    dir_ = baton::test::temp_dir("sqlite-clock");
    db_ = dir_ / "baton.db";
    recorder_ = baton::test::write_run_recorder(dir_);
    schedule_ = baton::test::unique_name("clock");
  }

  /// Starts node `name`; `faketime` (e.g. "+1h") runs it under libfaketime.
  void start(const std::string& name, const std::string& faketime = "") {
    const auto config = dir_ / (name + ".json");
    baton::test::write_file(
        config, "{\"backend\": {\"type\": \"sqlite\", \"path\": " + json_string(db_.string()) +
                    "},\n \"lease\": {\"ttl\": \"2s\", \"transition\": \"1s\", "
                    "\"retry_period\": \"200ms\", \"poll_interval\": \"100ms\"},\n"
                    " \"log_level\": \"debug\",\n \"schedules\": [{\"name\": " +
                    json_string(schedule_) + ", \"every\": \"500ms\", \"command\": " +
                    baton::test::run_recorder_command(recorder_, log(), name, "0.3") + "}]}\n");
    std::vector<std::string> argv;
    if (!faketime.empty()) {
      argv = {"/usr/bin/env"};
      for (auto& assignment : baton::test::faketime_env()) argv.push_back(assignment);
      argv.push_back("FAKETIME=" + faketime);
    }
    argv.insert(argv.end(), {daemon_path(), "run", "--config", config.string()});
    nodes_[name] = std::make_unique<process>(argv, dir_ / (name + ".out"), dir_ / (name + ".log"));
  }
  process& node(const std::string& name) { return *nodes_.at(name); }
  /// kill -9 of node `name`, waiting until it is gone; the true time (ns) it was gone.
  long long kill9(const std::string& name) {
    node(name).signal(SIGKILL);
    node(name).wait_exit(10s);
    return wall_ns();
  }

  fs::path log() const { return dir_ / "jobs.log"; }
  std::vector<baton::test::job_run> runs() const { return baton::test::read_runs(log()); }

  /// The first run by `node` that started after `after_ns`, waiting up to `timeout`.
  std::optional<baton::test::job_run> wait_run(const std::string& node, long long after_ns,
                                               std::chrono::milliseconds timeout) const {
    std::optional<baton::test::job_run> found;
    baton::test::wait_until(
        [&] {
          for (const auto& r : runs())
            if (r.node == node && r.start_ns > after_ns) {
              found = r;
              return true;
            }
          return false;
        },
        timeout);
    return found;
  }
  std::size_t runs_by(const std::string& node) const {
    std::size_t n = 0;
    for (const auto& r : runs()) n += r.node == node ? 1 : 0;
    return n;
  }

  std::string diagnostics() const {
    std::string out = "job log:\n" + baton::test::read_file(log());
    for (const auto& [name, p] : nodes_) {
      auto text = baton::test::read_file(dir_ / (name + ".log"));
      if (text.size() > 5000) text = "..." + text.substr(text.size() - 5000);
      out += "\n--- " + name + " ---\n" + text;
    }
    return out;
  }

  /// Stops every node still running (SIGTERM) and waits for it.
  void stop_all() {
    for (auto& [name, p] : nodes_)
      if (p->running()) p->signal(SIGTERM);
    for (auto& [name, p] : nodes_) p->wait_exit(20s);
  }

 private:
  fs::path dir_, db_, recorder_;
  std::string schedule_;
  std::map<std::string, std::unique_ptr<process>> nodes_;
};

void expect_one_run_at_a_time(const sqlite_nodes& nodes) {
  const auto check = baton::test::check_runs(nodes.runs(), wall_ns());
  EXPECT_EQ(check.overlaps, 0u) << check.details << nodes.diagnostics();
  EXPECT_EQ(check.fence_regressions, 0u) << check.details << nodes.diagnostics();
}

TEST(sqlite_clock, a_node_an_hour_ahead_never_takes_a_held_lease_and_leaves_no_lockout) {
  sqlite_nodes nodes;
  nodes.start("correct");
  ASSERT_TRUE(nodes.wait_run("correct", 0, 20s)) << nodes.diagnostics();
  // The +1 h node contends for two leases and more: it must never run while the correct node
  // holds the lease (its wall clock says the lease lapsed an hour ago).
  nodes.start("ahead", "+1h");
  const auto contended_from = wall_ns();
  ASSERT_FALSE(nodes.wait_run("ahead", 0, 7s)) << nodes.diagnostics();
  EXPECT_GE(nodes.runs_by("correct"), 8u) << nodes.diagnostics();
  EXPECT_TRUE(nodes.wait_run("correct", contended_from + 5'000'000'000LL, 5s))
      << "the correct node stopped running while the +1 h node contended\n"
      << nodes.diagnostics();

  // The correct node leaves (releasing): the +1 h node takes over.
  nodes.node("correct").signal(SIGTERM);
  ASSERT_EQ(nodes.node("correct").wait_exit(20s), 0) << nodes.diagnostics();
  ASSERT_TRUE(nodes.wait_run("ahead", 0, 10s)) << nodes.diagnostics();

  // kill -9 of the +1 h leader: the times it left are on the host's monotonic clock, so a new
  // correct node leads within one lease (ttl + transition) of the kill, not an hour later.
  const auto killed = nodes.kill9("ahead");
  nodes.start("fresh");
  const auto first = nodes.wait_run("fresh", 0, 20s);
  ASSERT_TRUE(first) << nodes.diagnostics();
  const auto takeover = first->start_ns - killed;
  std::cout << "[ measured ] fresh correct node ran " << seconds(takeover)
            << " s after kill -9 of the +1 h leader (lease " << seconds(lease_ns) << " s)\n";
  // One lease, plus the fresh daemon's start, its poll and the job's own start.
  EXPECT_LT(takeover, lease_ns + 3'000'000'000LL) << nodes.diagnostics();
  nodes.stop_all();
  expect_one_run_at_a_time(nodes);
}

TEST(sqlite_clock, after_kill_9_of_the_leader_a_node_two_minutes_behind_takes_over_within_a_lease) {
  sqlite_nodes nodes;
  nodes.start("correct");
  ASSERT_TRUE(nodes.wait_run("correct", 0, 20s)) << nodes.diagnostics();
  nodes.start("behind", "-2m");
  // It contends (and sees the lease held) before the leader dies.
  ASSERT_FALSE(nodes.wait_run("behind", 0, 3s)) << nodes.diagnostics();
  const auto killed = nodes.kill9("correct");
  const auto first = nodes.wait_run("behind", 0, 20s);
  ASSERT_TRUE(first) << nodes.diagnostics();
  const auto takeover = first->start_ns - killed;
  std::cout << "[ measured ] the -2 min node ran " << seconds(takeover)
            << " s after kill -9 of the leader (lease " << seconds(lease_ns) << " s)\n";
  // Within one lease (ttl + transition) plus its poll interval and the job's start.
  EXPECT_LT(takeover, lease_ns + 1'500'000'000LL) << nodes.diagnostics();
  // Not before the lease of the killed node could have ended on the host's clock either.
  EXPECT_GT(takeover, std::chrono::nanoseconds(transition).count()) << nodes.diagnostics();
  nodes.stop_all();
  expect_one_run_at_a_time(nodes);
  const auto runs = nodes.runs();
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs.back().node, "behind");
}

// ------------------------------------------------------------------ the file's clock state

struct sqlite_file {
  sqlite_file() {
    path = baton::test::temp_dir("sqlite-clock-file") + "/baton.db";
    config = baton::backend_config{"sqlite", {{"path", path}}};
  }
  std::unique_ptr<soci::session> admin() const {
    return std::make_unique<soci::session>("sqlite3", "db=" + path + " timeout=5");
  }
  std::string path;
  baton::backend_config config;
};

long long ms_since_epoch(baton::backend_time t) { return t.time_since_epoch().count(); }
long long now_ms() { return wall_ns() / 1'000'000; }

TEST(sqlite_clock, grants_show_wall_clock_times_and_the_file_names_its_clock_and_boot) {
  sqlite_file file;
  baton::test::blocking_store s(file.config, 10s);
  const auto before = now_ms();
  auto [ec, g] = s.acquire("m", "a", 5s, 1s);
  ASSERT_FALSE(ec) << ec.message();
  const auto after = now_ms();
  // lease_grant::now is the host's wall clock; the owner's times are shown on it too.
  EXPECT_GE(ms_since_epoch(g.now), before - 5);
  EXPECT_LE(ms_since_epoch(g.now), after + 5);
  EXPECT_EQ(ms_since_epoch(g.owner.acquired_at), ms_since_epoch(g.now));
  EXPECT_EQ(ms_since_epoch(g.owner.ttl_at) - ms_since_epoch(g.now), 5000);
  EXPECT_EQ(ms_since_epoch(g.owner.transition_at) - ms_since_epoch(g.now), 6000);
  // In the file: monotonic ms (far below any wall-clock time since the epoch).
  auto sql = file.admin();
  long long stored = 0;
  *sql << "SELECT transition_at FROM baton_mutex WHERE name = 'm'", soci::into(stored);
  EXPECT_LT(stored, 1'000'000'000'000LL);
  std::string clock, boot;
  *sql << "SELECT value FROM baton_mutex_meta WHERE key = 'clock'", soci::into(clock);
  *sql << "SELECT value FROM baton_mutex_meta WHERE key = 'boot_id'", soci::into(boot);
  EXPECT_EQ(clock, "monotonic");
  EXPECT_EQ(boot, baton::test::read_file("/proc/sys/kernel/random/boot_id").substr(0, 36));
  // A read-only reader (baton status) shows the same wall-clock times.
  auto ro_config = file.config;
  ro_config.read_only = true;
  baton::runtime rt;
  auto ro = baton::make_backend(ro_config, rt);
  const auto owner = ro->read_owner("m");
  EXPECT_EQ(owner.owner_id, "a");
  EXPECT_NEAR(ms_since_epoch(owner.transition_at), ms_since_epoch(g.owner.transition_at), 5);
}

TEST(sqlite_clock, lease_times_of_another_boot_count_as_past) {
  sqlite_file file;
  {
    baton::test::blocking_store s(file.config, 10s);
    auto [ec, g] = s.acquire("m", "a", 60s, 1s);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(g.owner.fence, 1u);
  }
  // As after a reboot: the file's times belong to another boot (whose processes are all gone).
  *file.admin() << "UPDATE baton_mutex_meta SET value = 'another-boot' WHERE key = 'boot_id'";
  baton::test::blocking_store s(file.config, 10s);
  auto [ec, g] = s.acquire("m", "b", 5s, 1s);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(g.owner.owner_id, "b") << "a lease of another boot still held the mutex";
  EXPECT_EQ(g.owner.fence, 2u);
}

TEST(sqlite_clock, a_file_of_an_older_baton_is_converted_keeps_its_live_lease_and_locks_it_out) {
  sqlite_file file;
  const auto wall = now_ms();
  {
    // The owner records table as an older baton made it, with its wall-clock times: a lease of
    // 'old' that ends 1.5 s from now.
    auto sql = file.admin();
    *sql << "CREATE TABLE baton_mutex (name VARCHAR(128) NOT NULL PRIMARY KEY, owner_id "
            "VARCHAR(255) NOT NULL DEFAULT '', acquired_at BIGINT NOT NULL DEFAULT 0, ttl_at "
            "BIGINT NOT NULL DEFAULT 0, transition_at BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT "
            "NULL DEFAULT 0, state TEXT NOT NULL DEFAULT '')";
    *sql << "INSERT INTO baton_mutex VALUES ('m', 'old', " + std::to_string(wall - 1000) + ", " +
                std::to_string(wall + 500) + ", " + std::to_string(wall + 1500) + ", 4, '')";
    *sql << "INSERT INTO baton_mutex VALUES ('free', '', 0, 0, 0, 2, '')";
  }
  baton::test::blocking_store s(file.config, 10s);
  auto [ec, g] = s.acquire("m", "new", 2s, 1s);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(g.owner.owner_id, "old") << "the converted lease of the older baton was lost";
  EXPECT_NEAR(ms_since_epoch(g.owner.transition_at), wall + 1500, 50);
  EXPECT_NEAR(ms_since_epoch(g.owner.acquired_at), wall - 1000, 50);
  auto [fec, f] = s.acquire("free", "new", 2s, 1s);
  ASSERT_FALSE(fec) << fec.message();
  EXPECT_EQ(f.owner.owner_id, "new");
  EXPECT_EQ(f.owner.fence, 3u);
  // Once the old lease has run out, the new node takes it with the next fence.
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        auto [e, x] = s.acquire("m", "new", 2s, 1s);
        return !e && x.owner.owner_id == "new";
      },
      5s));
  EXPECT_EQ(s.read("m").second.owner.fence, 5u);
  // An older baton (no baton_monotonic_ms function) can no longer write the file.
  auto sql = file.admin();
  try {
    *sql << "UPDATE baton_mutex SET owner_id = 'old' WHERE name = 'm'";
    ADD_FAILURE() << "an older baton could still write the converted file";
  } catch (const soci::soci_error& e) {
    EXPECT_NE(std::string(e.what()).find("no such function: baton_monotonic_ms"), std::string::npos)
        << e.what();
  }
}

}  // namespace
