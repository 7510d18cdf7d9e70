// The ZooKeeper backend against the real server the test script started (BATON_TEST_ZOOKEEPER):
// node layout, lost create replies, no herd, fences, disconnects, session expiry, a stopped
// owner process, server restarts, ACLs, chroot and bad input. A second, raw C client inspects
// the tree.
#if __has_include("baton/backends/zookeeper/detail.hpp")  // a build with the ZooKeeper backend
#ifndef THREADED
#define THREADED  // the synchronous C API (inspector) is declared only with THREADED
#endif
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/backends/zookeeper/detail.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/locker.hpp"
#include "baton/mutex/records.hpp"
#include "support/env.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;
namespace zkd = baton::backends::zookeeper::detail;
using steady = std::chrono::steady_clock;

namespace {

using baton::test::unique_name;

long long ms_since(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

struct recorder final : baton::mutex_contender {
  mutable std::mutex mutex;
  std::vector<std::uint64_t> acquired;
  std::vector<steady::time_point> acquired_at;
  std::vector<steady::time_point> released_at;
  int observed = 0;
  std::vector<std::error_code> errors;

  void on_acquired(const baton::mutex_state& s) override {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(s.acquired());
    acquired.push_back(s.after.fence);
    acquired_at.push_back(steady::now());
  }
  void on_released(const baton::mutex_state& s) override {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(s.released());
    released_at.push_back(steady::now());
  }
  void on_observed(const baton::mutex_owner&) override {
    std::lock_guard lock(mutex);
    ++observed;
  }
  void on_error(std::error_code ec) override {
    std::lock_guard lock(mutex);
    errors.push_back(ec);
  }
  int observations() const {
    std::lock_guard lock(mutex);
    return observed;
  }
  std::size_t releases() const {
    std::lock_guard lock(mutex);
    return released_at.size();
  }
  std::size_t acquisitions() const {
    std::lock_guard lock(mutex);
    return acquired.size();
  }
  bool saw_error(baton::errc e) const {
    std::lock_guard lock(mutex);
    return std::find(errors.begin(), errors.end(), make_error_code(e)) != errors.end();
  }
};

// A plain C client to look at the tree the backend builds.
class inspector {
 public:
  explicit inspector(const std::string& hosts, const std::string& digest = {}) {
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 10'000, nullptr, nullptr, 0);
    if (zh_ == nullptr) throw std::runtime_error("inspector: zookeeper_init failed");
    if (!baton::test::wait_until([&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }, 10s))
      throw std::runtime_error("inspector: cannot connect to " + hosts);
    if (!digest.empty())
      zoo_add_auth(zh_, "digest", digest.data(), static_cast<int>(digest.size()), nullptr, nullptr);
  }
  ~inspector() { zookeeper_close(zh_); }
  inspector(const inspector&) = delete;

  std::vector<std::string> children(const std::string& path) {
    String_vector v{};
    int rc = retry([&] { return zoo_get_children(zh_, path.c_str(), 0, &v); });
    std::vector<std::string> out;
    if (rc == ZOK) {
      for (int i = 0; i < v.count; ++i) out.emplace_back(v.data[i]);
      deallocate_String_vector(&v);
    }
    return out;
  }
  int get(const std::string& path, std::string* data, Stat* stat) {
    char buffer[4096];
    int len = sizeof buffer;
    int rc = retry([&] {
      len = sizeof buffer;
      return zoo_get(zh_, path.c_str(), 0, buffer, &len, stat);
    });
    if (rc == ZOK && data) data->assign(buffer, len > 0 ? len : 0);
    return rc;
  }

  int remove(const std::string& path) {
    return retry([&] { return zoo_delete(zh_, path.c_str(), -1); });
  }

 private:
  template <class F>
  int retry(F f) {
    int rc = ZCONNECTIONLOSS;
    for (int i = 0; i < 50 && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT); ++i) {
      rc = f();
      if (rc == ZCONNECTIONLOSS) std::this_thread::sleep_for(100ms);
    }
    return rc;
  }
  zhandle_t* zh_ = nullptr;
};

// Shuts down this process's TCP connections to `port` (the client sees the connection break).
int drop_connections_to(int port) {
  const auto fds = baton::test::connections_to_port(port);
  for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
  return static_cast<int>(fds.size());
}

std::uint64_t word_as_number(const std::string& line, int index) {
  std::istringstream in(line);
  std::string word;
  for (int i = 0; i <= index; ++i) in >> word;
  return std::stoull(word);
}

class zookeeper_backend : public ::testing::Test {
 protected:
  void TearDown() override {
    // A test that stopped the server must not leave it down for the next one.
    if (server_stopped_) baton::test::server_ctl("start", "zookeeper");
  }

  std::string hosts() { return baton::test::require_env("BATON_TEST_ZOOKEEPER"); }
  int port() { return std::stoi(baton::test::require_env("BATON_TEST_ZOOKEEPER_PORT")); }

