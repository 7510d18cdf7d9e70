#pragma once
/// When a contender talks to the backend next: a pure function of the owner record.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "baton/mutex/options.hpp"
#include "baton/mutex/owner.hpp"

namespace baton {

/// Uniform random integer in [lo, hi); injectable so tests are deterministic.
using random_source = std::function<std::int64_t(std::int64_t lo, std::int64_t hi)>;

/// The default random source (a thread-local Mersenne twister).
random_source default_random_source();

/// What a backend's wake-ups tell a waiter, and so how often it must still ask on its own.
enum class wakeup_coverage {
  none,                ///< no wake-ups: poll at least every poll_interval
  release,             ///< woken when the mutex is released: ask at transition_at (lapse)
  release_and_expiry,  ///< woken on release and on lapse: ask only now and then, as a safeguard
};

/// Pure: how long a contender waits before its next acquire/renew request.
class contend_period {
 public:
  explicit contend_period(contend_options options, random_source random = default_random_source());

  /// Delay from `now` (backend clock, read with `owner`) until the next request of `self`:
  /// the owner renews at ttl_at; a waiter wakes at transition_at plus a jitter drawn from
  /// [0, options.lapse_jitter), but never later than one poll_interval. A waiter the backend wakes
  /// on release waits until transition_at (at most one lease); one it also wakes when the lease
  /// lapses asks every two leases only, as a safeguard.
  std::chrono::milliseconds next_delay(const mutex_owner& owner, const std::string& self,
                                       backend_time now,
                                       wakeup_coverage wakeups = wakeup_coverage::none) const;

  const contend_options& options() const noexcept { return options_; }

 private:
  contend_options options_;
  random_source random_;
};

}  // namespace baton
