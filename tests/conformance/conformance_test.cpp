// The mutex contract, run on every backend this build has (baton::available_backends()),
// against the real servers the test script started. In-process tests run on "memory" too;
// multi-process and fault tests run on the real backends only.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/locker.hpp"
#include "baton/mutex/names.hpp"
#include "support/env.hpp"
#include "support/faults.hpp"
#include "support/lease.hpp"
#include "support/process.hpp"
#include "support/sections.hpp"

using namespace std::chrono_literals;

namespace {

// Upper bound for a crashed owner to be replaced: the lease (or the ZooKeeper session) plus the
// waiter's jitter and one poll, plus a margin for a loaded machine.
std::chrono::milliseconds crash_bound(const std::string& type) {
  auto o = baton::test::lease_options();
  std::chrono::milliseconds lease = type == "zookeeper" ? 2000ms : o.lease();
  return lease + 1000ms + o.poll_interval + 1500ms;
}

std::vector<std::string> all_backends() { return baton::available_backends(); }

std::vector<std::string> distributed_backends() {
  auto all = baton::available_backends();
  all.erase(std::remove(all.begin(), all.end(), "memory"), all.end());
  return all;
}

using baton::test::unique_name;

struct recorder final : baton::mutex_contender {
  std::mutex mutex;
  std::vector<std::uint64_t> acquired_fences;
  std::vector<baton::mutex_owner> observed;
  int released = 0;
  void on_acquired(const baton::mutex_state& s) override {
    std::lock_guard lock(mutex);
    acquired_fences.push_back(s.after.fence);
  }
  void on_released(const baton::mutex_state&) override {
    std::lock_guard lock(mutex);
    ++released;
  }
  void on_observed(const baton::mutex_owner& o) override {
    std::lock_guard lock(mutex);
    observed.push_back(o);
  }
};

class conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_ = baton::test::backend_config_for(GetParam());
    backend_ = baton::make_backend(config_, rt_);
  }
  std::shared_ptr<baton::contend_service> service(
      const std::string& name, std::shared_ptr<baton::mutex_contender> c,
      baton::contend_options o = baton::test::lease_options()) {
    return backend_->make_contend_service(name, std::move(c), o);
  }

  baton::runtime rt_;
  baton::backend_config config_;
  std::shared_ptr<baton::mutex_backend> backend_;
};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace

TEST_P(conformance, one_contender_acquires) {
  auto who = std::make_shared<recorder>();
  auto s = service(unique_name("one"), who);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));
  EXPECT_GT(s->fence(), 0u);
  EXPECT_EQ(s->last_observed().owner_id, s->contender_id());
  EXPECT_GT(s->lease_deadline(), std::chrono::steady_clock::now());
  auto owner = backend_->read_owner(s->mutex_name());
  EXPECT_EQ(owner.owner_id, s->contender_id());
  EXPECT_EQ(owner.fence, s->fence());
  EXPECT_TRUE(s->stop_and_wait(10s));
  EXPECT_FALSE(s->is_owner());
  std::lock_guard lock(who->mutex);
  EXPECT_EQ(who->acquired_fences.size(), 1u);
  EXPECT_EQ(who->released, 1);
}

TEST_P(conformance, ten_contenders_in_one_process_always_agree_on_one_owner) {
  const auto name = unique_name("ten");
  std::vector<std::shared_ptr<recorder>> who;
  std::vector<std::shared_ptr<baton::contend_service>> services;
  for (int i = 0; i < 10; ++i) {
    who.push_back(std::make_shared<recorder>());
    services.push_back(service(name, who.back()));
    services.back()->start();
  }
  auto owners_now = [&] {
    int n = 0;
    for (auto& s : services) n += s->is_owner() ? 1 : 0;
    return n;
  };
  // 10 s with a handover every 500 ms: about 18 handovers and thousands of sweeps.
  const auto end = std::chrono::steady_clock::now() + 10s;
  auto next_handover = std::chrono::steady_clock::now() + 500ms;
  int violations = 0, sweeps_with_owner = 0, handovers = 0;
  while (std::chrono::steady_clock::now() < end) {
    // A real split brain lasts for a lease; two sweeps in a row rule out a sweep that straddled
    // a clean handover.
    if (owners_now() > 1 && owners_now() > 1) ++violations;
    if (owners_now() == 1) ++sweeps_with_owner;
    if (std::chrono::steady_clock::now() >= next_handover) {
      // Make the owner step aside now and then, so ownership moves around.
      for (auto& s : services)
        if (s->is_owner()) {
          s->stop_and_wait(10s);
          s->start();
          ++handovers;
          break;
        }
      next_handover = std::chrono::steady_clock::now() + 500ms;
    }
    std::this_thread::sleep_for(1ms);
  }
  for (auto& s : services) s->stop_and_wait(10s);
  EXPECT_EQ(violations, 0);
  EXPECT_GT(sweeps_with_owner, 1000);
  EXPECT_GE(handovers, 10);
  // A fencing token belongs to one contender only. (The same contender may re-acquire the same
  // ownership with the same fence after a precautionary local step-down, when the backend never
  // let the ownership lapse.)
  std::map<std::uint64_t, std::size_t> fence_owner;
  std::vector<std::uint64_t> fences;
  for (std::size_t i = 0; i < who.size(); ++i)
    for (auto f : who[i]->acquired_fences) {
      auto [it, fresh] = fence_owner.emplace(f, i);
      EXPECT_EQ(it->second, i) << "fence " << f << " was given to two contenders";
      fences.push_back(f);
    }
  EXPECT_GE(fences.size(), 10u);
}

