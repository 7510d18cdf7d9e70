#pragma once
/// What a job is: a function called with the context of one run (fence, fire time, stop request).
#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>

namespace baton {

/// The context of one run of a schedule's job.
struct job_context {
  std::string schedule;      ///< schedule name (= mutex name)
  std::string contender_id;  ///< the contender (node) that fired this run
  std::uint64_t fence = 0;   ///< fencing token of the ownership that fired this run
  /// The planned fire time (not the moment the job actually started).
  std::chrono::system_clock::time_point fire_time{};
  /// When the schedule's `timeout` runs out (max() if none). The lease is enforced through `stop`
  /// instead, because its end moves with every renewal.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Requested on leadership loss (or a lease not renewed stop_grace before its end), timeout
  /// and shutdown. A job should return soon after.
  std::stop_token stop;
};

/// A job. It may throw: the exception is logged and counted as a failed run, never propagated.
using job_function = std::function<void(const job_context&)>;

}  // namespace baton
