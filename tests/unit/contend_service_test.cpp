// Lifecycle, generations and notification rules of the contend service, over an in-process
// store whose completions the test controls.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <deque>
#include <future>
#include <mutex>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/runtime.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

using namespace std::chrono_literals;

namespace {

// A lease_store that parks every acquire until the test answers it.
class manual_store : public baton::lease_store {
 public:
  void async_acquire(const std::string& name, const std::string& owner_id,
                     std::chrono::milliseconds, std::chrono::milliseconds,
                     grant_handler handler) override {
    std::lock_guard lock(mutex_);
    pending_.push_back(std::move(handler));
  }
  void async_release(const std::string&, const std::string& owner_id,
                     done_handler handler) override {
    {
      std::lock_guard lock(mutex_);
      ++releases_;
    }
    handler({});
  }
  void async_read(const std::string&, grant_handler handler) override { handler({}, {}); }
  void async_read_state(const std::string&, state_handler handler) override { handler({}, {}); }
  void async_write_state(const std::string&, const std::string&, std::uint64_t, std::string,
                         done_handler handler) override {
    handler({});
  }

  std::size_t pending() {
    std::lock_guard lock(mutex_);
    return pending_.size();
  }
  int releases() {
    std::lock_guard lock(mutex_);
    return releases_;
  }
  void answer(std::error_code ec, const baton::lease_grant& grant) {
    grant_handler h;
    {
      std::lock_guard lock(mutex_);
      h = std::move(pending_.front());
      pending_.pop_front();
    }
    h(ec, grant);
  }

 private:
  std::mutex mutex_;
  std::deque<grant_handler> pending_;
  int releases_ = 0;
};

// Records every callback in order.
struct recorder : baton::mutex_contender {
  std::mutex mutex;
  std::vector<std::string> events;
  void on_acquired(const baton::mutex_state& s) override {
    std::lock_guard lock(mutex);
    events.push_back("acquired:" + std::to_string(s.after.fence));
  }
  void on_released(const baton::mutex_state& s) override {
    std::lock_guard lock(mutex);
    events.push_back("released");
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex);
    return events;
  }
};

baton::lease_grant own_grant(const std::string& id, std::uint64_t fence,
                             std::chrono::milliseconds lease = 10s) {
  auto now =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  baton::lease_grant g;
  g.owner = {id, now, now + lease / 2, now + lease, fence};
  g.now = now;
  return g;
}

baton::contend_options short_options() {
  auto o = baton::test::lease_options(100ms, 20ms);
  o.drift_margin = 10ms;
  o.max_backoff = 40ms;
  return o;
}

}  // namespace

TEST(contend_service, lifecycle_goes_initial_running_initial_and_restarts) {
  baton::runtime rt;
  auto store = std::make_shared<baton::memory_lease_store>();
  auto who = std::make_shared<recorder>();
  auto s = baton::make_lease_contend_service(rt.io(), store, "life", "me", who, short_options());
  EXPECT_EQ(s->status(), baton::service_status::initial);
  EXPECT_TRUE(s->start());
  EXPECT_FALSE(s->start());  // only from INITIAL
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_EQ(s->status(), baton::service_status::running);
  EXPECT_TRUE(s->stop_and_wait(5s));
  EXPECT_EQ(s->status(), baton::service_status::initial);
  EXPECT_FALSE(s->is_owner());
  EXPECT_TRUE(s->start());
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_TRUE(s->stop_and_wait(5s));
  EXPECT_EQ(who->snapshot(),
            (std::vector<std::string>{"acquired:1", "released", "acquired:2", "released"}));
}

TEST(contend_service, late_completion_after_stop_changes_nothing) {
  baton::runtime rt;
  auto store = std::make_shared<manual_store>();
  auto who = std::make_shared<recorder>();
  auto s = baton::make_lease_contend_service(rt.io(), store, "late", "me", who, short_options());
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 5s));
  std::atomic<bool> stopped{false};
  s->stop([&] { stopped = true; });
  // The stop waits for the request in flight (it could otherwise win after the release).
  ASSERT_TRUE(
      baton::test::wait_until([&] { return s->status() == baton::service_status::stopping; }, 1s));
  EXPECT_FALSE(stopped.load());
  EXPECT_EQ(store->releases(), 0);
  store->answer({}, own_grant("me", 1));  // the backend says we won, too late
  ASSERT_TRUE(baton::test::wait_until([&] { return stopped.load(); }, 5s));
  EXPECT_EQ(store->releases(), 1);  // released what that late request may have taken
  EXPECT_TRUE(who->snapshot().empty());
  EXPECT_FALSE(s->is_owner());
}