namespace {
// Releases the mutex's owner `delay` after this contender first sees it named, as another
// process reacting to that would: the release lands while the waiter's follow-up request (the
// one a new wake-up subscription triggers, say) is out.
struct release_on_sight final : baton::mutex_contender {
  std::atomic<int> acquired{0};
  std::mutex mutex;
  std::string self;
  std::shared_ptr<baton::contend_service> owner;  // stopped at first sight, then cleared
  std::chrono::microseconds delay{};
  std::thread releaser;  // joined by the test after each round
  std::atomic<bool> owner_stopped{false};
  ~release_on_sight() override {
    // A round that failed its assertions left its releaser running.
    if (releaser.joinable()) releaser.join();
  }
  void on_acquired(const baton::mutex_state&) override { ++acquired; }
  void on_released(const baton::mutex_state&) override {}
  void on_observed(const baton::mutex_owner& o) override {
    std::lock_guard lock(mutex);
    if (o.owner_id.empty() || o.owner_id == self || !owner) return;
    releaser = std::thread([this, stop = std::move(owner), d = delay] {
      std::this_thread::sleep_for(d);
      stop->stop([this] { owner_stopped = true; });
    });
    owner = nullptr;
  }
};
}  // namespace

// A release that comes while the waiter has a request out (its reply still names the old owner)
// reaches the waiter at once, not at the lease's lapse: the wake-up is not lost to that reply.
// The lease here is 20 s + 20 s, so a lost wake-up costs 40 s against a bound of 5 s. The release
// follows the waiter's first sight after 0, 25, ..., 1,975 us. The window is narrower than one
// round trip and this in-process sweep rarely hits it (the state machine's own test,
// lease_machine.a_wakeup_during_a_request_asks_again_when_the_reply_names_another_owner, pins
// the rule); the handover benchmark with BATON_BENCH_HANDOVER_NO_PAUSE=1, releasing from another
// process, lost a wake-up on Redis in 2 of 6 runs of 22 handovers before the fix.
TEST_P(conformance, a_release_at_the_waiters_first_sight_is_taken_over_at_once) {
  const auto name = unique_name("sight");
  const auto options = baton::test::lease_options(20s);
  std::array<std::shared_ptr<release_on_sight>, 2> who{std::make_shared<release_on_sight>(),
                                                       std::make_shared<release_on_sight>()};
  std::array<std::shared_ptr<baton::contend_service>, 2> services;
  for (int i = 0; i < 2; ++i) {
    services[i] = service(name, who[i], options);
    who[i]->self = services[i]->contender_id();
  }
  ASSERT_TRUE(services[0]->start());
  ASSERT_TRUE(baton::test::wait_until([&] { return services[0]->is_owner(); }, 10s));
  int owner = 0;
  std::chrono::steady_clock::duration worst{};
  // SQLite and MySQL waiters poll (no wake-ups to lose): a few rounds show they keep up.
  const int rounds = GetParam() == "sqlite" || GetParam() == "mysql" ? 10 : 80;
  for (int round = 0; round < rounds; ++round) {
    const int waiter = 1 - owner;
    auto& w = *who[waiter];
    const int before = w.acquired;
    {
      std::lock_guard lock(w.mutex);
      w.owner = services[owner];
      w.owner_stopped = false;
      w.delay = std::chrono::microseconds{25 * round};
    }
    const auto started = std::chrono::steady_clock::now();
    ASSERT_TRUE(services[waiter]->start()) << "round " << round;
    ASSERT_TRUE(baton::test::wait_until([&] { return w.acquired > before; }, 60s))
        << "round " << round << ": the waiter never took the released mutex";
    worst = std::max(worst, std::chrono::steady_clock::now() - started);
    ASSERT_TRUE(baton::test::wait_until([&] { return w.owner_stopped.load(); }, 10s))
        << "round " << round << ": the old owner's stop never completed";
    {
      std::lock_guard lock(w.mutex);
      if (w.releaser.joinable()) w.releaser.join();
    }
    owner = waiter;
  }
  services[owner]->stop_and_wait(10s);
  const auto worst_ms = std::chrono::duration_cast<std::chrono::milliseconds>(worst);
  std::cout << "[ measured ] " << GetParam() << " slowest of " << rounds
            << " handovers at first sight: " << worst_ms.count() << " ms\n";
  EXPECT_LT(worst_ms, 5s) << "a wake-up was lost: the waiter waited for the lease to lapse";
}

