#include "baton/mutex/contend_period.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

using namespace std::chrono_literals;

namespace {

baton::backend_time at(long long ms) { return baton::backend_time{std::chrono::milliseconds{ms}}; }

baton::mutex_owner owner(std::string id, long long ttl_at, long long transition_at) {
  baton::mutex_owner o;
  o.owner_id = std::move(id);
  o.ttl_at = at(ttl_at);
  o.transition_at = at(transition_at);
  o.fence = 1;
  return o;
}

baton::random_source fixed(std::int64_t value) {
  return [value](std::int64_t lo, std::int64_t hi) {
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, 100);  // contend_options::lapse_jitter's default
    return value;
  };
}

baton::contend_options opts(std::chrono::milliseconds poll = 10s) {
  baton::contend_options o;
  o.poll_interval = poll;
  return o;
}

}  // namespace

TEST(contend_period, owner_renews_at_ttl) {
  baton::contend_period period(opts(), fixed(0));
  EXPECT_EQ(period.next_delay(owner("me", 10'000, 16'000), "me", at(1'000)), 9'000ms);
}

TEST(contend_period, owner_past_ttl_renews_at_once) {
  baton::contend_period period(opts(), fixed(0));
  EXPECT_EQ(period.next_delay(owner("me", 10'000, 16'000), "me", at(12'000)), 0ms);
}

TEST(contend_period, waiter_wakes_at_transition_plus_jitter) {
  baton::contend_period late(opts(), fixed(99));
  baton::contend_period first(opts(), fixed(0));
  EXPECT_EQ(late.next_delay(owner("other", 10'000, 16'000), "me", at(10'000)), 6'099ms);
  EXPECT_EQ(first.next_delay(owner("other", 10'000, 16'000), "me", at(10'000)), 6'000ms);
}

// The jitter only delays: a waiter never asks before the lease lapses (asking early costs a
// request that must fail), and a lapsed lease is asked for at once.
TEST(contend_period, waiter_never_wakes_before_transition_and_asks_a_lapsed_lease_at_once) {
  baton::contend_period period(opts(), fixed(0));
  EXPECT_EQ(period.next_delay(owner("other", 1'000, 1'100), "me", at(1'000)), 100ms);
  EXPECT_EQ(period.next_delay(owner("other", 1'000, 1'100), "me", at(1'100)), 0ms);
  EXPECT_EQ(period.next_delay(owner("other", 1'000, 1'100), "me", at(5'000)), 0ms);
}

TEST(contend_period, lapse_jitter_sets_the_window_and_zero_draws_nothing) {
  auto o = opts();
  o.lapse_jitter = 1'000ms;
  std::vector<std::pair<std::int64_t, std::int64_t>> asked;
  baton::contend_period wide(o, [&](std::int64_t lo, std::int64_t hi) {
    asked.emplace_back(lo, hi);
    return hi - 1;
  });
  EXPECT_EQ(wide.next_delay(owner("other", 10'000, 16'000), "me", at(10'000)), 6'999ms);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::pair<std::int64_t, std::int64_t>{0, 1'000}));
  o.lapse_jitter = 0ms;
  baton::contend_period none(o, [](std::int64_t, std::int64_t) -> std::int64_t {
    ADD_FAILURE() << "drew a jitter with lapse_jitter 0";
    return 0;
  });
  EXPECT_EQ(none.next_delay(owner("other", 10'000, 16'000), "me", at(10'000)), 6'000ms);
}

TEST(contend_period, waiter_polls_at_least_every_poll_interval) {
  baton::contend_period period(opts(500ms), fixed(0));
  EXPECT_EQ(period.next_delay(owner("other", 10'000, 16'000), "me", at(1'000)), 500ms);
}

TEST(contend_period, free_mutex_is_retried_soon) {
  baton::contend_period period(opts(500ms), fixed(300));
  EXPECT_EQ(period.next_delay(baton::mutex_owner{}, "me", at(5'000)), 0ms);
}

TEST(contend_period, waiter_woken_on_release_waits_for_transition_not_poll_interval) {
  baton::contend_period period(opts(500ms), fixed(0));
  const auto w = baton::wakeup_coverage::release;
  EXPECT_EQ(period.next_delay(owner("other", 10'000, 16'000), "me", at(1'000), w), 15'000ms);
  // Never longer than one lease (ttl 10 s + transition 6 s by default).
  EXPECT_EQ(period.next_delay(owner("other", 10'000, 90'000), "me", at(1'000), w), 16'000ms);
  EXPECT_EQ(period.next_delay(owner("other", 10'000, 16'000), "me", at(20'000), w), 0ms);
}

TEST(contend_period, waiter_woken_on_release_and_expiry_asks_every_two_leases) {
  baton::contend_period period(opts(500ms), fixed(0));
  const auto w = baton::wakeup_coverage::release_and_expiry;
  EXPECT_EQ(period.next_delay(owner("other", 10'000, 16'000), "me", at(1'000), w), 32'000ms);
  // A free or lapsed mutex is still asked for at once; the owner still renews at ttl_at.
  EXPECT_EQ(period.next_delay(owner("other", 10'000, 16'000), "me", at(17'000), w), 0ms);
  EXPECT_EQ(period.next_delay(baton::mutex_owner{}, "me", at(5'000), w), 0ms);
  EXPECT_EQ(period.next_delay(owner("me", 10'000, 16'000), "me", at(1'000), w), 9'000ms);
}

TEST(contend_period, default_random_source_stays_in_range) {
  auto random = baton::default_random_source();
  for (int i = 0; i < 10'000; ++i) {
    auto v = random(0, 100);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 100);
  }
}
