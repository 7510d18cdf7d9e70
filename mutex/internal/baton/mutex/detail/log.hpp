#pragma once
/// baton's logger (spdlog, named "baton") and the structured fields of its lines.
///
/// Internal: this header is not installed (mutex/internal/ is on the include path of baton's own
/// targets only, through baton_internal), so no installed header pulls in spdlog. Embedding
/// services use the public hook in baton/mutex/log.hpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "baton/mutex/log.hpp"

namespace baton::detail {

/// The shared "baton" logger, created on first use. Its one sink writes text (or JSON) lines to
/// stderr, or hands log_records to the handler of set_log_handler().
spdlog::logger& log();

/// The structured fields of one log line; they become log_record's fields and the JSON keys.
/// The schedule is shown as a "[name] " tag in text lines, so messages never repeat it.
struct log_fields {
  std::string_view schedule = {};  ///< the schedule (= mutex name) the line is about
  std::string_view event = {};  ///< a stable key, e.g. "job.started" (daemon/README.md lists them)
  std::uint64_t fence = 0;      ///< the fence of the leadership the line is about, 0 = none
};

/// While alive, log calls on this thread carry `fields` (the sink runs on the calling thread).
/// Keeps a copy of the fields (their strings must outlive the scope); scopes nest.
class log_scope {
 public:
  explicit log_scope(const log_fields& fields) noexcept;
  ~log_scope();
  log_scope(const log_scope&) = delete;
  log_scope& operator=(const log_scope&) = delete;

 private:
  log_fields fields_;
  const log_fields* previous_;
};

/// log() with fields: `detail::log({.schedule = name, .event = "job.started"}).info(...)`.
class field_logger {
 public:
  explicit field_logger(const log_fields& fields) noexcept : fields_(fields) {}

  template <typename... Args>
  void log(spdlog::level::level_enum level, spdlog::format_string_t<Args...> fmt,
           Args&&... args) const {
    auto& logger = detail::log();
    if (!logger.should_log(level)) return;
    log_scope scope(fields_);
    logger.log(level, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::debug, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void info(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::info, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::warn, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void error(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::err, fmt, std::forward<Args>(args)...);
  }

 private:
  log_fields fields_;
};

/// The logger with `fields` for one call.
inline field_logger log(const log_fields& fields) noexcept { return field_logger(fields); }

/// How the default sink writes to stderr.
enum class log_format {
  text,  ///< "2026-11-22T03:00:00.123Z info [schedule] message"
  json,  ///< one JSON object per line: time, level, msg, schedule, fence, node, event
};

/// Chooses the stderr format (the daemon's --log-format / log_format).
void set_log_format(log_format format) noexcept;

/// The contender id of this process, carried as every record's `node` (set by the scheduler).
void set_log_node(std::string node);

/// `text` with every byte that could forge a log line or drive a terminal escaped: \r \n \b \f
/// \v \a as such, ESC as \e, other C0 bytes, DEL and C1 controls as \xNN (each byte), invalid
/// UTF-8 bytes as \xNN. TAB and valid UTF-8 stay as they are; a backslash is not doubled.
std::string escape_log_text(std::string_view text);

/// `text` (already escaped: valid UTF-8, no control bytes but TAB) as a JSON string with quotes.
std::string json_string(std::string_view text);

}  // namespace baton::detail
