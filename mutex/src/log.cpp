// baton's logger: one spdlog logger ("baton") with one sink of ours. The sink reads the
// structured fields of the calling thread (detail::log_scope), escapes the message, and either
// writes a text or JSON line to stderr or hands a log_record to the embedding service's handler.
#include "baton/mutex/detail/log.hpp"

#include <spdlog/sinks/base_sink.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>

#include "baton/mutex/log.hpp"

namespace baton {

namespace detail {
namespace {

using handler_type = std::function<void(const log_record&)>;

/// What the sink needs besides the record; guarded by `mutex`, which also keeps stderr lines whole.
struct sink_state {
  std::mutex mutex;
  std::shared_ptr<const handler_type> handler;  // null: stderr
  log_level handler_min = log_level::info;
  log_format format = log_format::text;
  std::string node;
};

sink_state& state() {
  static sink_state s;
  return s;
}

thread_local const log_fields* current_fields = nullptr;

log_level from_spdlog(spdlog::level::level_enum l) noexcept {
  switch (l) {
    case spdlog::level::trace:
      return log_level::trace;
    case spdlog::level::debug:
      return log_level::debug;
    case spdlog::level::info:
      return log_level::info;
    case spdlog::level::warn:
      return log_level::warn;
    case spdlog::level::err:
      return log_level::error;
    case spdlog::level::critical:
      return log_level::critical;
    default:
      return log_level::off;
  }
}

spdlog::level::level_enum to_spdlog(log_level l) noexcept {
  switch (l) {
    case log_level::trace:
      return spdlog::level::trace;
    case log_level::debug:
      return spdlog::level::debug;
    case log_level::info:
      return spdlog::level::info;
    case log_level::warn:
      return spdlog::level::warn;
    case log_level::error:
      return spdlog::level::err;
    case log_level::critical:
      return spdlog::level::critical;
    case log_level::off:
      break;
  }
  return spdlog::level::off;
}

/// "2026-11-22T03:00:00.123Z"
std::string utc_millis(spdlog::log_clock::time_point tp) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[48];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count() % 1000));
  return buf;
}

/// The length of the valid UTF-8 sequence at the start of `s` (0 if it is not one).
std::size_t utf8_length(std::string_view s) noexcept {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
}

void append_hex(std::string& out, unsigned char c) {
  static constexpr char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[c >> 4];
  out += digits[c & 0xF];
}

class baton_sink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    static const log_fields none{};
    const log_fields& f = current_fields != nullptr ? *current_fields : none;
    const std::string message =
        escape_log_text(std::string_view(msg.payload.data(), msg.payload.size()));
    const log_level level = from_spdlog(msg.level);
    auto& s = state();
    std::unique_lock lock(s.mutex);
    if (s.handler) {
      if (level < s.handler_min) return;
      auto handler = s.handler;
      const std::string node = s.node;
      lock.unlock();
      const std::string schedule = escape_log_text(f.schedule);
      const log_record record{level, message, schedule, f.fence, node, f.event};
      try {
        (*handler)(record);
      } catch (...) {  // the handler must not throw; a log call never does
      }
      return;
    }
    std::string line;
    if (s.format == log_format::json) {
      line = "{\"time\":\"" + utc_millis(msg.time) + "\",\"level\":\"" +
             std::string(to_string(level)) + "\",\"msg\":" + json_string(message);
      if (!f.schedule.empty()) line += ",\"schedule\":" + json_string(escape_log_text(f.schedule));
      if (f.fence != 0) line += ",\"fence\":" + std::to_string(f.fence);
      if (!s.node.empty()) line += ",\"node\":" + json_string(escape_log_text(s.node));
      if (!f.event.empty()) line += ",\"event\":" + json_string(escape_log_text(f.event));
      line += "}\n";
    } else {
      const auto name = spdlog::level::to_string_view(msg.level);
      line = utc_millis(msg.time) + " " + std::string(name.data(), name.size()) + " ";
      if (!f.schedule.empty()) line += "[" + escape_log_text(f.schedule) + "] ";
      line += message + "\n";
    }
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

}  // namespace

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto sink = std::make_shared<baton_sink>();
    auto existing = spdlog::get("baton");
    if (existing) {
      existing->sinks().clear();
      existing->sinks().push_back(sink);
      return existing;
    }
    auto created = std::make_shared<spdlog::logger>("baton", sink);
    created->set_level(spdlog::level::info);
    spdlog::register_logger(created);
    return created;
  }();
  return *logger;
}

log_scope::log_scope(const log_fields& fields) noexcept
    : fields_(fields), previous_(current_fields) {
  current_fields = &fields_;
}

log_scope::~log_scope() { current_fields = previous_; }

void set_log_format(log_format format) noexcept {
  std::lock_guard lock(state().mutex);
  state().format = format;
}

void set_log_node(std::string node) {
  std::lock_guard lock(state().mutex);
  state().node = std::move(node);
}

std::string escape_log_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '\t':
          out += '\t';
          break;
        case '\r':
          out += "\\r";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\v':
          out += "\\v";
          break;
        case '\a':
          out += "\\a";
          break;
        case 0x1B:
          out += "\\e";
          break;
        default:  // other C0 bytes and DEL
          append_hex(out, c);
      }
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(text.substr(i));
    // U+0080..U+009F (C1 controls, 0xC2 0x80..0x9F) act as terminal controls (CSI is U+009B).
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (n == 0 || c1) {
      for (std::size_t k = 0; k < (c1 ? 2 : 1); ++k)
        append_hex(out, static_cast<unsigned char>(text[i + k]));
      i += c1 ? 2 : 1;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {  // not after escape_log_text; kept valid regardless
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace detail

std::string_view to_string(log_level l) noexcept {
  switch (l) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
    case log_level::critical:
      return "critical";
    case log_level::off:
      break;
  }
  return "off";
}

bool parse_log_level(std::string_view text, log_level& out) noexcept {
  std::string lower;
  try {
    lower.reserve(text.size());
    for (const char c : text)
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  } catch (...) {
    return false;
  }
  if (lower == "warning") lower = "warn";
  for (const log_level l : {log_level::trace, log_level::debug, log_level::info, log_level::warn,
                            log_level::error, log_level::critical, log_level::off}) {
    if (to_string(l) == lower) {
      out = l;
      return true;
    }
  }
  return false;
}

void set_log_handler(std::function<void(const log_record&)> handler, log_level min_level) {
  auto& logger = detail::log();  // creates the sink before the first record
  auto& s = detail::state();
  const bool installed = static_cast<bool>(handler);
  {
    std::lock_guard lock(s.mutex);
    if (handler)
      s.handler = std::make_shared<const detail::handler_type>(std::move(handler));
    else
      s.handler.reset();
    s.handler_min = min_level;
  }
  if (installed) logger.set_level(detail::to_spdlog(min_level));
}

void set_log_level(log_level l) noexcept { detail::log().set_level(detail::to_spdlog(l)); }

}  // namespace baton
