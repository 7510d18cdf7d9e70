// The scheduler's decision logic with a fake clock: cadence, handover, misfires, overlap, lease.
#include <gtest/gtest.h>

#include <vector>

#include "baton/scheduler/clock.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using detail::decision;
using detail::recorded_fire;
using detail::schedule_plan;
using detail::sys_time;

// 2024-03-01T10:00:00Z
const sys_time t0 = sys_time{std::chrono::seconds{1709287200}};

trigger every(std::chrono::milliseconds period, std::chrono::milliseconds initial_delay = 0ms,
              every_mode mode = every_mode::fixed_rate) {
  return every_trigger{period, mode, initial_delay};
}

trigger cron(const char* expr, const char* zone = "UTC") {
  return cron_trigger{cron_expression::parse(expr, zone)};
}

// A lease with plenty left, and the stop_grace used throughout.
constexpr std::chrono::nanoseconds long_lease = 10s;
constexpr std::chrono::milliseconds grace = 2s;

TEST(schedule_plan, every_fires_at_acquisition_when_nothing_is_recorded) {
  schedule_plan plan(every(1h), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  auto step = plan.due(t0);
  ASSERT_TRUE(step.fires());
  EXPECT_EQ(step.slot, t0);
  EXPECT_FALSE(step.catch_up);
  plan.fired(step.slot);
  EXPECT_EQ(plan.next_fire(), t0 + 1h);
  EXPECT_EQ(plan.last_fire(), t0);
}

TEST(schedule_plan, initial_delay_delays_the_first_fire_only) {
  schedule_plan plan(every(1h, 10min), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  auto step = plan.due(t0);
  EXPECT_FALSE(step.fires());
  EXPECT_EQ(step.wake, t0 + 10min);
  EXPECT_FALSE(plan.due(t0 + 10min - 1ms).fires());
  step = plan.due(t0 + 10min);
  ASSERT_TRUE(step.fires());
  EXPECT_EQ(step.slot, t0 + 10min);
  plan.fired(step.slot);
  EXPECT_EQ(plan.next_fire(), t0 + 70min);
}

TEST(schedule_plan, initial_delay_is_ignored_when_a_fire_is_recorded) {
  schedule_plan plan(every(1h, 10min), misfire_policy::run_once);
  plan.start(recorded_fire{t0 - 50min, 3, std::nullopt}, t0);
  EXPECT_EQ(plan.due(t0).wake, t0 + 10min);  // last + period, not now + initial_delay
  plan.start(recorded_fire{t0 - 5min, 3, std::nullopt}, t0);
  EXPECT_EQ(plan.due(t0).wake, t0 + 55min);
}

TEST(schedule_plan, new_leader_waits_55_minutes_after_a_fire_5_minutes_ago) {
  schedule_plan plan(every(1h), misfire_policy::run_once);
  plan.start(recorded_fire{t0, 7, std::nullopt}, t0 + 5min);
  auto step = plan.due(t0 + 5min);
  EXPECT_FALSE(step.fires());
  EXPECT_EQ(*step.wake - (t0 + 5min), 55min);
  EXPECT_FALSE(plan.due(t0 + 1h - 1ms).fires());
  step = plan.due(t0 + 1h);
  ASSERT_TRUE(step.fires());
  EXPECT_EQ(step.slot, t0 + 1h);
  EXPECT_FALSE(step.catch_up);
}

TEST(schedule_plan, new_leader_never_fires_sooner_than_the_cadence_under_either_policy) {
  for (auto policy : {misfire_policy::run_once, misfire_policy::skip}) {
    for (auto since : {0ms, 1ms, 1000ms, 59'999ms}) {
      schedule_plan plan(every(1min), policy);
      const sys_time now = t0 + since;
      plan.start(recorded_fire{t0, 1, std::nullopt}, now);
      auto step = plan.due(now);
      EXPECT_FALSE(step.fires()) << since.count();
      EXPECT_EQ(step.wake, t0 + 1min) << since.count();
    }
  }
}

TEST(schedule_plan, cadence_continues_across_a_handover_through_the_recorded_state) {
  // Leader A fires twice, the second time its timer wakes late; it records each fire.
  schedule_plan a(every(1h), misfire_policy::run_once);
  a.start(std::nullopt, t0);
  std::string state;
  for (auto wake : {t0, t0 + 1h + 3s}) {
    auto step = a.due(wake);
    ASSERT_TRUE(step.fires());
    a.fired(step.slot);
    state = detail::format_schedule_state(recorded_fire{step.slot, 5, std::nullopt});
  }
  EXPECT_EQ(a.last_fire(), t0 + 1h);  // the planned time, not when the timer woke

  // Leader B reads the state 20 minutes later and continues at last + period.
  schedule_plan b(every(1h), misfire_policy::run_once);
  auto recorded = detail::parse_schedule_state(state);
  ASSERT_TRUE(recorded);
  b.start(recorded, t0 + 1h + 20min);
  EXPECT_EQ(b.due(t0 + 1h + 20min).wake, t0 + 2h);
  auto step = b.due(t0 + 2h + 1ms);
  ASSERT_TRUE(step.fires());
  EXPECT_EQ(step.slot, t0 + 2h);
  EXPECT_FALSE(step.catch_up);
}

TEST(schedule_plan, fixed_rate_does_not_drift_when_timers_wake_late) {
  schedule_plan plan(every(10s), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  for (int k = 0; k < 100; ++k) {
    auto step = plan.due(t0 + k * 10s + 250ms);  // every wake-up 250 ms late
    ASSERT_TRUE(step.fires());
    EXPECT_EQ(step.slot, t0 + k * 10s);
    plan.fired(step.slot);
  }
  EXPECT_EQ(plan.next_fire(), t0 + 1000s);
}

TEST(schedule_plan, run_once_catches_up_exactly_once_for_fires_missed_while_nobody_led) {
  schedule_plan plan(every(1h), misfire_policy::run_once);
  const sys_time now = t0 + 3h + 30min;
  plan.start(recorded_fire{t0, 1, std::nullopt}, now);
  auto step = plan.due(now);
  ASSERT_TRUE(step.fires());
  EXPECT_TRUE(step.catch_up);
  EXPECT_EQ(step.slot, t0 + 3h);  // the latest missed fire
  EXPECT_EQ(step.missed_since, t0 + 1h);
  plan.fired(step.slot);
  // No second catch-up: the next fire is the regular one.
  step = plan.due(now + 1s);
  EXPECT_FALSE(step.fires());
  EXPECT_EQ(step.wake, t0 + 4h);
  step = plan.due(t0 + 4h);
  ASSERT_TRUE(step.fires());
  EXPECT_FALSE(step.catch_up);
}

TEST(schedule_plan, skip_drops_missed_fires_and_waits_for_the_next_regular_one) {
  schedule_plan plan(every(1h), misfire_policy::skip);
  const sys_time now = t0 + 3h + 30min;
  plan.start(recorded_fire{t0, 1, std::nullopt}, now);
  auto step = plan.due(now);
  EXPECT_FALSE(step.fires());
  EXPECT_TRUE(step.dropped);
  EXPECT_EQ(step.missed_since, t0 + 1h);
  EXPECT_EQ(step.wake, t0 + 4h);
  plan.drop_missed(now);
  step = plan.due(now);
  EXPECT_FALSE(step.fires());
  EXPECT_FALSE(step.dropped);
  EXPECT_EQ(step.wake, t0 + 4h);
  step = plan.due(t0 + 4h + 2s);  // a late timer during our leadership still fires
  ASSERT_TRUE(step.fires());
  EXPECT_EQ(step.slot, t0 + 4h);
  EXPECT_FALSE(step.catch_up);
}

TEST(schedule_plan, a_fire_due_just_before_the_acquisition_is_on_time_not_missed) {
  schedule_plan plan(every(1h), misfire_policy::skip);
  plan.start(recorded_fire{t0, 1, std::nullopt}, t0 + 1h + 400ms);
  auto step = plan.due(t0 + 1h + 400ms);
  ASSERT_TRUE(step.fires());
  EXPECT_EQ(step.slot, t0 + 1h);
  EXPECT_FALSE(step.catch_up);
}

TEST(schedule_plan, skip_policy_decide_drops_and_reports) {
  schedule_plan plan(every(1h), misfire_policy::skip);
  const sys_time now = t0 + 2h + 10min;
  plan.start(recorded_fire{t0, 1, std::nullopt}, now);
  auto d = plan.decide(now, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::wait);
  EXPECT_TRUE(d.dropped);
  EXPECT_EQ(d.missed_since, t0 + 1h);
  EXPECT_EQ(d.wake, t0 + 3h);
  d = plan.decide(now, false, long_lease, grace);
  EXPECT_FALSE(d.dropped);  // reported once
}

TEST(schedule_plan, run_once_decide_starts_a_catch_up) {
  schedule_plan plan(every(1h), misfire_policy::run_once);
  const sys_time now = t0 + 2h + 10min;
  plan.start(recorded_fire{t0, 1, std::nullopt}, now);
  auto d = plan.decide(now, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::start);
  EXPECT_TRUE(d.catch_up);
  EXPECT_EQ(d.slot, t0 + 2h);
  EXPECT_EQ(d.missed_since, t0 + 1h);
}

TEST(schedule_plan, a_record_from_a_clock_ahead_of_ours_is_never_fired_again) {
  schedule_plan plan(every(1h), misfire_policy::run_once);
  plan.start(recorded_fire{t0 + 2s, 1, std::nullopt}, t0);
  EXPECT_EQ(plan.due(t0).wake, t0 + 1h + 2s);
  EXPECT_EQ(plan.last_fire(), t0 + 2s);
}

// Measured before the fix: a PostgreSQL node two minutes behind took over and re-ran 42 slots
// of a 6-field cron that had already run ("the recorded last fire is in the future").
TEST(schedule_plan, a_cron_leader_whose_clock_is_behind_never_runs_a_recorded_slot_again) {
  schedule_plan plan(cron("*/2 * * * * *"), misfire_policy::run_once);
  const sys_time recorded = t0 + 2min;  // written by a leader whose clock was right
  plan.start(recorded_fire{recorded, 7, std::nullopt}, t0);
  std::vector<sys_time> fired;
  for (sys_time now = t0; now <= t0 + 3min; now += 500ms) {
    auto d = plan.decide(now, false, long_lease, grace);
    if (d.what != decision::start) continue;
    fired.push_back(d.slot);
    plan.fired(d.slot);
  }
  ASSERT_FALSE(fired.empty());
  EXPECT_GT(fired.front(), recorded);
  EXPECT_EQ(fired.front(), recorded + 2s);
  for (std::size_t i = 1; i < fired.size(); ++i) EXPECT_GT(fired[i], fired[i - 1]);
}

TEST(schedule_plan, every_and_fixed_delay_never_plan_a_slot_at_or_before_a_future_record) {
  for (auto mode : {every_mode::fixed_rate, every_mode::fixed_delay}) {
    schedule_plan plan(every(1s, 0ms, mode), misfire_policy::run_once);
    plan.start(recorded_fire{t0 + 2min, 3, std::nullopt}, t0);
    const auto wake = plan.due(t0).wake;
    ASSERT_TRUE(wake.has_value());
    EXPECT_GT(*wake, t0 + 2min);
  }
}

// --- overlap ---------------------------------------------------------------------------------

TEST(schedule_plan, fires_during_a_run_are_skipped_and_the_cadence_kept) {
  schedule_plan plan(every(200ms), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  auto d = plan.decide(t0, false, long_lease, grace);
  ASSERT_EQ(d.what, decision::start);
  plan.fired(d.slot);
  // The run takes 650 ms: the fires at 200, 400 and 600 ms are skipped.
  int skipped = 0;
  for (auto at : {200ms, 400ms, 600ms}) {
    d = plan.decide(t0 + at, true, long_lease, grace);
    ASSERT_EQ(d.what, decision::skip_overlap) << at.count();
    EXPECT_EQ(d.slot, t0 + at);
    EXPECT_EQ(d.wake, t0 + at + 200ms);
    ++skipped;
  }
  EXPECT_EQ(skipped, 3);
  plan.run_ended(t0 + 650ms);
  d = plan.decide(t0 + 650ms, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::wait);
  EXPECT_EQ(d.wake, t0 + 800ms);
  d = plan.decide(t0 + 800ms, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::start);
  EXPECT_EQ(d.slot, t0 + 800ms);
}

// Simulates a leader with a fake clock: the job takes `run` each time; counts starts and skips
// and checks that no two runs overlap.
struct sim_result {
  int starts = 0;
  int skips = 0;
  std::vector<sys_time> slots;
};

sim_result simulate(trigger when, std::chrono::milliseconds run, std::chrono::milliseconds span) {
  manual_clock clock(t0);
  schedule_plan plan(when, misfire_policy::run_once);
  plan.start(std::nullopt, clock.now_system());
  sim_result r;
  std::optional<sys_time> running_until;
  const sys_time end = t0 + span;
  while (clock.now_system() < end) {
    const sys_time now = clock.now_system();
    if (running_until && *running_until <= now) {
      plan.run_ended(*running_until);
      running_until.reset();
    }
    auto d = plan.decide(now, running_until.has_value(), long_lease, grace);
    if (d.what == decision::start) {
      EXPECT_FALSE(running_until) << "two runs at once";
      plan.fired(d.slot);
      r.slots.push_back(d.slot);
      ++r.starts;
      running_until = now + run;
      continue;
    }
    if (d.what == decision::skip_overlap) ++r.skips;
    // Sleep until the next event: the planned wake-up or the end of the run.
    sys_time next = end;
    if (d.wake) next = std::min(next, *d.wake);
    if (running_until) next = std::min(next, *running_until);
    if (next <= now) next = now + 1ms;
    clock.advance(next - now);
  }
  return r;
}

TEST(schedule_plan, fixed_rate_with_a_run_longer_than_the_period_counts_skips_and_never_overlaps) {
  // Period 1 s, run 2.5 s, 10 s: runs at 0, 3, 6, 9; skips at 1, 2, 4, 5, 7, 8.
  auto r = simulate(every(1s), 2500ms, 10s);
  EXPECT_EQ(r.starts, 4);
  EXPECT_EQ(r.skips, 6);
  EXPECT_EQ(r.slots, (std::vector<sys_time>{t0, t0 + 3s, t0 + 6s, t0 + 9s}));
}

TEST(schedule_plan, fixed_delay_counts_the_period_from_the_end_of_each_run) {
  // Period 1 s, run 2.5 s: runs at 0, 3.5, 7 (end of run + 1 s), never skipped.
  auto r = simulate(every(1s, 0ms, every_mode::fixed_delay), 2500ms, 10s);
  EXPECT_EQ(r.starts, 3);
  EXPECT_EQ(r.skips, 0);
  EXPECT_EQ(r.slots, (std::vector<sys_time>{t0, t0 + 3500ms, t0 + 7000ms}));
}

TEST(schedule_plan, fixed_rate_and_fixed_delay_agree_for_short_runs_only_in_count) {
  auto rate = simulate(every(1s), 100ms, 10s);
  auto delay = simulate(every(1s, 0ms, every_mode::fixed_delay), 100ms, 10s);
  EXPECT_EQ(rate.starts, 10);  // 0..9 s
  EXPECT_EQ(rate.slots.back(), t0 + 9s);
  EXPECT_EQ(delay.starts, 10);  // 0, 1.1, 2.2 ... 9.9 s
  EXPECT_EQ(delay.slots.back(), t0 + 9900ms);
}

TEST(schedule_plan, fixed_delay_continues_from_the_recorded_end_after_a_handover) {
  schedule_plan plan(every(1min, 0ms, every_mode::fixed_delay), misfire_policy::run_once);
  plan.start(recorded_fire{t0, 2, t0 + 30s}, t0 + 40s);
  EXPECT_EQ(plan.due(t0 + 40s).wake, t0 + 90s);
}

TEST(schedule_plan, fixed_delay_counts_from_the_acquisition_when_the_end_is_not_recorded) {
  schedule_plan plan(every(1min, 0ms, every_mode::fixed_delay), misfire_policy::run_once);
  plan.start(recorded_fire{t0, 2, std::nullopt}, t0 + 40s);
  EXPECT_EQ(plan.due(t0 + 40s).wake, t0 + 100s);
}

TEST(schedule_plan, fixed_delay_waits_for_the_run_to_end) {
  schedule_plan plan(every(1s, 0ms, every_mode::fixed_delay), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  auto d = plan.decide(t0, false, long_lease, grace);
  ASSERT_EQ(d.what, decision::start);
  plan.fired(d.slot);
  EXPECT_EQ(plan.next_fire(), std::nullopt);
  d = plan.decide(t0 + 1h, true, long_lease, grace);
  EXPECT_EQ(d.what, decision::wait);
  EXPECT_EQ(d.wake, std::nullopt);
  plan.run_ended(t0 + 1h);
  EXPECT_EQ(plan.next_fire(), t0 + 1h + 1s);
}

TEST(schedule_plan, fixed_delay_run_once_catches_up_after_an_outage) {
  schedule_plan plan(every(1min, 0ms, every_mode::fixed_delay), misfire_policy::run_once);
  const sys_time now = t0 + 10min;
  plan.start(recorded_fire{t0, 2, t0 + 10s}, now);
  auto d = plan.decide(now, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::start);
  EXPECT_TRUE(d.catch_up);
  EXPECT_EQ(d.slot, t0 + 9min + 10s);  // the latest of end + k * period
}

// --- lease -----------------------------------------------------------------------------------

TEST(schedule_plan, a_job_never_starts_with_stop_grace_or_less_of_lease_left) {
  schedule_plan plan(every(1h), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  for (auto left : {std::chrono::nanoseconds{0}, std::chrono::nanoseconds{grace},
                    std::chrono::nanoseconds{grace} - 1ns, std::chrono::nanoseconds{-5s}}) {
    auto d = plan.decide(t0, false, left, grace);
    EXPECT_EQ(d.what, decision::defer) << left.count();
    EXPECT_EQ(d.slot, t0);
  }
  // The deferred fire stays due and starts once the lease is renewed.
  auto d = plan.decide(t0 + 300ms, false, std::chrono::nanoseconds{grace} + 1ns, grace);
  EXPECT_EQ(d.what, decision::start);
  EXPECT_EQ(d.slot, t0);
}

TEST(schedule_plan, may_start_and_stop_point) {
  const auto now = std::chrono::steady_clock::time_point{} + 100s;
  EXPECT_TRUE(detail::may_start(now + 3s, now, 2s));
  EXPECT_FALSE(detail::may_start(now + 2s, now, 2s));
  EXPECT_FALSE(detail::may_start(now + 1s, now, 2s));
  EXPECT_FALSE(detail::may_start(now - 1s, now, 0s));
  EXPECT_TRUE(detail::may_start(now + 1ms, now, 0s));
  EXPECT_EQ(detail::stop_point(now + 10s, 2s), now + 8s);
}

TEST(schedule_plan, stop_grace_defaults_fit_inside_the_lease) {
  contend_options lease;  // ttl 10 s, transition 6 s, drift margin 320 ms
  EXPECT_EQ(detail::stop_grace_limit(lease), 5680ms);
  EXPECT_EQ(detail::default_stop_grace(lease), 2840ms);
  lease.ttl = 30s;
  lease.transition = 20s;
  EXPECT_EQ(detail::default_stop_grace(lease), 3s);
  lease.ttl = 300ms;
  lease.transition = 300ms;  // drift margin 50 ms
  EXPECT_EQ(detail::default_stop_grace(lease), 125ms);
}

// --- cron ------------------------------------------------------------------------------------

TEST(schedule_plan, cron_without_state_fires_at_the_next_match) {
  schedule_plan plan(cron("*/15 * * * *"), misfire_policy::run_once);
  plan.start(std::nullopt, t0 + 1min);
  EXPECT_EQ(plan.due(t0 + 1min).wake, t0 + 15min);
}

TEST(schedule_plan, cron_continues_from_the_recorded_fire) {
  schedule_plan plan(cron("0 3 * * *", "Europe/Berlin"), misfire_policy::run_once);
  // Recorded: 2024-03-01 03:00 Berlin = 02:00Z; the new leader comes at 10:00Z.
  const sys_time last = t0 - 8h;
  plan.start(recorded_fire{last, 9, std::nullopt}, t0);
  auto step = plan.due(t0);
  EXPECT_FALSE(step.fires());
  EXPECT_EQ(step.wake, last + 24h);  // 2024-03-02 03:00 Berlin
}

TEST(schedule_plan, cron_catch_up_fires_the_latest_missed_time_once) {
  schedule_plan plan(cron("0 * * * *"), misfire_policy::run_once);
  const sys_time now = t0 + 5h + 20min;
  plan.start(recorded_fire{t0, 1, std::nullopt}, now);
  auto d = plan.decide(now, false, long_lease, grace);
  ASSERT_EQ(d.what, decision::start);
  EXPECT_TRUE(d.catch_up);
  EXPECT_EQ(d.slot, t0 + 5h);
  EXPECT_EQ(d.missed_since, t0 + 1h);
  plan.fired(d.slot);
  EXPECT_EQ(plan.due(now).wake, t0 + 6h);
}

TEST(schedule_plan, cron_skip_waits_for_the_next_match) {
  schedule_plan plan(cron("0 * * * *"), misfire_policy::skip);
  const sys_time now = t0 + 5h + 20min;
  plan.start(recorded_fire{t0, 1, std::nullopt}, now);
  auto d = plan.decide(now, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::wait);
  EXPECT_TRUE(d.dropped);
  EXPECT_EQ(d.wake, t0 + 6h);
}

TEST(schedule_plan, cron_after_a_long_outage_finds_the_latest_missed_time_fast) {
  // Walking a per-second expression through 400 days of misses would take 34 million steps.
  schedule_plan per_second(cron("* * * * * *"), misfire_policy::run_once);
  const sys_time now = t0 + 400 * 24h + 500ms;
  per_second.start(recorded_fire{t0, 1, std::nullopt}, now);
  const auto before = std::chrono::steady_clock::now();
  auto d = per_second.decide(now, false, long_lease, grace);
  ASSERT_EQ(d.what, decision::start);
  EXPECT_EQ(d.slot, t0 + 400 * 24h);
  EXPECT_FALSE(d.catch_up);  // due half a second ago: on time

  schedule_plan per_minute(cron("* * * * *"), misfire_policy::run_once);
  per_minute.start(recorded_fire{t0, 1, std::nullopt}, now + 30s);
  d = per_minute.decide(now + 30s, false, long_lease, grace);
  ASSERT_EQ(d.what, decision::start);
  EXPECT_EQ(d.slot, t0 + 400 * 24h);
  EXPECT_TRUE(d.catch_up);
  EXPECT_EQ(d.missed_since, t0 + 1min);
  EXPECT_LT(std::chrono::steady_clock::now() - before, 1s);
}

TEST(schedule_plan, cron_new_leader_waits_for_the_next_match_after_a_recent_fire) {
  schedule_plan plan(cron("0 * * * *"), misfire_policy::run_once);
  plan.start(recorded_fire{t0, 1, std::nullopt}, t0 + 5min);
  auto step = plan.due(t0 + 5min);
  EXPECT_FALSE(step.fires());
  EXPECT_EQ(step.wake, t0 + 1h);
}

TEST(schedule_plan, cron_with_no_more_matches_plans_nothing) {
  schedule_plan plan(cron("0 0 30 2 *"), misfire_policy::run_once);
  plan.start(std::nullopt, t0);
  auto d = plan.decide(t0, false, long_lease, grace);
  EXPECT_EQ(d.what, decision::wait);
  EXPECT_EQ(d.wake, std::nullopt);
}

// --- recorded state --------------------------------------------------------------------------

TEST(schedule_state, round_trips) {
  recorded_fire r{t0 + 250ms, 42, std::nullopt};
  EXPECT_EQ(detail::format_schedule_state(r), "v1 1709287200250 42");
  EXPECT_EQ(detail::parse_schedule_state("v1 1709287200250 42"), r);
  r.last_end = t0 + 5s;
  EXPECT_EQ(detail::format_schedule_state(r), "v1 1709287200250 42 1709287205000");
  EXPECT_EQ(detail::parse_schedule_state(detail::format_schedule_state(r)), r);
}

TEST(schedule_state, rejects_empty_and_malformed_text) {
  for (const char* bad : {"", "v1", "v1 12", "v2 1 2", "v1 x 2", "v1 1 -2", "v1 1 2 3 4",
                          "v1 1 2 x", "garbage", "v1 99999999999999999999999 1"})
    EXPECT_EQ(detail::parse_schedule_state(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace baton

namespace baton {
namespace {

using namespace std::chrono_literals;
using detail::schedule_state;

TEST(schedule_state, v1_is_kept_without_manual_runs_and_v2_carries_them) {
  const auto t = detail::sys_time{std::chrono::milliseconds{1'700'000'000'123}};
  schedule_state s{detail::recorded_fire{t, 4, std::nullopt}, 0};
  EXPECT_EQ(detail::format_state(s), "v1 1700000000123 4");
  EXPECT_EQ(detail::parse_state("v1 1700000000123 4"), s);
  s.manual_runs = 3;
  s.fire->last_end = t + 5s;
  EXPECT_EQ(detail::format_state(s), "v2 3 1700000000123 4 1700000005123");
  EXPECT_EQ(detail::parse_state(detail::format_state(s)), s);
  const schedule_state manual_only{std::nullopt, 2};
  EXPECT_EQ(detail::format_state(manual_only), "v2 2");
  EXPECT_EQ(detail::parse_state("v2 2"), manual_only);
  EXPECT_EQ(detail::parse_state(""), schedule_state{});
  for (const char* bad : {"v2", "v2 x", "v2 1 2", "v3 1", "v1 1", "v2 -1 5 6"})
    EXPECT_FALSE(detail::parse_state(bad).has_value()) << bad;
}

TEST(run_outcome_rules, a_requested_stop_wins_then_signal_then_throw) {
  run_report none;
  run_report signalled;
  signalled.signal = 9;
  using detail::stop_cause;
  EXPECT_EQ(detail::classify_outcome(stop_cause::timeout, true, signalled), run_outcome::timed_out);
  EXPECT_EQ(detail::classify_outcome(stop_cause::lost_lease, true, signalled),
            run_outcome::lost_lease);
  EXPECT_EQ(detail::classify_outcome(stop_cause::shutdown, false, none), run_outcome::lost_lease);
  EXPECT_EQ(detail::classify_outcome(stop_cause::none, true, signalled), run_outcome::killed);
  EXPECT_EQ(detail::classify_outcome(stop_cause::none, true, none), run_outcome::failed);
  EXPECT_EQ(detail::classify_outcome(stop_cause::none, false, none), run_outcome::succeeded);
  EXPECT_TRUE(detail::retryable(run_outcome::failed));
  EXPECT_TRUE(detail::retryable(run_outcome::killed));
  EXPECT_TRUE(detail::retryable(run_outcome::timed_out));
  EXPECT_FALSE(detail::retryable(run_outcome::lost_lease));
  EXPECT_FALSE(detail::retryable(run_outcome::succeeded));
  EXPECT_FALSE(detail::retryable(run_outcome::skipped_paused));
}

TEST(retry_rules, the_delay_doubles_saturates_and_a_retry_must_come_before_the_next_fire) {
  EXPECT_EQ(detail::retry_delay(10s, 1), 10s);
  EXPECT_EQ(detail::retry_delay(10s, 2), 20s);
  EXPECT_EQ(detail::retry_delay(10s, 4), 80s);
  EXPECT_EQ(detail::retry_delay(10s, 1000), std::chrono::hours{24});
  const auto t = detail::sys_time{} + 1h;
  EXPECT_TRUE(detail::retry_fits(t, std::nullopt));
  EXPECT_TRUE(detail::retry_fits(t, t + 1ms));
  EXPECT_FALSE(detail::retry_fits(t, t));
  EXPECT_FALSE(detail::retry_fits(t, t - 1s));
}

TEST(history_queue, drops_the_oldest_beyond_its_bound) {
  detail::history_queue q(2);
  EXPECT_EQ(q.push({1, "a"}), 0u);
  EXPECT_EQ(q.push({1, "b"}), 0u);
  EXPECT_EQ(q.push({2, "c"}), 1u);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.front().bytes, "b");
  q.pop();
  EXPECT_EQ(q.front().fence, 2u);
}

TEST(schedule_plan_resume, slots_skipped_while_paused_are_caught_up_once_or_dropped) {
  const auto t0 = detail::sys_time{std::chrono::milliseconds{1'700'000'000'000}};
  const detail::recorded_fire last{t0, 1, std::nullopt};
  // Paused for 5 periods; the last slot came 100 ms before the resume (inside the on-time window
  // of an acquisition, but a resume treats it as missed).
  const auto now = t0 + 5 * 200ms + 100ms;
  detail::schedule_plan run_once(every_trigger{200ms}, misfire_policy::run_once);
  run_once.resume(last, now);
  auto d = run_once.due(now);
  EXPECT_EQ(d.what, detail::decision::start);
  EXPECT_TRUE(d.catch_up);
  EXPECT_EQ(d.slot, t0 + 1000ms);
  detail::schedule_plan skip(every_trigger{200ms}, misfire_policy::skip);
  skip.resume(last, now);
  d = skip.due(now);
  EXPECT_TRUE(d.dropped);
  EXPECT_EQ(d.wake, t0 + 1200ms);
}

}  // namespace
}  // namespace baton