TEST_P(conformance, fence_changes_on_every_change_of_owner_and_never_on_renewal) {
  const auto name = unique_name("fence");
  auto o = baton::test::lease_options();
  o.ttl = 200ms;
  o.transition = 300ms;
  auto a_who = std::make_shared<recorder>();
  auto b_who = std::make_shared<recorder>();
  auto a = service(name, a_who, o);
  auto b = service(name, b_who, o);
  a->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 10s));
  const auto first = a->fence();
  // Several renewals (ttl_at moves) keep the fence.
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        std::lock_guard lock(a_who->mutex);
        std::set<long long> ttls;
        for (auto& obs : a_who->observed)
          if (obs.owner_id == a->contender_id()) ttls.insert(obs.ttl_at.time_since_epoch().count());
        return ttls.size() >= 4;
      },
      10s));
  {
    std::lock_guard lock(a_who->mutex);
    for (auto& obs : a_who->observed) {
      if (obs.owner_id == a->contender_id()) {
        EXPECT_EQ(obs.fence, first);
      }
    }
    EXPECT_EQ(a_who->acquired_fences.size(), 1u);
  }
  EXPECT_EQ(a->fence(), first);
  b->start();
  a->stop_and_wait(10s);
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  const auto second = b->fence();
  EXPECT_GT(second, first);
  b->stop_and_wait(10s);
  a->start();  // the same contender again: a new ownership, a new fence
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 10s));
  EXPECT_GT(a->fence(), second);
  a->stop_and_wait(10s);
}

TEST_P(conformance, lease_guarded_state_is_written_by_owner_and_read_by_next_owner) {
  const auto name = unique_name("state");
  auto a = service(name, std::make_shared<recorder>());
  auto b = service(name, std::make_shared<recorder>());
  auto write = [](baton::contend_service& s, std::string bytes) {
    std::promise<std::error_code> p;
    s.async_write_state(std::move(bytes), [&p](std::error_code ec) { p.set_value(ec); });
    return p.get_future().get();
  };
  auto read = [](baton::contend_service& s) {
    std::promise<std::string> p;
    s.async_read_state([&p](std::error_code ec, std::string v) {
      p.set_value(ec ? "error: " + ec.message() : v);
    });
    return p.get_future().get();
  };
  a->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 10s));
  const std::string bytes("v1 \0\x01\xff last", 12);
  EXPECT_FALSE(write(*a, bytes));
  EXPECT_EQ(read(*a), bytes);
  b->start();
  a->stop_and_wait(10s);
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  EXPECT_EQ(read(*b), bytes);
  EXPECT_EQ(backend_->read_state(name), bytes);
  // The old owner can no longer write.
  EXPECT_EQ(write(*a, "stale"), baton::errc::not_owner);
  EXPECT_FALSE(write(*b, "v2"));
  EXPECT_EQ(read(*b), "v2");
  b->stop_and_wait(10s);
}

