#pragma once
// Logging setup and the ways the daemon shows times.
#include <chrono>
#include <string>

namespace baton::daemon {

/// Sets up the "baton" spdlog logger on stderr: "2026-11-22T03:00:00.123Z info message" (UTC).
void configure_logging(const std::string& level);

/// "2026-11-22T03:00:00Z" (milliseconds when nonzero).
std::string utc(std::chrono::system_clock::time_point tp);

/// The wall-clock time in `zone`: "2026-11-22 04:00:00 CET (+01:00)".
std::string local(std::chrono::system_clock::time_point tp, const std::string& zone);

}  // namespace baton::daemon
