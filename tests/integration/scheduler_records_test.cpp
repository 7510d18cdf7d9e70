// Run history, controls and retries of the scheduler on the in-process memory backend (several
// schedulers on one backend = several nodes), in real time with short periods: a failing
// command's record, bounded history, a stale leader's late record rejected, pause/resume with
// the misfire policy, manual runs exactly once across a leader change, retries with backoff.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "baton/jobs/command_job.hpp"
#include "baton/mutex/backend.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/scheduler/records.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

contend_options test_lease() {
  auto o = baton::test::lease_options(1s, 50ms);
  o.max_backoff = 100ms;
  return o;
}

/// Counts the runs per node; each job takes `length` or until asked to stop.
class counter {
 public:
  job_function job(std::string node, std::chrono::milliseconds length = 10ms, bool fail = false) {
    return [this, node, length, fail](const job_context& ctx) {
      {
        std::lock_guard lock(mutex_);
        ++runs_[node];
      }
      std::condition_variable_any cv;
      std::mutex m;
      std::unique_lock lock(m);
      cv.wait_for(lock, ctx.stop, length, [] { return false; });
      if (fail) throw std::runtime_error("it failed");
    };
  }
  int runs(const std::string& node) const {
    std::lock_guard lock(mutex_);
    auto it = runs_.find(node);
    return it == runs_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> runs_;
};

schedule_options every(std::chrono::milliseconds period, job_function job) {
  schedule_options s;
  s.name = "tick";
  s.when = every_trigger{period};
  s.job = std::move(job);
  s.lease = test_lease();
  return s;
}

/// Fires at acquisition, then hourly: only manual runs and retries happen during a test.
schedule_options hourly(job_function job) {
  auto s = every(1h, std::move(job));
  return s;
}

std::size_t count_of(const std::vector<run_record>& h, run_outcome o) {
  return std::count_if(h.begin(), h.end(), [&](const run_record& r) { return r.outcome == o; });
}
std::size_t count_of(const std::vector<run_record>& h, run_trigger t) {
  return std::count_if(h.begin(), h.end(), [&](const run_record& r) {
    return r.trigger == t && r.outcome != run_outcome::skipped_overlap &&
           r.outcome != run_outcome::skipped_paused;
  });
}

class scheduler_records : public ::testing::Test {
 protected:
  scheduler_records()
      : store_(std::make_shared<memory_lease_store>()),
        backend_("memory", rt_, store_, store_, test_lease()) {}

  std::vector<run_record> history(std::size_t limit = 1000) {
    return read_run_history(backend_, "tick", limit);
  }

  runtime rt_{runtime::options{2, 1}};
  std::shared_ptr<memory_lease_store> store_;
  lease_store_backend backend_;
  counter counter_;
};

TEST_F(scheduler_records, a_failing_command_is_recorded_failed_with_its_exit_status_and_stderr) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  command_options cmd;
  cmd.argv = {"sh", "-c", "echo oops >&2; exit 3"};
  cmd.log_output = 0;  // the tail is kept even when nothing is logged
  a.add(every(300ms, make_command_job(cmd)));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return !history().empty(); }, 10s));
  const auto r = history().front();
  EXPECT_EQ(r.outcome, run_outcome::failed);
  ASSERT_TRUE(r.exit_status.has_value());
  EXPECT_EQ(*r.exit_status, 3);
  EXPECT_FALSE(r.signal.has_value());
  EXPECT_EQ(r.output, "oops\n");
  EXPECT_FALSE(r.output_truncated);
  EXPECT_EQ(r.node, "node-a");
  EXPECT_EQ(r.trigger, run_trigger::schedule);
  EXPECT_EQ(r.attempt, 1u);
  EXPECT_GT(r.fence, 0u);
  EXPECT_TRUE(r.started && r.ended);
  EXPECT_NE(r.error.find("exited with status 3"), std::string::npos) << r.error;
  ASSERT_TRUE(test::wait_until([&] { return a.status().at(0).consecutive_failures >= 2; }, 10s));
  const auto st = a.status().at(0);
  ASSERT_TRUE(st.last_run.has_value());
  EXPECT_EQ(st.last_run->outcome, run_outcome::failed);
  a.stop(1s);
}