TEST_P(conformance, write_state_with_a_stale_fence_is_rejected_by_the_backend) {
  auto* leased = dynamic_cast<baton::lease_store_backend*>(backend_.get());
  if (leased == nullptr) {
    // Event-driven backends (ZooKeeper) check the owner's node instead of a fence column; their
    // own integration tests cover the stale writer. Here: the local check must hold.
    SUCCEED();
    return;
  }
  const auto name = unique_name("stale");
  auto a = service(name, std::make_shared<recorder>());
  auto b = service(name, std::make_shared<recorder>());
  a->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 10s));
  const auto old_fence = a->fence();
  b->start();
  a->stop_and_wait(10s);
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  auto store_write = [&](const std::string& id, std::uint64_t fence) {
    std::promise<std::error_code> p;
    leased->store()->async_write_state(name, id, fence, "x",
                                       [&p](std::error_code ec) { p.set_value(ec); });
    return p.get_future().get();
  };
  EXPECT_EQ(store_write(a->contender_id(), old_fence), baton::errc::not_owner);
  EXPECT_EQ(store_write(b->contender_id(), old_fence), baton::errc::not_owner);
  EXPECT_FALSE(store_write(b->contender_id(), b->fence()));
  b->stop_and_wait(10s);
}

TEST_P(conformance, bad_names_get_clear_errors_before_reaching_the_backend) {
  for (std::string bad :
       {std::string(), std::string("has space"), std::string(129, 'x'), std::string("slash/name"),
        std::string("{tag}"), std::string("caf\xc3\xa9"), std::string("."), std::string("..")}) {
    try {
      service(bad, std::make_shared<recorder>());
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("mutex name"), std::string::npos) << e.what();
    }
    EXPECT_THROW(backend_->read_owner(bad), std::invalid_argument);
  }
}

// The name rule and the backends agree: every odd name the rule lets through can be locked,
// read and released on every backend (ZooKeeper keeps names as path components).
TEST_P(conformance, odd_names_the_rule_accepts_can_be_locked_on_every_backend) {
  for (std::string name :
       {std::string("..."), std::string(".hidden"), std::string("trailing."), std::string("-"),
        std::string("_"), std::string("zookeeper"), std::string(128, '.'), std::string(128, 'Z')}) {
    ASSERT_EQ(baton::mutex_name_error(name), "") << name;
    auto s = service(name, std::make_shared<recorder>());
    s->start();
    EXPECT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s)) << name;
    EXPECT_EQ(backend_->read_owner(name).owner_id, s->contender_id()) << name;
    EXPECT_TRUE(s->stop_and_wait(10s)) << name;
    EXPECT_EQ(backend_->read_owner(name).owner_id, "") << name;
  }
}

INSTANTIATE_TEST_SUITE_P(backend, conformance, ::testing::ValuesIn(all_backends()), param_name);

// ---------------------------------------------------------------------------------------------
// Separate processes.

namespace {

using baton::test::read_sections;
using baton::test::section;

class conformance_processes : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { config_ = baton::test::backend_config_for(GetParam()); }

  std::vector<std::string> contender_argv(const std::string& mode, const std::string& mutex) {
    std::vector<std::string> argv{
        baton::test::program_path("contender"), mode, "--type", config_.type, "--mutex", mutex};
    for (auto& [k, v] : config_.params) {
      argv.push_back("--param");
      argv.push_back(k + "=" + v);
    }
    return argv;
  }

  // Starts `n` critical-section processes for `duration`; returns them.
  std::vector<baton::test::child_process> start_sections(int n, const std::string& mutex,
                                                         const std::string& log,
                                                         std::chrono::milliseconds duration) {
    std::vector<baton::test::child_process> procs;
    for (int i = 0; i < n; ++i) {
      auto argv = contender_argv("cs", mutex);
      argv.insert(argv.end(), {"--log", log, "--duration-ms", std::to_string(duration.count())});
      procs.emplace_back(argv);
    }
    return procs;
  }

  long long acquired_ns(const std::string& line) {
    std::istringstream in(line);
    std::string word;
    long long fence = 0, ns = 0;
    in >> word >> fence >> ns;
    return ns;
  }

  baton::backend_config config_;
};

}  // namespace

TEST_P(conformance_processes, three_processes_never_overlap_and_fences_increase) {
  const auto mutex = unique_name("cs");
  const auto log = baton::test::temp_dir("cs") + "/sections.log";
  auto procs = start_sections(3, mutex, log, 8s);
  for (auto& p : procs) ASSERT_EQ(p.wait_exit(60s), 0);
  auto sections = read_sections(log);
  baton::test::expect_sections_serialized(sections);
  EXPECT_GE(sections.size(), 20u);
  std::set<long long> pids;
  for (auto& s : sections) pids.insert(s.pid);
  EXPECT_EQ(pids.size(), 3u) << "every process should get the mutex";
}