  baton::backend_config config(const std::string& session_timeout = "2s") {
    auto c = baton::test::backend_config_for("zookeeper");
    c.params["session_timeout"] = session_timeout;
    return c;
  }
  std::shared_ptr<baton::mutex_backend> make(const baton::backend_config& c) {
    return baton::make_backend(c, rt_);
  }
  std::shared_ptr<baton::contend_service> service(baton::mutex_backend& backend,
                                                  const std::string& name,
                                                  std::shared_ptr<recorder> who) {
    return backend.make_contend_service(name, std::move(who), backend.default_options());
  }

  /// Two backends (two sessions) on one mutex: `a` owns it with `fence`, `b` waits and has seen
  /// the owner at least once.
  struct owner_and_waiter {
    std::shared_ptr<baton::mutex_backend> a_backend, b_backend;
    std::shared_ptr<recorder> a_who, b_who;
    std::shared_ptr<baton::contend_service> a, b;
    std::uint64_t fence = 0;
  };
  /// Starts an owner_and_waiter on a fresh mutex named after `hint` (use with
  /// ASSERT_NO_FATAL_FAILURE).
  void start_owner_and_waiter(const std::string& hint, owner_and_waiter& p) {
    p.a_backend = make(config());
    p.b_backend = make(config());
    const auto name = unique_name(hint);
    p.a_who = std::make_shared<recorder>();
    p.b_who = std::make_shared<recorder>();
    p.a = service(*p.a_backend, name, p.a_who);
    p.b = service(*p.b_backend, name, p.b_who);
    p.a->start();
    ASSERT_TRUE(baton::test::wait_until([&] { return p.a->is_owner(); }, 10s));
    p.fence = p.a->fence();
    p.b->start();
    ASSERT_TRUE(baton::test::wait_until([&] { return p.b_who->observations() > 0; }, 10s));
  }

  bool server_stopped_ = false;
  baton::runtime rt_;
};

}  // namespace

TEST_F(zookeeper_backend, lock_nodes_are_ephemeral_sequential_with_a_protection_prefix) {
  auto backend = make(config());
  const auto name = unique_name("layout");
  auto who = std::make_shared<recorder>();
  auto s = service(*backend, name, who);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));

  inspector look(hosts());
  const auto dir = "/baton/" + name;
  auto children = look.children(dir);
  ASSERT_EQ(children.size(), 1u);
  EXPECT_TRUE(std::regex_match(children[0], std::regex("_c_[0-9a-f]{32}-lock-[0-9]{10}")))
      << children[0];
  std::string data;
  Stat stat{};
  ASSERT_EQ(look.get(dir + "/" + children[0], &data, &stat), ZOK);
  EXPECT_EQ(data, s->contender_id());  // the node's data is the owner id
  EXPECT_EQ(stat.ephemeralOwner, zkd::session_id(*backend));
  EXPECT_EQ(static_cast<std::uint64_t>(stat.czxid), s->fence());
  EXPECT_EQ(backend->read_owner(name).owner_id, s->contender_id());

  // The lease-guarded state is the data of the mutex folder, written in one transaction with a
  // check of the owner's node.
  std::promise<std::error_code> written;
  s->async_write_state("cadence", [&](std::error_code ec) { written.set_value(ec); });
  EXPECT_FALSE(written.get_future().get());
  ASSERT_EQ(look.get(dir, &data, nullptr), ZOK);
  EXPECT_EQ(data, "cadence");
  EXPECT_EQ(backend->read_state(name), "cadence");

  ASSERT_TRUE(s->stop_and_wait(10s));
  EXPECT_TRUE(look.children(dir).empty()) << "release must delete the node";
  EXPECT_EQ(backend->read_owner(name).owner_id, "");
  EXPECT_EQ(backend->read_state(name), "cadence");
}

TEST_F(zookeeper_backend, a_create_whose_reply_was_lost_finds_its_node_instead_of_a_ghost) {
  auto backend = make(config());
  const auto name = unique_name("ghost");
  zkd::inject_lost_create_replies(*backend, 1);
  auto who = std::make_shared<recorder>();
  auto s = service(*backend, name, who);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));
  auto stats = zkd::get_stats(*backend);
  EXPECT_EQ(stats.nodes_created, 1u) << "a blind retry would have created a second node";
  EXPECT_EQ(stats.nodes_adopted, 1u);
  inspector look(hosts());
  EXPECT_EQ(look.children("/baton/" + name).size(), 1u);
  EXPECT_TRUE(who->saw_error(baton::errc::connection_lost));

  // A waiter that also loses its reply queues up behind, with its one node.
  zkd::inject_lost_create_replies(*backend, 1);
  auto who2 = std::make_shared<recorder>();
  auto s2 = service(*backend, name, who2);
  s2->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return who2->observations() > 0; }, 10s));
  EXPECT_EQ(look.children("/baton/" + name).size(), 2u);
  EXPECT_FALSE(s2->is_owner());
  ASSERT_TRUE(s->stop_and_wait(10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return s2->is_owner(); }, 10s));
  ASSERT_TRUE(s2->stop_and_wait(10s));
  EXPECT_TRUE(look.children("/baton/" + name).empty());
}

