// Two schedulers (two contender ids) on one in-process memory backend, in real time with short
// periods: one leader at a time, the cadence carried across a handover, fences that never go
// down, skips for overlapping fires, stop requests on leadership loss and on shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <spdlog/sinks/base_sink.h>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/scheduler/cron.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using sys = std::chrono::system_clock;

/// One run as the job saw it.
struct run_record {
  std::string node;
  std::uint64_t fence = 0;
  sys::time_point fire_time;
  sys::time_point started_wall;
  steady::time_point start;
  steady::time_point end;
  bool stop_requested = false;  ///< the stop token fired during the run
};

/// Thread-safe journal of runs, and jobs that write to it.
class journal {
 public:
  /// A job that runs for `length`, or until asked to stop.
  job_function job(std::string node, std::chrono::milliseconds length) {
    return [this, node, length](const job_context& ctx) {
      run_record r;
      r.node = node;
      r.fence = ctx.fence;
      r.fire_time = ctx.fire_time;
      r.started_wall = sys::now();
      r.start = steady::now();
      {
        std::unique_lock lock(mutex_);
        ++running_;
        max_running_ = std::max(max_running_, running_);
        cv_.wait_for(lock, ctx.stop, length, [] { return false; });
        --running_;
      }
      r.stop_requested = ctx.stop.stop_requested();
      r.end = steady::now();
      std::lock_guard lock(mutex_);
      runs_.push_back(r);
    };
  }

  std::vector<run_record> runs() const {
    std::lock_guard lock(mutex_);
    auto copy = runs_;
    std::sort(copy.begin(), copy.end(), [](auto& a, auto& b) { return a.start < b.start; });
    return copy;
  }
  std::size_t count(const std::string& node) const {
    std::lock_guard lock(mutex_);
    return std::count_if(runs_.begin(), runs_.end(), [&](auto& r) { return r.node == node; });
  }
  int running() const {
    std::lock_guard lock(mutex_);
    return running_;
  }
  int max_running() const {
    std::lock_guard lock(mutex_);
    return max_running_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable_any cv_;
  std::vector<run_record> runs_;
  int running_ = 0;
  int max_running_ = 0;
};

/// Forwards to a shared store, or fails every request with connection_lost while `cut` is set
/// (this node lost its backend).
class cuttable_store final : public lease_store {
 public:
  explicit cuttable_store(std::shared_ptr<lease_store> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> cut{false};

  void async_acquire(const std::string& name, const std::string& owner_id,
                     std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                     grant_handler handler) override {
    if (cut) return handler(make_error_code(errc::connection_lost), {});
    inner_->async_acquire(name, owner_id, ttl, transition, std::move(handler));
  }
  void async_release(const std::string& name, const std::string& owner_id,
                     done_handler handler) override {
    if (cut) return handler(make_error_code(errc::connection_lost));
    inner_->async_release(name, owner_id, std::move(handler));
  }
  void async_read(const std::string& name, grant_handler handler) override {
    if (cut) return handler(make_error_code(errc::connection_lost), {});
    inner_->async_read(name, std::move(handler));
  }
  void async_read_state(const std::string& name, state_handler handler) override {
    if (cut) return handler(make_error_code(errc::connection_lost), {});
    inner_->async_read_state(name, std::move(handler));
  }
  void async_write_state(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                         std::string bytes, done_handler handler) override {
    if (cut) return handler(make_error_code(errc::connection_lost));
    inner_->async_write_state(name, owner_id, fence, std::move(bytes), std::move(handler));
  }
  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::chrono::milliseconds poll_interval,
                      std::function<void()> wake) override {
    return inner_->watch(name, owner_id, poll_interval, std::move(wake));
  }
  void unwatch(std::uint64_t handle) noexcept override { inner_->unwatch(handle); }

