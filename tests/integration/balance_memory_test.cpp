// Balance in one process: three schedulers (three nodes) with balance on, sharing one in-memory
// backend, in real time with short heartbeats: fair shares whatever the start order, a node that
// stops hands its share to the others, a joining node takes about a third, drain empties a node;
// never two runs of one schedule at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;

/// Counts runs per node and schedule, and overlapping runs of one schedule.
class ledger {
 public:
  job_function job(std::string node, std::string schedule) {
    return [this, node, schedule](const job_context&) {
      {
        std::lock_guard lock(mutex_);
        if (++running_[schedule] > 1) ++overlaps_;
        ++runs_[node];
      }
      std::this_thread::sleep_for(5ms);
      std::lock_guard lock(mutex_);
      --running_[schedule];
    };
  }
  int overlaps() const {
    std::lock_guard lock(mutex_);
    return overlaps_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> running_;
  std::map<std::string, std::size_t> runs_;
  int overlaps_ = 0;
};

scheduler_options node_options(const std::string& id) {
  scheduler_options o;
  o.job_threads = 4;
  o.contender_id = id;
  o.balance.enabled = true;
  o.balance.node_id = id;
  o.balance.heartbeat = 200ms;
  o.balance.handoff_rate = 50;
  return o;
}

constexpr int schedule_count = 30;

void add_schedules(scheduler& s, ledger& l, const std::string& node) {
  for (int i = 0; i < schedule_count; ++i) {
    schedule_options o;
    o.name = "job-" + std::to_string(i);
    o.when = every_trigger{500ms};
    o.job = l.job(node, o.name);
    o.history = 0;
    s.add(std::move(o));
  }
}

std::size_t leads(const scheduler& s) {
  std::size_t n = 0;
  for (const auto& st : s.status()) n += st.leader ? 1 : 0;
  return n;
}

class balance_memory : public ::testing::Test {
 protected:
  balance_memory()
      : store_(std::make_shared<memory_lease_store>()),
        backend_("memory", rt_, store_, store_, test::lease_options(1000ms, 100ms)) {}

  runtime rt_{runtime::options{2, 1}};
  std::shared_ptr<memory_lease_store> store_;
  lease_store_backend backend_;
  ledger ledger_;
};

TEST_F(balance_memory, three_nodes_share_thirty_schedules_and_a_stopped_nodes_share_moves) {
  scheduler a(backend_, rt_, node_options("node-a"));
  scheduler b(backend_, rt_, node_options("node-b"));
  scheduler c(backend_, rt_, node_options("node-c"));
  add_schedules(a, ledger_, "node-a");
  add_schedules(b, ledger_, "node-b");
  add_schedules(c, ledger_, "node-c");
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return leads(a) == schedule_count; }, 20s))
      << "a alone leads " << leads(a);
  b.start();
  c.start();
  const auto fair = [&](std::initializer_list<const scheduler*> nodes, std::size_t lo,
                        std::size_t hi) {
    std::size_t total = 0;
    for (auto* n : nodes) {
      const auto l = leads(*n);
      if (l < lo || l > hi) return false;
      total += l;
    }
    return total == schedule_count;
  };
  ASSERT_TRUE(test::wait_until([&] { return fair({&a, &b, &c}, 9, 11); }, 30s))
      << leads(a) << "/" << leads(b) << "/" << leads(c);
  EXPECT_EQ(a.balance().alive, 3u);
  EXPECT_GT(a.balance().handoffs, 0u);

  c.stop(1s);
  ASSERT_TRUE(test::wait_until([&] { return fair({&a, &b}, 14, 16); }, 30s))
      << leads(a) << "/" << leads(b);

  b.drain(true);
  ASSERT_TRUE(test::wait_until([&] { return b.balance().drained && leads(a) == schedule_count; },
                               30s))
      << leads(a) << "/" << leads(b);
  b.drain(false);
  ASSERT_TRUE(test::wait_until([&] { return fair({&a, &b}, 14, 16); }, 30s))
      << leads(a) << "/" << leads(b);
  a.stop(1s);
  b.stop(1s);
  EXPECT_EQ(ledger_.overlaps(), 0);
}

}  // namespace
}  // namespace baton
