#include "baton/scheduler/cron.hpp"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>

namespace baton {

namespace detail {

/// Everything a parsed expression holds; shared by all copies of a cron_expression.
struct cron_spec {
  std::string text;
  std::string zone_name;
  const date::time_zone* zone = nullptr;
  bool has_seconds = false;
  // Bit v is set when value v matches. Day of week uses bits 0-6 (7 is folded into 0).
  std::uint64_t seconds = 0;
  std::uint64_t minutes = 0;
  std::uint64_t hours = 0;
  std::uint64_t days_of_month = 0;
  std::uint64_t months = 0;
  std::uint64_t days_of_week = 0;
  // ISC cron's flags, set when the field's text begins with '*' (see the class comment):
  // DOM_STAR / DOW_STAR pick AND over OR for the day fields; a "wildcard" job (MIN_STAR or
  // HR_STAR, or a second field starting with '*') is treated differently at clock shifts.
  bool dom_star = false;
  bool dow_star = false;
  bool wildcard = false;
  // No date ever matches ("0 0 30 2 *").
  bool never_fires = false;
};

}  // namespace detail

namespace {

using std::chrono::seconds;
using clock_point = std::chrono::system_clock::time_point;

// ---------------------------------------------------------------------------------------------
// Parsing

enum class field_kind { second, minute, hour, day_of_month, month, day_of_week };

struct field_def {
  const char* name;
  int lo;
  int hi;  // largest value accepted (7 for day of week)
};

constexpr std::array<field_def, 6> field_defs{{
    {"second", 0, 59},
    {"minute", 0, 59},
    {"hour", 0, 23},
    {"day of month", 1, 31},
    {"month", 1, 12},
    {"day of week", 0, 7},
}};

constexpr std::array<std::string_view, 12> month_names{"jan", "feb", "mar", "apr", "may", "jun",
                                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> weekday_names{"sun", "mon", "tue", "wed",
                                                        "thu", "fri", "sat"};

struct macro {
  std::string_view name;
  std::string_view expansion;
};

constexpr std::array<macro, 7> macros{{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
}};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

/// Parses one field of an expression into a bit mask; errors name the field and its text.
class field_parser {
 public:
  field_parser(field_kind kind, int position, std::string_view text)
      : def_(field_defs[static_cast<std::size_t>(kind)]),
        kind_(kind),
        position_(position),
        text_(text) {}

  std::uint64_t parse() {
    std::uint64_t mask = 0;
    std::size_t begin = 0;
    for (;;) {
      const std::size_t comma = text_.find(',', begin);
      const std::string_view item =
          text_.substr(begin, comma == std::string_view::npos ? comma : comma - begin);
      if (item.empty()) fail("empty list element");
      mask |= parse_item(item);
      if (comma == std::string_view::npos) break;
      begin = comma + 1;
    }
    if (kind_ == field_kind::day_of_week && (mask & (1u << 7)) != 0) {
      mask = (mask & ~(std::uint64_t{1} << 7)) | 1u;  // 7 is Sunday
    }
    return mask;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw cron_error("cron field " + std::to_string(position_) + " (" + def_.name + ") '" +
                     std::string(text_) + "': " + what);
  }

  std::string range_text() const { return std::to_string(def_.lo) + "-" + std::to_string(def_.hi); }

  // Reads the digits at item[pos] (saturating far above any valid value); advances pos.
  static long long read_number(std::string_view item, std::size_t& pos) {
    long long v = 0;
    while (pos < item.size() && is_digit(item[pos])) {
      v = std::min<long long>(v * 10 + (item[pos] - '0'), 1'000'000'000);
      ++pos;
    }
    return v;
  }

  // Reads a number or a name at item[pos]; advances pos.
  int parse_value(std::string_view item, std::size_t& pos) const {
    if (pos >= item.size()) fail("expected a value at the end of '" + std::string(item) + "'");
    if (is_digit(item[pos])) {
      const std::size_t start = pos;
      const long long v = read_number(item, pos);
      if (v < def_.lo || v > def_.hi) {
        fail("value " + std::string(item.substr(start, pos - start)) + " out of range " +
             range_text());
      }
      return static_cast<int>(v);
    }
    if (is_alpha(item[pos])) {
      const std::size_t start = pos;
      while (pos < item.size() && is_alpha(item[pos])) ++pos;
      const std::string_view word = item.substr(start, pos - start);
      const std::string key = lower(word);
      if (kind_ == field_kind::month) {
        for (std::size_t i = 0; i < month_names.size(); ++i) {
          if (key == month_names[i]) return static_cast<int>(i) + 1;
        }
        fail("unknown month name '" + std::string(word) + "' (expected JAN-DEC)");
      }
      if (kind_ == field_kind::day_of_week) {
        for (std::size_t i = 0; i < weekday_names.size(); ++i) {
          if (key == weekday_names[i]) return static_cast<int>(i);
        }
        fail("unknown weekday name '" + std::string(word) + "' (expected SUN-SAT)");
      }
      fail("'" + std::string(word) +
           "' is not a number (names are only allowed for month "
           "and day of week)");
    }
    fail("unexpected text '" + std::string(item.substr(pos)) + "'");
  }

  std::uint64_t parse_item(std::string_view item) const {
    std::size_t pos = 0;
    int first = def_.lo;
    int last = def_.hi;
    bool single = false;
    if (item[pos] == '*') {
      ++pos;
    } else {
      first = parse_value(item, pos);
      if (pos < item.size() && item[pos] == '-') {
        ++pos;
        last = parse_value(item, pos);
        if (kind_ == field_kind::day_of_week && last == 0 && first > 0) last = 7;  // FRI-SUN
        if (first > last) {
          fail("inverted range '" + std::string(item.substr(0, pos)) + "' (start after end)");
        }
      } else {
        last = first;
        single = true;
      }
    }
    int step = 1;
    if (pos < item.size() && item[pos] == '/') {
      ++pos;
      if (pos >= item.size() || !is_digit(item[pos])) {
        fail("step after '/' must be a number in '" + std::string(item) + "'");
      }
      const std::size_t start = pos;
      const long long v = read_number(item, pos);
      // ISC accepts any positive step; one larger than the range selects only its start.
      if (v < 1)
        fail("step " + std::string(item.substr(start, pos - start)) + " must be 1 or more");
      step = static_cast<int>(v);
      if (single) last = def_.hi;  // a/n means a-max/n
    }
    if (pos != item.size()) fail("unexpected text '" + std::string(item.substr(pos)) + "'");
    std::uint64_t mask = 0;
    for (int v = first; v <= last; v += step) mask |= std::uint64_t{1} << v;
    return mask;
  }

  const field_def& def_;
  field_kind kind_;
  int position_;
  std::string_view text_;
};

std::string macro_list() {
  std::string out;
  for (std::size_t i = 0; i < macros.size(); ++i) {
    if (i > 0) out += i + 1 == macros.size() ? " or " : ", ";
    out += macros[i].name;
  }
  return out;
}

void parse_fields(std::string_view expr, detail::cron_spec& spec) {
  std::string_view body = trim(expr);
  if (body.empty()) throw cron_error("empty cron expression");
  if (body.front() == '@') {
    const std::string key = lower(body);
    const auto it =
        std::find_if(macros.begin(), macros.end(), [&](const macro& m) { return m.name == key; });
    if (key == "@reboot") {
      throw cron_error(
          "cron macro '@reboot' is not supported: a cluster-wide schedule has no boot to run at");
    }
    if (it == macros.end()) {
      throw cron_error("unknown cron macro '" + std::string(body) + "' (expected " + macro_list() +
                       ")");
    }
    body = it->expansion;
  }

  std::vector<std::string_view> fields;
  std::size_t pos = 0;
  while (pos < body.size()) {
    while (pos < body.size() && is_space(body[pos])) ++pos;
    const std::size_t start = pos;
    while (pos < body.size() && !is_space(body[pos])) ++pos;
    if (pos > start) fields.push_back(body.substr(start, pos - start));
  }
  if (fields.size() != 5 && fields.size() != 6) {
    throw cron_error("cron expression '" + std::string(body) + "' has " +
                     std::to_string(fields.size()) +
                     " fields, expected 5 (minute hour day-of-month month day-of-week) or 6 "
                     "(second first)");
  }

  spec.has_seconds = fields.size() == 6;
  const std::size_t offset = spec.has_seconds ? 0 : 1;
  std::array<std::uint64_t, 6> masks{1, 0, 0, 0, 0, 0};  // without seconds: second 0 only
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto kind = static_cast<field_kind>(i + offset);
    masks[i + offset] = field_parser(kind, static_cast<int>(i) + 1, fields[i]).parse();
  }
  spec.seconds = masks[0];
  spec.minutes = masks[1];
  spec.hours = masks[2];
  spec.days_of_month = masks[3];
  spec.months = masks[4];
  spec.days_of_week = masks[5];
  const auto starts_with_star = [&](std::size_t kind) {
    return kind >= offset && fields[kind - offset].front() == '*';
  };
  spec.wildcard = starts_with_star(0) || starts_with_star(1) || starts_with_star(2);
  spec.dom_star = starts_with_star(3);
  spec.dow_star = starts_with_star(5);
}

// ---------------------------------------------------------------------------------------------
// Matching on the wall clock

/// Smallest set bit of `mask` in [from, to], or -1.
int next_bit(std::uint64_t mask, int from, int to) {
  if (from > to) return -1;
  const std::uint64_t window = mask >> from;
  if (window == 0) return -1;
  const int bit = from + std::countr_zero(window);
  return bit <= to ? bit : -1;
}

bool has_bit(std::uint64_t mask, int v) { return ((mask >> v) & 1u) != 0; }

bool day_matches(const detail::cron_spec& spec, const date::year_month_day& ymd) {
  const bool dom = has_bit(spec.days_of_month, static_cast<int>(unsigned{ymd.day()}));
  const bool dow =
      has_bit(spec.days_of_week, static_cast<int>(date::weekday{date::sys_days{ymd}}.c_encoding()));
  if (spec.dom_star || spec.dow_star) return dom && dow;
  return dom || dow;
}

/// The first matching wall-clock time at or after `from`, searching through local year
/// `last_year`. Steps month -> day -> hour -> minute -> second, so the cost is bounded by the
/// number of days searched, not minutes.
std::optional<date::local_seconds> first_match(const detail::cron_spec& spec,
                                               date::local_seconds from, int last_year) {
  const auto from_day = date::floor<date::days>(from);
  const date::year_month_day start{from_day};
  const date::hh_mm_ss<seconds> tod{from - from_day};
  int y = static_cast<int>(start.year());
  int m = static_cast<int>(unsigned{start.month()});
  int d = static_cast<int>(unsigned{start.day()});
  int hh = static_cast<int>(tod.hours().count());
  int mm = static_cast<int>(tod.minutes().count());
  int ss = static_cast<int>(tod.seconds().count());

  for (;;) {
    if (y > last_year) return std::nullopt;
    const int month = next_bit(spec.months, m, 12);
    if (month < 0) {
      ++y, m = 1, d = 1, hh = mm = ss = 0;
      continue;
    }
    if (month != m) m = month, d = 1, hh = mm = ss = 0;

    const date::year_month ym{date::year{y}, date::month{static_cast<unsigned>(m)}};
    const int month_days = static_cast<int>(unsigned{(ym / date::last).day()});
    while (d <= month_days && !day_matches(spec, ym / date::day{static_cast<unsigned>(d)})) {
      ++d, hh = mm = ss = 0;
    }
    if (d > month_days) {
      ++m, d = 1, hh = mm = ss = 0;
      if (m > 12) ++y, m = 1;
      continue;
    }

    const int hour = next_bit(spec.hours, hh, 23);
    if (hour < 0) {
      ++d, hh = mm = ss = 0;
      continue;
    }
    if (hour != hh) hh = hour, mm = ss = 0;

    const int minute = next_bit(spec.minutes, mm, 59);
    if (minute < 0) {
      ++hh, mm = ss = 0;
      if (hh > 23) ++d, hh = 0;
      continue;
    }
    if (minute != mm) mm = minute, ss = 0;

    const int second = next_bit(spec.seconds, ss, 59);
    if (second < 0) {
      ++mm, ss = 0;
      if (mm > 59) ++hh, mm = 0;
      if (hh > 23) ++d, hh = 0;
      continue;
    }
    ss = second;
    return date::local_days{ym / date::day{static_cast<unsigned>(d)}} + std::chrono::hours{hh} +
           std::chrono::minutes{mm} + seconds{ss};
  }
}

/// A backward shift of the zone's offset at `at`: wall-clock times in
/// [at + after_offset, at + before_offset) occur twice.
struct backward_shift {
  date::sys_seconds at;
  seconds before_offset;
  seconds after_offset;
};

/// Backward shifts within `margin` of `around` (real shifts are at most a day long).
std::vector<backward_shift> backward_shifts_near(const date::time_zone& zone,
                                                 date::sys_seconds around, seconds margin) {
  std::vector<backward_shift> out;
  date::sys_info info = zone.get_info(around - margin);
  while (info.end <= around + margin) {
    date::sys_info next = zone.get_info(info.end);
    if (next.begin <= info.begin) break;  // no progress: defensive
    if (next.offset < info.offset) out.push_back({info.end, info.offset, next.offset});
    info = std::move(next);
  }
  return out;
}

constexpr seconds shift_margin{48 * 3600};
// The Gregorian calendar repeats every 400 years, so a search over 400 years and a day sees
// every combination of date and weekday: an expression with no fire in that span never fires.
constexpr int horizon_years = 401;

// ISC cron's classification of a clock change (cron.c): it compares the wall-clock minute it
// wakes up in with the one after the last minute it ran jobs for. A forward shift of G minutes
// gives a difference of G + 1, a backward shift of B minutes one of 1 - B.
// - forward, G + 1 <= 5 (G < 5 min): "woke up late", every skipped minute is run;
// - forward, 5 < G + 1 <= 180 (G < 3 h): "DST begins", fixed-time jobs of the skipped minutes
//   run, wildcard jobs only at the new time;
// - backward, 1 - B >= -180 (B <= 181 min): "DST ends", only wildcard jobs run until the clock
//   has caught up, so fixed-time jobs do not run twice;
// - anything larger: "the clock jumped", cron starts over at the new time: a forward jump skips
//   everything in between, a backward one runs everything again.
constexpr seconds small_jump{5 * 60};
constexpr seconds dst_jump{180 * 60};
constexpr seconds dst_backward_limit{181 * 60};

/// Whether a wall-clock time skipped by a forward shift of `gap` fires at the end of the gap.
bool catches_up(const detail::cron_spec& spec, seconds gap) {
  return gap < small_jump || (gap < dst_jump && !spec.wildcard);
}

/// Whether a wall-clock time repeated by a backward shift of `repeat` fires again.
bool repeats(const detail::cron_spec& spec, seconds repeat) {
  return spec.wildcard || repeat > dst_backward_limit;
}

/// Whether some allowed month has one of the allowed days (February with 29). With the OR day
/// rule every month qualifies, since every month has every weekday.
bool some_day_matches(const detail::cron_spec& spec) {
  static constexpr int lengths[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (!spec.dom_star && !spec.dow_star) return spec.months != 0;
  for (int m = 1; m <= 12; ++m) {
    if (has_bit(spec.months, m) && next_bit(spec.days_of_month, 1, lengths[m - 1]) >= 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// cron_expression

cron_expression::cron_expression(std::shared_ptr<const detail::cron_spec> spec)
    : spec_(std::move(spec)) {}

cron_expression cron_expression::parse(std::string_view expr, std::string_view time_zone) {
  auto spec = std::make_shared<detail::cron_spec>();
  spec->text = std::string(expr);
  spec->zone_name = std::string(time_zone);
  parse_fields(expr, *spec);
  try {
    spec->zone = date::locate_zone(spec->zone_name);
    // The zone's file is read on first use: do it now so that a broken one fails here.
    if (spec->zone != nullptr) spec->zone->get_info(date::sys_seconds{});
  } catch (const std::exception&) {
    spec->zone = nullptr;
  }
  if (spec->zone == nullptr) throw cron_error("unknown time zone '" + spec->zone_name + "'");
  spec->never_fires = !some_day_matches(*spec);
  return cron_expression(std::move(spec));
}

std::optional<clock_point> cron_expression::next(clock_point after) const {
  const detail::cron_spec& spec = *spec_;
  if (spec.never_fires) return std::nullopt;
  const date::time_zone& zone = *spec.zone;
  // Fire times are whole seconds, so "strictly after `after`" means ">= floor(after) + 1s".
  const date::sys_seconds floor_after = date::floor<seconds>(after);
  const date::sys_seconds earliest = floor_after + seconds{1};
  const date::local_seconds local_after = zone.to_local(floor_after);
  const int last_year =
      static_cast<int>(date::year_month_day{date::floor<date::days>(local_after)}.year()) +
      horizon_years;
  const auto shifts = backward_shifts_near(zone, floor_after, shift_margin);

  // First occurrences: a wall-clock time fires after `after` exactly when it is later than every
  // wall-clock time shown up to `after` (which, just after a backward shift, is the wall clock
  // before the shift). Times are tried in wall-clock order; the first one that fires is the
  // earliest instant, since the instants of first occurrences grow with the wall clock.
  date::local_seconds from = local_after + seconds{1};
  for (const backward_shift& s : shifts) {
    if (s.at <= floor_after)
      from = std::max(from, date::local_seconds{s.at.time_since_epoch() + s.before_offset});
  }
  std::optional<date::sys_seconds> best;
  while (const auto local = first_match(spec, from, last_year)) {
    const date::local_info info = zone.get_info(*local);
    if (info.result != date::local_info::nonexistent) {
      best = date::sys_seconds{local->time_since_epoch() - info.first.offset};
      break;
    }
    // Skipped by a forward shift: it fires when the gap ends, or not at all.
    if (catches_up(spec, info.second.offset - info.first.offset)) {
      best = info.second.begin;
      break;
    }
    from = date::local_seconds{info.second.begin.time_since_epoch() + info.second.offset};
  }

  // Second occurrences of wall-clock times repeated by a backward shift.
  for (const backward_shift& s : shifts) {
    if (!repeats(spec, s.before_offset - s.after_offset)) continue;
    const date::local_seconds repeat_begin{s.at.time_since_epoch() + s.after_offset};
    const date::local_seconds repeat_end{s.at.time_since_epoch() + s.before_offset};
    const date::local_seconds lo =
        std::max(repeat_begin, date::local_seconds{earliest.time_since_epoch() + s.after_offset});
    if (lo >= repeat_end) continue;
    const auto local = first_match(spec, lo, last_year);
    if (!local || *local >= repeat_end) continue;
    const date::sys_seconds instant{local->time_since_epoch() - s.after_offset};
    if (!best || instant < *best) best = instant;
  }

  if (!best) return std::nullopt;
  if (*best > date::floor<seconds>(clock_point::max())) return std::nullopt;
  return std::chrono::time_point_cast<clock_point::duration>(*best);
}

std::vector<clock_point> cron_expression::next_n(clock_point after, std::size_t n) const {
  std::vector<clock_point> out;
  out.reserve(std::min<std::size_t>(n, 1024));
  while (out.size() < n) {
    const auto t = next(after);
    if (!t) break;
    out.push_back(*t);
    after = *t;
  }
  return out;
}

const std::string& cron_expression::text() const { return spec_->text; }

const std::string& cron_expression::time_zone() const { return spec_->zone_name; }

bool cron_expression::has_seconds() const { return spec_->has_seconds; }

bool cron_expression::never_fires() const { return spec_->never_fires; }

bool cron_expression::is_wildcard() const { return spec_->wildcard; }

// ---------------------------------------------------------------------------------------------
// RFC 3339

std::string format_rfc3339_utc(clock_point tp) {
  const auto ms = date::floor<std::chrono::milliseconds>(tp);
  const auto day = date::floor<date::days>(ms);
  const date::year_month_day ymd{day};
  const date::hh_mm_ss<std::chrono::milliseconds> tod{ms - day};
  char buf[48];
  const int len = std::snprintf(
      buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
      unsigned{ymd.month()}, unsigned{ymd.day()}, static_cast<int>(tod.hours().count()),
      static_cast<int>(tod.minutes().count()), static_cast<int>(tod.seconds().count()));
  std::string out(buf, static_cast<std::size_t>(len));
  if (tod.subseconds().count() != 0) {
    std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(tod.subseconds().count()));
    out += buf;
  }
  out += 'Z';
  return out;
}

namespace {

/// Reads exactly `n` digits at text[pos]; advances pos.
std::optional<int> read_digits(std::string_view text, std::size_t& pos, std::size_t n) {
  if (text.size() - pos < n) return std::nullopt;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = text[pos + i];
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  pos += n;
  return v;
}

bool expect(std::string_view text, std::size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

}  // namespace

std::optional<clock_point> parse_rfc3339(std::string_view text) {
  std::size_t pos = 0;
  const auto year = read_digits(text, pos, 4);
  if (!year || !expect(text, pos, '-')) return std::nullopt;
  const auto month = read_digits(text, pos, 2);
  if (!month || !expect(text, pos, '-')) return std::nullopt;
  const auto day = read_digits(text, pos, 2);
  if (!day || pos >= text.size()) return std::nullopt;
  const char sep = text[pos++];
  if (sep != 'T' && sep != 't' && sep != ' ') return std::nullopt;
  const auto hour = read_digits(text, pos, 2);
  if (!hour || !expect(text, pos, ':')) return std::nullopt;
  const auto minute = read_digits(text, pos, 2);
  if (!minute || !expect(text, pos, ':')) return std::nullopt;
  const auto second = read_digits(text, pos, 2);
  if (!second) return std::nullopt;

  std::chrono::nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    long long ns = 0;
    while (pos < text.size() && is_digit(text[pos])) {
      if (pos - start < 9) ns = ns * 10 + (text[pos] - '0');
      ++pos;
    }
    if (pos == start) return std::nullopt;
    for (std::size_t i = std::min<std::size_t>(pos - start, 9); i < 9; ++i) ns *= 10;
    fraction = std::chrono::nanoseconds{ns};
  }

  seconds offset{0};
  if (pos >= text.size()) return std::nullopt;
  const char zone = text[pos++];
  if (zone == '+' || zone == '-') {
    const auto oh = read_digits(text, pos, 2);
    if (!oh || !expect(text, pos, ':')) return std::nullopt;
    const auto om = read_digits(text, pos, 2);
    if (!om || *oh > 23 || *om > 59) return std::nullopt;
    offset = std::chrono::hours{*oh} + std::chrono::minutes{*om};
    if (zone == '-') offset = -offset;
  } else if (zone != 'Z' && zone != 'z') {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;

  const date::year_month_day ymd{date::year{*year}, date::month{static_cast<unsigned>(*month)},
                                 date::day{static_cast<unsigned>(*day)}};
  if (!ymd.ok() || *hour > 23 || *minute > 59 || *second > 59) return std::nullopt;
  const date::sys_seconds secs = date::sys_days{ymd} + std::chrono::hours{*hour} +
                                 std::chrono::minutes{*minute} + seconds{*second} - offset;
  // Keep one second of headroom so adding the fraction cannot overflow the clock's duration.
  if (secs >= date::floor<seconds>(clock_point::max()) ||
      secs <= date::floor<seconds>(clock_point::min()) + seconds{1}) {
    return std::nullopt;
  }
  return std::chrono::time_point_cast<clock_point::duration>(secs) +
         std::chrono::duration_cast<clock_point::duration>(fraction);
}

}  // namespace baton
