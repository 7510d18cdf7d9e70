#pragma once
/// What a job is: a function called with the context of one run (fence, fire time, stop request).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>

namespace baton {

/// What a job may tell about how its run ended, beyond returning or throwing (the scheduler puts
/// it into the run's history record). The command job fills it; other jobs may leave it alone.
struct run_report {
  std::optional<int> exit_status;  ///< a command's exit status, when it exited
  std::optional<int> signal;       ///< the signal that ended a command
  /// The last bytes of the run's error output (a command's stderr), at most output_tail_limit.
  std::string output_tail;
  bool output_truncated = false;  ///< output_tail is only the tail of a longer output
  /// Most bytes kept in output_tail (set by the scheduler; 0: keep none).
  std::size_t output_tail_limit = 0;
};

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
  /// Where the job reports its exit status, signal and output tail; null when nobody asks.
  /// Owned by the caller and valid until the job returns; written only by the job's thread.
  run_report* report = nullptr;
};

/// A job. It may throw: the exception is logged and counted as a failed run, never propagated.
using job_function = std::function<void(const job_context&)>;

/// An asynchronous job: starts the run and returns, then calls `done` exactly once, from any
/// thread, when the run has ended (a null exception_ptr: succeeded; else why it failed). The
/// context (and the run_report it points to) stays valid until then. A job that cannot start
/// throws from the call instead, and `done` is not called. Lets a process run many jobs at once
/// on few threads (the daemon's command jobs).
using async_job_function =
    std::function<void(const job_context&, std::function<void(std::exception_ptr)> done)>;

}  // namespace baton
