#pragma once
/// The leader-gated scheduler: one contend service per schedule; the node that holds a
/// schedule's mutex fires its job, continuing the cadence recorded in the lease-guarded state.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "baton/jobs/job.hpp"
#include "baton/mutex/backend.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/clock.hpp"
#include "baton/scheduler/trigger.hpp"

namespace baton {

/// One schedule: a job, when it fires, and how it is guarded.
struct schedule_options {
  std::string name;  ///< also the mutex name: [A-Za-z0-9._-]{1,128}
  trigger when;
  job_function job;
  /// Lease of this schedule's mutex; else the scheduler's (scheduler_options::lease, else the
  /// backend's default_options()).
  std::optional<contend_options> lease;
  std::chrono::milliseconds timeout{0};  ///< a run is asked to stop after this; 0 = no timeout
  /// Running jobs are asked to stop this long before the local lease deadline (unless renewed by
  /// then), and a job is never started with less than this left. Should cover the job's own
  /// shutdown (command jobs: kill_grace). Must be less than lease transition - drift margin
  /// (else jobs would be stopped before every renewal). Unset: min(3s, that bound / 2).
  std::optional<std::chrono::milliseconds> stop_grace;
  misfire_policy misfire = misfire_policy::run_once;
};

/// A schedule's lease and stop_grace as the scheduler runs it, and every problem found on the
/// way (empty `problems`: add() accepts it, unless the name is taken).
struct schedule_check {
  contend_options lease;
  std::chrono::milliseconds stop_grace{0};
  /// Fields: "name", "job", "every", "initial_delay", "timeout", "stop_grace", or a field of
  /// the lease ("ttl", "transition", ...; see baton::check(const contend_options&)).
  std::vector<setting_problem> problems;
};

/// The lease rules (baton::check) and the stop_grace rules of a schedule: transition must exceed
/// the drift margin (so that jobs can be stopped before the lease ends) and stop_grace, unset:
/// detail::default_stop_grace(lease), must stay below transition - drift margin.
schedule_check check_lease(const contend_options& lease,
                           std::optional<std::chrono::milliseconds> stop_grace);

/// Resolves `s` the way scheduler::add() does (its own lease, else `fallback_lease`: the
/// scheduler's lease, else the backend's default_options()) and checks everything add() checks
/// except that the name is free. The one set of schedule rules: add() throws with these
/// messages, the config maps their fields to JSON paths.
schedule_check check(const schedule_options& s, const contend_options& fallback_lease);

/// Settings shared by every schedule of a scheduler.
struct scheduler_options {
  /// Most threads of the job pool (jobs never run on io threads). Threads start only when a job
  /// comes and all are busy, and end after a minute idle.
  unsigned job_threads = 4;
  std::optional<contend_options> lease;  ///< default lease for schedules without their own
  std::string contender_id;              ///< this node; empty = make_contender_id()
  /// Time source; null = system_scheduler_clock(). Its steady time must follow
  /// std::chrono::steady_clock (it is compared with lease deadlines); timers wait in real time.
  std::shared_ptr<const scheduler_clock> clock;
};

/// A snapshot of one schedule on this node.
struct schedule_status {
  std::string name;
  bool leader = false;      ///< this node holds the schedule's mutex
  std::uint64_t fence = 0;  ///< fencing token while leader, else 0
  std::optional<std::chrono::system_clock::time_point> last_fire;  ///< planned time, as recorded
  std::optional<std::chrono::system_clock::time_point> next_fire;  ///< while leader
  bool running = false;               ///< a run is in progress on this node
  std::uint64_t runs = 0;             ///< runs started on this node
  std::uint64_t skipped_overlap = 0;  ///< fires skipped because the previous run was still going
  std::uint64_t failures = 0;         ///< runs that threw (command: failed or non-zero exit)
  std::uint64_t catch_ups = 0;        ///< misfire catch-up runs started (run_once)
  std::uint64_t state_errors = 0;     ///< failed reads/writes of the lease-guarded state
};

namespace detail {
class schedule_runner;
}  // namespace detail

/// Runs schedules on one backend. Lifecycle: add()... start() ... stop(); schedules can be added
/// and removed while it runs. The backend and runtime must outlive it. Thread-safe for status();
/// add/remove/start/stop from one control thread.
class scheduler {
 public:
  scheduler(mutex_backend& backend, runtime& rt, scheduler_options opts = {});
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;
  /// stop(0), then waits for the jobs still running (a job that ignores its stop request
  /// blocks here).
  ~scheduler();

  /// Adds a schedule; after start() it starts contending at once. Throws std::invalid_argument
  /// naming the schedule and field (duplicate or invalid name, no job, non-positive period, bad
  /// lease or stop_grace), std::logic_error after stop().
  void add(schedule_options s);
  /// Removes a schedule: stops firing it, asks its running job to stop, waits up to `grace` for
  /// the job, then releases its mutex (another node may take it at once). False if there is no
  /// schedule of that name. Blocking; not on an io thread.
  bool remove(const std::string& name, std::chrono::milliseconds grace) noexcept;
  /// Raises the job pool's most threads to at least `n` (for schedules added later).
  void reserve_job_threads(unsigned n);
  /// Starts contending for every schedule. Throws std::logic_error if called twice.
  void start();
  /// Stops firing, asks running jobs to stop, waits up to `grace` for them, then releases
  /// every mutex (so another node takes over at once). Blocking; not on an io thread.
  void stop(std::chrono::milliseconds grace) noexcept;
  /// A snapshot of every schedule, in the order added.
  std::vector<schedule_status> status() const;
  /// This node's contender id.
  const std::string& contender_id() const noexcept { return id_; }

 private:
  mutex_backend& backend_;
  runtime& runtime_;
  scheduler_options options_;
  std::string id_;
  struct pool;
  std::unique_ptr<pool> pool_;
  /// Stops firing `which`, waits up to `grace` for their jobs, then releases their mutexes.
  void retire(const std::vector<std::shared_ptr<detail::schedule_runner>>& which,
              std::chrono::milliseconds grace);

  mutable std::mutex runners_mutex_;  // guards runners_ (status() reads it from any thread)
  std::vector<std::shared_ptr<detail::schedule_runner>> runners_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace baton
