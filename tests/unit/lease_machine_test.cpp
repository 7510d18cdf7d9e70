// The lease state machine with a fake clock: no sleeps, no I/O.
#include "baton/mutex/detail/lease_machine.hpp"
#include "support/lease.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

using namespace std::chrono_literals;
using baton::detail::lease_machine;

namespace {

using time_point = lease_machine::time_point;

baton::backend_time bt(long long ms) { return baton::backend_time{std::chrono::milliseconds{ms}}; }

baton::contend_options options() {
  auto o = baton::test::lease_options(1000ms, 100ms);
  o.poll_interval = 300ms;
  o.drift_margin = 50ms;
  o.max_backoff = 800ms;
  return o;
}

// A grant as the backend would give it at backend time `now` for `id` holding `fence`.
baton::lease_grant grant(const std::string& id, std::uint64_t fence, long long now,
                         long long ttl = 1000, long long transition = 1000) {
  baton::lease_grant g;
  g.owner.owner_id = id;
  g.owner.fence = fence;
  g.owner.acquired_at = bt(now);
  g.owner.ttl_at = bt(now + ttl);
  g.owner.transition_at = bt(now + ttl + transition);
  g.now = bt(now);
  return g;
}

struct fake_clock {
  time_point now{std::chrono::hours{1}};
  void advance(std::chrono::milliseconds d) { now += d; }
};

lease_machine make_machine(std::int64_t jitter = 0) {
  return lease_machine("me", options(), [jitter](std::int64_t, std::int64_t) { return jitter; });
}

}  // namespace

TEST(lease_machine, first_grant_makes_owner_with_deadline_from_send_time) {
  fake_clock clock;
  auto m = make_machine();
  auto sent = clock.now;
  m.on_send(sent);
  clock.advance(30ms);  // reply takes 30 ms; the lease still counts from the send
  auto notes = m.on_reply(clock.now, grant("me", 7, 5'000));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(notes[0].acquired);
  EXPECT_TRUE(notes[0].state.acquired());
  EXPECT_EQ(notes[0].state.after.fence, 7u);
  EXPECT_TRUE(m.leader());
  EXPECT_EQ(m.fence(), 7u);
  EXPECT_EQ(m.deadline(), sent + 2000ms - 50ms);
  EXPECT_EQ(m.next_attempt(), sent + 1000ms);  // renew at ttl_at
}

TEST(lease_machine, renewal_extends_deadline_without_notification) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 7, 5'000));
  clock.advance(1000ms);
  auto sent = clock.now;
  m.on_send(sent);
  auto notes = m.on_reply(clock.now, grant("me", 7, 6'000));
  EXPECT_TRUE(notes.empty());
  EXPECT_TRUE(m.leader());
  EXPECT_EQ(m.deadline(), sent + 1950ms);
}

TEST(lease_machine, owner_steps_down_when_local_lease_passes_without_renewal) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 3, 0));
  // Renewals fail from ttl on; the machine keeps retrying every retry_period.
  clock.advance(1000ms);
  m.on_send(clock.now);
  auto notes = m.on_error(clock.now);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(m.next_attempt(), clock.now + 100ms);
  clock.advance(949ms);
  EXPECT_TRUE(m.on_tick(clock.now).empty());
  clock.advance(1ms);  // exactly at the deadline
  notes = m.on_tick(clock.now);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_FALSE(notes[0].acquired);
  EXPECT_TRUE(notes[0].state.released());
  EXPECT_EQ(notes[0].state.before.fence, 3u);
  EXPECT_EQ(notes[0].why, baton::release_reason::step_down);  // a local decision
  EXPECT_FALSE(m.leader());
  EXPECT_EQ(m.fence(), 0u);
}