TEST_F(zookeeper_backend, a_release_wakes_only_the_next_of_ten_waiters) {
  auto backend = make(config());
  const auto name = unique_name("herd");
  std::vector<std::shared_ptr<recorder>> who;
  std::vector<std::shared_ptr<baton::contend_service>> s;
  for (int i = 0; i < 11; ++i) {
    who.push_back(std::make_shared<recorder>());
    s.push_back(service(*backend, name, who.back()));
    s.back()->start();
    // Queued (node created, predecessor watched) before the next one starts: queue = start order.
    ASSERT_TRUE(baton::test::wait_until([&] { return who.back()->observations() > 0; }, 10s));
  }
  ASSERT_TRUE(s[0]->is_owner());
  std::vector<long long> handover_us;
  for (int round = 0; round < 4; ++round) {
    const auto events_before = zkd::get_stats(*backend).watch_events;
    const auto fence_before = s[round]->fence();
    const auto released = steady::now();
    ASSERT_TRUE(s[round]->stop_and_wait(10s));
    ASSERT_TRUE(baton::test::wait_until([&] { return s[round + 1]->is_owner(); }, 10s));
    {
      std::lock_guard lock(who[round + 1]->mutex);
      handover_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                                who[round + 1]->acquired_at.back() - released)
                                .count());
    }
    EXPECT_GT(s[round + 1]->fence(), fence_before);
    // One more round trip on the same session: every watch event of the deletion came first.
    backend->read_owner(name);
    EXPECT_EQ(zkd::get_stats(*backend).watch_events - events_before, 1u)
        << "a release must wake exactly one waiter (its successor)";
    for (int j = round + 2; j < 11; ++j) EXPECT_FALSE(s[j]->is_owner());
  }
  std::sort(handover_us.begin(), handover_us.end());
  std::cout << "[ measured ] zookeeper graceful handover (stop -> next on_acquired) us: min "
            << handover_us.front() << " median " << handover_us[handover_us.size() / 2] << " max "
            << handover_us.back() << "\n";
  for (auto& x : s) x->stop_and_wait(10s);
}

TEST_F(zookeeper_backend, a_burst_of_requests_is_bounded_in_flight_and_no_owner_steps_down) {
  // 2,000 mutexes started at once send some 8,000 requests on the one session. At most
  // max_in_flight of them may be in the client at a time (the rest wait in the session), so
  // that the heartbeat, which skips that queue, keeps proving the session alive: every
  // contender ends up owner and none steps down for want of an answer.
  auto backend = make(config());
  const auto base = unique_name("burst");
  constexpr int count = 2'000;
  std::vector<std::shared_ptr<recorder>> who;
  std::vector<std::shared_ptr<baton::contend_service>> s;
  for (int i = 0; i < count; ++i) {
    who.push_back(std::make_shared<recorder>());
    s.push_back(service(*backend, base + "-" + std::to_string(i), who.back()));
  }
  for (auto& x : s) x->start();
  ASSERT_TRUE(baton::test::wait_until(
      [&] { return std::all_of(s.begin(), s.end(), [](auto& x) { return x->is_owner(); }); }, 60s));
  // Three heartbeat periods (timeout / 3 each) more: an owner whose session was not proven
  // alive in time would step down meanwhile.
  const auto heartbeats = zkd::get_stats(*backend).heartbeats;
  ASSERT_TRUE(baton::test::wait_until(
      [&] { return zkd::get_stats(*backend).heartbeats >= heartbeats + 3; }, 10s));
  const auto st = zkd::get_stats(*backend);
  EXPECT_GT(st.peak_waiting, 0u) << "a burst this size must have waited for flow slots";
  EXPECT_LE(st.peak_in_flight, st.max_in_flight);
  EXPECT_GT(st.peak_in_flight, 0u);
  std::size_t stepped_down = 0;
  for (auto& w : who) stepped_down += w->releases();
  EXPECT_EQ(stepped_down, 0u) << "no owner may step down while the backlog drains";
  EXPECT_EQ(std::count_if(s.begin(), s.end(), [](auto& x) { return x->is_owner(); }), count);
  for (auto& x : s) x->stop();
  EXPECT_TRUE(baton::test::wait_until(
      [&] { return std::none_of(s.begin(), s.end(), [](auto& x) { return x->is_owner(); }); },
      30s));
  inspector look(hosts());
  const auto dir = "/baton/" + base + "-" + std::to_string(count - 1);
  EXPECT_TRUE(baton::test::wait_until([&] { return look.children(dir).empty(); }, 30s))
      << "every lock node is deleted at stop";
}