 private:
  std::shared_ptr<lease_store> inner_;
};

/// Forwards to a shared store; once `hold_next_write` is set, the next write of the lease-guarded
/// state that records a fire (not a run's end) reaches the store at once, but its answer is held
/// back until release_held() (a reply still on its way when the scheduler begins to stop).
class held_reply_store final : public lease_store {
 public:
  explicit held_reply_store(std::shared_ptr<lease_store> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> hold_next_write{false};

  /// True while an answer is held back; `bytes` gets the state that was written.
  bool holding(std::string* bytes = nullptr) {
    std::lock_guard lock(mutex_);
    if (bytes) *bytes = held_bytes_;
    return static_cast<bool>(held_);
  }
  void release_held() {
    std::function<void()> held;
    {
      std::lock_guard lock(mutex_);
      held = std::move(held_);
      held_ = nullptr;
    }
    if (held) held();
  }

  void async_acquire(const std::string& name, const std::string& owner_id,
                     std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                     grant_handler handler) override {
    inner_->async_acquire(name, owner_id, ttl, transition, std::move(handler));
  }
  void async_release(const std::string& name, const std::string& owner_id,
                     done_handler handler) override {
    inner_->async_release(name, owner_id, std::move(handler));
  }
  void async_read(const std::string& name, grant_handler handler) override {
    inner_->async_read(name, std::move(handler));
  }
  void async_read_state(const std::string& name, state_handler handler) override {
    inner_->async_read_state(name, std::move(handler));
  }
  void async_write_state(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                         std::string bytes, done_handler handler) override {
    const auto fire = detail::parse_schedule_state(bytes);
    if (!fire || fire->last_end || !hold_next_write.exchange(false))
      return inner_->async_write_state(name, owner_id, fence, std::move(bytes), std::move(handler));
    const auto written = bytes;
    inner_->async_write_state(name, owner_id, fence, std::move(bytes),
                              [this, written, handler = std::move(handler)](std::error_code ec) {
                                std::lock_guard lock(mutex_);
                                held_bytes_ = written;
                                held_ = [handler, ec] { handler(ec); };
                              });
  }
  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::chrono::milliseconds poll_interval,
                      std::function<void()> wake) override {
    return inner_->watch(name, owner_id, poll_interval, std::move(wake));
  }
  void unwatch(std::uint64_t handle) noexcept override { inner_->unwatch(handle); }

 private:
  std::shared_ptr<lease_store> inner_;
  std::mutex mutex_;
  std::function<void()> held_;
  std::string held_bytes_;
};

/// Keeps the messages logged on the "baton" logger.
class capture_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  bool contains(const std::string& text) {
    std::lock_guard lock(mutex_);
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

contend_options short_lease() {
  auto o = baton::test::lease_options(300ms, 50ms);
  o.max_backoff = 100ms;
  return o;
}

/// A lease that survives a busy machine: renewals would have to be 1 s late to lose it.
contend_options steady_lease() {
  auto o = short_lease();
  o.ttl = 1s;
  o.transition = 1s;
  return o;
}

schedule_options every_200ms(job_function job, contend_options lease = steady_lease()) {
  schedule_options s;
  s.name = "tick";
  s.when = every_trigger{200ms};
  s.job = std::move(job);
  s.lease = lease;
  return s;
}

std::size_t leader_index(const std::vector<scheduler*>& nodes) {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]->status().at(0).leader) return i;
  return nodes.size();
}

/// One node at a time; fences never go down; the cadence is last + k * period; nothing fires
/// before its planned time.
void expect_single_leader_cadence(const std::vector<run_record>& runs,
                                  std::chrono::milliseconds period) {
  ASSERT_FALSE(runs.empty());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    EXPECT_GE(r.started_wall, r.fire_time) << "run " << i << " started before its fire time";
    if (i == 0) continue;
    const auto& prev = runs[i - 1];
    EXPECT_GE(r.start, prev.end) << "runs " << i - 1 << " and " << i << " overlap";
    EXPECT_GE(r.fence, prev.fence) << "fence went down at run " << i;
    const auto step = r.fire_time - prev.fire_time;
    EXPECT_GE(step, period) << "run " << i;
    EXPECT_EQ(step % std::chrono::duration_cast<sys::duration>(period), sys::duration::zero())
        << "run " << i << " is off the cadence";
  }
}