TEST_P(conformance_processes, graceful_release_is_taken_over_within_poll_interval) {
  const auto mutex = unique_name("graceful");
  std::vector<long long> gaps;
  baton::test::child_process first(contender_argv("hold", mutex));
  ASSERT_TRUE(first.wait_line("ACQUIRED", 20s));
  baton::test::child_process owner = std::move(first);
  for (int round = 0; round < 3; ++round) {
    baton::test::child_process waiter(contender_argv("hold", mutex));
    ASSERT_TRUE(waiter.wait_line("STARTED", 20s));
    ASSERT_FALSE(waiter.wait_line("ACQUIRED", 300ms)) << "took the mutex from a live owner";
    owner.signal(SIGTERM);
    auto releasing = owner.wait_line("RELEASING", 10s);
    ASSERT_TRUE(releasing);
    auto acquired = waiter.wait_line("ACQUIRED", 20s);
    ASSERT_TRUE(acquired);
    ASSERT_EQ(owner.wait_exit(10s), 0);
    long long released_at = std::stoll(releasing->substr(10));
    gaps.push_back((acquired_ns(*acquired) - released_at) / 1'000'000);
    owner = std::move(waiter);
  }
  owner.signal(SIGTERM);
  owner.wait_exit(10s);
  std::sort(gaps.begin(), gaps.end());
  RecordProperty("graceful_handover_ms_median", std::to_string(gaps[1]));
  std::cout << "[ measured ] " << GetParam() << " graceful handover ms: " << gaps[0] << " "
            << gaps[1] << " " << gaps[2] << "\n";
  const auto bound = baton::test::lease_options().poll_interval + 700ms;
  for (auto g : gaps) EXPECT_LE(g, bound.count());
}

TEST_P(conformance_processes, sigkilled_owner_is_taken_over_within_the_lease_bound) {
  const auto mutex = unique_name("crash");
  baton::test::child_process owner(contender_argv("hold", mutex));
  ASSERT_TRUE(owner.wait_line("ACQUIRED", 20s));
  baton::test::child_process waiter(contender_argv("hold", mutex));
  ASSERT_TRUE(waiter.wait_line("STARTED", 20s));
  ASSERT_FALSE(waiter.wait_line("ACQUIRED", 300ms));
  long long killed_at = baton::test::mono_ns();
  owner.signal(SIGKILL);
  auto acquired = waiter.wait_line("ACQUIRED", 30s);
  ASSERT_TRUE(acquired);
  long long gap_ms = (acquired_ns(*acquired) - killed_at) / 1'000'000;
  RecordProperty("crash_takeover_ms", std::to_string(gap_ms));
  std::cout << "[ measured ] " << GetParam() << " SIGKILL takeover ms: " << gap_ms << " (bound "
            << crash_bound(GetParam()).count() << ")\n";
  EXPECT_LE(gap_ms, crash_bound(GetParam()).count());
  waiter.signal(SIGTERM);
  EXPECT_EQ(waiter.wait_exit(10s), 0);
}

TEST_P(conformance_processes, killed_connections_and_restarted_server_never_yield_two_owners) {
  const auto mutex = unique_name("faults");
  const auto log = baton::test::temp_dir("faults") + "/sections.log";
  const std::string sqlite_path = config_.type == "sqlite" ? config_.params["path"] : "";
  auto procs = start_sections(3, mutex, log, 14s);
  // Let ownership settle, then break things twice while the sections run.
  ASSERT_TRUE(baton::test::wait_until([&] { return read_sections(log).size() >= 3; }, 20s));
  ASSERT_TRUE(baton::test::kill_connections(GetParam(), sqlite_path));
  std::this_thread::sleep_for(2s);  // spacing between faults, not a synchronization
  ASSERT_TRUE(baton::test::restart_server(GetParam(), sqlite_path));
  long long after_fault = baton::test::mono_ns();
  for (auto& p : procs) ASSERT_EQ(p.wait_exit(90s), 0);
  auto sections = read_sections(log);
  baton::test::expect_sections_serialized(sections);
  auto recovered = std::count_if(sections.begin(), sections.end(),
                                 [&](const section& s) { return s.start > after_fault; });
  EXPECT_GE(recovered, 3) << "ownership did not recover after the faults";
}

INSTANTIATE_TEST_SUITE_P(backend, conformance_processes,
                         ::testing::ValuesIn(distributed_backends()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(conformance_processes);