TEST_F(zookeeper_backend, owners_hear_of_some_heartbeats_only_and_step_down_at_the_session_lapse) {
  // An owner's local lease is the session's, read when asked: the session tells owners of a
  // heartbeat only every other one or so (to publish the renewal in their owner record), and
  // steps them all down with one lapse event when its lease runs out.
  auto backend = make(config());
  const auto base = unique_name("lapse");
  constexpr int count = 40;
  std::vector<std::shared_ptr<recorder>> who;
  std::vector<std::shared_ptr<baton::contend_service>> s;
  for (int i = 0; i < count; ++i) {
    who.push_back(std::make_shared<recorder>());
    s.push_back(service(*backend, base + "-" + std::to_string(i), who.back()));
  }
  auto owners = [&] {
    return std::count_if(s.begin(), s.end(), [](auto& x) { return x->is_owner(); });
  };
  for (auto& x : s) x->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return owners() == count; }, 20s));

  const auto before = zkd::get_stats(*backend);
  const auto deadline = s.front()->lease_deadline();
  std::vector<int> observed_before;
  for (auto& w : who) observed_before.push_back(w->observations());
  ASSERT_TRUE(baton::test::wait_until(
      [&] { return zkd::get_stats(*backend).heartbeats >= before.heartbeats + 6; }, 10s));
  const auto after = zkd::get_stats(*backend);
  const auto heartbeats = after.heartbeats - before.heartbeats;
  const auto events = after.heartbeat_events - before.heartbeat_events;
  EXPECT_GT(events, 0u) << "owners publish their renewals";
  EXPECT_LE(events, count * (heartbeats / 2 + 1)) << "owners were told of every heartbeat";
  for (int i = 0; i < count; ++i)
    EXPECT_GE(who[i]->observations(), observed_before[i] + 2)
        << "owner " << i << " published no renewal";
  EXPECT_GT(s.front()->lease_deadline(), deadline) << "the lease follows the session's";
  EXPECT_EQ(owners(), count);

  // The server's answers stop proving the session (the connection stays up): one lapse of the
  // session steps every owner down by the deadline.
  zkd::inject_unproven_answers(*backend, true);
  const auto last_deadline = s.front()->lease_deadline();
  ASSERT_TRUE(baton::test::wait_until([&] { return owners() == 0; }, 5s));
  EXPECT_LE(steady::now(), last_deadline + 2s) << "the owners stepped down late";
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        return std::all_of(who.begin(), who.end(), [](auto& w) { return w->releases() == 1; });
      },
      5s))
      << "every owner is told it lost the lease, once";
  const auto lapsed = zkd::get_stats(*backend);
  EXPECT_GE(lapsed.lapses, 1u);
  EXPECT_EQ(lapsed.disconnects, before.disconnects) << "this was a lapse, not a disconnect";

  // Proven alive again: they own again.
  zkd::inject_unproven_answers(*backend, false);
  ASSERT_TRUE(baton::test::wait_until([&] { return owners() == count; }, 20s));
  for (auto& x : s) EXPECT_TRUE(x->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, the_fence_is_the_owner_node_czxid_and_grows_with_each_owner) {
  auto backend = make(config());
  const auto name = unique_name("fence");
  auto a = service(*backend, name, std::make_shared<recorder>());
  auto b = service(*backend, name, std::make_shared<recorder>());
  inspector look(hosts());
  auto czxid_of_owner = [&] {
    auto locks = zkd::sorted_locks(look.children("/baton/" + name));
    Stat stat{};
    if (locks.empty() || look.get("/baton/" + name + "/" + locks.front(), nullptr, &stat) != ZOK)
      return std::uint64_t{0};
    return static_cast<std::uint64_t>(stat.czxid);
  };
  std::uint64_t last = 0;
  for (int round = 0; round < 3; ++round) {
    auto& owner = round % 2 == 0 ? a : b;
    auto& next = round % 2 == 0 ? b : a;
    owner->start();
    ASSERT_TRUE(baton::test::wait_until([&] { return owner->is_owner(); }, 10s));
    EXPECT_EQ(owner->fence(), czxid_of_owner());
    EXPECT_EQ(backend->read_owner(name).fence, owner->fence());
    EXPECT_GT(owner->fence(), last);
    last = owner->fence();
    next->start();
    ASSERT_TRUE(owner->stop_and_wait(10s));
    ASSERT_TRUE(baton::test::wait_until([&] { return next->is_owner(); }, 10s));
    EXPECT_GT(next->fence(), last);
    ASSERT_TRUE(next->stop_and_wait(10s));
  }
}

