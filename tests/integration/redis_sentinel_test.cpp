// The Redis backend in sentinel mode against the Sentinel topology the test script starts (one
// master, one replica, three sentinels: BATON_TEST_REDIS_SENTINELS, _MASTER, _DIR), with real
// `baton run` daemons: a manual failover (SENTINEL FAILOVER) and a crashed master (kill -9). Each
// job run appends "S|E fence wall_ns node" to a shared file; the checks are on that history: any
// overlap only with a higher fence, fences never decrease, the old owner never runs past its
// local deadline while no master is reachable, and the fence counter is re-seeded from the new
// master's clock. The tests share the topology: each leaves it healthy (a master with one
// replica online, all sentinels up), whichever server is master.
#if __has_include(<baton/backends/redis/redis_backend.hpp>)
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "support/daemon.hpp"
#include "support/env.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using baton::test::json_string;
using baton::test::process;

namespace {

using steady = std::chrono::steady_clock;

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// host:port -> {host, port}
std::pair<std::string, int> split(const std::string& address) {
  const auto colon = address.rfind(':');
  return {address.substr(0, colon), std::stoi(address.substr(colon + 1))};
}

// One synchronous command on a fresh connection: the reply as text (arrays joined by spaces),
// nullopt when the server cannot be reached or answers with an error.
std::optional<std::string> command(const std::string& address, std::vector<std::string> args) {
  const auto [host, port] = split(address);
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    return std::nullopt;
  }
  redisSetTimeout(c, tv);
  std::vector<const char*> argv;
  std::vector<size_t> len;
  for (auto& a : args) argv.push_back(a.data()), len.push_back(a.size());
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), len.data()));
  std::optional<std::string> out;
  if (r != nullptr && r->type != REDIS_REPLY_ERROR) {
    std::function<std::string(const redisReply*)> text = [&](const redisReply* x) {
      switch (x->type) {
        case REDIS_REPLY_INTEGER:
          return std::to_string(x->integer);
        case REDIS_REPLY_NIL:
          return std::string("(nil)");
        case REDIS_REPLY_ARRAY: {
          std::string s;
          for (size_t i = 0; i < x->elements; ++i) s += (i ? " " : "") + text(x->element[i]);
          return s;
        }
        default:
          return std::string(x->str, x->len);
      }
    };
    out = text(r);
  }
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

std::vector<std::string> sentinel_addresses() {
  std::vector<std::string> out;
  std::stringstream list(baton::test::require_env("BATON_TEST_REDIS_SENTINELS"));
  for (std::string a; std::getline(list, a, ',');) out.push_back(a);
  return out;
}

std::string master_name() { return baton::test::require_env("BATON_TEST_REDIS_SENTINEL_MASTER"); }

// host:port of the master the first answering sentinel names.
std::optional<std::string> named_master() {
  for (const auto& s : sentinel_addresses()) {
    auto a = command(s, {"SENTINEL", "get-master-addr-by-name", master_name()});
    if (a && a->find(' ') != std::string::npos) return a->replace(a->find(' '), 1, ":");
  }
  return std::nullopt;
}

// The member name (original role) of the server at `address`.
std::string member_of(const std::string& address) {
  const fs::path dir = baton::test::require_env("BATON_TEST_REDIS_SENTINEL_DIR");
  for (const char* member : {"redis-primary", "redis-replica"}) {
    std::ifstream conf(dir / member / "redis.conf");
    for (std::string line; std::getline(conf, line);)
      if (line.rfind("port ", 0) == 0 && "127.0.0.1:" + line.substr(5) == address) return member;
  }
  return "";
}

// Polls scripts/server-ctl.sh status redis-sentinel (a shell and a few redis-cli per check).
bool wait_healthy(std::chrono::seconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (steady::now() < deadline) {
    if (baton::test::server_ctl("status", "redis-sentinel")) return true;
    std::this_thread::sleep_for(200ms);
  }
  return false;
}

