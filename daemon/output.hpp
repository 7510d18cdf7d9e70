#pragma once
// Logging setup, the ways the daemon shows times, durations and signals, the JSON pieces that
// several commands print, and the watchdog that bounds a command's backend calls.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "baton/mutex/backend.hpp"
#include "baton/scheduler/balance.hpp"

namespace baton::daemon {

/// Sets the level ("warning" = "warn") and the stderr format of baton's log: "text"
/// ("2026-11-22T03:00:00.123Z info [schedule] message", UTC) or "json" (one object per line).
void configure_logging(const std::string& level, const std::string& format = "text");

/// "2026-11-22T03:00:00Z" (milliseconds when nonzero).
std::string utc(std::chrono::system_clock::time_point tp);

/// The wall-clock time in `zone`: "2026-11-22 04:00:00 CET (+01:00)".
std::string local(std::chrono::system_clock::time_point tp, const std::string& zone);

/// A measured duration for people: "250ms", "4.2s", "3m05s", "2h10m".
std::string format_elapsed(std::chrono::milliseconds d);

/// How far `t` is from `now`: "4.2s ago", "in 3m05s", "now".
std::string relative(std::chrono::system_clock::time_point t,
                     std::chrono::system_clock::time_point now);

/// "SIGKILL" for 9; "signal 77" for a number without a name.
std::string signal_text(int sig);

/// "user@host" of this process (the login name, else $USER, else the uid).
std::string caller_identity();

/// The JSON of a backend config for --json: {"type", "description", "parameters": {...}}, every
/// secret masked as describe() masks it (no value reaches JSON unmasked).
nlohmann::json backend_json(const backend_config& backend);

/// The items joined with `sep` between them.
std::string join(const std::vector<std::string>& items, const char* sep = " ");

/// "[gpu, eu-west]" ("[]" for none).
std::string tags_text(const std::vector<std::string>& tags);

/// This node as `node` configures it: "id web-1, tags [gpu]" ("id (from the contender id)"
/// when unset).
std::string node_text(const balance_options& b);

/// The balance mode: "on (heartbeat 1s, member_timeout default, settle default, handoff_rate
/// 5/s)" or "off (first come)". Values left at 0 show as "default".
std::string balance_text(const balance_options& b);

/// The JSON text of a document: 2-space indented, invalid UTF-8 replaced (never throws on bytes).
std::string dump_json(const nlohmann::json& document);

/// Exits the process with exit_failure and a message naming `command` and `what` if it is not
/// destroyed within `timeout` (a backend call that hangs).
class watchdog {
 public:
  watchdog(std::chrono::seconds timeout, std::string command, std::string what);
  ~watchdog();
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace baton::daemon