class scheduler_memory : public ::testing::Test {
 protected:
  scheduler_memory()
      : store_(std::make_shared<memory_lease_store>()),
        backend_("memory", rt_, store_, store_, short_lease()) {}

  runtime rt_{runtime::options{2, 1}};
  std::shared_ptr<memory_lease_store> store_;
  lease_store_backend backend_;
  journal journal_;
};

TEST_F(scheduler_memory, the_other_node_continues_the_cadence_when_the_leader_stops) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  a.add(every_200ms(journal_.job("node-a", 20ms)));
  b.add(every_200ms(journal_.job("node-b", 20ms)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-a") >= 3; }, 10s));
  b.start();
  // b waits while a leads.
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-a") >= 5; }, 10s));
  EXPECT_EQ(journal_.count("node-b"), 0u);
  EXPECT_TRUE(a.status().at(0).leader);
  EXPECT_FALSE(b.status().at(0).leader);

  const auto stopped = steady::now();
  a.stop(1s);
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-b") >= 4; }, 10s));
  b.stop(1s);

  auto runs = journal_.runs();
  expect_single_leader_cadence(runs, 200ms);
  EXPECT_EQ(journal_.max_running(), 1);
  // a's runs, then b's: one handover, with a higher fence.
  auto first_b = std::find_if(runs.begin(), runs.end(), [](auto& r) { return r.node == "node-b"; });
  ASSERT_NE(first_b, runs.end());
  ASSERT_NE(first_b, runs.begin());
  const auto& last_a = *(first_b - 1);
  EXPECT_EQ(last_a.node, "node-a");
  EXPECT_TRUE(std::all_of(first_b, runs.end(), [](auto& r) { return r.node == "node-b"; }));
  EXPECT_GT(first_b->fence, last_a.fence);
  // The release lets b take over at once: its first run is the next fire of a's cadence, not
  // a lease (2 s) later and not a fresh start.
  EXPECT_EQ(first_b->fire_time - last_a.fire_time, 200ms);
  EXPECT_LT(first_b->start - stopped, 500ms);
  auto status = b.status().at(0);
  EXPECT_EQ(status.runs, journal_.count("node-b"));
  EXPECT_EQ(status.failures, 0u);
  EXPECT_EQ(status.skipped_overlap, 0u);
}

// stop() while a fire is being recorded (the state written, its answer not yet back): the job
// does not start on the stopping node, and the fire is given back, so that the next leader runs
// it. Recorded and never run, it would be lost.
TEST_F(scheduler_memory, a_fire_recorded_while_the_leader_stops_is_run_by_the_next_leader) {
  auto held = std::make_shared<held_reply_store>(store_);
  lease_store_backend held_backend("memory", rt_, held, store_, short_lease());
  scheduler a(held_backend, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  a.add(every_200ms(journal_.job("node-a", 20ms)));
  b.add(every_200ms(journal_.job("node-b", 20ms)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-a") >= 2; }, 10s));
  b.start();
  held->hold_next_write = true;
  std::string bytes;
  ASSERT_TRUE(test::wait_until([&] { return held->holding(&bytes); }, 10s));
  const auto recorded = detail::parse_schedule_state(bytes).value().last_fire;

  std::thread stopper([&] { a.stop(1s); });
  // The stop is under way while the answer is still out (less than a period: the next fire is
  // not due yet when b takes over).
  std::this_thread::sleep_for(100ms);
  held->release_held();
  stopper.join();
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-b") >= 3; }, 10s));
  b.stop(1s);

  auto runs = journal_.runs();
  EXPECT_TRUE(std::any_of(runs.begin(), runs.end(),
                          [&](const run_record& r) { return r.fire_time == recorded; }))
      << "the fire at " << format_rfc3339_utc(recorded)
      << " was recorded by the stopping node and never run";
  expect_single_leader_cadence(runs, 200ms);
}

TEST_F(scheduler_memory, only_one_of_two_nodes_fires_when_both_start_together) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  a.add(every_200ms(journal_.job("node-a", 20ms)));
  b.add(every_200ms(journal_.job("node-b", 20ms)));
  a.start();
  b.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.runs().size() >= 6; }, 10s));
  std::vector<scheduler*> nodes{&a, &b};
  const auto leader = leader_index(nodes);
  ASSERT_LT(leader, 2u);
  nodes[1 - leader]->stop(1s);  // the follower first, so that nobody takes over
  nodes[leader]->stop(1s);
  auto runs = journal_.runs();
  expect_single_leader_cadence(runs, 200ms);
  const std::string name = leader == 0 ? "node-a" : "node-b";
  EXPECT_TRUE(std::all_of(runs.begin(), runs.end(), [&](auto& r) { return r.node == name; }));
}

