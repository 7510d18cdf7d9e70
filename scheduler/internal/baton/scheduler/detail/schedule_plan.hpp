#pragma once
/// The scheduler's decisions as pure code: when a schedule fires next, whether a missed fire is
/// caught up, whether a job may start under the current lease. No clocks, no I/O: every time is
/// passed in, so the rules are tested with a fake clock.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "baton/jobs/job.hpp"
#include "baton/mutex/options.hpp"
#include "baton/scheduler/records.hpp"
#include "baton/scheduler/trigger.hpp"

namespace baton::detail {

using sys_time = std::chrono::system_clock::time_point;
using steady_time = std::chrono::steady_clock::time_point;

/// What a leader records in the lease-guarded state before each run (and after it ends).
struct recorded_fire {
  sys_time last_fire{};              ///< planned time of the last fire (millisecond precision)
  std::uint64_t fence = 0;           ///< fence of the ownership that fired it
  std::optional<sys_time> last_end;  ///< when that run ended, if recorded

  friend bool operator==(const recorded_fire&, const recorded_fire&) = default;
};

/// "v1 <last_fire_ms_utc> <fence>[ <last_end_ms_utc>]".
std::string format_schedule_state(const recorded_fire& r);
/// Parses format_schedule_state(); nullopt for an empty or malformed state.
std::optional<recorded_fire> parse_schedule_state(std::string_view text);

/// The whole lease-guarded state of a schedule: the last fire and how many manual runs
/// (schedule_controls::trigger_requests) were taken, so that a new leader runs each request once.
struct schedule_state {
  std::optional<recorded_fire> fire;  ///< nullopt: never fired
  std::uint64_t manual_runs = 0;      ///< manual runs taken (recorded before each starts)

  friend bool operator==(const schedule_state&, const schedule_state&) = default;
};

/// Without manual runs: format_schedule_state(*fire) (the v1 text, readable by older versions);
/// else "v2 <manual_runs>[ <last_fire_ms_utc> <fence>[ <last_end_ms_utc>]]". Empty when there
/// is nothing to record.
std::string format_state(const schedule_state& s);
/// Parses both forms (an empty text: the empty state); nullopt when malformed.
std::optional<schedule_state> parse_state(std::string_view text);

/// Why the scheduler asked a run to stop.
enum class stop_cause {
  none,        ///< it did not
  timeout,     ///< the schedule's timeout passed
  lost_lease,  ///< leadership lost, or the lease not renewed stop_grace before its end
  shutdown,    ///< the scheduler is stopping or the schedule was removed (the lease is given up)
};

/// How an attempt ended: a stop the scheduler asked for wins (timeout: timed_out; lease loss or
/// shutdown: lost_lease), then a reported signal (killed), then a throw (failed), else succeeded.
run_outcome classify_outcome(stop_cause stop, bool threw, const run_report& report) noexcept;
/// True for the outcomes a retry is for: failed, killed, timed_out.
bool retryable(run_outcome o) noexcept;
/// The wait before retry `n` (1 for the first): backoff * 2^(n-1), saturating at a day.
std::chrono::milliseconds retry_delay(std::chrono::milliseconds backoff, unsigned n) noexcept;
/// True when a retry at `at` may run: before the next planned fire (none planned: always).
bool retry_fits(sys_time at, std::optional<sys_time> next_fire) noexcept;

/// The bounded queue of history records not written yet (oldest first). push() beyond `bound`
/// drops the oldest and counts it.
class history_queue {
 public:
  struct item {
    std::uint64_t fence = 0;  ///< written with this fence (the ownership that made the record)
    std::string bytes;
  };
  explicit history_queue(std::size_t bound) : bound_(bound) {}
  /// Adds a record; returns how many old ones were dropped to make room (0 or 1).
  std::size_t push(item i);
  bool empty() const noexcept { return items_.empty(); }
  std::size_t size() const noexcept { return items_.size(); }
  const item& front() const { return items_.front(); }
  void pop() { items_.pop_front(); }

 private:
  std::size_t bound_;
  std::deque<item> items_;
};

/// What a leader does at one wake-up. due() answers wait or start; decide() adds the skip
/// policy, the overlap rule (skip_overlap) and the lease rule (defer).
struct decision {
  enum kind {
    wait,          ///< nothing due: decide again at `wake` (nullopt: nothing planned)
    start,         ///< record `slot` in the lease-guarded state, then start the job
    skip_overlap,  ///< `slot` came due while the previous run is still going: skipped
    defer,         ///< `slot` is due but the lease has too little left: retry shortly
  };
  kind what = wait;
  sys_time slot{};  ///< start / skip_overlap / defer: the planned fire time
  /// wait / skip_overlap: when to decide again (nullopt: nothing planned, e.g. a fixed_delay run
  /// still going or a cron expression with no more fire times).
  std::optional<sys_time> wake;
  bool catch_up = false;                 ///< start: a run_once catch-up of missed fires
  bool dropped = false;                  ///< missed fires were dropped (misfire policy skip)
  std::optional<sys_time> missed_since;  ///< catch_up / dropped: the earliest missed fire

