#pragma once
/// Timing settings of a contend service, and the one place their rules live.
#include <chrono>
#include <string>
#include <vector>

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
  /// Refuse to lead while this host's wall clock is surely further than this from the
  /// backend's (clock.hpp): no acquisition, and an owner that finds out steps down. Zero: no
  /// limit (the offset is still measured, logged and corrected for).
  std::chrono::milliseconds max_clock_offset{0};
  /// A waiter asks for a lapsing lease at its transition_at plus a random delay in
  /// [0, lapse_jitter), so that the waiters of one mutex do not all ask in the same instant after
  /// a crash. Zero: all at transition_at. Every waiter's takeover is late by half of it on
  /// average (bench/RESULTS.md, crash takeover with 8 waiters).
  std::chrono::milliseconds lapse_jitter{100};

  /// The lease a backend grants on acquire/renew.
  std::chrono::milliseconds lease() const noexcept { return ttl + transition; }
  /// The effective drift margin.
  std::chrono::milliseconds effective_drift_margin() const noexcept;
};

/// One problem with a setting: the field it concerns ("retry_period") and why. `also` names the
/// other fields the rule involves ("ttl"), so that a caller can point at whichever one the user
/// set (the config names JSON paths this way).
struct setting_problem {
  std::string field;
  std::string message;
  std::vector<std::string> also = {};

  friend bool operator==(const setting_problem&, const setting_problem&) = default;
};

/// The messages of `problems` joined with "; " (empty when there are none).
std::string join_messages(const std::vector<setting_problem>& problems);

/// Every problem of `options`; empty when they are usable. The lease rules: ttl > 0,
/// transition >= 0, 0 < retry_period < ttl (a failed renewal is retried before the lease runs
/// out), poll_interval > 0, max_backoff >= retry_period, drift_margin >= 0 and below
/// ttl + transition, max_clock_offset >= 0, 0 <= lapse_jitter <= ttl + transition.
std::vector<setting_problem> check(const contend_options& options);

/// Throws std::invalid_argument ("lease options: " + the messages of check()) when `options`
/// are inconsistent.
void validate(const contend_options& options);

}  // namespace baton