TEST_F(scheduler_memory, a_job_longer_than_the_period_causes_counted_skips) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  a.add(every_200ms(journal_.job("node-a", 500ms)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-a") >= 3; }, 10s));
  const auto status = a.status().at(0);
  a.stop(1s);
  // Runs at 0, 600, 1200 ms...: the fires at 200 and 400 ms of each run are skipped.
  EXPECT_GE(status.skipped_overlap, 4u);
  EXPECT_EQ(journal_.max_running(), 1);
  auto runs = journal_.runs();
  expect_single_leader_cadence(runs, 200ms);
  for (std::size_t i = 1; i < runs.size(); ++i)
    EXPECT_EQ(runs[i].fire_time - runs[i - 1].fire_time, 600ms) << i;
}

TEST_F(scheduler_memory, stop_asks_the_running_job_to_stop_and_waits_for_it) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  a.add(every_200ms(journal_.job("node-a", 60s)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.running() == 1; }, 10s));
  const auto before = steady::now();
  a.stop(5s);
  EXPECT_LT(steady::now() - before, 3s);
  auto runs = journal_.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].stop_requested);
  EXPECT_EQ(backend_.read_owner("tick").owner_id, "");  // released
}

TEST_F(scheduler_memory, a_node_that_loses_its_backend_stops_its_job_before_the_other_takes_over) {
  auto cut_store = std::make_shared<cuttable_store>(store_);
  lease_store_backend cut_backend("memory", rt_, cut_store, store_, short_lease());
  auto sink = std::make_shared<capture_sink>();
  detail::log().sinks().push_back(sink);

  scheduler a(cut_backend, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  // Renewals from 300 ms on; the job is asked to stop 400 ms before the local lease ends; b
  // may acquire only 1 s after a's last renewal.
  auto lease = short_lease();
  lease.transition = 700ms;
  auto sa = every_200ms(journal_.job("node-a", 60s), lease);  // runs until asked to stop
  sa.stop_grace = 400ms;
  a.add(std::move(sa));
  b.add(every_200ms(journal_.job("node-b", 20ms), lease));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.running() == 1; }, 10s));
  b.start();
  cut_store->cut = true;  // a can no longer renew
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-b") >= 2; }, 10s));
  EXPECT_FALSE(a.status().at(0).leader);
  a.stop(1s);
  b.stop(1s);

  auto runs = journal_.runs();
  ASSERT_GE(runs.size(), 3u);
  EXPECT_EQ(runs[0].node, "node-a");
  EXPECT_TRUE(runs[0].stop_requested);
  EXPECT_EQ(runs[1].node, "node-b");
  EXPECT_GE(runs[1].start, runs[0].end) << "b started while a's job still ran";
  EXPECT_GT(runs[1].fence, runs[0].fence);
  expect_single_leader_cadence(runs, 200ms);
  EXPECT_TRUE(sink->contains("the lease was not renewed in time"));
  auto& sinks = detail::log().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
}

