#pragma once
/// Timing settings of a contend service.
#include <chrono>

namespace baton {

/// Lease and polling settings. `ttl + transition` is the lease a backend grants; the owner renews
/// from `ttl` on and others may acquire only after `ttl + transition`.
struct contend_options {
  std::chrono::milliseconds ttl{10'000};          ///< renew this long after a successful acquire
  std::chrono::milliseconds transition{6'000};    ///< grace after ttl before others may take over
  std::chrono::milliseconds retry_period{1'000};  ///< between failed renewals / failed requests
  std::chrono::milliseconds poll_interval{500};   ///< waiters re-check at least this often
  /// Subtracted from the local lease, covers clock rate differences between hosts. Zero picks
  /// max(50 ms, 2% of ttl + transition).
  std::chrono::milliseconds drift_margin{0};
  /// Backoff cap for a waiter whose requests fail.
  std::chrono::milliseconds max_backoff{5'000};

  /// The lease a backend grants on acquire/renew.
  std::chrono::milliseconds lease() const noexcept { return ttl + transition; }
  /// The effective drift margin.
  std::chrono::milliseconds effective_drift_margin() const noexcept;
};

/// Throws std::invalid_argument naming the field when the options are inconsistent.
void validate(const contend_options& options);

}  // namespace baton
