#pragma once
/// A blocking, RAII distributed lock meeting the standard TimedLockable requirements.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "baton/mutex/backend.hpp"

namespace baton {

/// Blocking lock on one named mutex: `std::unique_lock<baton::locker>` works. Holding it is a
/// lease: check owns_lease() (or lease_deadline()) before acting, and pass fence() to whatever
/// the critical section writes. Not for use on the runtime's io threads.
class locker {
 public:
  /// Throws std::invalid_argument for a bad name or options.
  locker(mutex_backend& backend, const std::string& name, contend_options options,
         std::string contender_id = {});
  locker(mutex_backend& backend, const std::string& name);
  locker(const locker&) = delete;
  locker& operator=(const locker&) = delete;
  /// Unlocks if locked.
  ~locker();

  /// Blocks until owner.
  void lock();
  /// One contend round: true if it made this contender owner.
  bool try_lock();
  /// Waits up to `d` for ownership.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until_steady(std::chrono::steady_clock::now() +
                                 std::chrono::ceil<std::chrono::steady_clock::duration>(d));
  }
  /// Waits until `t` for ownership.
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    auto left = t - Clock::now();
    return try_lock_until_steady(std::chrono::steady_clock::now() +
                                 std::chrono::ceil<std::chrono::steady_clock::duration>(left));
  }
  /// Releases the mutex (waits a bounded time for the backend); never throws.
  void unlock() noexcept;

  /// True while locked and the local lease has not run out.
  bool owns_lease() const noexcept;
  /// Fencing token of the current ownership, 0 when not owner.
  std::uint64_t fence() const noexcept;
  /// Local lease deadline while owner.
  std::chrono::steady_clock::time_point lease_deadline() const noexcept;
  /// The contender id used on the backend.
  const std::string& contender_id() const noexcept;
  /// The underlying service (for lease-guarded state).
  contend_service& service() noexcept { return *service_; }

 private:
  struct waiter;
  bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<waiter> waiter_;
  std::shared_ptr<contend_service> service_;
  bool locked_ = false;
};

}  // namespace baton
