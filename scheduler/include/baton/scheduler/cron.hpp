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
/// Fire times follow ISC cron 4.1 / Debian's `cron` (entry.c, cron.c), as if that daemon ran
/// without interruption on a host whose local time zone is `time_zone()`.
///
/// Syntax: 5 fields `minute hour day-of-month month day-of-week`, or 6 with `second` first.
/// Each field is a comma list of `*`, `v`, `a-b`, `*/n`, `a-b/n`, or `a/n` (= `a-max/n`, an
/// extension). Any step n >= 1 is accepted; one larger than the range selects only its start
/// (`*/100` in day of month is day 1), as in ISC. Months take JAN-DEC, weekdays SUN-SAT
/// (case-insensitive); 0 and 7 are Sunday, and a weekday range ending at Sunday (`FRI-SUN`,
/// `5-0`) ends at 7 (an extension; ISC rejects it). Macros: @yearly @annually @monthly @weekly
/// @daily @midnight @hourly (case-insensitive). `@reboot` is rejected: a cluster has no boot.
///
/// Which texts count as `*` (ISC sets DOM_STAR, DOW_STAR, MIN_STAR, HR_STAR): a field whose
/// text BEGINS with `*` — `*`, `*/2`, `*,5` — whatever values it matches; `1-31`, `0-6`,
/// `0-59` or a 24-item hour list do not count, `@hourly` counts as a `*` hour.
///
/// Day rule: if the day-of-month or the day-of-week text begins with `*`, a day must match
/// both fields; otherwise a day matches if EITHER matches. So `1 1 1-7 * */7` fires on the
/// first Sunday of a month, and `0 12 1-31 * 1` fires every day.
///
/// Wildcard and fixed-time jobs: an expression is "wildcard" when its minute or hour text (or,
/// in the 6-field form, its second text) begins with `*`, else "fixed-time". They differ only
/// when the zone's offset changes (DST, or a zone changing its standard offset):
/// - a time that exists once fires at that instant;
/// - forward shift (a gap of G): at the instant the gap ends, a job fires if the new wall
///   clock matches; a fixed-time job also fires there (once) if a skipped time matched and
///   G < 3 h; for G < 5 min every job does (ISC's "woke up late"). A wildcard job's skipped
///   times are not caught up, and after a jump of 3 hours or more nothing is;
/// - backward shift (a repeat of B): a wildcard job fires at every real instant whose wall
///   clock matches, in both passes; a fixed-time job fires only in the first pass, unless
///   B > 181 min (ISC's "-180 minute" window, measured from the minute before the shift), when
///   ISC starts over at the new time and every job fires in both passes.
/// Zone rules come from the system tz database through Howard Hinnant's date library; the
/// Debian 12 build reads only explicit transitions, so it applies no DST after 2037.
class cron_expression {
 public:
  /// Parses `expr` with wall-clock times in the IANA zone `time_zone` (default "UTC").
  /// Throws cron_error, e.g. "cron field 2 (hour) '25': value 25 out of range 0-23" or
  /// "unknown time zone 'Mars/Base'".
  static cron_expression parse(std::string_view expr, std::string_view time_zone = "UTC");

  /// The first fire time strictly after `after`, or nullopt if there is none in the next 400
  /// years (one Gregorian cycle: the expression never fires again, e.g. "0 0 30 2 *"). Steps by
  /// fields, never minute by minute.
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
  /// True when no date can ever match: day and month fields that exclude each other under the
  /// AND day rule ("0 0 30 2 *", "0 0 31 4,6,9,11 *"). next() always returns nullopt then.
  bool never_fires() const;
  /// True for a "wildcard" job (minute, hour or second text begins with `*`), false for a
  /// fixed-time one; see the class comment for what that changes at clock shifts.
  bool is_wildcard() const;

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
