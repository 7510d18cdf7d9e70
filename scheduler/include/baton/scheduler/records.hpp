#pragma once
/// A schedule's run history and controls as the scheduler stores them in the backend's
/// record_store (mutex/records.hpp): the record types, their JSON form (one schema, used in the
/// backend and by `--json` output), and the blocking operations for tools and embedding services.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/records.hpp"

namespace baton {

/// Why a run started.
enum class run_trigger {
  schedule,  ///< its planned fire time came
  catch_up,  ///< a fire missed while no node led (or while paused), misfire policy run_once
  manual,    ///< `baton trigger` / scheduler::trigger()
  retry,     ///< a retry of a failed attempt (schedule_options::retries)
};

/// How a run (one attempt) ended, or why a fire did not run.
enum class run_outcome {
  succeeded,        ///< the job returned (a command exited with status 0)
  failed,           ///< the job threw (a command: exit status != 0, or could not start)
  killed,           ///< a command was ended by a signal that baton did not send for a
                    ///< timeout or a lost lease (`signal` says which)
  timed_out,        ///< stopped because the schedule's timeout passed
  lost_lease,       ///< stopped because this node stopped leading (lease lost, or the
                    ///< scheduler stopping / the schedule removed: the lease is given up)
  skipped_overlap,  ///< not run: the previous run was still going
  skipped_paused,   ///< not run: the schedule is paused
};
inline constexpr std::size_t run_outcome_count = 7;

std::string_view to_string(run_trigger t) noexcept;
std::string_view to_string(run_outcome o) noexcept;
std::optional<run_trigger> parse_run_trigger(std::string_view text) noexcept;
std::optional<run_outcome> parse_run_outcome(std::string_view text) noexcept;

/// One history record: one attempt of a run, or one fire that did not run.
struct run_record {
  std::uint64_t seq = 0;  ///< the backend's (history_entry::seq); 0 before it is stored
  std::string schedule;
  std::string node;         ///< contender id of the leader that ran it
  std::uint64_t fence = 0;  ///< the fence of that leadership
  run_trigger trigger = run_trigger::schedule;
  unsigned attempt = 1;  ///< 1, then 2, 3, ... for retries of the same fire
  /// The planned fire time (manual: when the leader took the request). Wall clock.
  std::chrono::system_clock::time_point planned{};
  /// Start and end on `node`'s wall clock (not the backend's); unset for skipped fires.
  std::optional<std::chrono::system_clock::time_point> started;
  std::optional<std::chrono::system_clock::time_point> ended;
  std::chrono::milliseconds duration{0};  ///< measured on `node`'s steady clock
  run_outcome outcome = run_outcome::succeeded;
  std::optional<int> exit_status;  ///< a command's exit status, when it exited
  std::optional<int> signal;       ///< the signal that ended a command
  std::string error;               ///< what went wrong, one line; empty on success
  std::string output;              ///< the last bytes of the run's stderr (history_output)
  bool output_truncated = false;   ///< `output` is only the tail

  friend bool operator==(const run_record&, const run_record&) = default;
};

/// The JSON of a record (the stored form and the `--json` form; times RFC 3339 UTC with
/// milliseconds, "clock": "node_wall" names where start and end come from). `seq` is included
/// when non-zero.
std::string to_json(const run_record& r);
/// Reads a stored entry (its seq and fence come from the entry). Throws std::invalid_argument
/// saying what is wrong with the bytes.
run_record parse_run_record(const history_entry& e);

/// The cluster-wide controls of a schedule.
struct schedule_controls {
  bool paused = false;
  std::string reason;      ///< given with pause
  std::string changed_by;  ///< who paused or resumed last ("user@host" from the CLI)
  std::optional<std::chrono::system_clock::time_point> changed_at;  ///< the writer's wall clock
  /// Manual runs ever asked for (only grows); the leader runs one per request it has not run
  /// yet, counting those it ran in the lease-guarded state.
  std::uint64_t trigger_requests = 0;
  std::uint64_t version = 0;  ///< controls_record::version (0: never written)

  friend bool operator==(const schedule_controls&, const schedule_controls&) = default;
};

/// JSON of the controls (without the version, which the backend keeps).
std::string to_json(const schedule_controls& c);
/// Reads the stored controls ({} when never written). Throws std::invalid_argument.
schedule_controls parse_schedule_controls(const controls_record& r);

/// Blocking operations on one schedule's records (not on an io thread). Throw
/// std::system_error for backend trouble, std::invalid_argument for a bad name or unreadable
/// stored controls. Each change is a compare-and-set, retried on conflict, so concurrent writers
/// never lose an update.
std::vector<run_record> read_run_history(mutex_backend& backend, const std::string& schedule,
                                         std::size_t limit);
schedule_controls read_schedule_controls(mutex_backend& backend, const std::string& schedule);
schedule_controls pause_schedule(mutex_backend& backend, const std::string& schedule,
                                 std::string reason, std::string by);
schedule_controls resume_schedule(mutex_backend& backend, const std::string& schedule,
                                  std::string by);
/// Asks for one manual run; returns the controls written (trigger_requests is this request's
/// number).
schedule_controls trigger_schedule(mutex_backend& backend, const std::string& schedule,
                                   std::string by);

}  // namespace baton
