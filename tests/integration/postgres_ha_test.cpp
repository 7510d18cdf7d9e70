// The SQL backend on a PostgreSQL primary with a streaming standby (scripts/servers.sh,
// baton_start_postgres_ha): the libpq multi-host connection string, reconnecting to the writable
// member after a failover, and `baton run` nodes across a failover. Each test leaves a fresh
// pair behind (postgres-ha-reset).
#include <signal.h>
#include <soci/soci.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "baton/backends/factory.hpp"
#include "baton/mutex/lease_store.hpp"
#include "support/blocking_store.hpp"
#include "support/daemon.hpp"
#include "support/env.hpp"
#include "support/run_log.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using baton::test::json_string;
using baton::test::require_env;
using baton::test::wall_ns;

namespace {

std::string server_ctl_script() { return std::string(BATON_SOURCE_DIR) + "/scripts/server-ctl.sh"; }

// scripts/server-ctl.sh with these arguments; true on success.
bool ha_ctl(const std::string& args) {
  return std::system((server_ctl_script() + " " + args + " >&2").c_str()) == 0;
}

std::string primary_port() { return require_env("BATON_TEST_POSTGRES_HA_PRIMARY_PORT"); }
std::string standby_port() { return require_env("BATON_TEST_POSTGRES_HA_STANDBY_PORT"); }

// The port of the member a new connection with `connection` lands on.
int server_port(const std::string& connection) {
  soci::session sql("postgresql", connection + " connect_timeout=5");
  int port = 0;
  sql << "SELECT inet_server_port()", soci::into(port);
  return port;
}

class postgres_ha : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ha_ctl("status postgres-primary")) << "the HA primary is not running";
    ASSERT_TRUE(ha_ctl("status postgres-standby")) << "the HA standby is not running";
  }
  // A fresh primary + standby for the next test (a failover leaves a promoted standby).
  void TearDown() override { EXPECT_TRUE(ha_ctl("postgres-ha-reset")) << "reset failed"; }

  static baton::backend_config config(const std::string& connection) {
    return {"postgresql", {{"connection", connection}, {"statement_timeout", "2s"}}};
  }
  // The exported string with the standby listed first: only a string that reaches libpq whole
  // (every host, every port, target_session_attrs) lands on the primary.
  static std::string standby_first() {
    return "dbname=baton_test user=postgres host=127.0.0.1,127.0.0.1 port=" + standby_port() + "," +
           primary_port() + " target_session_attrs=read-write";
  }
};

TEST_F(postgres_ha, the_multi_host_string_passes_through_soci_to_the_writable_member) {
  const auto exported = require_env("BATON_TEST_POSTGRES_HA");
  EXPECT_EQ(server_port(exported), std::stoi(primary_port()));
  EXPECT_EQ(server_port(standby_first()), std::stoi(primary_port()));
  // Through the backend (SOCI, with the timeouts baton adds): a write, so on the primary.
  baton::test::blocking_store s(config(standby_first()));
  auto [ec, g] = s.acquire(baton::test::unique_name("ha"), "a");
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(g.owner.owner_id, "a");
  EXPECT_EQ(g.owner.fence, 1u);
  // Without target_session_attrs the standby, listed first, would take the connection: the
  // setting is what makes the string safe.
  EXPECT_EQ(server_port("dbname=baton_test user=postgres host=127.0.0.1,127.0.0.1 port=" +
                        standby_port() + "," + primary_port()),
            std::stoi(standby_port()));
}

TEST_F(postgres_ha,
       after_a_failover_the_backend_reconnects_to_the_new_primary_with_a_higher_fence) {
  const auto name = baton::test::unique_name("ha");
  baton::test::blocking_store s(config(require_env("BATON_TEST_POSTGRES_HA")));
  auto [ec, g] = s.acquire(name, "a");
  ASSERT_FALSE(ec) << ec.message();
  const auto fence = g.owner.fence;
  // The primary goes away (a fast shutdown ships its WAL to the standby first); the pooled
  // connection is lost, and a new one finds no writable member until the promotion.
  ASSERT_TRUE(ha_ctl("stop postgres-primary"));
  auto [lost, x] = s.acquire(name, "b");
  EXPECT_TRUE(lost) << "an acquire succeeded with no writable member";
  ASSERT_TRUE(ha_ctl("postgres-ha-promote"));
  const auto promoted = std::chrono::steady_clock::now();
  baton::lease_grant won;
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        auto [e, r] = s.acquire(name, "b");
        if (e || r.owner.owner_id != "b") return false;
        won = r;
        return true;
      },
      15s))
      << "no acquire succeeded on the promoted standby";
  std::cout << "[ measured ] acquired on the new primary "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - promoted)
                   .count()
            << " ms after the promotion\n";
  EXPECT_EQ(won.owner.fence, fence + 1);
  EXPECT_EQ(server_port(require_env("BATON_TEST_POSTGRES_HA")), std::stoi(standby_port()));
}

