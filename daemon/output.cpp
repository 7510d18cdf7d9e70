#include "output.hpp"

#include <date/date.h>
#include <date/tz.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "baton/scheduler/cron.hpp"

namespace baton::daemon {

void configure_logging(const std::string& level) {
  auto logger = spdlog::get("baton");
  if (!logger) logger = spdlog::stderr_color_mt("baton");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
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

}  // namespace baton::daemon