TEST_F(scheduler_records, history_is_bounded_by_the_history_setting) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  auto s = every(100ms, counter_.job("node-a"));
  s.history = 3;
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") >= 6; }, 10s));
  a.stop(1s);  // flushes the records of ended runs
  const auto h = history();
  EXPECT_EQ(h.size(), 3u);
  for (const auto& r : h)  // the last one may have been stopped by stop()
    EXPECT_TRUE(r.outcome == run_outcome::succeeded || r.outcome == run_outcome::lost_lease)
        << to_json(r);
  EXPECT_GT(h.at(0).seq, h.at(1).seq);  // newest first
  EXPECT_EQ(a.status().at(0).history_errors, 0u);
}

TEST_F(scheduler_records, a_stale_leaders_late_record_is_rejected_and_counted) {
  std::atomic<scheduler*> other{nullptr};
  std::atomic<int> a_runs{0};
  // a's job ignores its stop request until the other node leads: its record comes too late.
  job_function stubborn = [&](const job_context&) {
    ++a_runs;
    test::wait_until(
        [&] {
          auto* b = other.load();
          return b != nullptr && b->status().at(0).leader;
        },
        20s);
  };
  auto a = std::make_unique<scheduler>(backend_, rt_,
                                       scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  a->add(hourly(stubborn));
  b.add(hourly(counter_.job("node-b")));
  a->start();
  ASSERT_TRUE(test::wait_until([&] { return a_runs.load() == 1; }, 10s));
  other = &b;
  b.start();
  // Stopping with no grace releases the mutex while a's job still runs; b takes over, then the
  // job ends and a's record (fence of the old ownership) comes too late.
  a->stop(0ms);
  ASSERT_TRUE(test::wait_until([&] { return b.status().at(0).leader; }, 10s));
  ASSERT_TRUE(test::wait_until([&] { return a->status().at(0).history_dropped == 1; }, 10s));
  EXPECT_EQ(a->status().at(0).last_run->outcome, run_outcome::lost_lease);
  a.reset();
  for (const auto& r : history())
    EXPECT_NE(r.node, "node-a") << "a stale record was accepted: " << to_json(r);
  b.stop(1s);
}

TEST_F(scheduler_records, pause_records_skipped_fires_and_resume_catches_up_once) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  a.add(every(200ms, counter_.job("node-a")));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") >= 2; }, 10s));
  const auto c = a.pause("tick", "maintenance");
  EXPECT_TRUE(c.paused);
  ASSERT_TRUE(test::wait_until([&] { return a.status().at(0).paused; }, 5s));
  EXPECT_EQ(a.status().at(0).paused_reason, "maintenance");
  const int runs_when_paused = counter_.runs("node-a");
  ASSERT_TRUE(
      test::wait_until([&] { return count_of(history(), run_outcome::skipped_paused) >= 3; }, 10s));
  EXPECT_LE(counter_.runs("node-a"), runs_when_paused + 1);  // at most one already started
  const int runs_before_resume = counter_.runs("node-a");
  const auto last_fire = a.status().at(0).last_fire;
  a.resume("tick");
  ASSERT_TRUE(
      test::wait_until([&] { return count_of(history(), run_trigger::catch_up) == 1; }, 5s));
  EXPECT_GT(counter_.runs("node-a"), runs_before_resume);
  EXPECT_FALSE(a.status().at(0).paused);
  EXPECT_NE(a.status().at(0).last_fire, last_fire);
  // Skipped slots are recorded once each.
  auto h = history();
  std::vector<std::chrono::system_clock::time_point> slots;
  for (const auto& r : h)
    if (r.outcome == run_outcome::skipped_paused) slots.push_back(r.planned);
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(std::adjacent_find(slots.begin(), slots.end()), slots.end());
  a.stop(1s);
}