// A `baton run` node on the sentinel backend: one schedule every 300 ms whose 200 ms run logs
// "S fence ns node" and "E fence ns node" (also when stopped: a TERM trap) to `history`.
class node {
 public:
  node(const std::string& name, const std::string& key_prefix, const fs::path& history)
      : dir_(baton::test::temp_dir("sentinel-" + name)) {
    const std::string line =
        "\"$BATON_FENCING_TOKEN $(date +%s%N) " + name + "\" >> " + history.string();
    const std::string script = "trap 'echo E " + line + "; exit 143' TERM; echo S " + line +
                               "; sleep 0.2 & wait; echo E " + line;
    baton::test::write_file(
        dir_ / "baton.json",
        "{\"backend\": {\"type\": \"redis\", \"sentinels\": " +
            json_string(baton::test::require_env("BATON_TEST_REDIS_SENTINELS")) + ", \"master\": " +
            json_string(master_name()) + ", \"key_prefix\": " + json_string(key_prefix) +
            ", \"connect_timeout\": \"1s\", \"command_timeout\": \"1s\"},\n"
            " \"lease\": {\"ttl\": \"1s\", \"transition\": \"1s\", \"retry_period\": \"200ms\", "
            "\"stop_grace\": \"500ms\"},\n \"kill_grace\": \"300ms\",\n"
            " \"schedules\": [{\"name\": \"tick\", \"every\": \"300ms\", \"command\": "
            "[\"/bin/sh\", \"-c\", " +
            json_string(script) + "]}]}\n");
    daemon_ = std::make_unique<process>(
        std::vector<std::string>{baton::test::daemon_path(), "run", "--config",
                                 (dir_ / "baton.json").string()},
        dir_ / "out", dir_ / "err");
  }
  ~node() {
    if (daemon_ && daemon_->running()) {
      daemon_->signal(SIGTERM);
      daemon_->wait_exit(10s);
    }
  }
  pid_t pid() const { return daemon_->pid(); }
  std::string log() const { return baton::test::read_file(dir_ / "err"); }
  /// True when its command connection is open on the server at `address` (CLIENT SETNAME).
  bool connected_to(const std::string& address) const {
    auto list = command(address, {"CLIENT", "LIST"});
    return list &&
           list->find("name=baton-command-" + std::to_string(pid()) + " ") != std::string::npos;
  }

 private:
  fs::path dir_;
  std::unique_ptr<process> daemon_;
};

struct run {
  std::uint64_t fence = 0;
  long long start = 0, end = 0;  // wall ns; end 0: no E line (yet)
  std::string node;
};

// The runs in `history`, by start time; an E line closes the open run of its node and fence.
std::vector<run> read_runs(const fs::path& history) {
  std::vector<run> runs;
  std::ifstream in(history);
  for (std::string kind, node; in >> kind;) {
    run r;
    long long at = 0;
    in >> r.fence >> at >> node;
    if (kind == "S") {
      r.start = at;
      r.node = node;
      runs.push_back(r);
    } else {
      for (auto it = runs.rbegin(); it != runs.rend(); ++it)
        if (it->node == node && it->fence == r.fence && it->end == 0) {
          it->end = at;
          break;
        }
    }
  }
  std::sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.start < b.start; });
  return runs;
}

// What the issue asks of the history: fences never decrease in start order, and two runs overlap
// only when the later has the higher fence (a fenced overlap). Returns the fenced overlaps.
int expect_fenced_history(const std::vector<run>& runs) {
  int fenced = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto end_i = runs[i].end != 0 ? runs[i].end : std::numeric_limits<long long>::max();
    for (std::size_t j = i + 1; j < runs.size() && runs[j].start < end_i; ++j) {
      EXPECT_GT(runs[j].fence, runs[i].fence)
          << "run of " << runs[j].node << " (fence " << runs[j].fence
          << ") started during the run of " << runs[i].node << " (fence " << runs[i].fence
          << ") without a higher fence";
      ++fenced;
    }
    if (i > 0)
      EXPECT_GE(runs[i].fence, runs[i - 1].fence)
          << "fence went down: " << runs[i - 1].fence << " then " << runs[i].fence;
  }
  return fenced;
}

