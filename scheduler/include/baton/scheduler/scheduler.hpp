#pragma once
/// The leader-gated scheduler: one contend service per schedule; the node that holds a
/// schedule's mutex fires its job, continuing the cadence recorded in the lease-guarded state.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "baton/jobs/job.hpp"
#include "baton/mutex/backend.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/clock.hpp"
#include "baton/scheduler/records.hpp"
#include "baton/scheduler/trigger.hpp"

namespace baton {

/// One schedule: a job, when it fires, and how it is guarded.
struct schedule_options {
  std::string name;  ///< also the mutex name: [A-Za-z0-9._-]{1,128}
  trigger when;
  job_function job;
  /// Instead of `job` when set: an asynchronous job (the daemon's command jobs). A job-pool
  /// thread only starts the run; the job calls back when it has ended, so runs that last hold
  /// no thread.
  async_job_function async_job;
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
  /// History records kept in the backend (run_record per attempt and per skipped fire); the
  /// leader prunes older ones. 0: no history is written. At most max_history_keep.
  std::size_t history = 50;
  /// Most bytes of a run's stderr tail kept in its history record; 0: none. At most
  /// max_history_output.
  std::size_t history_output = 4096;
  /// A failed, killed or timed-out attempt is retried up to this many times, while the lease is
  /// held and before the next planned fire.
  unsigned retries = 0;
  /// Wait before retry n: retry_backoff * 2^(n-1) after the previous attempt ended. Positive.
  std::chrono::milliseconds retry_backoff{10'000};
  /// Only nodes with all these tags (balance_options::tags) contend for the schedule, whether
  /// balance is on or off.
  std::vector<std::string> required_tags;
  /// With balance on, nodes with all these tags are chosen first while one is alive and has
  /// room in its fair share.
  std::vector<std::string> preferred_tags;
};

/// Largest schedule_options::history_output: its JSON (escapes included) must fit in a history
/// entry (max_history_entry_bytes).
inline constexpr std::size_t max_history_output = 8 * 1024;

/// A schedule's lease and stop_grace as the scheduler runs it, and every problem found on the
/// way (empty `problems`: add() accepts it, unless the name is taken).
struct schedule_check {
  contend_options lease;
  std::chrono::milliseconds stop_grace{0};
  /// Fields: "name", "job", "every", "initial_delay", "timeout", "stop_grace", "history",
  /// "history_output", "retry_backoff", or a field of
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
  /// comes and all are busy, and end after a minute idle. A run of an async_job holds a thread
  /// only while it starts.
  unsigned job_threads = 4;
  std::optional<contend_options> lease;  ///< default lease for schedules without their own
  std::string contender_id;              ///< this node; empty = make_contender_id()
  /// Time source; null = system_scheduler_clock(). Its steady time must follow
  /// std::chrono::steady_clock (it is compared with lease deadlines); timers wait in real time.
  std::shared_ptr<const scheduler_clock> clock;
  /// Fire on the backend's clock: planned fire times are this host's wall clock plus the offset
  /// the schedule's contend service measured (baton/mutex/clock.hpp), so that every leader
  /// fires at the same instants whatever its own clock says. Not applied with an injected
  /// `clock` (the offset is measured against the real wall clock).
  bool follow_backend_clock = true;
  /// Spread the schedules over the cluster's nodes (balance.hpp); off by default in the
  /// library (first come), on by default in the daemon.
  balance_options balance{};
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
  /// The schedule is paused cluster-wide (as last read from its controls; while leader).
  bool paused = false;
  std::string paused_reason;  ///< the reason given with pause
  /// The last history record this node made for the schedule (also when writing it failed).
  std::optional<run_record> last_run;
  /// Attempts in a row that ended failed, killed or timed_out on this node (0 after a success).
  std::uint64_t consecutive_failures = 0;
  std::uint64_t retries = 0;      ///< retry attempts started on this node
  std::uint64_t manual_runs = 0;  ///< manual (triggered) runs started on this node
  /// History appends that failed (backend trouble; the record is kept and written later).
  std::uint64_t history_errors = 0;
  /// History records given up: rejected as stale (not_owner: another ownership began) or dropped
  /// from a full queue of unwritten records.
  std::uint64_t history_dropped = 0;
  std::uint64_t controls_errors = 0;  ///< failed or unreadable reads of the controls
  /// Attempts and not-run fires on this node, by outcome (indexed by run_outcome).
  std::array<std::uint64_t, run_outcome_count> outcomes{};
  /// How long the attempts this node finished took (seconds; skipped fires not included).
  histogram_snapshot run_duration;
  /// When the last successful attempt on this node ended (wall clock).
  std::optional<std::chrono::system_clock::time_point> last_success;
  /// The backend's clock minus this host's, as last measured by the schedule's contend service
  /// (nullopt before the first measurement).
  std::optional<clock_sample> clock_offset;
  /// This node refuses to lead the schedule: its clock is beyond max_clock_offset.
  bool clock_refused = false;
};

namespace detail {
class schedule_runner;
class balancer;
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

  /// Drain (true): hand every schedule to the other nodes, gracefully (at quiet moments, at
  /// most balance_options::handoff_rate per second), and stop contending; balance().drained
  /// once this node leads nothing. false: take a fair share again. The request is written into
  /// this node's membership record. Needs balance enabled (else std::logic_error). Any thread.
  void drain(bool on);
  /// What the balancer knows now (enabled false and nothing else when balance is off).
  balance_status balance() const;

  /// The newest `limit` history records of schedule `name`, newest first (from the backend: every
  /// node's records). Blocking, not on an io thread. Throws std::invalid_argument when `name` is
  /// not a schedule of this scheduler (naming the known ones), std::system_error for backend
  /// trouble.
  std::vector<run_record> history(const std::string& name, std::size_t limit) const;
  /// The cluster-wide controls of schedule `name`. Blocking; throws like history().
  schedule_controls controls(const std::string& name) const;
  /// Pauses schedule `name` cluster-wide (this node's contender id recorded as who did it): the
  /// leader stops firing it and records each skipped fire. Returns the controls written.
  schedule_controls pause(const std::string& name, std::string reason = {});
  /// Resumes schedule `name` cluster-wide; the misfire policy decides about the fires missed.
  schedule_controls resume(const std::string& name);
  /// Asks for one manual run of `name` on whichever node leads it (now or next). Returns the
  /// controls written.
  schedule_controls trigger(const std::string& name);

 private:
  mutex_backend& backend_;
  runtime& runtime_;
  scheduler_options options_;
  std::string id_;
  struct pool;
  std::unique_ptr<pool> pool_;
  /// Stops firing `which`, waits up to `grace` for their jobs, then releases their mutexes.
  void retire(const std::vector<std::shared_ptr<detail::schedule_runner>>& which,
              std::chrono::milliseconds grace, const std::function<void()>& before_release = {});
  /// Throws std::invalid_argument unless `name` is one of the schedules.
  void require_schedule(const std::string& name) const;

  mutable std::mutex runners_mutex_;  // guards runners_ (status() reads it from any thread)
  std::vector<std::shared_ptr<detail::schedule_runner>> runners_;
  std::shared_ptr<detail::balancer> balancer_;  // null when balance is off
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace baton