TEST_F(scheduler_memory, a_job_that_throws_is_counted_as_a_failure_and_the_cadence_goes_on) {
  scheduler a(backend_, rt_, scheduler_options{1, std::nullopt, "node-a", nullptr});
  std::atomic<int> calls{0};
  auto s = every_200ms([&](const job_context&) {
    ++calls;
    throw std::runtime_error("boom");
  });
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return a.status().at(0).failures >= 3; }, 10s));
  a.stop(1s);
  EXPECT_GE(calls.load(), 3);
  EXPECT_EQ(a.status().at(0).runs, static_cast<std::uint64_t>(calls.load()));
}

TEST_F(scheduler_memory, a_new_leader_waits_for_the_recorded_cadence) {
  // A previous leader recorded a fire 100 ms ago on an `every 1s` schedule.
  auto seed = backend_.make_contend_service("slow", nullptr, short_lease(), "seed");
  const auto last = std::chrono::time_point_cast<std::chrono::milliseconds>(sys::now()) - 100ms;
  ASSERT_TRUE(seed->start());
  ASSERT_TRUE(test::wait_until([&] { return seed->is_owner(); }, 5s));
  std::promise<std::error_code> written;
  seed->async_write_state(
      "v1 " + std::to_string(last.time_since_epoch().count()) + " " + std::to_string(seed->fence()),
      [&](std::error_code ec) { written.set_value(ec); });
  ASSERT_FALSE(written.get_future().get());
  ASSERT_TRUE(seed->stop_and_wait(2s));

  scheduler a(backend_, rt_, scheduler_options{1, std::nullopt, "node-a", nullptr});
  schedule_options s;
  s.name = "slow";
  s.when = every_trigger{1s};
  s.job = journal_.job("node-a", 1ms);
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-a") >= 1; }, 5s));
  a.stop(1s);
  auto runs = journal_.runs();
  EXPECT_EQ(runs[0].fire_time, last + 1s);
  EXPECT_GE(runs[0].started_wall, last + 1s);
}

}  // namespace
}  // namespace baton

namespace baton {
namespace {

std::uint64_t outcome(const schedule_status& s, run_outcome o) {
  return s.outcomes[static_cast<std::size_t>(o)];
}

// Attempts that ran, whatever their end.
std::uint64_t attempts(const schedule_status& s) {
  return outcome(s, run_outcome::succeeded) + outcome(s, run_outcome::failed) +
         outcome(s, run_outcome::killed) + outcome(s, run_outcome::timed_out) +
         outcome(s, run_outcome::lost_lease);
}

}  // namespace

TEST_F(scheduler_memory, status_counts_outcomes_run_durations_and_the_last_success) {
  scheduler a(backend_, rt_, scheduler_options{1, std::nullopt, "node-a", nullptr});
  std::atomic<int> calls{0};
  a.add(every_200ms([&](const job_context&) {
    const int n = ++calls;
    // Every run takes at least 20 ms (a lower bound, whatever the machine's speed).
    std::this_thread::sleep_for(20ms);
    if (n % 2 == 0) throw std::runtime_error("even");
  }));
  EXPECT_FALSE(a.status().at(0).last_success);
  EXPECT_EQ(a.status().at(0).run_duration.count, 0u);
  const auto started = sys::now();
  a.start();
  ASSERT_TRUE(test::wait_until(
      [&] {
        const auto s = a.status().at(0);
        return outcome(s, run_outcome::succeeded) >= 2 && outcome(s, run_outcome::failed) >= 2;
      },
      10s));
  a.stop(1s);
  const auto stopped = sys::now();
  const auto s = a.status().at(0);
  EXPECT_GE(outcome(s, run_outcome::succeeded), 2u);
  EXPECT_GE(outcome(s, run_outcome::failed), 2u);
  EXPECT_EQ(outcome(s, run_outcome::skipped_overlap), 0u);
  EXPECT_EQ(outcome(s, run_outcome::skipped_paused), 0u);
  // Every run is one attempt outcome and one duration (stop waited for the last run).
  EXPECT_EQ(attempts(s), s.runs);
  EXPECT_EQ(s.run_duration.count, s.runs);
  EXPECT_EQ(s.runs, static_cast<std::uint64_t>(calls.load()));
  EXPECT_GE(s.run_duration.sum, 0.020 * static_cast<double>(s.run_duration.count));
  EXPECT_EQ(s.run_duration.bounds, histogram::run_bounds());
  std::uint64_t in_buckets = 0;
  for (auto c : s.run_duration.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, s.run_duration.count);
  EXPECT_EQ(s.run_duration.counts.front(), 0u);  // none took 10 ms or less
  ASSERT_TRUE(s.last_success);
  EXPECT_GE(*s.last_success, started);
  EXPECT_LE(*s.last_success, stopped);
}

TEST_F(scheduler_memory, skipped_fires_count_as_outcomes_but_not_as_run_durations) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  a.add(every_200ms(journal_.job("node-a", 500ms)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return journal_.count("node-a") >= 3; }, 10s));
  a.stop(1s);
  const auto s = a.status().at(0);
  EXPECT_GE(outcome(s, run_outcome::skipped_overlap), 4u);
  EXPECT_EQ(outcome(s, run_outcome::skipped_overlap), s.skipped_overlap);
  EXPECT_EQ(s.run_duration.count, s.runs);
  EXPECT_EQ(attempts(s), s.runs);
  ASSERT_TRUE(s.last_success);  // the runs that finished before the stop succeeded
}

}  // namespace baton