TEST_F(scheduler_records, resume_with_misfire_skip_drops_the_missed_fires) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  auto s = every(200ms, counter_.job("node-a"));
  s.misfire = misfire_policy::skip;
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") >= 1; }, 10s));
  a.pause("tick");
  ASSERT_TRUE(
      test::wait_until([&] { return count_of(history(), run_outcome::skipped_paused) >= 2; }, 10s));
  const int before = counter_.runs("node-a");
  a.resume("tick");
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") >= before + 2; }, 10s));
  EXPECT_EQ(count_of(history(), run_trigger::catch_up), 0u);
  a.stop(1s);
}

TEST_F(scheduler_records, trigger_runs_once_per_request_on_the_leader_without_moving_the_cadence) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  a.add(hourly(counter_.job("node-a")));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") == 1; }, 10s));
  const auto last_fire = a.status().at(0).last_fire;
  const auto asked = steady::now();
  a.trigger("tick");
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") == 2; }, 5s));
  EXPECT_LT(steady::now() - asked, 2s);
  a.trigger("tick");
  a.trigger("tick");
  ASSERT_TRUE(test::wait_until([&] { return count_of(history(), run_trigger::manual) == 3; }, 5s));
  EXPECT_FALSE(test::wait_until([&] { return counter_.runs("node-a") > 4; }, 500ms));
  EXPECT_EQ(counter_.runs("node-a"), 4);
  EXPECT_EQ(a.status().at(0).manual_runs, 3u);
  EXPECT_EQ(a.status().at(0).last_fire, last_fire);
  a.stop(1s);
}

TEST_F(scheduler_records, a_manual_run_happens_exactly_once_across_a_leader_change) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  a.add(hourly(counter_.job("node-a")));
  b.add(hourly(counter_.job("node-b")));
  a.start();
  b.start();
  // Either may win the first election (a slow machine can let the one started second win).
  ASSERT_TRUE(test::wait_until(
      [&] { return counter_.runs("node-a") + counter_.runs("node-b") == 1; }, 10s));
  const bool a_leads = counter_.runs("node-a") == 1;
  scheduler& leader = a_leads ? a : b;
  scheduler& other = a_leads ? b : a;
  const std::string leader_id = a_leads ? "node-a" : "node-b";
  const std::string other_id = a_leads ? "node-b" : "node-a";
  other.trigger("tick");  // asked on the node that does not lead
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs(leader_id) == 2; }, 5s));
  leader.stop(1s);
  ASSERT_TRUE(test::wait_until([&] { return other.status().at(0).leader; }, 10s));
  other.trigger("tick");
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs(other_id) >= 1; }, 5s));
  EXPECT_FALSE(test::wait_until([&] { return counter_.runs(other_id) > 1; }, 500ms));
  EXPECT_EQ(counter_.runs(other_id), 1);
  EXPECT_EQ(count_of(history(), run_trigger::manual), 2u);
  other.stop(1s);
}

TEST_F(scheduler_records, failed_attempts_are_retried_with_backoff_and_attempt_numbers) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  auto s = hourly(counter_.job("node-a", 1ms, true));
  s.retries = 2;
  s.retry_backoff = 150ms;
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return history().size() == 3; }, 10s));
  EXPECT_FALSE(test::wait_until([&] { return history().size() > 3; }, 600ms));
  auto h = history();
  std::reverse(h.begin(), h.end());
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(h[i].attempt, i + 1);
    EXPECT_EQ(h[i].outcome, run_outcome::failed);
    EXPECT_EQ(h[i].trigger, i == 0 ? run_trigger::schedule : run_trigger::retry);
    EXPECT_EQ(h[i].planned, h[0].planned);
  }
  EXPECT_GE(*h[1].started - *h[0].ended, 150ms);
  EXPECT_GE(*h[2].started - *h[1].ended, 300ms);
  EXPECT_EQ(a.status().at(0).retries, 2u);
  EXPECT_EQ(a.status().at(0).consecutive_failures, 3u);
  a.stop(1s);
}

