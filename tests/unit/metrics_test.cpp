// Process-wide metrics (mutex/metrics.hpp): histogram buckets, the on/off switch, names. Counters
// are process-wide, so every test compares before and after, under a backend type of its own.
#include "baton/mutex/metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "baton/mutex/errc.hpp"

using namespace std::chrono_literals;

namespace {

std::optional<baton::backend_metrics> metrics_of(const std::string& type) {
  for (auto& m : baton::backend_metrics_snapshot())
    if (m.type == type) return m;
  return std::nullopt;
}

std::uint64_t errors_of(const baton::backend_metrics& m, const std::string& kind) {
  for (const auto& [name, n] : m.errors)
    if (name == kind) return n;
  return 0;
}

std::uint64_t event(const baton::backend_metrics& m, baton::lease_event e) {
  return m.lease_events[static_cast<std::size_t>(e)];
}

// Turns metrics back on whatever the test did.
struct enabled_again {
  ~enabled_again() { baton::set_metrics_enabled(true); }
};

}  // namespace

TEST(histogram, a_value_on_a_bound_lands_in_that_bounds_bucket) {
  baton::histogram h({0.001, 0.01, 0.1});
  h.observe(1ms);   // == 0.001: bucket le=0.001
  h.observe(10ms);  // == 0.01: bucket le=0.01
  h.observe(100ms);
  auto s = h.snapshot();
  ASSERT_EQ(s.counts.size(), 4u);
  EXPECT_EQ(s.counts, (std::vector<std::uint64_t>{1, 1, 1, 0}));
}

TEST(histogram, a_value_just_above_a_bound_lands_in_the_next_bucket) {
  baton::histogram h({0.001, 0.01, 0.1});
  h.observe(1ms + 1ns);
  h.observe(10ms + 1us);
  h.observe(0ns);  // the smallest bucket takes zero
  auto s = h.snapshot();
  EXPECT_EQ(s.counts, (std::vector<std::uint64_t>{1, 1, 1, 0}));
}

TEST(histogram, values_above_the_last_bound_land_in_the_inf_bucket) {
  baton::histogram h({0.001, 0.01});
  h.observe(10ms + 1ns);
  h.observe(1h);
  auto s = h.snapshot();
  EXPECT_EQ(s.counts, (std::vector<std::uint64_t>{0, 0, 2}));
  EXPECT_EQ(s.count, 2u);
}

TEST(histogram, sum_and_count_add_up_and_bucket_counts_sum_to_count) {
  baton::histogram h(baton::histogram::request_bounds());
  std::chrono::nanoseconds total{0};
  for (std::chrono::nanoseconds d :
       std::initializer_list<std::chrono::nanoseconds>{250us, 1ms, 3ms, 40ms, 700ms, 2s, 12s}) {
    h.observe(d);
    total += d;
  }
  auto s = h.snapshot();
  EXPECT_EQ(s.count, 7u);
  EXPECT_EQ(std::accumulate(s.counts.begin(), s.counts.end(), std::uint64_t{0}), s.count);
  EXPECT_NEAR(s.sum, std::chrono::duration<double>(total).count(), 1e-9);
  EXPECT_EQ(s.bounds, baton::histogram::request_bounds());
  EXPECT_EQ(s.counts.size(), s.bounds.size() + 1);
  EXPECT_EQ(s.counts.back(), 1u);  // 12 s > 10 s
}

TEST(histogram, a_negative_duration_counts_in_the_first_bucket_and_adds_nothing_to_sum) {
  baton::histogram h({0.001});
  h.observe(-5ms);
  auto s = h.snapshot();
  EXPECT_EQ(s.counts, (std::vector<std::uint64_t>{1, 0}));
  EXPECT_EQ(s.sum, 0.0);
}

TEST(histogram, bounds_must_ascend_and_be_at_most_32) {
  EXPECT_THROW((baton::histogram{std::vector<double>{0.1, 0.01}}), std::invalid_argument);
  EXPECT_THROW((baton::histogram{std::vector<double>(33, 1.0)}), std::invalid_argument);
  EXPECT_NO_THROW((baton::histogram{std::vector<double>(32, 1.0)}));
}

TEST(histogram, run_bounds_ascend_from_10_ms_to_6_h) {
  const auto& b = baton::histogram::run_bounds();
  ASSERT_FALSE(b.empty());
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_DOUBLE_EQ(b.front(), 0.01);
  EXPECT_DOUBLE_EQ(b.back(), 6 * 3600.0);
}

