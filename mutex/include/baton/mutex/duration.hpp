#pragma once
/// Durations as written in a config file: a whole number and a unit, `250ms`, `10s`, `5m`, `2h`,
/// `1d`.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace baton {

/// Parses `<digits><unit>` with unit ms, s, m, h or d, as in "250ms" or "10s". No sign, spaces,
/// fractions, compound forms ("1h30m") or bare numbers; at most about 34 years. nullopt otherwise.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// The largest unit that represents `d` exactly: 90000ms -> "90s", 7200000ms -> "2h", 0 -> "0s".
std::string format_duration(std::chrono::milliseconds d);

/// The accepted forms, for error messages: "use 250ms, 10s, 5m, 2h, 1d".
inline constexpr std::string_view duration_hint = "use 250ms, 10s, 5m, 2h, 1d";

}  // namespace baton