TEST_F(scheduler_records, retries_stop_when_the_lease_is_given_up) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  scheduler b(backend_, rt_, scheduler_options{2, std::nullopt, "node-b", nullptr});
  auto s = hourly(counter_.job("node-a", 1ms, true));
  s.retries = 5;
  s.retry_backoff = 300ms;
  a.add(std::move(s));
  b.add(hourly(counter_.job("node-b")));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return counter_.runs("node-a") == 1; }, 10s));
  b.start();
  a.stop(1s);  // releases the lease: the planned retry must not run
  ASSERT_TRUE(test::wait_until([&] { return b.status().at(0).leader; }, 10s));
  EXPECT_FALSE(test::wait_until([&] { return counter_.runs("node-a") > 1; }, 1s));
  EXPECT_EQ(count_of(history(), run_trigger::retry), 0u);
  b.stop(1s);
}

TEST_F(scheduler_records, unknown_schedule_names_are_refused_listing_the_known_ones) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  a.add(hourly(counter_.job("node-a")));
  try {
    a.pause("nope", "");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tick"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a.trigger("nope"), std::invalid_argument);
  EXPECT_THROW(a.history("nope", 5), std::invalid_argument);
}

TEST_F(scheduler_records, an_async_command_job_is_recorded_like_a_synchronous_one) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  command_options cmd;
  cmd.argv = {"sh", "-c", "echo oops >&2; exit 3"};
  auto s = every(300ms, nullptr);
  s.async_job = make_async_command_job(cmd);
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return !history().empty(); }, 10s));
  const auto r = history().front();
  EXPECT_EQ(r.outcome, run_outcome::failed);
  EXPECT_EQ(r.exit_status, std::optional<int>(3));
  EXPECT_EQ(r.output, "oops\n");
  EXPECT_NE(r.error.find("exited with status 3"), std::string::npos) << r.error;
  a.stop(1s);
}

TEST_F(scheduler_records, stop_asks_a_running_async_job_to_stop_and_the_scheduler_waits_for_it) {
  std::atomic<bool> invoked{false};
  std::atomic<bool> called_back{false};
  {
    scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
    auto s = hourly(nullptr);
    // Ends from a thread of its own, once asked to stop.
    s.async_job = [&](const job_context& ctx, std::function<void(std::exception_ptr)> done) {
      invoked = true;
      std::thread([stop = ctx.stop, done = std::move(done), &called_back] {
        std::condition_variable_any cv;
        std::mutex m;
        std::unique_lock lock(m);
        cv.wait(lock, stop, [] { return false; });
        lock.unlock();
        std::this_thread::sleep_for(50ms);
        called_back = true;
        done(nullptr);
      }).detach();
    };
    a.add(std::move(s));
    a.start();
    // Running, and the job called: a stop between the two ends the run before the job starts
    // ("asked to stop before it started"), with nothing to call back.
    ASSERT_TRUE(test::wait_until([&] { return a.status().at(0).running && invoked.load(); }, 10s));
    a.stop(5s);
    EXPECT_TRUE(called_back.load());
    EXPECT_FALSE(a.status().at(0).running);
  }
  const auto h = history();
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(h.front().outcome, run_outcome::lost_lease) << h.front().error;
}

TEST_F(scheduler_records, an_async_job_that_cannot_start_is_a_failed_run) {
  scheduler a(backend_, rt_, scheduler_options{2, std::nullopt, "node-a", nullptr});
  auto s = hourly(nullptr);
  s.async_job = [](const job_context&, std::function<void(std::exception_ptr)>) {
    throw std::runtime_error("cannot start");
  };
  a.add(std::move(s));
  a.start();
  ASSERT_TRUE(test::wait_until([&] { return !history().empty(); }, 10s));
  EXPECT_EQ(history().front().outcome, run_outcome::failed);
  EXPECT_EQ(history().front().error, "cannot start");
  a.stop(1s);
}

}  // namespace
}  // namespace baton
