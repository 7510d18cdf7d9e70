// The blocking locker over the in-process backend.
#include "baton/mutex/locker.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "baton/mutex/memory_store.hpp"
#include "support/lease.hpp"

using namespace std::chrono_literals;

namespace {

baton::contend_options fast() {
  auto o = baton::test::lease_options(200ms, 20ms);
  o.drift_margin = 10ms;
  o.max_backoff = 40ms;
  return o;
}

struct memory_backend_fixture : ::testing::Test {
  baton::runtime rt;
  std::shared_ptr<baton::memory_lease_store> store = std::make_shared<baton::memory_lease_store>();
  baton::lease_store_backend backend{"memory", rt, store, store, fast()};
};

}  // namespace

using locker_test = memory_backend_fixture;

TEST_F(locker_test, lock_unlock_and_fence_increases_with_each_owner) {
  baton::locker a(backend, "m", fast());
  baton::locker b(backend, "m", fast());
  a.lock();
  EXPECT_TRUE(a.owns_lease());
  auto f1 = a.fence();
  EXPECT_GT(f1, 0u);
  a.unlock();
  EXPECT_FALSE(a.owns_lease());
  b.lock();
  EXPECT_GT(b.fence(), f1);
  b.unlock();
}

TEST_F(locker_test, try_lock_fails_fast_while_held_and_succeeds_when_free) {
  baton::locker a(backend, "m", fast());
  baton::locker b(backend, "m", fast());
  EXPECT_TRUE(a.try_lock());
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(b.try_lock());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  a.unlock();
  EXPECT_TRUE(b.try_lock());
}

TEST_F(locker_test, try_lock_for_times_out_while_held) {
  baton::locker a(backend, "m", fast());
  baton::locker b(backend, "m", fast());
  a.lock();
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(b.try_lock_for(300ms));
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 3s);
  EXPECT_TRUE(a.owns_lease());  // the holder kept renewing meanwhile
}

TEST_F(locker_test, try_lock_until_gets_it_when_holder_unlocks) {
  baton::locker a(backend, "m", fast());
  baton::locker b(backend, "m", fast());
  a.lock();
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);  // let b start waiting; correctness does not depend on it
    a.unlock();
  });
  EXPECT_TRUE(b.try_lock_until(std::chrono::system_clock::now() + 5s));
  t.join();
  EXPECT_TRUE(b.owns_lease());
}

TEST_F(locker_test, works_with_std_unique_lock_as_timed_lockable) {
  baton::locker a(backend, "m", fast());
  {
    std::unique_lock<baton::locker> guard(a, 2s);
    ASSERT_TRUE(guard.owns_lock());
    EXPECT_TRUE(a.owns_lease());
  }
  EXPECT_FALSE(a.owns_lease());
  std::unique_lock<baton::locker> again(a, std::try_to_lock);
  EXPECT_TRUE(again.owns_lock());
}

TEST_F(locker_test, unlock_is_idempotent_and_noexcept) {
  baton::locker a(backend, "m", fast());
  static_assert(noexcept(a.unlock()));
  a.unlock();
  a.lock();
  a.unlock();
  a.unlock();
  EXPECT_FALSE(a.owns_lease());
}

TEST_F(locker_test, bad_name_throws_invalid_argument) {
  EXPECT_THROW(baton::locker(backend, "no spaces"), std::invalid_argument);
  EXPECT_THROW(baton::locker(backend, ""), std::invalid_argument);
}