TEST_F(zookeeper_backend, a_dropped_connection_keeps_the_lease_while_the_session_reconnects) {
  auto backend = make(config());
  const auto name = unique_name("drop");
  auto who = std::make_shared<recorder>();
  auto s = service(*backend, name, who);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));
  const auto fence = s->fence();
  const auto deadline = s->lease_deadline();
  ASSERT_GE(drop_connections_to(port()), 1);
  ASSERT_TRUE(
      baton::test::wait_until([&] { return zkd::get_stats(*backend).disconnects >= 1; }, 1s));
  // The session survives the reconnect: the owner never stopped owning, and its lease moves on.
  ASSERT_TRUE(baton::test::wait_until([&] { return s->lease_deadline() > deadline; }, 5s))
      << "the lease was not extended after the reconnect";
  EXPECT_TRUE(s->is_owner());
  EXPECT_EQ(s->fence(), fence);
  EXPECT_EQ(who->releases(), 0u) << "a reconnect within the session must not stop the owner";
  EXPECT_EQ(who->acquisitions(), 1u);
  EXPECT_EQ(zkd::get_stats(*backend).sessions, 1u);
  ASSERT_TRUE(s->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, an_expired_session_is_replaced_and_the_owner_rejoins_with_a_new_fence) {
  owner_and_waiter pair;
  ASSERT_NO_FATAL_FAILURE(start_owner_and_waiter("expire", pair));
  auto& [a_backend, b_backend, a_who, b_who, a, b, first] = pair;
  const auto old_session = zkd::session_id(*a_backend);

  ASSERT_TRUE(zkd::expire_session(*a_backend, 10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  EXPECT_GT(b->fence(), first);
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        auto id = zkd::session_id(*a_backend);
        return zkd::get_stats(*a_backend).sessions == 2 && id != 0 && id != old_session;
      },
      10s));
  EXPECT_GE(a_who->releases(), 1u);
  // The old owner can no longer write the guarded state.
  std::promise<std::error_code> stale;
  a->async_write_state("stale", [&](std::error_code ec) { stale.set_value(ec); });
  EXPECT_EQ(stale.get_future().get(), baton::errc::not_owner);

  // a rejoined with a new node behind b.
  ASSERT_TRUE(baton::test::wait_until([&] { return a_who->observations() > 1; }, 10s));
  EXPECT_FALSE(a->is_owner());
  const auto second = b->fence();
  ASSERT_TRUE(b->stop_and_wait(10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 10s));
  EXPECT_GT(a->fence(), second);
  ASSERT_TRUE(a->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, a_stopped_owner_process_is_not_owner_when_it_resumes) {
  const auto name = unique_name("sigstop");
  baton::test::child_process holder({baton::test::program_path("zk_holder"), "--hosts", hosts(),
                                     "--mutex", name, "--session-timeout", "2s"});
  auto acquired = holder.wait_line("ACQUIRED", 20s);
  ASSERT_TRUE(acquired);
  const auto first = word_as_number(*acquired, 1);

  auto backend = make(config());
  auto who = std::make_shared<recorder>();
  auto w = service(*backend, name, who);
  w->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return who->observations() > 0; }, 10s));
  ASSERT_FALSE(w->is_owner());

  const auto stopped = steady::now();
  holder.signal(SIGSTOP);
  ASSERT_TRUE(baton::test::wait_until([&] { return w->is_owner(); }, 15s));
  std::cout << "[ measured ] zookeeper takeover after SIGSTOP of the owner ms: "
            << ms_since(stopped) << " (session timeout 2000)\n";
  EXPECT_GT(w->fence(), first);

  holder.signal(SIGCONT);
  auto resumed = holder.wait_line("RESUMED", 10s);
  ASSERT_TRUE(resumed);
  EXPECT_EQ(word_as_number(*resumed, 2), 0u)
      << "is_owner() must be false at the first look after the resume: " << *resumed;
  // It does not act as owner while w owns, and re-acquires with a newer fence once w leaves.
  EXPECT_FALSE(holder.wait_line("OWNER 1", 1s));
  const auto taken = w->fence();
  ASSERT_TRUE(w->stop_and_wait(10s));
  auto again = holder.wait_line("ACQUIRED", 20s);
  ASSERT_TRUE(again);
  EXPECT_GT(word_as_number(*again, 1), taken);
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_exit(10s), 0);
}

