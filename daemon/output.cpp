#include "output.hpp"

#include <date/date.h>
#include <date/tz.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <iostream>

#include "baton/backends/factory.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/duration.hpp"
#include "baton/mutex/log.hpp"
#include "baton/scheduler/cron.hpp"
#include "cli.hpp"

namespace baton::daemon {

void configure_logging(const std::string& level, const std::string& format) {
  log_level parsed = log_level::info;
  if (!parse_log_level(level, parsed)) parsed = log_level::info;  // cli and config checked it
  set_log_level(parsed);
  detail::set_log_format(format == "json" ? detail::log_format::json : detail::log_format::text);
}

std::string utc(std::chrono::system_clock::time_point tp) { return format_rfc3339_utc(tp); }

std::string local(std::chrono::system_clock::time_point tp, const std::string& zone) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(tp);
  const auto* tz = date::locate_zone(zone);
  if (ms.time_since_epoch() % std::chrono::seconds{1} == std::chrono::milliseconds::zero())
    return date::format("%Y-%m-%d %H:%M:%S %Z (%Ez)",
                        date::make_zoned(tz, std::chrono::floor<std::chrono::seconds>(tp)));
  return date::format("%Y-%m-%d %H:%M:%S %Z (%Ez)", date::make_zoned(tz, ms));
}

std::string format_elapsed(std::chrono::milliseconds d) {
  const long long ms = d.count() < 0 ? -d.count() : d.count();
  char buf[64];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", ms);
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%lld.%llds", ms / 1000, (ms % 1000) / 100);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", ms / 60'000, (ms / 1000) % 60);
  } else if (ms < 86'400'000) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", ms / 3'600'000, (ms / 60'000) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", ms / 86'400'000, (ms / 3'600'000) % 24);
  }
  return buf;
}

std::string relative(std::chrono::system_clock::time_point t,
                     std::chrono::system_clock::time_point now) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - now);
  if (d.count() == 0) return "now";
  return d.count() < 0 ? format_elapsed(-d) + " ago" : "in " + format_elapsed(d);
}

std::string signal_text(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

std::string caller_identity() {
  std::string user;
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr)
    user = pw->pw_name;
  else if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0')
    user = u;
  else
    user = "uid" + std::to_string(::geteuid());
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return user + "@" + (host[0] != '\0' ? host : "unknown-host");
}

nlohmann::json backend_json(const backend_config& backend) {
  const backend_descriptor* d = find_backend(backend.type);
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [name, value] : backend.params) params[name] = mask_param(d, name, value).text;
  return {{"type", backend.type}, {"description", describe(d, backend)}, {"parameters", params}};
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::string tags_text(const std::vector<std::string>& tags) {
  std::string out;
  for (const auto& t : tags) out += (out.empty() ? "" : ", ") + t;
  return "[" + out + "]";
}

std::string node_text(const balance_options& b) {
  return "id " + (b.node_id.empty() ? std::string("(from the contender id)") : b.node_id) +
         ", tags " + tags_text(b.tags);
}

std::string balance_text(const balance_options& b) {
  if (!b.enabled) return "off (first come)";
  auto or_default = [](std::chrono::milliseconds d) {
    return d.count() > 0 ? format_duration(d) : std::string("default");
  };
  char rate[32];
  const auto [end, ec] = std::to_chars(rate, rate + sizeof rate, b.handoff_rate);
  return "on (heartbeat " + or_default(b.heartbeat) + ", member_timeout " +
         or_default(b.member_timeout) + ", settle " + or_default(b.settle) + ", handoff_rate " +
         (ec == std::errc{} ? std::string(rate, end) : std::string("?")) + "/s)";
}

std::string dump_json(const nlohmann::json& document) {
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

watchdog::watchdog(std::chrono::seconds timeout, std::string command, std::string what)
    : thread_([this, timeout, command = std::move(command), what = std::move(what)] {
        std::unique_lock lock(mutex_);
        if (cv_.wait_for(lock, timeout, [this] { return done_; })) return;
        std::cerr << "baton " << command << ": " << what << " did not answer within "
                  << timeout.count() << " s\n";
        std::_Exit(exit_failure);
      }) {}

watchdog::~watchdog() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace baton::daemon