TEST(lease_machine, late_reply_after_local_deadline_is_ignored_even_if_backend_says_owner) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 3, 0));
  clock.advance(1000ms);
  m.on_send(clock.now);   // renewal sent
  clock.advance(2500ms);  // answered far too late
  auto notes = m.on_reply(clock.now, grant("me", 3, 1'000));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_FALSE(notes[0].acquired);
  // The backend still says owner; the local lease ran out before the renewal came back.
  EXPECT_EQ(notes[0].why, baton::release_reason::step_down);
  EXPECT_FALSE(m.leader());
  EXPECT_EQ(m.next_attempt(), clock.now);  // asks again at once
}

TEST(lease_machine, another_owner_in_reply_means_released) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 3, 0));
  clock.advance(1000ms);
  m.on_send(clock.now);
  auto notes = m.on_reply(clock.now, grant("other", 4, 3'000));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(notes[0].state.released());
  EXPECT_EQ(notes[0].state.after.owner_id, "other");
  EXPECT_TRUE(notes[0].state.changed());
  EXPECT_EQ(notes[0].why, baton::release_reason::lost);  // the backend said so
}

TEST(lease_machine, fence_change_while_owner_is_released_then_acquired) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 3, 0));
  clock.advance(500ms);
  m.on_send(clock.now);
  auto notes = m.on_reply(clock.now, grant("me", 5, 500));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_FALSE(notes[0].acquired);
  EXPECT_EQ(notes[0].why, baton::release_reason::lost);  // that ownership ended on the backend
  EXPECT_TRUE(notes[1].acquired);
  EXPECT_EQ(notes[1].state.after.fence, 5u);
  EXPECT_EQ(m.fence(), 5u);
}

TEST(lease_machine, waiter_wakes_at_transition_with_jitter_capped_by_poll_interval) {
  fake_clock clock;
  auto m = make_machine(-200);
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("other", 1, 0, 100, 100));  // free again at backend 200
  EXPECT_FALSE(m.leader());
  EXPECT_EQ(m.next_attempt(), clock.now + 0ms);  // 200 - 200 jitter
  auto far = make_machine(999);
  far.on_send(clock.now);
  far.on_reply(clock.now, grant("other", 1, 0));
  EXPECT_EQ(far.next_attempt(), clock.now + 300ms);  // poll interval caps the wait
}

TEST(lease_machine, waiter_backs_off_exponentially_on_errors_up_to_cap) {
  fake_clock clock;
  auto m = make_machine();
  std::vector<std::chrono::milliseconds> delays;
  for (int i = 0; i < 6; ++i) {
    m.on_send(clock.now);
    m.on_error(clock.now);
    delays.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(m.next_attempt() - clock.now));
  }
  EXPECT_EQ(delays,
            (std::vector<std::chrono::milliseconds>{100ms, 200ms, 400ms, 800ms, 800ms, 800ms}));
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("other", 1, 0));
  EXPECT_EQ(m.consecutive_errors(), 0u);
}

TEST(lease_machine, wakeup_makes_waiter_ask_at_once_but_not_owner) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("other", 1, 0));
  clock.advance(10ms);
  m.on_wakeup(clock.now);
  EXPECT_EQ(m.next_attempt(), clock.now);

  auto owner = make_machine();
  owner.on_send(clock.now);
  owner.on_reply(clock.now, grant("me", 1, 0));
  auto renew_at = owner.next_attempt();
  owner.on_wakeup(clock.now);
  EXPECT_EQ(owner.next_attempt(), renew_at);
}

// A wake-up that comes while a request is out (the mutex was released after the backend answered
// it) is not lost when the reply still names the old owner: the waiter asks again at once rather
// than at its safeguard wait (the lease's lapse). The handover benchmark released at the waiter's
// first observation and the Redis waiter waited 16 s (ttl + transition) instead of 1 ms.
TEST(lease_machine, a_wakeup_during_a_request_asks_again_when_the_reply_names_another_owner) {
  fake_clock clock;
  auto m = make_machine();
  m.set_wakeups(baton::wakeup_coverage::release_and_expiry);
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("other", 1, 0));
  const auto safeguard = m.next_attempt();
  ASSERT_GT(safeguard, clock.now + 500ms);

  clock.advance(10ms);
  m.on_send(clock.now);  // asked again (a wake-up of a new subscription, say) ...
  clock.advance(1ms);
  m.on_wakeup(clock.now);  // ... and the owner released while it was out
  clock.advance(1ms);
  m.on_reply(clock.now, grant("other", 1, 11));  // answered before the release
  EXPECT_EQ(m.next_attempt(), clock.now);

  // Consumed by the request it caused: the next stale reply waits as before.
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("other", 2, 12));
  EXPECT_GT(m.next_attempt(), clock.now + 500ms);

  // A wake-up before the request went out is covered by that request.
  clock.advance(5ms);
  m.on_wakeup(clock.now);
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("other", 2, 17));
  EXPECT_GT(m.next_attempt(), clock.now + 500ms);
}

TEST(lease_machine, stop_releases_owner_once) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 9, 0));
  auto notes = m.on_stop();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(notes[0].state.released());
  EXPECT_TRUE(m.on_stop().empty());
}

