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

namespace baton {
namespace {

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

}  // namespace
}  // namespace baton