TEST(contend_service, owner_steps_down_when_backend_stops_answering) {
  baton::runtime rt;
  auto store = std::make_shared<manual_store>();
  auto who = std::make_shared<recorder>();
  auto s = baton::make_lease_contend_service(rt.io(), store, "silent", "me", who, short_options());
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 5s));
  store->answer({}, own_grant("me", 4, 200ms));
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_EQ(s->fence(), 4u);
  // The renewal is sent but never answered: the local lease runs out by itself.
  ASSERT_TRUE(baton::test::wait_until([&] { return who->snapshot().size() == 2; }, 5s));
  EXPECT_EQ(who->snapshot(), (std::vector<std::string>{"acquired:4", "released"}));
  EXPECT_FALSE(s->is_owner());
  EXPECT_EQ(s->fence(), 0u);
  s->stop();
  while (store->pending() > 0) store->answer(baton::errc::connection_lost, {});
  ASSERT_TRUE(
      baton::test::wait_until([&] { return s->status() == baton::service_status::initial; }, 5s));
}

TEST(contend_service, errors_are_retried_and_reported) {
  baton::runtime rt;
  auto store = std::make_shared<manual_store>();
  struct error_counter : recorder {
    std::atomic<int> errors{0};
    void on_error(std::error_code) override { ++errors; }
  };
  auto who = std::make_shared<error_counter>();
  auto s = baton::make_lease_contend_service(rt.io(), store, "flaky", "me", who, short_options());
  s->start();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 5s));
    store->answer(baton::errc::connection_lost, {});
  }
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 5s));
  store->answer({}, own_grant("me", 1));
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_EQ(who->errors.load(), 3);
  s->stop();
  while (s->status() != baton::service_status::initial) {
    if (store->pending() > 0) store->answer(baton::errc::connection_lost, {});
    std::this_thread::yield();
  }
}

TEST(contend_service, acquired_and_released_strictly_alternate_under_churn) {
  baton::runtime rt;
  auto store = std::make_shared<baton::memory_lease_store>();
  std::vector<std::shared_ptr<recorder>> who;
  std::vector<std::shared_ptr<baton::contend_service>> services;
  for (int i = 0; i < 4; ++i) {
    who.push_back(std::make_shared<recorder>());
    services.push_back(baton::make_lease_contend_service(
        rt.io(), store, "churn", "c" + std::to_string(i), who.back(), short_options()));
    services.back()->start();
  }
  for (int round = 0; round < 30; ++round) {
    for (auto& s : services)
      if (s->is_owner()) {
        s->stop_and_wait(5s);
        s->start();
      }
    ASSERT_TRUE(baton::test::wait_until(
        [&] {
          for (auto& s : services)
            if (s->is_owner()) return true;
          return false;
        },
        5s));
  }
  for (auto& s : services) s->stop_and_wait(5s);
  std::uint64_t acquisitions = 0;
  for (auto& w : who) {
    auto events = w->snapshot();
    for (std::size_t i = 0; i < events.size(); ++i) {
      bool acquired = events[i].rfind("acquired", 0) == 0;
      ASSERT_EQ(acquired, i % 2 == 0) << "event " << i << " of a contender: " << events[i];
      acquisitions += acquired;
    }
    EXPECT_EQ(events.size() % 2, 0u);
  }
  EXPECT_GE(acquisitions, 30u);
}

namespace {
// A memory store that counts watch() calls.
class watch_counting_store : public baton::memory_lease_store {
 public:
  std::atomic<int> watches{0};
  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::chrono::milliseconds poll_interval,
                      std::function<void()> wake) override {
    ++watches;
    return memory_lease_store::watch(name, owner_id, poll_interval, std::move(wake));
  }
};

struct observation_counter : baton::mutex_contender {
  std::atomic<int> observed{0};
  void on_acquired(const baton::mutex_state&) override {}
  void on_released(const baton::mutex_state&) override {}
  void on_observed(const baton::mutex_owner&) override { ++observed; }
};
}  // namespace

TEST(contend_service, only_a_waiter_asks_the_store_for_wake_ups) {
  baton::runtime rt;
  auto store = std::make_shared<watch_counting_store>();
  auto owner_seen = std::make_shared<observation_counter>();
  auto owner = baton::make_lease_contend_service(rt.io(), store, "quiet", "owner", owner_seen,
                                                 short_options());
  owner->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return owner->is_owner(); }, 5s));
  // Acquire and a few renewals (ttl 100 ms): the uncontended owner costs no wake-ups.
  ASSERT_TRUE(baton::test::wait_until([&] { return owner_seen->observed >= 4; }, 5s));
  EXPECT_EQ(store->watches.load(), 0);

  auto waiter = baton::make_lease_contend_service(rt.io(), store, "quiet", "waiter",
                                                  std::make_shared<recorder>(), short_options());
  waiter->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return store->watches == 1; }, 5s));
  EXPECT_FALSE(waiter->is_owner());
  ASSERT_TRUE(owner->stop_and_wait(5s));
  ASSERT_TRUE(baton::test::wait_until([&] { return waiter->is_owner(); }, 5s));
  EXPECT_EQ(store->watches.load(), 1);  // one watch per start, not per reply
  EXPECT_TRUE(waiter->stop_and_wait(5s));
}

