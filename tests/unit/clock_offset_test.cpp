// Measuring the backend's clock against this host's: the midpoint estimate and the limit.
#include <gtest/gtest.h>

#include "baton/mutex/clock.hpp"
#include "baton/mutex/options.hpp"

namespace {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;

const sys::time_point t0{std::chrono::seconds{1'764'000'000}};

baton::backend_time ms(sys::time_point t) {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(t);
}

TEST(clock_offset, is_the_backend_time_minus_the_midpoint_of_the_request) {
  // Sent at t0, answered 40 ms later; the backend read t0 + 1h + 20 ms.
  auto s = baton::estimate_clock_offset(ms(t0 + 1h + 20ms), t0, t0 + 40ms);
  EXPECT_EQ(s.offset, std::chrono::milliseconds{1h});
  EXPECT_EQ(s.uncertainty, 20ms);
  // A host two minutes ahead: negative.
  s = baton::estimate_clock_offset(ms(t0 - 2min + 5ms), t0, t0 + 10ms);
  EXPECT_EQ(s.offset, -2min);
  EXPECT_EQ(s.uncertainty, 5ms);
}

TEST(clock_offset, a_wall_clock_that_stepped_back_during_the_request_adds_no_uncertainty) {
  const auto s = baton::estimate_clock_offset(ms(t0), t0, t0 - 3s);
  EXPECT_EQ(s.offset, 0ms);
  EXPECT_EQ(s.uncertainty, 0ms);
}

TEST(clock_offset, moved_only_when_surely_beyond_the_uncertainty) {
  EXPECT_TRUE(baton::clock_offset_moved({1h, 0ms}, 0ms, 1s));
  EXPECT_TRUE(baton::clock_offset_moved({-1500ms, 100ms}, 0ms, 1s));
  EXPECT_FALSE(baton::clock_offset_moved({1500ms, 600ms}, 0ms, 1s));  // a slow reply
  EXPECT_FALSE(baton::clock_offset_moved({3s, 2500ms}, 0ms, 1s));
  EXPECT_FALSE(baton::clock_offset_moved({1h + 900ms, 0ms}, 1h, 1s));
  EXPECT_TRUE(baton::clock_offset_moved({1h - 1200ms, 100ms}, 1h, 1s));
}

TEST(clock_offset, exceeds_only_when_surely_beyond_the_limit) {
  EXPECT_FALSE(baton::clock_offset_exceeds({1h, 0ms}, 0ms));  // no limit
  EXPECT_TRUE(baton::clock_offset_exceeds({1h, 0ms}, 30s));
  EXPECT_TRUE(baton::clock_offset_exceeds({-2min, 10ms}, 30s));
  EXPECT_FALSE(baton::clock_offset_exceeds({31s, 2s}, 30s));  // within the uncertainty
  EXPECT_FALSE(baton::clock_offset_exceeds({-30s, 0ms}, 30s));
}

TEST(clock_offset, a_negative_max_clock_offset_is_a_setting_problem) {
  baton::contend_options o;
  o.max_clock_offset = -1s;
  const auto problems = baton::check(o);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].field, "max_clock_offset");
}

}  // namespace
