#pragma once
// What a stop signal does to `baton run`: a pure function of the signal, the time and when the
// stop began (tests/unit/stop_policy_test.cpp drives it with made-up times). run.cpp acts on it.
#include <signal.h>

#include <chrono>
#include <optional>

namespace baton::daemon {

/// What to do with a SIGTERM or SIGINT, or with the passing of time while stopping.
enum class stop_step {
  wait,             ///< nothing to do (time passing, before stop_timeout)
  stop_gracefully,  ///< the first SIGTERM/SIGINT: stop firing, end the jobs, release, exit 0
  duplicate,        ///< SIGTERM within stop_duplicate_window of the first: the same stop, twice
  keep_stopping,    ///< a later SIGTERM while stopping: logged; the graceful stop carries on
  exit_now,         ///< SIGINT while stopping (Ctrl-C again): exit at once without releasing
  give_up,          ///< stop_timeout has passed since the first signal: exit, waiting no longer
};

/// A SIGTERM this soon after the first stop signal is the same stop delivered twice: GNU
/// `timeout` signals the daemon and then its process group, and systemd may do the same.
inline constexpr std::chrono::milliseconds stop_duplicate_window{1000};

/// What `sig` (SIGTERM or SIGINT; nullopt: only time passing) received at `now` does, the stop
/// having begun at `stopping_since` (nullopt: not stopping yet). A SIGTERM while stopping never
/// aborts the handover; a SIGINT while stopping exits at once, whatever began the stop; once
/// `stop_timeout` has passed since the stop began the daemon gives up, signal or not.
constexpr stop_step next_stop_step(std::optional<int> sig,
                                   std::optional<std::chrono::steady_clock::time_point> since,
                                   std::chrono::steady_clock::time_point now,
                                   std::chrono::milliseconds stop_timeout) {
  if (!since) return sig ? stop_step::stop_gracefully : stop_step::wait;
  if (now - *since >= stop_timeout) return stop_step::give_up;
  if (!sig) return stop_step::wait;
  if (*sig == SIGINT) return stop_step::exit_now;
  return now - *since < stop_duplicate_window ? stop_step::duplicate : stop_step::keep_stopping;
}

}  // namespace baton::daemon