TEST(contend_service, bad_name_is_rejected_before_any_backend_call) {
  baton::runtime rt;
  auto store = std::make_shared<manual_store>();
  auto who = std::make_shared<recorder>();
  EXPECT_THROW(baton::make_lease_contend_service(rt.io(), store, "bad name", "me", who, {}),
               std::invalid_argument);
  EXPECT_EQ(store->pending(), 0u);
}

namespace {
// The lease events counted so far under `type`, indexed by baton::lease_event.
std::array<std::uint64_t, baton::lease_event_count> lease_events(const std::string& type) {
  for (const auto& m : baton::backend_metrics_snapshot())
    if (m.type == type) return m.lease_events;
  return {};
}

std::uint64_t delta(const std::array<std::uint64_t, baton::lease_event_count>& before,
                    const std::string& type, baton::lease_event e) {
  const auto i = static_cast<std::size_t>(e);
  return lease_events(type)[i] - before[i];
}

// `id` owns the mutex with `fence` for 1 s.
baton::lease_grant other_grant(const std::string& id, std::uint64_t fence) {
  return own_grant(id, fence, 1s);
}
}  // namespace

TEST(contend_service, lease_events_say_acquired_renewed_lost_step_down_and_released) {
  baton::runtime rt;
  auto store = std::make_shared<manual_store>();
  auto who = std::make_shared<recorder>();
  const std::string type = "metrics-test";  // counted as "other"
  auto s = baton::make_lease_contend_service(rt.io(), store, "events", "me", who, short_options(),
                                             baton::default_random_source(), type);
  EXPECT_EQ(s->backend_type(), type);
  const auto before = lease_events("other");
  using ev = baton::lease_event;
  s->start();
  // Acquired (lease 4 s: the renewal is due after 2 s and has until ~3.99 s, room for a slow
  // machine to answer it in time).
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 10s));
  store->answer({}, own_grant("me", 1, 4s));
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_EQ(delta(before, "other", ev::acquired), 1u);
  EXPECT_EQ(delta(before, "other", ev::renewed), 0u);
  // Renewed: the backend keeps us owner under the same fence.
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 10s));
  store->answer({}, own_grant("me", 1, 4s));
  ASSERT_TRUE(
      baton::test::wait_until([&] { return delta(before, "other", ev::renewed) == 1; }, 5s));
  // Lost: the next renewal finds another owner.
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 10s));
  store->answer({}, other_grant("them", 2));
  ASSERT_TRUE(baton::test::wait_until([&] { return who->snapshot().size() == 2; }, 5s));
  EXPECT_EQ(delta(before, "other", ev::lost), 1u);
  EXPECT_EQ(delta(before, "other", ev::step_down), 0u);
  // Step down: owner again with a short lease whose renewal is never answered.
  ASSERT_TRUE(baton::test::wait_until([&] { return store->pending() == 1; }, 10s));
  store->answer({}, own_grant("me", 3, 200ms));
  ASSERT_TRUE(baton::test::wait_until([&] { return who->snapshot().size() == 4; }, 5s));
  EXPECT_EQ(delta(before, "other", ev::acquired), 2u);
  EXPECT_EQ(delta(before, "other", ev::step_down), 1u);
  EXPECT_EQ(delta(before, "other", ev::lost), 1u);
  // The late renewal makes us owner again; stop() gives it up on purpose.
  ASSERT_EQ(store->pending(), 1u);
  store->answer({}, own_grant("me", 3, 10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_EQ(delta(before, "other", ev::released), 0u);
  EXPECT_TRUE(s->stop_and_wait(5s));
  EXPECT_EQ(delta(before, "other", ev::released), 1u);
  EXPECT_EQ(delta(before, "other", ev::acquired), 3u);
  EXPECT_EQ(delta(before, "other", ev::renewed), 1u);
  EXPECT_EQ(delta(before, "other", ev::lost), 1u);
  EXPECT_EQ(delta(before, "other", ev::step_down), 1u);
  EXPECT_EQ(who->snapshot(), (std::vector<std::string>{"acquired:1", "released", "acquired:3",
                                                       "released", "acquired:3", "released"}));
}

// --- the backend's clock ---------------------------------------------------------------------

namespace {
// A memory store whose clock runs `*ahead_ms` ahead of this host's (the test may change it).
std::shared_ptr<baton::memory_lease_store> store_ahead(
    std::shared_ptr<std::atomic<long long>> ahead_ms) {
  return std::make_shared<baton::memory_lease_store>([ahead_ms] {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now()) +
           std::chrono::milliseconds{ahead_ms->load()};
  });
}
std::shared_ptr<baton::memory_lease_store> store_ahead(std::chrono::milliseconds ahead) {
  return store_ahead(std::make_shared<std::atomic<long long>>(ahead.count()));
}
}  // namespace

