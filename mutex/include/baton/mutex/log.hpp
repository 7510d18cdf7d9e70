#pragma once
/// baton's log records and the hook that sends them to an embedding service's own logging.
/// By default baton logs to stderr (spdlog, logger "baton"); set_log_handler() replaces that.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace baton {

enum class log_level { trace, debug, info, warn, error, critical, off };

/// "trace", "debug", "info", "warn", "error", "critical", "off".
std::string_view to_string(log_level l) noexcept;
/// Accepts the names above and "warning" (as "warn"), any case. False if unknown.
bool parse_log_level(std::string_view text, log_level& out) noexcept;

/// One log line with its structured fields (empty / 0 when the line has none).
struct log_record {
  log_level level = log_level::info;
  std::string_view message;   ///< without the schedule tag; job output already escaped
  std::string_view schedule;  ///< the schedule (= mutex name) the line is about
  std::uint64_t fence = 0;    ///< the fence of the leadership the line is about
  std::string_view node;      ///< the contender id of this node, when known
  std::string_view event;     ///< a short stable key: "job.started", "lease.acquired", ...
};

/// Sends every baton log record at or above `min_level` to `handler` instead of stderr (from
/// any thread, possibly concurrently: the handler must be thread-safe and must not throw).
/// An empty handler restores the default stderr output.
void set_log_handler(std::function<void(const log_record&)> handler,
                     log_level min_level = log_level::info);

/// Sets the level below which baton drops records (default info).
void set_log_level(log_level l) noexcept;

}  // namespace baton