  /// True for a start.
  bool fires() const noexcept { return what == start; }
};

/// The cadence of one schedule on the current leader.
///
/// Slots (planned fire times): fixed_rate `every` continues last_fire + k * period; fixed_delay
/// starts `period` after the end of the previous run (after the acquisition when that end was
/// not recorded); cron takes the expression's next times after the last fire. Without any
/// recorded fire the first slot is acquisition + initial_delay (`every`) or the next cron time.
/// A slot that came due while this node led (or less than `on_time_window` before it became
/// leader) fires; older ones are missed fires, handled by the misfire policy. A recorded fire
/// in the future (clock skew between hosts) counts as a fire now, so the next one is a whole
/// period away. Nothing fires before its slot: a leader that took over 5 minutes after an
/// hourly fire waits 55 minutes.
class schedule_plan {
 public:
  static constexpr std::chrono::milliseconds default_on_time_window{1000};

  schedule_plan(trigger when, misfire_policy policy,
                std::chrono::milliseconds on_time_window = default_on_time_window);

  /// Became leader at `now`; `recorded` is what the state held (nullopt: nothing recorded).
  void start(const std::optional<recorded_fire>& recorded, sys_time now);
  /// Resumed at `now` after a pause (this node leads): like start(), but every slot before `now`
  /// is a missed fire (no on-time window), so the misfire policy decides about them.
  void resume(const std::optional<recorded_fire>& recorded, sys_time now);
  /// What to do at `now`, by the cadence alone: start (`slot`, maybe a catch_up) or wait
  /// (`wake`; `dropped` when the skip policy would drop missed fires: call drop_missed()).
  decision due(sys_time now) const;
  /// The whole decision at a wake-up: due(), then the skip policy, the overlap rule (`running`:
  /// a run is going or being recorded) and the lease rule (`lease_left`: local lease deadline
  /// minus now; a job never starts with stop_grace or less left). Skips are applied to the plan;
  /// a `start` is not (call fired() once the job really starts).
  decision decide(sys_time now, bool running, std::chrono::nanoseconds lease_left,
                  std::chrono::milliseconds stop_grace);
  /// The fire at `slot` (from due()) was started.
  void fired(sys_time slot);
  /// The fire at `slot` was skipped because the previous run was still going.
  void skipped(sys_time slot);
  /// Drops the missed fires due at `now` (skip policy): next is the first slot after them.
  void drop_missed(sys_time now);
  /// The run started last ended at `end` (fixed_delay counts the period from here).
  void run_ended(sys_time end);

  /// The first slot not yet handled; nullopt when none is planned.
  std::optional<sys_time> next_fire() const { return awaiting_end_ ? std::nullopt : candidate_; }
  /// The last fire (recorded by an earlier leader or fired here).
  std::optional<sys_time> last_fire() const { return last_fire_; }
  const trigger& when() const noexcept { return when_; }

 private:
  std::optional<sys_time> after(sys_time slot) const;
  sys_time latest_due(sys_time first, sys_time now) const;

  trigger when_;
  misfire_policy policy_;
  std::chrono::milliseconds window_;
  std::chrono::milliseconds active_window_;  // window_, or 0 after resume()
  std::optional<sys_time> candidate_;
  std::optional<sys_time> last_fire_;
  sys_time leader_since_{};
  bool awaiting_end_ = false;
};

/// True when a job may start at `now`: the local lease has more than `stop_grace` left.
bool may_start(steady_time lease_deadline, steady_time now, std::chrono::milliseconds stop_grace);
/// When a running job is asked to stop unless the lease was renewed by then.
steady_time stop_point(steady_time lease_deadline, std::chrono::milliseconds stop_grace);
/// The largest useful stop_grace is below this: the lease left just before a regular renewal
/// (transition - drift margin); a larger one would stop jobs before every renewal.
std::chrono::milliseconds stop_grace_limit(const contend_options& lease);
/// stop_grace when none is configured: min(3s, stop_grace_limit / 2).
std::chrono::milliseconds default_stop_grace(const contend_options& lease);

}  // namespace baton::detail