TEST(contend_service, measures_the_backends_clock_and_leads_without_a_limit) {
  baton::runtime rt;
  auto who = std::make_shared<recorder>();
  auto s = baton::make_lease_contend_service(rt.io(), store_ahead(1h), "clock-free", "me", who,
                                             short_options());
  EXPECT_FALSE(s->clock_offset().has_value());
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  const auto offset = s->clock_offset();
  ASSERT_TRUE(offset.has_value());
  EXPECT_NEAR(static_cast<double>(offset->offset.count()), 3'600'000.0, 1'000.0);
  EXPECT_LT(offset->uncertainty, 1s);
  EXPECT_FALSE(s->clock_refused());
  EXPECT_TRUE(s->stop_and_wait(5s));
}

TEST(contend_service, refuses_to_lead_beyond_max_clock_offset_and_gives_back_a_lease_won_first) {
  baton::runtime rt;
  auto store = store_ahead(-2min);  // this host is two minutes ahead of the backend
  auto who = std::make_shared<recorder>();
  auto o = short_options();
  o.max_clock_offset = 30s;
  auto s = baton::make_lease_contend_service(rt.io(), store, "clock-refused", "me", who, o);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->clock_refused(); }, 5s));
  // Several rounds later: never owner, never told it acquired, and the mutex is free again.
  auto other = std::make_shared<recorder>();
  auto o2 = short_options();
  auto peer = baton::make_lease_contend_service(rt.io(), store, "clock-refused", "peer", other, o2);
  peer->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return peer->is_owner(); }, 5s));
  EXPECT_FALSE(s->is_owner());
  EXPECT_TRUE(who->snapshot().empty());
  EXPECT_NEAR(static_cast<double>(s->clock_offset()->offset.count()), -120'000.0, 1'000.0);
  EXPECT_TRUE(peer->stop_and_wait(5s));
  EXPECT_TRUE(s->stop_and_wait(5s));
}

TEST(contend_service, leads_once_the_clock_is_back_within_max_clock_offset) {
  baton::runtime rt;
  auto ahead_ms = std::make_shared<std::atomic<long long>>(-120'000);
  auto store = store_ahead(ahead_ms);
  auto who = std::make_shared<recorder>();
  auto o = short_options();
  o.max_clock_offset = 30s;
  auto s = baton::make_lease_contend_service(rt.io(), store, "clock-back", "me", who, o);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->clock_refused(); }, 5s));
  EXPECT_FALSE(s->is_owner());
  *ahead_ms = 0;  // the clock was fixed
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  EXPECT_FALSE(s->clock_refused());
  EXPECT_TRUE(s->stop_and_wait(5s));
}

TEST(contend_service, an_owner_whose_clock_goes_off_steps_down_and_lets_its_lease_lapse) {
  baton::runtime rt;
  auto ahead_ms = std::make_shared<std::atomic<long long>>(0);
  auto store = store_ahead(ahead_ms);
  auto who = std::make_shared<recorder>();
  auto o = short_options();
  o.max_clock_offset = 30s;
  auto s = baton::make_lease_contend_service(rt.io(), store, "clock-lapse", "me", who, o);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 5s));
  *ahead_ms = -120'000;  // this host's clock stepped two minutes ahead
  ASSERT_TRUE(baton::test::wait_until([&] { return s->clock_refused() && !s->is_owner(); }, 5s));
  EXPECT_EQ(who->snapshot(), (std::vector<std::string>{"acquired:1", "released"}));
  // Not released on the backend: the record still names it until its lease lapses, so the
  // jobs it was asked to stop are gone before anybody else may start.
  std::promise<baton::lease_grant> read;
  store->async_read("clock-lapse",
                    [&](std::error_code, baton::lease_grant g) { read.set_value(g); });
  EXPECT_EQ(read.get_future().get().owner.owner_id, "me");
  EXPECT_TRUE(s->stop_and_wait(5s));
}