TEST(lease_machine, reacquire_after_local_step_down_is_a_new_acquisition) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 2, 0));
  clock.advance(1950ms);
  ASSERT_EQ(m.on_tick(clock.now).size(), 1u);
  m.on_send(clock.now);
  auto notes = m.on_reply(clock.now, grant("me", 3, 1950));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(notes[0].acquired);
  EXPECT_TRUE(notes[0].state.acquired());
}

TEST(mutex_state, acquired_released_changed) {
  baton::mutex_owner me{"me", {}, {}, {}, 4};
  baton::mutex_owner other{"other", {}, {}, {}, 5};
  baton::mutex_owner none;
  EXPECT_TRUE((baton::mutex_state{none, me, "me"}.acquired()));
  EXPECT_TRUE((baton::mutex_state{other, me, "me"}.acquired()));
  EXPECT_FALSE((baton::mutex_state{me, me, "me"}.acquired()));
  EXPECT_TRUE((baton::mutex_state{me, other, "me"}.released()));
  EXPECT_TRUE((baton::mutex_state{me, none, "me"}.released()));
  EXPECT_FALSE((baton::mutex_state{other, none, "me"}.released()));
  EXPECT_FALSE((baton::mutex_state{me, me, "me"}.changed()));
  EXPECT_TRUE((baton::mutex_state{other, none, "me"}.changed()));
  auto me_new_fence = me;
  me_new_fence.fence = 6;
  EXPECT_TRUE((baton::mutex_state{me, me_new_fence, "me"}.acquired()));
  EXPECT_TRUE((baton::mutex_state{me, me_new_fence, "me"}.released()));
}

TEST(lease_machine, stop_while_owner_is_a_release_on_purpose) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  m.on_reply(clock.now, grant("me", 3, 0));
  auto notes = m.on_stop();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_FALSE(notes[0].acquired);
  EXPECT_EQ(notes[0].why, baton::release_reason::released);
  EXPECT_FALSE(m.leader());
}

