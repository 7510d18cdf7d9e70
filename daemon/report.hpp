#pragma once
// The documents that `baton status --json` / `baton history --json` print and the web console's
// GET /api/v1/schedules and /api/v1/schedules/NAME/history serve (one code path, one schema:
// daemon/README.md, "JSON output"), and the control actions of `baton pause|resume|trigger` and
// POST /api/v1/schedules/NAME/ACTION.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/config/config.hpp"
#include "baton/mutex/backend.hpp"
#include "baton/scheduler/records.hpp"

namespace baton::daemon {

/// Every schedule of `config` as the backend records it: owner, fence, lease times, waiting
/// contenders, controls, last and next fire, last run; and the nodes' membership records.
struct status_report {
  nlohmann::json doc;                 ///< the `status --json` document (schema 1)
  std::string text;                   ///< the text `status` prints
  std::vector<std::string> warnings;  ///< what could not be read, for stderr or the log
  std::string error;                  ///< set when a schedule's owner record could not be read
};

/// Reads the backend (blocking: from a command's thread or the console's pool, never from the
/// runtime's io threads). Secrets in backend errors are scrubbed.
status_report build_status(const config::daemon_config& config, mutex_backend& backend);

/// The `history --json` document of `records` (newest first).
nlohmann::json history_document(const std::string& schedule, std::size_t limit,
                                const std::vector<run_record>& records);

/// "pause", "resume" or "trigger".
bool is_control_action(const std::string& action);

/// What a control action found and left.
struct control_result {
  mutex_owner owner;  ///< the schedule's owner when it was applied (empty: none leads it)
  schedule_controls before;
  schedule_controls after;
};

/// Applies `action` (is_control_action) to `schedule` as `by` ("user@host", "console
/// 127.0.0.1:5555"); `reason` only for pause. Blocking; throws what the backend throws.
control_result apply_control(mutex_backend& backend, const std::string& schedule,
                             const std::string& action, const std::string& reason,
                             const std::string& by);

}  // namespace baton::daemon
