// What a SIGTERM or SIGINT does to `baton run` at which moment (daemon/stop_policy.hpp), with
// made-up times: a repeated SIGTERM never aborts the graceful stop, SIGINT twice exits at once,
// stop_timeout ends the wait.
#include <gtest/gtest.h>

#include "../../daemon/stop_policy.hpp"

namespace {

using namespace std::chrono_literals;
using baton::daemon::next_stop_step;
using baton::daemon::stop_step;
using clock_type = std::chrono::steady_clock;

const clock_type::time_point t0 = clock_type::time_point{} + 1000h;
constexpr std::chrono::milliseconds stop_timeout = 20s;

stop_step after(std::optional<int> sig, std::chrono::milliseconds since_first) {
  return next_stop_step(sig, t0, t0 + since_first, stop_timeout);
}

TEST(stop_policy, the_first_sigterm_or_sigint_stops_gracefully) {
  EXPECT_EQ(next_stop_step(SIGTERM, std::nullopt, t0, stop_timeout), stop_step::stop_gracefully);
  EXPECT_EQ(next_stop_step(SIGINT, std::nullopt, t0, stop_timeout), stop_step::stop_gracefully);
  EXPECT_EQ(next_stop_step(std::nullopt, std::nullopt, t0, stop_timeout), stop_step::wait);
}

TEST(stop_policy, a_sigterm_within_a_second_of_the_first_is_the_same_stop_delivered_twice) {
  // GNU timeout signals the daemon, then its process group: microseconds apart.
  EXPECT_EQ(after(SIGTERM, 0ms), stop_step::duplicate);
  EXPECT_EQ(after(SIGTERM, 1ms), stop_step::duplicate);
  EXPECT_EQ(after(SIGTERM, 999ms), stop_step::duplicate);
}

TEST(stop_policy, a_later_sigterm_while_stopping_is_ignored_until_stop_timeout) {
  EXPECT_EQ(after(SIGTERM, 1s), stop_step::keep_stopping);
  EXPECT_EQ(after(SIGTERM, 5s), stop_step::keep_stopping);
  EXPECT_EQ(after(SIGTERM, stop_timeout - 1ms), stop_step::keep_stopping);
  EXPECT_EQ(after(SIGTERM, stop_timeout), stop_step::give_up);
}

TEST(stop_policy, sigint_while_stopping_exits_at_once_whatever_began_the_stop) {
  EXPECT_EQ(after(SIGINT, 0ms), stop_step::exit_now);
  EXPECT_EQ(after(SIGINT, 300ms), stop_step::exit_now);
  EXPECT_EQ(after(SIGINT, 10s), stop_step::exit_now);
}

TEST(stop_policy, the_stop_gives_up_at_stop_timeout_without_any_signal) {
  EXPECT_EQ(after(std::nullopt, 0ms), stop_step::wait);
  EXPECT_EQ(after(std::nullopt, stop_timeout - 1ms), stop_step::wait);
  EXPECT_EQ(after(std::nullopt, stop_timeout), stop_step::give_up);
  EXPECT_EQ(after(std::nullopt, stop_timeout + 1h), stop_step::give_up);
  EXPECT_EQ(after(SIGINT, stop_timeout), stop_step::give_up);
}

}  // namespace
