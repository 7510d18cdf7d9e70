// The scheduler's elastic job pool: threads only for jobs that run at once, up to the cap.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "baton/scheduler/detail/job_pool.hpp"
#include "support/env.hpp"

using namespace std::chrono_literals;

namespace {

// Jobs that block until the test opens the gate.
struct gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> inside{0};
  void pass() {
    ++inside;
    std::unique_lock lock(mutex);
    cv.wait(lock, [this] { return open; });
    --inside;
  }
  void release() {
    std::lock_guard lock(mutex);
    open = true;
    cv.notify_all();
  }
};

}  // namespace

TEST(job_pool, starts_no_thread_before_a_job) {
  baton::detail::job_pool pool(256);
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(job_pool, jobs_at_once_get_a_thread_each_up_to_the_cap_then_queue) {
  baton::detail::job_pool pool(3);
  gate g;
  for (int i = 0; i < 5; ++i) pool.post([&] { g.pass(); });
  ASSERT_TRUE(baton::test::wait_until([&] { return g.inside == 3; }, 5s));
  EXPECT_EQ(pool.threads(), 3u);
  g.release();
  ASSERT_TRUE(baton::test::wait_until([&] { return g.inside == 0; }, 5s));
  // The two queued jobs ran on the same three threads.
  std::atomic<int> ran{0};
  pool.post([&] { ++ran; });
  ASSERT_TRUE(baton::test::wait_until([&] { return ran == 1; }, 5s));
  EXPECT_LE(pool.threads(), 3u);
}

TEST(job_pool, a_free_thread_is_reused_instead_of_starting_another) {
  baton::detail::job_pool pool(8);
  for (int i = 0; i < 20; ++i) {
    std::atomic<bool> done{false};
    pool.post([&] { done = true; });
    ASSERT_TRUE(baton::test::wait_until([&] { return done.load(); }, 5s));
    // The thread that ran it goes back to idle before the next job.
    ASSERT_TRUE(baton::test::wait_until([&] { return pool.threads() == 1; }, 5s));
  }
}

TEST(job_pool, idle_threads_end_after_idle_exit) {
  baton::detail::job_pool pool(4, 50ms);
  gate g;
  for (int i = 0; i < 4; ++i) pool.post([&] { g.pass(); });
  ASSERT_TRUE(baton::test::wait_until([&] { return g.inside == 4; }, 5s));
  g.release();
  ASSERT_TRUE(baton::test::wait_until([&] { return pool.threads() == 0; }, 5s));
  // And it starts again when work comes.
  std::atomic<bool> done{false};
  pool.post([&] { done = true; });
  ASSERT_TRUE(baton::test::wait_until([&] { return done.load(); }, 5s));
}

TEST(job_pool, join_runs_what_is_queued_and_drops_later_jobs) {
  std::atomic<int> ran{0};
  baton::detail::job_pool pool(1);
  gate g;
  pool.post([&] { g.pass(); });
  for (int i = 0; i < 3; ++i) pool.post([&] { ++ran; });
  ASSERT_TRUE(baton::test::wait_until([&] { return g.inside == 1; }, 5s));
  g.release();
  pool.join();
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(pool.threads(), 0u);
  pool.post([&] { ++ran; });
  pool.join();
  EXPECT_EQ(ran.load(), 3);
}

TEST(job_pool, a_throwing_job_does_not_end_the_pool) {
  baton::detail::job_pool pool(1);
  pool.post([] { throw std::runtime_error("job failed"); });
  std::atomic<bool> done{false};
  pool.post([&] { done = true; });
  ASSERT_TRUE(baton::test::wait_until([&] { return done.load(); }, 5s));
}

TEST(job_pool, join_waits_for_every_held_asynchronous_job) {
  baton::detail::job_pool pool(2);
  pool.hold();  // a job started from a pool thread that ends elsewhere
  auto joined = std::async(std::launch::async, [&] { pool.join(); });
  EXPECT_EQ(joined.wait_for(200ms), std::future_status::timeout);
  pool.release();
  EXPECT_EQ(joined.wait_for(5s), std::future_status::ready);
}

TEST(job_pool, no_idle_thread_ends_while_an_asynchronous_job_runs) {
  // A process a job started from a thread gets its parent-death signal when that thread ends.
  baton::detail::job_pool pool(2, 20ms);
  std::atomic<bool> started{false};
  pool.post([&] {
    pool.hold();
    started = true;
  });
  ASSERT_TRUE(baton::test::wait_until([&] { return started.load(); }, 5s));
  // Many idle_exit periods later the thread is still there.
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(pool.threads(), 1u);
  pool.release();
  ASSERT_TRUE(baton::test::wait_until([&] { return pool.threads() == 0; }, 5s));
}