double ms(long long ns) { return static_cast<double>(ns) / 1e6; }

class redis_sentinel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(wait_healthy(60s)) << "the Sentinel topology is not healthy at the start";
    prefix_ = baton::test::unique_name("sentinel") + ":";
    history_ = fs::path(baton::test::temp_dir("sentinel-history")) / "runs.log";
  }
  void TearDown() override {
    nodes_.clear();
    EXPECT_TRUE(wait_healthy(60s)) << "the test left the Sentinel topology unhealthy";
  }

  void start_nodes() {
    for (const char* name : {"a", "b"})
      nodes_.push_back(std::make_unique<node>(name, prefix_, history_));
    ASSERT_TRUE(baton::test::wait_until([&] { return read_runs(history_).size() >= 3; }, 20s))
        << "no runs on the sentinel backend:\n"
        << nodes_[0]->log();
  }

  // Ms from `fault` until each node's command connection is on `master`.
  std::vector<double> wait_used(const std::string& master, long long fault) {
    std::vector<double> out(nodes_.size(), -1);
    baton::test::wait_until(
        [&] {
          bool all = true;
          for (std::size_t i = 0; i < nodes_.size(); ++i) {
            if (out[i] < 0 && nodes_[i]->connected_to(master)) out[i] = ms(wall_ns() - fault);
            all = all && out[i] >= 0;
          }
          return all;
        },
        30s);
    return out;
  }

  // The fence counter of the schedule's mutex on `master`.
  std::uint64_t fence_counter(const std::string& master) {
    auto v = command(master, {"GET", prefix_ + "{tick}:fence"});
    return v && *v != "(nil)" ? std::stoull(*v) : 0;
  }

  // The master the sentinels name once it is not `before` and answers ROLE as a master; empty
  // when that does not happen within 30 s.
  std::string wait_promoted(const std::string& before) {
    std::string after;
    const bool promoted = baton::test::wait_until(
        [&] {
          auto m = named_master();
          if (!m || *m == before) return false;
          after = *m;
          return command(after, {"ROLE"}).value_or("").rfind("master", 0) == 0;
        },
        30s);
    return promoted ? after : std::string{};
  }

  std::string prefix_;
  fs::path history_;
  std::vector<std::unique_ptr<node>> nodes_;
};

TEST_F(redis_sentinel, a_manual_failover_is_followed_and_fences_never_go_down) {
  start_nodes();
  const auto before = *named_master();
  const auto runs_before = read_runs(history_);
  const auto fence_before = runs_before.back().fence;

  const long long fault = wall_ns();
  ASSERT_TRUE(command(sentinel_addresses().front(), {"SENTINEL", "FAILOVER", master_name()}));
  const std::string after = wait_promoted(before);
  ASSERT_FALSE(after.empty()) << "the sentinels did not promote the replica";
  const double promoted_ms = ms(wall_ns() - fault);
  const auto used_ms = wait_used(after, fault);
  for (auto u : used_ms) EXPECT_GE(u, 0) << "a node did not move to the new master " << after;

  // Ownership continues (the owner record was replicated) or moves; runs go on either way.
  long long first_after = 0;
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        for (const auto& r : read_runs(history_))
          if (r.start > fault + 1'000'000 * static_cast<long long>(promoted_ms)) {
            first_after = r.start;
            return true;
          }
        return false;
      },
      20s))
      << "no run after the failover";
  std::this_thread::sleep_for(1s);  // a few more runs on the new master, then stop
  nodes_.clear();
  const auto runs = read_runs(history_);
  const int fenced = expect_fenced_history(runs);
  // Re-seeded from the new master's TIME (us) by the first acquire after the reconnect.
  const auto counter = fence_counter(after);
  EXPECT_GE(counter, static_cast<std::uint64_t>(fault / 1000)) << "fence counter not re-seeded";
  std::cout << "[ MEASURE  ] SENTINEL FAILOVER: promoted after " << promoted_ms
            << " ms; nodes on the new master after " << used_ms[0] << " / " << used_ms[1]
            << " ms; first run after the switch " << ms(first_after - fault)
            << " ms after the fault; fences before " << fence_before << ", after "
            << runs.back().fence << " (counter " << counter << "); runs " << runs.size()
            << ", fenced overlaps " << fenced << "\n";
}

