// mutex_backend::read_waiters on every backend this build has: where the backend keeps its
// waiters (Redis: the wait queue, ZooKeeper: the lock nodes after the owner's), a contender
// waiting for a held mutex is listed; the others (SQL: waiters only poll) answer std::nullopt.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "baton/backends/factory.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

using namespace std::chrono_literals;

namespace {

using baton::test::unique_name;

struct quiet final : baton::mutex_contender {
  void on_acquired(const baton::mutex_state&) override {}
  void on_released(const baton::mutex_state&) override {}
};

// Backends that know who waits.
bool keeps_waiters(const std::string& type) { return type == "redis" || type == "zookeeper"; }

class waiters : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = baton::make_backend(baton::test::backend_config_for(GetParam()), rt_);
  }

  std::shared_ptr<quiet> contender_ = std::make_shared<quiet>();
  baton::runtime rt_;
  std::shared_ptr<baton::mutex_backend> backend_;
};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace

TEST_P(waiters, a_contender_waiting_for_a_held_mutex_is_listed_where_the_backend_keeps_waiters) {
  const auto name = unique_name("waiters");
  auto owner = backend_->make_contend_service(name, contender_, baton::test::lease_options());
  owner->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return owner->is_owner(); }, 10s));
  auto waiter = backend_->make_contend_service(name, contender_, baton::test::lease_options());
  waiter->start();
  if (!keeps_waiters(GetParam())) {
    EXPECT_EQ(backend_->read_waiters(name), std::nullopt);
  } else {
    // The waiter is listed once its first attempt has found the mutex held; the owner is not.
    std::optional<std::vector<std::string>> listed;
    EXPECT_TRUE(baton::test::wait_until(
        [&] {
          listed = backend_->read_waiters(name);
          return listed && listed->size() == 1 && listed->front() == waiter->contender_id();
        },
        10s))
        << (listed ? std::to_string(listed->size()) + " waiter(s)" : std::string("nullopt"));
    // Once the waiter leaves, nobody waits.
    ASSERT_TRUE(waiter->stop_and_wait(10s));
    EXPECT_TRUE(baton::test::wait_until(
        [&] {
          listed = backend_->read_waiters(name);
          return listed && listed->empty();
        },
        10s));
  }
  EXPECT_FALSE(owner->is_owner() && waiter->is_owner());
  EXPECT_TRUE(waiter->stop_and_wait(10s));
  EXPECT_TRUE(owner->stop_and_wait(10s));
  // A mutex nobody ever used has no waiters.
  if (keeps_waiters(GetParam()))
    EXPECT_EQ(backend_->read_waiters(unique_name("unused")), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(backend, waiters, ::testing::ValuesIn(baton::available_backends()),
                         param_name);
