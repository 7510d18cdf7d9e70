#include "baton/mutex/duration.hpp"

#include <array>
#include <utility>

namespace baton {

namespace {

struct unit {
  std::string_view suffix;
  long long ms;
};

// Largest first, for format_duration().
constexpr std::array<unit, 5> units{{
    {"d", 86'400'000LL},
    {"h", 3'600'000LL},
    {"m", 60'000LL},
    {"s", 1'000LL},
    {"ms", 1LL},
}};

// 2^40 ms is about 34.8 years: far beyond any lease or period, far below overflow.
constexpr long long max_ms = 1LL << 40;

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;
  long long count = 0;
  for (std::size_t i = 0; i < digits; ++i) count = count * 10 + (text[i] - '0');
  std::string_view suffix = text.substr(digits);
  for (const auto& u : units) {
    if (suffix != u.suffix) continue;
    if (count > max_ms / u.ms) return std::nullopt;
    return std::chrono::milliseconds{count * u.ms};
  }
  return std::nullopt;
}

std::string format_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms == 0) return "0s";
  for (const auto& u : units)
    if (ms % u.ms == 0) return std::to_string(ms / u.ms) + std::string(u.suffix);
  return std::to_string(ms) + "ms";
}

}  // namespace baton