TEST_F(redis_sentinel, a_killed_master_is_replaced_and_the_old_owner_stops_at_its_deadline) {
  start_nodes();
  const auto before = *named_master();
  const auto member = member_of(before);
  ASSERT_FALSE(member.empty()) << before << " is neither redis-primary nor redis-replica";
  // Wait for a run in progress to know the owner at the fault.
  const auto owner_run = read_runs(history_).back();

  const long long fault = wall_ns();
  ASSERT_TRUE(baton::test::server_ctl("kill", member));
  const std::string after = wait_promoted(before);
  ASSERT_FALSE(after.empty()) << "the sentinels did not promote the replica";
  const double promoted_ms = ms(wall_ns() - fault);
  const auto used_ms = wait_used(after, fault);
  for (auto u : used_ms) EXPECT_GE(u, 0) << "a node did not move to the new master " << after;

  long long takeover = 0;
  std::uint64_t fence_after = 0;
  const bool resumed = baton::test::wait_until(
      [&] {
        for (const auto& r : read_runs(history_))
          if (r.start > fault && r.fence > owner_run.fence) {
            takeover = r.start, fence_after = r.fence;
            return true;
          }
        return false;
      },
      20s);
  // Bring the old master back: the sentinels make it a replica of the new one.
  ASSERT_TRUE(baton::test::server_ctl("start", member));
  ASSERT_TRUE(resumed) << "no run with a new fence after the failover";
  std::this_thread::sleep_for(500ms);
  nodes_.clear();

  const auto runs = read_runs(history_);
  const int fenced = expect_fenced_history(runs);
  // The owner at the fault: while it could reach no master (until it used the new one), it
  // fired nothing after its local deadline (at most ttl + transition after its last renewal,
  // which was before the fault) and its runs ended by then (stop_grace, kill_grace).
  const long long lease_ns = 2'000'000'000LL;
  const std::size_t owner_index = owner_run.node == "a" ? 0 : 1;
  const long long reconnected = fault + static_cast<long long>(used_ms[owner_index] * 1e6);
  for (const auto& r : runs) {
    if (r.node != owner_run.node || r.fence != owner_run.fence || r.start <= fault) continue;
    if (r.start < reconnected)
      EXPECT_LE(r.start, fault + lease_ns)
          << "the old owner fired " << ms(r.start - fault) << " ms after the fault";
  }
  for (const auto& r : runs) {
    if (r.node != owner_run.node || r.fence != owner_run.fence || r.start > fault + lease_ns)
      continue;
    if (reconnected > fault + lease_ns) {
      EXPECT_NE(r.end, 0) << "a run of the old owner has no end";
      EXPECT_LE(r.end, fault + lease_ns + 500'000'000LL)
          << "the old owner ran " << ms(r.end - fault) << " ms after the fault";
    }
  }
  const auto counter = fence_counter(after);
  EXPECT_GE(counter, static_cast<std::uint64_t>(fault / 1000)) << "fence counter not re-seeded";
  std::cout << "[ MEASURE  ] kill -9 of the master: promoted after " << promoted_ms
            << " ms; nodes on the new master after " << used_ms[0] << " / " << used_ms[1]
            << " ms; takeover (first run with a new fence) " << ms(takeover - fault)
            << " ms after the fault; owner " << owner_run.node << " fence " << owner_run.fence
            << " -> " << fence_after << "; runs " << runs.size() << ", fenced overlaps " << fenced
            << "\n";
}

