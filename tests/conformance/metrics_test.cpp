// Backend metrics (mutex/metrics.hpp), run on every backend this build has: requests and their
// latency, and the lease events of the contend service, counted under the backend's type.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include <boost/asio/post.hpp>

#include "baton/backends/factory.hpp"
#include "baton/mutex/locker.hpp"
#include "baton/mutex/metrics.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

using namespace std::chrono_literals;

namespace {

using baton::test::unique_name;

// The counters of `type` now (zero when it counted nothing yet).
baton::backend_metrics metrics_of(const std::string& type) {
  for (auto& m : baton::backend_metrics_snapshot())
    if (m.type == type) return m;
  baton::backend_metrics none;
  none.type = type;
  return none;
}

std::uint64_t event(const baton::backend_metrics& m, baton::lease_event e) {
  return m.lease_events[static_cast<std::size_t>(e)];
}

struct counting final : baton::mutex_contender {
  std::atomic<int> acquired{0};
  std::atomic<int> released{0};
  void on_acquired(const baton::mutex_state&) override { ++acquired; }
  void on_released(const baton::mutex_state&) override { ++released; }
};

baton::runtime::options one_io_thread() {
  baton::runtime::options o;
  o.io_threads = 1;  // the freeze test blocks it: every strand and timer of the backend waits
  return o;
}

class metrics : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_ = baton::test::backend_config_for(GetParam());
    backend_ = baton::make_backend(config_, rt_);
  }

  baton::runtime rt_{one_io_thread()};
  baton::backend_config config_;
  std::shared_ptr<baton::mutex_backend> backend_;
};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace

TEST_P(metrics, lock_unlock_cycles_count_requests_latencies_acquired_and_released) {
  const std::string type(backend_->type());
  EXPECT_EQ(type, GetParam());
  const auto before = metrics_of(type);
  constexpr int cycles = 3;
  for (int i = 0; i < cycles; ++i) {
    baton::locker lock(*backend_, unique_name("metrics-cycle"), baton::test::lease_options());
    ASSERT_TRUE(lock.try_lock_for(30s)) << "cycle " << i;
    EXPECT_TRUE(lock.owns_lease());
    lock.unlock();
  }
  // Nothing of this backend is in flight any more once it is gone (a ZooKeeper session keeps
  // sending heartbeats while it lives).
  backend_.reset();
  const auto after = metrics_of(type);
  const auto requests = after.requests - before.requests;
  EXPECT_GE(requests, static_cast<std::uint64_t>(2 * cycles));  // at least acquire + release each
  EXPECT_EQ(after.request_latency.count - before.request_latency.count, requests);
  EXPECT_GE(after.request_latency.sum, before.request_latency.sum);
  EXPECT_EQ(
      event(after, baton::lease_event::acquired) - event(before, baton::lease_event::acquired),
      static_cast<std::uint64_t>(cycles));
  EXPECT_EQ(
      event(after, baton::lease_event::released) - event(before, baton::lease_event::released),
      static_cast<std::uint64_t>(cycles));
}

TEST_P(metrics, an_owner_frozen_past_its_lease_counts_a_loss_as_lost_or_step_down) {
  const std::string type(backend_->type());
  auto who = std::make_shared<counting>();
  const auto options = baton::test::lease_options();
  auto s = backend_->make_contend_service(unique_name("metrics-loss"), who, options);
  s->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 30s));
  const auto before = metrics_of(type);

  // Block the only io thread until the local lease has surely run out: no renewal can be sent
  // or acted on meanwhile. A request sent just before counts its lease from its send time at
  // the latest, so one lease (the ZooKeeper session timeout: at most twice the time left, as
  // the owner's heartbeat renews every third of it) past the freeze is enough.
  const auto frozen_at = std::chrono::steady_clock::now();
  const auto left = std::max<std::chrono::steady_clock::duration>(
      s->lease_deadline() - frozen_at, std::chrono::steady_clock::duration::zero());
  const auto thaw_at =
      frozen_at + std::max<std::chrono::steady_clock::duration>(options.lease(), 2 * left) + 300ms;
  std::atomic<bool> frozen{false};
  std::atomic<bool> thawed{false};
  boost::asio::post(rt_.io(), [&] {
    frozen = true;
    baton::test::wait_until([&] { return std::chrono::steady_clock::now() >= thaw_at; },
                            std::chrono::duration_cast<std::chrono::milliseconds>(
                                thaw_at - std::chrono::steady_clock::now()) +
                                1s);
    thawed = true;
  });
  ASSERT_TRUE(baton::test::wait_until([&] { return thawed.load(); }, 60s));
  ASSERT_TRUE(frozen.load());

  ASSERT_TRUE(baton::test::wait_until([&] { return who->released.load() >= 1; }, 30s));
  const auto after = metrics_of(type);
  const auto losses =
      event(after, baton::lease_event::lost) - event(before, baton::lease_event::lost) +
      event(after, baton::lease_event::step_down) - event(before, baton::lease_event::step_down);
  EXPECT_GE(losses, 1u);
  // Not a release on purpose: stop() was not called.
  EXPECT_EQ(event(after, baton::lease_event::released),
            event(before, baton::lease_event::released));
  EXPECT_TRUE(s->stop_and_wait(30s));
}

INSTANTIATE_TEST_SUITE_P(backend, metrics, ::testing::ValuesIn(baton::available_backends()),
                         param_name);