TEST(backend_metrics, requests_errors_and_events_are_counted_per_type) {
  const std::string type = "memory";
  const auto before = metrics_of(type).value_or(baton::backend_metrics{});
  baton::detail::record_backend_request(type, 2ms);
  baton::detail::record_backend_request(type, 3ms);
  baton::detail::record_backend_error(type, make_error_code(baton::errc::timeout));
  baton::detail::record_lease_event(type, baton::lease_event::acquired);
  baton::detail::record_lease_event(type, baton::lease_event::step_down);
  const auto after = metrics_of(type);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->requests - before.requests, 2u);
  EXPECT_EQ(after->request_latency.count - before.request_latency.count, 2u);
  EXPECT_NEAR(after->request_latency.sum - before.request_latency.sum, 0.005, 1e-9);
  EXPECT_EQ(errors_of(*after, "timeout") - errors_of(before, "timeout"), 1u);
  EXPECT_EQ(
      event(*after, baton::lease_event::acquired) - event(before, baton::lease_event::acquired),
      1u);
  EXPECT_EQ(
      event(*after, baton::lease_event::step_down) - event(before, baton::lease_event::step_down),
      1u);
  EXPECT_EQ(event(*after, baton::lease_event::lost), event(before, baton::lease_event::lost));
}

TEST(backend_metrics, error_kinds_are_errc_names_and_foreign_errors_count_as_other) {
  const std::string type = "zookeeper";
  const auto before = metrics_of(type).value_or(baton::backend_metrics{});
  baton::detail::record_backend_error(type, make_error_code(baton::errc::connection_lost));
  baton::detail::record_backend_error(type, make_error_code(baton::errc::session_expired));
  baton::detail::record_backend_error(type, make_error_code(baton::errc::conflict));
  baton::detail::record_backend_error(type, std::make_error_code(std::errc::io_error));
  const auto after = metrics_of(type);
  ASSERT_TRUE(after);
  for (const char* kind : {"connection_lost", "session_expired", "conflict", "other"})
    EXPECT_EQ(errors_of(*after, kind) - errors_of(before, kind), 1u) << kind;
  // Only kinds seen so far are listed, none with a zero count.
  for (const auto& [kind, n] : after->errors) EXPECT_GT(n, 0u) << kind;
}

TEST(backend_metrics, an_unknown_type_counts_as_other) {
  const auto before = metrics_of("other").value_or(baton::backend_metrics{});
  baton::detail::record_backend_request("etcd", 1ms);
  const auto after = metrics_of("other");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->requests - before.requests, 1u);
  EXPECT_FALSE(metrics_of("etcd"));
}

TEST(backend_metrics, snapshots_list_known_types_in_a_fixed_order) {
  baton::detail::record_backend_request("redis", 1ms);
  baton::detail::record_backend_request("sqlite", 1ms);
  std::vector<std::string> types;
  for (const auto& m : baton::backend_metrics_snapshot()) types.push_back(m.type);
  const auto sqlite = std::find(types.begin(), types.end(), "sqlite");
  const auto redis = std::find(types.begin(), types.end(), "redis");
  ASSERT_NE(sqlite, types.end());
  ASSERT_NE(redis, types.end());
  EXPECT_LT(sqlite, redis);  // sqlite, postgresql, mysql, redis, zookeeper, memory, other
}

TEST(backend_metrics, disabled_metrics_count_nothing_and_keep_what_was_counted) {
  enabled_again restore;
  const std::string type = "redis";
  baton::detail::record_backend_request(type, 1ms);  // the type is listed from here on
  const auto before = metrics_of(type);
  ASSERT_TRUE(before);
  baton::set_metrics_enabled(false);
  EXPECT_FALSE(baton::metrics_enabled());
  baton::detail::record_backend_request(type, 1ms);
  baton::detail::record_backend_error(type, make_error_code(baton::errc::timeout));
  baton::detail::record_lease_event(type, baton::lease_event::renewed);
  const auto off = metrics_of(type);
  ASSERT_TRUE(off);  // snapshots still read
  EXPECT_EQ(off->requests, before->requests);
  EXPECT_EQ(off->request_latency.count, before->request_latency.count);
  EXPECT_EQ(errors_of(*off, "timeout"), errors_of(*before, "timeout"));
  EXPECT_EQ(off->lease_events, before->lease_events);
  baton::set_metrics_enabled(true);
  EXPECT_TRUE(baton::metrics_enabled());
  baton::detail::record_backend_request(type, 1ms);
  EXPECT_EQ(metrics_of(type)->requests, before->requests + 1);
}

TEST(lease_event, names_are_the_exposition_labels) {
  EXPECT_EQ(baton::to_string(baton::lease_event::acquired), "acquired");
  EXPECT_EQ(baton::to_string(baton::lease_event::renewed), "renewed");
  EXPECT_EQ(baton::to_string(baton::lease_event::lost), "lost");
  EXPECT_EQ(baton::to_string(baton::lease_event::step_down), "step_down");
  EXPECT_EQ(baton::to_string(baton::lease_event::released), "released");
  EXPECT_EQ(static_cast<std::size_t>(baton::lease_event::released) + 1, baton::lease_event_count);
}
