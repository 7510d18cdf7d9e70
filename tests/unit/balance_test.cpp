// Balance, the pure parts: the assignment of schedules to nodes (fair shares, tags, drain, few
// moves when a node joins or leaves), the digests, membership records, option checks, and the
// balancer's small pieces (tolerance, handoff quota, token bucket, member tracker) with made-up
// times.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/detail/balancer.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using steady_point = std::chrono::steady_clock::time_point;

const steady_point t0 = steady_point{} + 1000h;

std::vector<balance_node> make_nodes(std::size_t n) {
  std::vector<balance_node> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back({"node-" + std::to_string(i), {}, false});
  return out;
}

std::vector<balance_schedule> make_schedules(std::size_t s) {
  std::vector<balance_schedule> out;
  for (std::size_t i = 0; i < s; ++i) out.push_back({"job-" + std::to_string(i), {}, {}});
  return out;
}

/// How many schedules each node got ("" counts too: nobody).
std::map<std::string, std::size_t> shares(const std::vector<std::string>& owners) {
  std::map<std::string, std::size_t> out;
  for (const auto& o : owners) ++out[o];
  return out;
}

TEST(balance_assign, every_node_gets_the_floor_or_the_ceiling_of_its_fair_share) {
  for (std::size_t s : {1u, 7u, 60u, 1000u, 10000u}) {
    const auto schedules = make_schedules(s);
    for (std::size_t n = 1; n <= 7; ++n) {
      const auto nodes = make_nodes(n);
      auto got = shares(assign_schedules(nodes, schedules));
      EXPECT_EQ(got.count(""), 0u) << s << " on " << n;
      for (const auto& node : nodes) {
        EXPECT_GE(got[node.id], s / n) << node.id << ": " << s << " on " << n;
        EXPECT_LE(got[node.id], (s + n - 1) / n) << node.id << ": " << s << " on " << n;
      }
    }
  }
}

TEST(balance_assign, preferred_nodes_get_their_schedules_while_they_have_room) {
  const std::vector<balance_node> nodes{{"a", {}, false}, {"b", {}, false}, {"c", {"ssd"}, false}};
  for (std::size_t preferring : {1u, 5u, 10u, 20u}) {
    auto schedules = make_schedules(30);
    for (std::size_t i = 0; i < preferring; ++i) schedules[i].preferred_tags = {"ssd"};
    const auto owners = assign_schedules(nodes, schedules);
    std::size_t on_c = 0, preferring_on_c = 0;
    for (std::size_t i = 0; i < owners.size(); ++i)
      if (owners[i] == "c") {
        ++on_c;
        if (i < preferring) ++preferring_on_c;
      }
    EXPECT_EQ(on_c, 10u) << preferring << " prefer ssd";  // its fair share, no more
    EXPECT_EQ(preferring_on_c, std::min<std::size_t>(preferring, 10))
        << preferring << " prefer ssd";
  }
}

/// Takes as many tokens as the bucket gives at `at`.
int drain_bucket(detail::token_bucket& b, steady_point at) {
  int n = 0;
  while (b.take(at)) ++n;
  return n;
}

TEST(token_bucket, gives_a_burst_of_one_seconds_worth_then_the_rate) {
  detail::token_bucket b(5.0);
  EXPECT_EQ(drain_bucket(b, t0), 5);
  EXPECT_FALSE(b.take(t0 + 150ms));
  EXPECT_TRUE(b.take(t0 + 201ms));
  EXPECT_FALSE(b.take(t0 + 201ms));
}

TEST(token_bucket, takes_at_most_the_rate_per_second_over_a_long_run) {
  detail::token_bucket b(5.0);
  int taken = 0;
  for (auto at = t0; at < t0 + 60s; at += 10ms) taken += drain_bucket(b, at);
  EXPECT_GE(taken, 5 * 60);
  EXPECT_LE(taken, 5 * 60 + 5);  // the rate, plus the first burst
}

TEST(token_bucket, an_idle_hour_gives_no_more_than_one_burst) {
  detail::token_bucket b(5.0);
  EXPECT_EQ(drain_bucket(b, t0), 5);
  EXPECT_EQ(drain_bucket(b, t0 + 1h), 5);
}

TEST(token_bucket, a_refund_gives_one_back_but_never_beyond_the_burst) {
  detail::token_bucket b(5.0);
  EXPECT_EQ(drain_bucket(b, t0), 5);
  b.refund();
  EXPECT_EQ(drain_bucket(b, t0), 1);
  detail::token_bucket full(5.0);
  full.refund();
  EXPECT_EQ(drain_bucket(full, t0), 5);
}

TEST(token_bucket, a_rate_below_one_per_second_still_gives_a_token_now_and_then) {
  // handoff_rate 0.5: one handoff every 2 s (the burst is at least one token, else none ever).
  detail::token_bucket b(0.5);
  EXPECT_TRUE(b.take(t0));
  EXPECT_FALSE(b.take(t0 + 1s));
  EXPECT_TRUE(b.take(t0 + 2001ms));
  EXPECT_FALSE(b.take(t0 + 3s));
  int taken = 0;
  for (auto at = t0 + 3s; at < t0 + 63s; at += 100ms) taken += drain_bucket(b, at);
  EXPECT_GE(taken, 29);
  EXPECT_LE(taken, 31);
}

}  // namespace
}  // namespace baton