TEST(lease_machine, a_refused_reply_never_makes_owner_and_waits_before_asking_again) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  // The acquire that measured the offset won: still not owner, nothing to tell.
  auto notes = m.on_refused(clock.now, grant("me", 3, 5'000));
  EXPECT_TRUE(notes.empty());
  EXPECT_FALSE(m.leader());
  EXPECT_FALSE(m.in_flight());
  EXPECT_TRUE(m.known_owner().empty());
  EXPECT_EQ(m.next_attempt(), clock.now + 300ms);  // max(retry_period 100 ms, poll 300 ms)
}

TEST(lease_machine, an_owner_whose_clock_is_refused_steps_down) {
  fake_clock clock;
  auto m = make_machine();
  m.on_send(clock.now);
  ASSERT_EQ(m.on_reply(clock.now, grant("me", 4, 5'000)).size(), 1u);
  clock.advance(500ms);
  m.on_send(clock.now);
  auto notes = m.on_refused(clock.now, grant("me", 4, 5'500));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_FALSE(notes[0].acquired);
  EXPECT_EQ(notes[0].why, baton::release_reason::step_down);
  EXPECT_EQ(notes[0].state.before.fence, 4u);
  EXPECT_FALSE(m.leader());
}

// --- renewal spreading -----------------------------------------------------------------------

namespace {

// A seeded uniform source, as the default one but reproducible.
baton::random_source seeded(std::uint64_t seed) {
  auto engine = std::make_shared<std::mt19937_64>(seed);
  return [engine](std::int64_t lo, std::int64_t hi) -> std::int64_t {
    if (hi <= lo) return lo;
    return std::uniform_int_distribution<std::int64_t>{lo, hi - 1}(*engine);
  };
}

// A source that always picks the top of the range: the earliest renewal the machine allows.
lease_machine earliest_renewer() {
  return lease_machine("me", options(),
                       [](std::int64_t lo, std::int64_t hi) { return hi > lo ? hi - 1 : lo; });
}

}  // namespace

TEST(lease_machine, owners_acquired_at_the_same_instant_do_not_all_renew_at_the_same_instant) {
  fake_clock clock;
  constexpr int n = 5000;
  auto source = seeded(19);
  std::map<time_point, int> per_instant;
  std::map<long long, int> per_10ms;
  const time_point sent = clock.now;
  for (int i = 0; i < n; ++i) {
    lease_machine m("me", options(), source);
    m.on_send(sent);
    ASSERT_EQ(m.on_reply(sent, grant("me", 1, 5'000)).size(), 1u);
    const auto at = m.next_attempt();
    // Inside the safe window: from ttl/2 after the send until ttl_at, so the renewal still has
    // transition - drift_margin of local lease left for retries.
    EXPECT_GE(at, sent + 500ms);
    EXPECT_LE(at, sent + 1000ms);
    EXPECT_LE(at, m.deadline() - (1000ms - 50ms));
    ++per_instant[at];
    ++per_10ms[std::chrono::duration_cast<std::chrono::milliseconds>(at - sent).count() / 10];
  }
  // On the grid (ttl/100 = 10 ms): 51 slots share 5,000 renewals, about 100 each.
  int most = 0;
  for (const auto& [at, count] : per_instant) {
    most = std::max(most, count);
    EXPECT_EQ((at - sent) % 10ms, 0ms) << "off the renewal grid";
  }
  EXPECT_LE(most, n / 25) << "renewals burst at one instant";
  EXPECT_GE(per_instant.size(), 45u);
  int most_10ms = 0;
  for (const auto& [slot, count] : per_10ms) most_10ms = std::max(most_10ms, count);
  EXPECT_LE(most_10ms, n / 25) << "renewals burst within 10 ms";
}

TEST(lease_machine, renewal_spread_is_wide_after_acquiring_and_after_errors_narrow_otherwise) {
  fake_clock clock;
  auto m = earliest_renewer();
  m.on_send(clock.now);
  ASSERT_EQ(m.on_reply(clock.now, grant("me", 1, 0)).size(), 1u);
  EXPECT_EQ(m.next_attempt(), clock.now + 500ms);  // ttl_at - ttl/2
  clock.advance(500ms);
  m.on_send(clock.now);
  ASSERT_TRUE(m.on_reply(clock.now, grant("me", 1, 500)).empty());
  EXPECT_EQ(m.next_attempt(), clock.now + 950ms);  // ttl_at - ttl/20
  EXPECT_EQ(m.deadline(), clock.now + 1950ms);
  // A failed renewal, then a good one: wide again (a stalled backend lines renewals up).
  clock.advance(950ms);
  m.on_send(clock.now);
  ASSERT_TRUE(m.on_error(clock.now).empty());
  clock.advance(100ms);
  m.on_send(clock.now);
  ASSERT_TRUE(m.on_reply(clock.now, grant("me", 1, 1'550)).empty());
  EXPECT_EQ(m.next_attempt(), clock.now + 500ms);
  // A source that ignores the range cannot push a renewal out of the window.
  auto wild = lease_machine("me", options(), [](std::int64_t, std::int64_t) { return 99'999; });
  wild.on_send(clock.now);
  wild.on_reply(clock.now, grant("me", 1, 0));
  EXPECT_EQ(wild.next_attempt(), clock.now + 500ms);
  auto negative = lease_machine("me", options(), [](std::int64_t, std::int64_t) { return -700; });
  negative.on_send(clock.now);
  negative.on_reply(clock.now, grant("me", 1, 0));
  EXPECT_EQ(negative.next_attempt(), clock.now + 1000ms);
}

TEST(lease_machine, spread_renewals_do_not_line_up_again_over_many_terms_of_renewals) {
  // 1,000 owners acquired together renew 50 times each; their renewal instants stay spread.
  constexpr int n = 1000;
  auto source = seeded(7);
  std::vector<lease_machine> owners;
  std::vector<time_point> at(n);
  const time_point start{std::chrono::hours{1}};
  for (int i = 0; i < n; ++i) {
    owners.emplace_back("me", options(), source);
    owners[i].on_send(start);
    owners[i].on_reply(start, grant("me", 1, 0));
  }
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < n; ++i) {
      auto& m = owners[i];
      const auto t = m.next_attempt();
      ASSERT_LT(t, m.deadline());
      m.on_send(t);
      const long long backend =
          std::chrono::duration_cast<std::chrono::milliseconds>(t - start).count();
      ASSERT_TRUE(m.on_reply(t, grant("me", 1, backend)).empty());
      at[i] = m.next_attempt();
    }
  }
  std::map<time_point, int> per_instant;
  for (const auto& t : at) ++per_instant[t];
  int most = 0;
  for (const auto& [t, count] : per_instant) most = std::max(most, count);
  EXPECT_LE(most, n / 20);  // about 10 per slot of the 10 ms grid
}