TEST_F(zookeeper_backend, a_killed_owner_process_is_taken_over_after_the_session_timeout) {
  const auto name = unique_name("sigkill");
  baton::test::child_process holder({baton::test::program_path("zk_holder"), "--hosts", hosts(),
                                     "--mutex", name, "--session-timeout", "2s"});
  auto acquired = holder.wait_line("ACQUIRED", 20s);
  ASSERT_TRUE(acquired);
  auto backend = make(config());
  auto who = std::make_shared<recorder>();
  auto w = service(*backend, name, who);
  w->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return who->observations() > 0; }, 10s));
  const auto killed = steady::now();
  holder.signal(SIGKILL);
  ASSERT_TRUE(baton::test::wait_until([&] { return w->is_owner(); }, 15s));
  const auto took = ms_since(killed);
  std::cout << "[ measured ] zookeeper SIGKILL takeover ms: " << took
            << " (session timeout 2000)\n";
  // The dead owner's session ends `timeout` after its last request (heartbeats every third).
  EXPECT_GE(took, 1000) << "nobody may take over before the dead owner's session ends";
  EXPECT_LE(took, 4500);
  EXPECT_GT(w->fence(), word_as_number(*acquired, 1));
  ASSERT_TRUE(w->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, a_server_restart_shorter_than_the_session_keeps_the_ownership) {
  // The server accepts at most 20 ticks (10 s): enough to outlast a JVM restart.
  auto a_backend = make(config("10s"));
  auto b_backend = make(config("10s"));
  const auto name = unique_name("restart-short");
  auto a_who = std::make_shared<recorder>();
  auto b_who = std::make_shared<recorder>();
  auto a = service(*a_backend, name, a_who);
  auto b = service(*b_backend, name, b_who);
  a->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 10s));
  const auto fence = a->fence();
  b->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return b_who->observations() > 0; }, 10s));

  const auto t0 = steady::now();
  server_stopped_ = true;
  ASSERT_TRUE(baton::test::server_ctl("restart", "zookeeper"));
  server_stopped_ = false;
  const auto outage = ms_since(t0);
  std::cout << "[ measured ] zookeeper server restart took ms: " << outage << "\n";
  ASSERT_LT(outage, 8000) << "the restart took too long to test an outage within the session";
  // The local lease (last answer + 10 s - margin, heartbeats every 3.3 s) outlasts an outage of
  // up to 6.4 s: then the owner keeps leading through it.
  if (outage < 6000) {
    EXPECT_EQ(a_who->releases(), 0u) << "the owner kept its lease";
  }
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner(); }, 15s));
  EXPECT_EQ(a->fence(), fence) << "same session, same node, same ownership";
  EXPECT_EQ(b_who->acquisitions(), 0u);
  EXPECT_EQ(zkd::get_stats(*a_backend).sessions, 1u);
  ASSERT_TRUE(a->stop_and_wait(10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  EXPECT_GT(b->fence(), fence);
  ASSERT_TRUE(b->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, a_server_outage_longer_than_the_session_moves_ownership_on) {
  owner_and_waiter pair;
  ASSERT_NO_FATAL_FAILURE(start_owner_and_waiter("restart-long", pair));
  auto& [a_backend, b_backend, a_who, b_who, a, b, fence] = pair;

  server_stopped_ = true;
  ASSERT_TRUE(baton::test::server_ctl("stop", "zookeeper"));
  // The owner keeps its lease until its local deadline (within the 2 s session timeout).
  ASSERT_TRUE(baton::test::wait_until([&] { return !a->is_owner(); }, 2500ms));
  // Without a server both clients give their sessions up by the session timeout.
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        return zkd::get_stats(*a_backend).local_expiries >= 1 &&
               zkd::get_stats(*b_backend).local_expiries >= 1;
      },
      10s));
  ASSERT_TRUE(baton::test::server_ctl("start", "zookeeper"));
  server_stopped_ = false;
  ASSERT_TRUE(baton::test::wait_until([&] { return a->is_owner() || b->is_owner(); }, 20s));
  EXPECT_FALSE(a->is_owner() && b->is_owner());
  const auto after = a->is_owner() ? a->fence() : b->fence();
  EXPECT_GT(after, fence) << "a new session means a new node and a larger fence";
  ASSERT_TRUE(a->stop_and_wait(10s));
  ASSERT_TRUE(b->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, digest_credentials_protect_the_nodes) {
  auto c = config();
  const auto root = "/" + unique_name("baton-acl");
  c.params["root"] = root;
  c.params["username"] = "baton";
  c.params["password"] = "secret";
  auto backend = make(c);
  const auto name = unique_name("acl");
  auto s = service(*backend, name, std::make_shared<recorder>());
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));
  EXPECT_EQ(backend->read_owner(name).owner_id, s->contender_id());

  inspector anonymous(hosts());
  EXPECT_EQ(anonymous.get(root + "/" + name, nullptr, nullptr), ZNOAUTH);
  inspector authenticated(hosts(), "baton:secret");
  EXPECT_EQ(authenticated.get(root + "/" + name, nullptr, nullptr), ZOK);

  auto wrong = c;
  wrong.params["password"] = "wrong";
  auto intruder = make(wrong);
  try {
    intruder->read_owner(name);
    ADD_FAILURE() << "read with the wrong password";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), baton::errc::auth_failed) << e.what();
  }
  auto who = std::make_shared<recorder>();
  auto t = service(*intruder, name, who);
  t->start();
  ASSERT_TRUE(
      baton::test::wait_until([&] { return who->saw_error(baton::errc::auth_failed); }, 10s));
  EXPECT_FALSE(t->is_owner());
  t->stop_and_wait(10s);
  ASSERT_TRUE(s->stop_and_wait(10s));
}

