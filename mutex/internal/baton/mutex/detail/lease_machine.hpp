#pragma once
/// Pure lease state machine behind the lease-store contend service: given the replies and the
/// (injected) steady time, it decides who is owner locally, when to ask the backend next and
/// when the local lease runs out. No I/O, no clocks of its own; tested with a fake clock.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "baton/mutex/contend_period.hpp"
#include "baton/mutex/contend_service.hpp"
#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/owner.hpp"

namespace baton::detail {

class lease_machine {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// What the driver must tell the contender, in order.
  struct notification {
    bool acquired = false;  ///< else released
    mutex_state state;
    release_reason why = release_reason::released;  ///< when released: why
  };

  lease_machine(std::string self, contend_options options, random_source random);

  /// A request is sent at `now`.
  void on_send(time_point now);
  /// The reply to the request in flight arrived at `now`.
  std::vector<notification> on_reply(time_point now, const lease_grant& grant);
  /// The reply to the request in flight arrived at `now` while this node refuses to lead (its
  /// clock is too far off the backend's): never owner; an owner steps down (step_down); the next
  /// request (a read) is due after max(retry_period, poll_interval).
  std::vector<notification> on_refused(time_point now, const lease_grant& grant);
  /// The request in flight failed at `now`.
  std::vector<notification> on_error(time_point now);
  /// Time passed: steps down when the local lease has run out.
  std::vector<notification> on_tick(time_point now);
  /// The backend says the mutex may be free: a waiter asks at once. One that comes while a
  /// request is out asks again once its reply is in (unless the reply makes it owner or is an
  /// error): that reply may have been read before the release the wake-up announces.
  void on_wakeup(time_point now);
  /// What the backend's wake-ups cover (none until set): sets how often a waiter asks.
  void set_wakeups(wakeup_coverage coverage) noexcept { wakeups_ = coverage; }
  /// The service stops: steps down if owner.
  std::vector<notification> on_stop();

  bool leader() const noexcept { return leader_; }
  bool in_flight() const noexcept { return in_flight_; }
  /// When the next acquire/renew request is due. An owner renews a random time before ttl_at,
  /// so that many leases won together do not all renew together: the first renewal of a term
  /// (and the first after a failed request, when a stalled backend lined the renewals up again)
  /// falls in [ttl_at - ttl/2, ttl_at], later ones in [ttl_at - ttl/20, ttl_at] (where ttl is
  /// ttl_at minus the reply's backend time), rounded down to a grid of ttl/100 (1 to 100 ms) of
  /// the steady clock, so that the renewals of one slot fire in one wake-up and can share a
  /// statement. Never later than ttl_at, so a renewal leaves at least transition - drift_margin
  /// of the local lease for retries, as without spreading; it only costs up to one renewal in
  /// twenty more. A waiter's long safeguard wait (release_and_expiry) is on the grid too.
  time_point next_attempt() const noexcept { return next_attempt_; }
  /// Local lease deadline while leader.
  time_point deadline() const noexcept { return deadline_; }
  /// The owner last reported (empty after a local step-down).
  const mutex_owner& known_owner() const noexcept { return known_; }
  std::uint64_t fence() const noexcept { return leader_ ? known_.fence : 0; }
  unsigned consecutive_errors() const noexcept { return errors_; }

 private:
  notification step_down(mutex_owner after, release_reason why);

  /// `t` rounded down to the renewal grid of `ttl` (see next_attempt()).
  static time_point on_grid(time_point t, std::chrono::milliseconds ttl);
  /// How long before ttl_at the owner renews (see next_attempt()).
  std::chrono::milliseconds renewal_spread(std::chrono::milliseconds ttl, bool wide) const;

  std::string self_;
  contend_options options_;
  random_source random_;
  contend_period period_;
  mutex_owner known_;
  bool leader_ = false;
  bool in_flight_ = false;
  bool woken_in_flight_ = false;  // on_wakeup() while in_flight_
  wakeup_coverage wakeups_ = wakeup_coverage::none;
  unsigned errors_ = 0;
  time_point sent_at_{};
  time_point next_attempt_{};
  time_point deadline_{};
};

}  // namespace baton::detail
