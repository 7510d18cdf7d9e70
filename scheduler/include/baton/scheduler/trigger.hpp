#pragma once
/// When a schedule fires: `every` (fixed rate or fixed delay) or `cron`, and what to do about
/// fires missed while no node led.
#include <chrono>
#include <variant>

#include "baton/scheduler/cron.hpp"

namespace baton {

/// How an `every` trigger counts its period.
enum class every_mode {
  fixed_rate,   ///< fires at first + k * period, no drift; a fire during a run is skipped
  fixed_delay,  ///< the next fire is `period` after the end of the previous run
};

/// Fires every `period`.
struct every_trigger {
  std::chrono::milliseconds period{0};  ///< must be positive
  every_mode mode = every_mode::fixed_rate;
  /// Delay of the very first fire after acquisition when no earlier fire is recorded.
  std::chrono::milliseconds initial_delay{0};
};

/// Fires at the times of a cron expression (its time zone included).
struct cron_trigger {
  cron_expression expression;
};

/// A schedule's trigger.
using trigger = std::variant<every_trigger, cron_trigger>;

/// What a new leader does about fires missed while nobody led (failover, all nodes down).
enum class misfire_policy {
  run_once,  ///< one catch-up run right away (for the latest missed fire), then the cadence
  skip,      ///< drop missed fires and wait for the next regular one
};

}  // namespace baton