TEST_F(zookeeper_backend, a_chroot_in_hosts_is_honoured_and_created) {
  auto c = config();
  const auto chroot = "/" + unique_name("baton-chroot") + "/deep";
  c.params["hosts"] = hosts() + chroot;
  auto backend = make(c);
  const auto name = unique_name("chroot");
  auto s = service(*backend, name, std::make_shared<recorder>());
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));
  inspector look(hosts());
  EXPECT_EQ(look.children(chroot + "/baton/" + name).size(), 1u);
  EXPECT_TRUE(look.children("/baton/" + name).empty());
  ASSERT_TRUE(s->stop_and_wait(10s));
}

namespace {

std::error_code append(baton::mutex_backend& backend, const std::string& name,
                       const std::string& id, std::uint64_t fence, const std::string& bytes) {
  auto p = std::make_shared<std::promise<std::error_code>>();
  auto f = p->get_future();
  backend.records().async_append_history(name, id, fence, bytes, 50,
                                         [p](std::error_code ec) { p->set_value(ec); });
  EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_F(zookeeper_backend, records_live_beside_the_lock_folder_and_a_stale_owner_node_is_rejected) {
  auto backend = make(config());
  const auto name = unique_name("records");
  auto s = service(*backend, name, std::make_shared<recorder>());
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s));
  ASSERT_FALSE(append(*backend, name, s->contender_id(), s->fence(), "run 1"));
  baton::write_controls(backend->records(), name, 0, "{\"paused\":true}");

  inspector look(hosts());
  const auto dir = "/baton/" + name;
  // The lock folder holds lock nodes only; history and controls are its siblings ('@' never
  // occurs in a mutex name).
  for (const auto& child : look.children(dir))
    EXPECT_TRUE(std::regex_match(child, std::regex("_c_[0-9a-f]{32}-lock-[0-9]{10}"))) << child;
  auto entries = look.children(dir + "@history");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(std::regex_match(entries[0], std::regex(std::to_string(s->fence()) + "-[0-9]{10}")))
      << entries[0];
  std::string data;
  ASSERT_EQ(look.get(dir + "@history/" + entries[0], &data, nullptr), ZOK);
  EXPECT_EQ(data, "run 1");
  Stat stat{};
  ASSERT_EQ(look.get(dir + "@controls", &data, &stat), ZOK);
  EXPECT_EQ(data, "{\"paused\":true}");
  EXPECT_EQ(stat.version, 0);  // our version 1

  // The owner's lock node disappears behind its back (as when its session ends on the server):
  // the owner still believes it leads, but its next record is refused in the same transaction.
  auto locks = look.children(dir);
  ASSERT_EQ(locks.size(), 1u);
  ASSERT_EQ(look.remove(dir + "/" + locks[0]), ZOK);
  EXPECT_EQ(append(*backend, name, s->contender_id(), s->fence(), "stale"), baton::errc::not_owner);
  auto h = baton::read_history(backend->records(), name, 10);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].bytes, "run 1");
  s->stop_and_wait(10s);
}