// --- clocks ----------------------------------------------------------------------------------

namespace baton {
namespace {

schedule_options every_second_cron(job_function job) {
  schedule_options s;
  s.name = "cron-tick";
  s.when = cron_trigger{cron_expression::parse("* * * * * *", "UTC")};
  s.job = std::move(job);
  s.lease = steady_lease();
  return s;
}

}  // namespace

// The backend's clock runs two minutes ahead of both nodes' (as if both were behind): each
// leader fires at the backend's instants, and the one that takes over continues with the next
// slot after the recorded one (before the fix, a PostgreSQL node two minutes behind re-ran 42
// recorded slots of a 6-field cron).
TEST(scheduler_clock, every_leader_fires_on_the_backends_clock_once_per_slot) {
  constexpr auto ahead = std::chrono::milliseconds{2min};
  runtime rt{runtime::options{2, 1}};
  auto store = std::make_shared<memory_lease_store>([ahead] {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(sys::now()) + ahead;
  });
  lease_store_backend backend("memory", rt, store, store, short_lease());
  journal record;
  scheduler a(backend, rt, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend, rt, scheduler_options{2, std::nullopt, "node-b", nullptr});
  a.add(every_second_cron(record.job("node-a", 20ms)));
  b.add(every_second_cron(record.job("node-b", 20ms)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return record.count("node-a") >= 2; }, 10s));
  b.start();
  a.stop(1s);
  ASSERT_TRUE(test::wait_until([&] { return record.count("node-b") >= 3; }, 15s));
  const auto b_status = b.status().at(0);
  b.stop(1s);
  ASSERT_TRUE(b_status.clock_offset.has_value());
  EXPECT_NEAR(static_cast<double>(b_status.clock_offset->offset.count()),
              static_cast<double>(ahead.count()), 1'000.0);
  auto runs = record.runs();
  std::set<sys::time_point> slots;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    EXPECT_TRUE(slots.insert(r.fire_time).second) << "slot run twice by " << r.node;
    if (i > 0) EXPECT_GT(r.fire_time, runs[i - 1].fire_time) << "run " << i;
    // The slot is on the backend's clock: the node's own clock reads it two minutes earlier.
    EXPECT_LT(std::chrono::abs(r.started_wall + ahead - r.fire_time), 1500ms)
        << r.node << " fired slot " << format_rfc3339_utc(r.fire_time) << " at local "
        << format_rfc3339_utc(r.started_wall);
  }
  EXPECT_EQ(record.max_running(), 1);
}

}  // namespace baton
