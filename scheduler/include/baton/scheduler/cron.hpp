#pragma once
/// The cron trigger: parses a cron expression with its time zone and computes fire times.
/// Pure and immutable; no clock is read here, the caller passes the instant to start from.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace baton {

/// A cron expression or time zone that cannot be parsed; the message names the field and text.
class cron_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {
struct cron_spec;
}  // namespace detail

/// A parsed cron expression with its time zone. Immutable, cheap to copy (shares its state).
///
/// Syntax: 5 fields `minute hour day-of-month month day-of-week`, or 6 with `second` first.
/// Each field is a comma list of `*`, `v`, `a-b`, `*/n`, `a-b/n` or `a/n` (= `a-max/n`).
/// Months take JAN-DEC, weekdays SUN-SAT (case-insensitive); 0 and 7 are Sunday, and a weekday
/// range ending at Sunday (`FRI-SUN`, `5-0`) ends at 7. Macros: @yearly @annually @monthly
/// @weekly @daily @midnight @hourly. A step must be 1..(number of values of the field).
///
/// Day rule (Vixie cron, as croniter decides "restricted"): a day-of-month or day-of-week field
/// is unrestricted when it matches every value of its range (`*`, `*/1`, `1-31`, `0-6`, `1-7`),
/// else restricted (`*/2` too). Both restricted: a day matches if EITHER matches; otherwise
/// both must match (the unrestricted one always does).
///
/// Time zones: matching happens on the zone's wall clock, and matching wall-clock times map to
/// instants like this:
/// - a time that exists once fires at that instant;
/// - a time skipped by a forward shift (DST gap) fires at the instant the gap ends (03:00 local
///   for 02:30 in Europe/Berlin); several skipped matches in one gap fire once together;
/// - a time that occurs twice (backward shift) fires at its first occurrence only, except when
///   the hour field is unrestricted (`*`, `*/1`, `0-23`): such hourly-or-faster jobs fire at
///   both occurrences, i.e. at every real instant whose wall clock matches.
/// Zone rules come from the system tz database through Howard Hinnant's date library; the
/// Debian 12 build reads only explicit transitions, so it applies no DST after 2037.
class cron_expression {
 public:
  /// Parses `expr` with wall-clock times in the IANA zone `time_zone` (default "UTC").
  /// Throws cron_error, e.g. "cron field 2 (hour) '25': value 25 out of range 0-23" or
  /// "unknown time zone 'Mars/Base'".
  static cron_expression parse(std::string_view expr, std::string_view time_zone = "UTC");

  /// The first fire time strictly after `after`, or nullopt if there is none in the next 8 years
  /// (e.g. "0 0 30 2 *"; 8 years is the longest gap of any satisfiable expression: Feb 29
  /// across 2100). Steps by fields, never minute by minute.
  std::optional<std::chrono::system_clock::time_point> next(
      std::chrono::system_clock::time_point after) const;

  /// The next `n` fire times after `after`, ascending; fewer if the expression runs out.
  std::vector<std::chrono::system_clock::time_point> next_n(
      std::chrono::system_clock::time_point after, std::size_t n) const;

  /// The expression as given to parse().
  const std::string& text() const;
  /// The time zone name as given to parse().
  const std::string& time_zone() const;
  /// True for the 6-field form (second resolution); otherwise fire times are at second 0.
  bool has_seconds() const;

 private:
  explicit cron_expression(std::shared_ptr<const detail::cron_spec> spec);

  std::shared_ptr<const detail::cron_spec> spec_;
};

/// Formats an instant as RFC 3339 in UTC: "2026-11-22T03:00:00Z", or with milliseconds when
/// they are nonzero: "2026-11-22T03:00:00.250Z" (sub-millisecond digits are truncated).
std::string format_rfc3339_utc(std::chrono::system_clock::time_point tp);

/// Parses an RFC 3339 date-time ("2026-11-22T03:00:00Z", "2026-11-22T04:00:00.5+01:00"):
/// separator 'T', 't' or ' ', optional fraction (up to nanoseconds), 'Z'/'z' or ±hh:mm.
/// Returns nullopt for anything else, including leap second 60 and out-of-range values.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

}  // namespace baton