TEST_F(zookeeper_backend, a_stale_leaders_record_after_its_session_expired_is_rejected) {
  owner_and_waiter pair;
  ASSERT_NO_FATAL_FAILURE(start_owner_and_waiter("stale-record", pair));
  auto& [a_backend, b_backend, a_who, b_who, a, b, first] = pair;
  const auto name = a->mutex_name();
  ASSERT_FALSE(append(*a_backend, name, a->contender_id(), first, "by a"));
  ASSERT_TRUE(zkd::expire_session(*a_backend, 10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  EXPECT_EQ(append(*a_backend, name, a->contender_id(), first, "late by a"),
            baton::errc::not_owner);
  EXPECT_FALSE(append(*b_backend, name, b->contender_id(), b->fence(), "by b"));
  auto h = baton::read_history(a_backend->records(), name, 10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].bytes, "by b");
  EXPECT_EQ(h[1].bytes, "by a");
  b->stop_and_wait(10s);
  a->stop_and_wait(10s);
}

TEST_F(zookeeper_backend, a_controls_watch_survives_session_expiry) {
  auto backend = make(config());
  auto other = make(config());
  const auto name = unique_name("controls-expiry");
  std::atomic<int> calls{0};
  const auto handle = backend->records().watch_controls(name, [&] { ++calls; });
  baton::write_controls(other->records(), name, 0, "one");
  ASSERT_TRUE(baton::test::wait_until([&] { return calls.load() >= 1; }, 10s));

  ASSERT_TRUE(zkd::expire_session(*backend, 10s));
  ASSERT_TRUE(baton::test::wait_until(
      [&] { return zkd::get_stats(*backend).sessions == 2 && zkd::session_id(*backend) != 0; },
      10s));
  // The new session re-arms the watch (and reports a possible change once it is connected).
  ASSERT_TRUE(baton::test::wait_until([&] { return calls.load() >= 2; }, 10s));
  std::this_thread::sleep_for(200ms);  // let the re-armed watch reach the server
  const int before = calls.load();
  baton::write_controls(other->records(), name, 1, "two");
  EXPECT_TRUE(baton::test::wait_until([&] { return calls.load() > before; }, 10s));
  backend->records().unwatch_controls(handle);
  EXPECT_EQ(baton::read_controls(backend->records(), name), (baton::controls_record{"two", 2}));
}

TEST_F(zookeeper_backend, read_waiters_lists_the_lock_nodes_after_the_owners_in_order) {
  auto backend = make(config());
  const auto name = unique_name("waiters");
  auto owner = service(*backend, name, std::make_shared<recorder>());
  owner->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return owner->is_owner(); }, 10s));
  auto w1 = service(*backend, name, std::make_shared<recorder>());
  w1->start();
  ASSERT_TRUE(
      baton::test::wait_until([&] { return backend->read_waiters(name)->size() == 1; }, 10s));
  auto w2 = service(*backend, name, std::make_shared<recorder>());
  w2->start();
  ASSERT_TRUE(
      baton::test::wait_until([&] { return backend->read_waiters(name)->size() == 2; }, 10s));
  EXPECT_EQ(backend->read_waiters(name),
            (std::vector<std::string>{w1->contender_id(), w2->contender_id()}));
  ASSERT_TRUE(owner->stop_and_wait(10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return w1->is_owner(); }, 10s));
  EXPECT_EQ(backend->read_waiters(name), (std::vector<std::string>{w2->contender_id()}));
  w2->stop_and_wait(10s);
  w1->stop_and_wait(10s);
}

TEST_F(zookeeper_backend, bad_configuration_is_rejected_naming_the_parameter) {
  auto expect_rejected = [&](const std::string& key, const std::string& value,
                             const std::string& named) {
    auto c = config();
    c.params[key] = value;
    try {
      make(c);
      ADD_FAILURE() << "accepted " << key << "='" << value << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  expect_rejected("hosts", "127.0.0.1:", "'hosts'");
  expect_rejected("hosts", "127.0.0.1:70000", "'hosts'");
  expect_rejected("hosts", "127.0.0.1:2181,,127.0.0.2:2181", "'hosts'");
  expect_rejected("hosts", hosts() + "/a//b", "chroot '/a//b'");
  expect_rejected("hosts", hosts() + "bad", "'hosts'");
  expect_rejected("root", "bad", "'root'");
  expect_rejected("session_timeout", "two seconds", "'session_timeout'");
  expect_rejected("username", "someone", "'password'");
}

TEST_F(zookeeper_backend, an_unreachable_server_gives_connection_lost_without_hanging) {
  auto c = config();
  c.params["hosts"] = "127.0.0.1:1";
  // The client's reconnect loop must not print to stderr: capture it meanwhile.
  const auto captured = baton::test::temp_dir("zk-stderr") + "/stderr.txt";
  std::fflush(stderr);
  int saved = ::dup(2);
  int file = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(file, 0);
  ::dup2(file, 2);
  const auto t0 = steady::now();
  std::shared_ptr<baton::mutex_backend> backend;
  try {
    backend = make(c);
  } catch (...) {
  }
  const auto made_in = ms_since(t0);
  std::this_thread::sleep_for(500ms);  // let the reconnect loop run a few rounds
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  ASSERT_TRUE(backend);
  EXPECT_LT(made_in, 4000) << "make_backend waits at most the session timeout";
  std::ifstream in(captured);
  std::string line;
  int client_lines = 0;
  while (std::getline(in, line))
    if (line.find("ZOO_") != std::string::npos) ++client_lines;
  EXPECT_EQ(client_lines, 0) << "the ZooKeeper client logged to stderr";

  const auto t1 = steady::now();
  try {
    backend->read_owner("anything");
    ADD_FAILURE() << "read_owner answered without a server";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), baton::errc::connection_lost) << e.what();
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
  EXPECT_LT(ms_since(t1), 4000);

  auto who = std::make_shared<recorder>();
  auto s = service(*backend, "unreachable", who);
  s->start();
  ASSERT_TRUE(
      baton::test::wait_until([&] { return who->saw_error(baton::errc::connection_lost); }, 2s));
  EXPECT_FALSE(s->is_owner());
  EXPECT_TRUE(s->stop_and_wait(5s));

  baton::locker lock(*backend, "unreachable");
  const auto t2 = steady::now();
  EXPECT_FALSE(lock.try_lock());
  EXPECT_LT(ms_since(t2), 4000);
}

#endif  // __has_include(baton/backends/zookeeper/detail.hpp)