TEST_F(postgres_ha, baton_run_nodes_resume_on_the_promoted_standby_and_no_owner_outruns_its_lease) {
  // Two nodes; lease ttl 2 s + transition 1 s; a 0.3 s job every 0.5 s that logs its runs.
  constexpr long long lease_ns = 3'000'000'000LL;
  const fs::path dir = baton::test::temp_dir("postgres-ha");
  const auto recorder = baton::test::write_run_recorder(dir);
  const auto log = dir / "jobs.log";
  const auto schedule = baton::test::unique_name("ha");
  std::map<std::string, std::unique_ptr<baton::test::process>> nodes;
  for (const std::string node : {"n1", "n2"}) {
    const auto file = dir / (node + ".json");
    baton::test::write_file(
        file, "{\"backend\": " +
                  baton::test::backend_json(config(require_env("BATON_TEST_POSTGRES_HA"))) +
                  ",\n \"lease\": {\"ttl\": \"2s\", \"transition\": \"1s\", "
                  "\"retry_period\": \"200ms\", \"poll_interval\": \"100ms\"},\n"
                  " \"log_level\": \"debug\",\n \"schedules\": [{\"name\": " +
                  json_string(schedule) + ", \"every\": \"500ms\", \"command\": " +
                  baton::test::run_recorder_command(recorder, log, node, "0.3") + "}]}\n");
    nodes[node] = std::make_unique<baton::test::process>(
        std::vector<std::string>{baton::test::daemon_path(), "run", "--config", file.string()},
        dir / (node + ".out"), dir / (node + ".log"));
  }
  auto diagnostics = [&] {
    std::string out = "job log:\n" + baton::test::read_file(log);
    for (const auto& [name, p] : nodes) {
      auto text = baton::test::read_file(dir / (name + ".log"));
      if (text.size() > 5000) text = "..." + text.substr(text.size() - 5000);
      out += "\n--- " + name + " ---\n" + text;
    }
    return out;
  };
  auto finished = [&](long long after) {
    std::size_t n = 0;
    for (const auto& r : baton::test::read_runs(log)) n += r.end_ns > after ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(baton::test::wait_until([&] { return finished(0) >= 3; }, 30s)) << diagnostics();

  const auto stopped = wall_ns();
  ASSERT_TRUE(ha_ctl("stop postgres-primary"));
  // No writable member for longer than a lease: the owner must step down on its own.
  std::this_thread::sleep_for(std::chrono::nanoseconds(lease_ns) + 1s);
  // The fences taken so far, read before the promotion: a node may take the lease on the
  // promoted standby before ha_ctl returns (on a loaded machine it did, and a fence read after
  // the promotion hid that run).
  std::uint64_t old_fence = 0;
  for (const auto& r : baton::test::read_runs(log)) old_fence = std::max(old_fence, r.fence);
  const auto promote_at = wall_ns();
  ASSERT_TRUE(ha_ctl("postgres-ha-promote"));
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        for (const auto& r : baton::test::read_runs(log))
          if (r.fence > old_fence && r.end_ns > 0) return true;
        return false;
      },
      20s))
      << "no run on the promoted standby\n"
      << diagnostics();
  for (auto& [name, p] : nodes) p->signal(SIGTERM);
  for (auto& [name, p] : nodes) EXPECT_EQ(p->wait_exit(30s), 0) << name << "\n" << diagnostics();

  const auto runs = baton::test::read_runs(log);
  long long resumed = 0;
  for (const auto& r : runs) {
    if (r.fence <= old_fence) {
      // Every run of the old ownership ended before its lease could have (its last renewal was
      // sent before the primary stopped); slack for the job's own exit and log line.
      EXPECT_GE(r.end_ns, 0) << "a run of fence " << r.fence << " never ended\n" << diagnostics();
      EXPECT_LT(r.end_ns, stopped + lease_ns + 500'000'000LL)
          << r.node << " ran fence " << r.fence << " past its lease\n"
          << diagnostics();
    } else {
      EXPECT_GT(r.start_ns, promote_at) << "a run without a writable primary\n" << diagnostics();
      if (resumed == 0) resumed = r.start_ns;
    }
  }
  std::cout << "[ measured ] first run on the new primary "
            << static_cast<double>(resumed - promote_at) / 1e6
            << " ms after pg_ctl promote was started\n";
  const auto check = baton::test::check_runs(runs, wall_ns());
  EXPECT_EQ(check.overlaps, 0u) << check.details << diagnostics();
  EXPECT_EQ(check.fence_regressions, 0u) << check.details << diagnostics();
}

}  // namespace