// Config errors of sentinel mode exit 2 from validate and run, naming the JSON path; validate
// prints the sentinels and the master, never a password.
TEST(redis_sentinel_config, validate_prints_sentinels_and_master_and_refuses_bad_lists) {
  const fs::path dir = baton::test::temp_dir("sentinel-validate");
  const std::string schedules =
      ", \"schedules\": [{\"name\": \"x\", \"every\": \"1m\", \"command\": [\"true\"]}]}";
  baton::test::write_file(dir / "good.json",
                          "{\"backend\": {\"type\": \"redis\", \"sentinels\": "
                          "\"127.0.0.1:26379,127.0.0.1:26380\", \"master\": \"mymaster\", "
                          "\"password\": \"Zq-master-secret\", \"sentinel_password\": "
                          "\"Zq-sentinel-secret\"}" +
                              schedules);
  auto good =
      baton::test::run_baton_command({"validate", "--config", (dir / "good.json").string()});
  EXPECT_EQ(good.status, 0) << good.err;
  EXPECT_NE(good.out.find("sentinels=127.0.0.1:26379,127.0.0.1:26380"), std::string::npos)
      << good.out;
  EXPECT_NE(good.out.find("master=mymaster"), std::string::npos) << good.out;
  EXPECT_EQ((good.out + good.err).find("Zq-"), std::string::npos) << good.out << good.err;

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("sentinels": "127.0.0.1:26379,:1", "master": "m")", "/backend/sentinels"},
      {R"("sentinels": "127.0.0.1:26379", "master": "")", "/backend/master"},
      {R"("sentinels": "127.0.0.1:26379", "url": "redis://h", "master": "m")",
       "/backend/sentinels"},
  };
  for (const auto& [params, path] : bad) {
    baton::test::write_file(dir / "bad.json",
                            "{\"backend\": {\"type\": \"redis\", " + params + "}" + schedules);
    for (const char* cmd : {"validate", "run"}) {
      auto r = baton::test::run_baton_command({cmd, "--config", (dir / "bad.json").string()});
      EXPECT_EQ(r.status, 2) << cmd << " " << params << ": " << r.err;
      EXPECT_NE(r.err.find(path), std::string::npos) << cmd << " " << params << ": " << r.err;
    }
  }
}

// Unreachable sentinels and an unknown master name are runtime trouble, named in the log.
TEST(redis_sentinel_config, unreachable_sentinels_and_an_unknown_master_are_named_in_the_log) {
  const fs::path dir = baton::test::temp_dir("sentinel-unknown");
  const auto dead = "127.0.0.1:" + std::to_string(baton::test::unused_loopback_port());
  const auto live = sentinel_addresses().front();
  baton::test::write_file(
      dir / "baton.json",
      "{\"backend\": {\"type\": \"redis\", \"sentinels\": " + json_string(dead + "," + live) +
          ", \"master\": \"no-such-master\"}, \"schedules\": [{\"name\": \"x\", \"every\": "
          "\"1m\", \"command\": [\"true\"]}]}");
  process daemon({baton::test::daemon_path(), "run", "--config", (dir / "baton.json").string()},
                 dir / "out", dir / "err");
  EXPECT_TRUE(baton::test::wait_until(
      [&] {
        const auto err = baton::test::read_file(dir / "err");
        return err.find("no sentinel named master 'no-such-master'") != std::string::npos &&
               err.find(dead + ": ") != std::string::npos &&
               err.find(live + ": does not know master 'no-such-master'") != std::string::npos;
      },
      15s))
      << baton::test::read_file(dir / "err");
  daemon.signal(SIGTERM);
  EXPECT_TRUE(daemon.wait_exit(15s));
}

}  // namespace

#endif  // the Redis backend is built
