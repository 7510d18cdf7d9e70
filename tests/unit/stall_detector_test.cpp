// The daemon's stall detector's decision (daemon/stall_detector.hpp) with made-up times: a
// timer that wakes at least the threshold late is a stall of that length; anything else is not.
#include <gtest/gtest.h>

#include "../../daemon/stall_detector.hpp"

namespace {

using namespace std::chrono_literals;
using baton::daemon::stall_threshold;
using baton::daemon::stalled_for;
using clock_type = std::chrono::steady_clock;

const clock_type::time_point planned = clock_type::time_point{} + 1000h;

TEST(stall_detector, an_on_time_or_slightly_late_wake_up_is_no_stall) {
  EXPECT_FALSE(stalled_for(planned, planned));
  EXPECT_FALSE(stalled_for(planned, planned + 1ms));
  EXPECT_FALSE(stalled_for(planned, planned + stall_threshold - 1ms));
}

TEST(stall_detector, an_early_wake_up_is_no_stall) {
  EXPECT_FALSE(stalled_for(planned, planned - 5s));
}

TEST(stall_detector, a_wake_up_the_threshold_late_or_later_is_a_stall_of_that_length) {
  EXPECT_EQ(stalled_for(planned, planned + stall_threshold), stall_threshold);
  // SIGSTOP for twice a 3 s lease, then SIGCONT: the pause length is what is reported.
  EXPECT_EQ(stalled_for(planned, planned + 6s + 20ms), 6020ms);
}

TEST(stall_detector, the_threshold_is_a_parameter) {
  EXPECT_FALSE(stalled_for(planned, planned + 150ms, 200ms));
  EXPECT_EQ(stalled_for(planned, planned + 200ms, 200ms), 200ms);
}

}  // namespace
