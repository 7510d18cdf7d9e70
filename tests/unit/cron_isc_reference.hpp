#pragma once
// A brute-force reference for ISC cron 4.1 / Debian cron, for tests only. It shares no code with
// the engine (scheduler/src/cron.cpp): its own small parser of 5-field expressions (entry.c's
// rules: DOM_STAR, DOW_STAR, MIN_STAR, HR_STAR from the field text's first character), and a
// simulation of cron.c's main loop that wakes up at every real minute, reads the zone's wall
// clock, and classifies the change against its virtual time exactly like cron.c does:
//   diff == 1          run every job matching the new minute;
//   diff in 2..5       run every job for each virtual minute up to the new one (woke up late);
//   diff in 6..180     run wildcard jobs at the new minute, fixed-time jobs for each minute up
//                      to it (DST begins);
//   diff in -180..0    run only wildcard jobs at the new minute, keep virtual time (DST ends);
//   otherwise          jump virtual time to the new minute and run every job matching it.
// A "job" here is one expression; a real minute in which it runs counts as one fire.
#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace baton::test {

/// One 5-field expression as ISC's entry.c reads it (plus baton's "a/n" and "FRI-SUN" forms
/// and @macros, so that the engine's inputs can be replayed).
class isc_reference {
 public:
  explicit isc_reference(std::string text) {
    static const std::pair<const char*, const char*> macros[] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}};
    std::string lowered = text;
    for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& [name, expansion] : macros) {
      if (lowered == name) text = expansion;
    }
    std::istringstream in(text);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    if (fields.size() != 5) throw std::invalid_argument("reference: not 5 fields: " + text);
    minutes_ = parse_field(fields[0], 0, 59, nullptr);
    hours_ = parse_field(fields[1], 0, 23, nullptr);
    days_ = parse_field(fields[2], 1, 31, nullptr);
    months_ = parse_field(fields[3], 1, 12, month_names);
    weekdays_ = parse_field(fields[4], 0, 7, weekday_names);
    if ((weekdays_ & 0x81u) != 0) weekdays_ |= 0x81u;  // make Sundays equivalent
    wildcard_ = fields[0][0] == '*' || fields[1][0] == '*';
    dom_star_ = fields[2][0] == '*';
    dow_star_ = fields[4][0] == '*';
  }

  bool wildcard() const { return wildcard_; }

  /// Whether the wall-clock minute `local` (minutes since 1970-01-01 00:00 wall clock)
  /// matches, with cron.c's find_jobs() day rule.
  bool matches(std::int64_t local) const {
    const std::int64_t day = floor_div(local, 1440);
    const std::int64_t minute_of_day = local - day * 1440;
    return matches_day(date::sys_days{date::days{day}}) &&
           matches_time(static_cast<int>(minute_of_day));
  }

  /// Whether the month and day fields match `day` (a wall-clock date).
  bool matches_day(date::sys_days day) const {
    const date::year_month_day ymd{day};
    const bool this_dom = bit(days_, static_cast<int>(unsigned{ymd.day()}));
    const bool this_dow = bit(weekdays_, static_cast<int>(date::weekday{day}.c_encoding()));
    const bool day_ok = (dom_star_ || dow_star_) ? (this_dom && this_dow) : (this_dom || this_dow);
    return bit(months_, static_cast<int>(unsigned{ymd.month()})) && day_ok;
  }

  /// Whether the minute and hour fields match minute `minute_of_day` (0-1439) of a day.
  bool matches_time(int minute_of_day) const {
    return bit(minutes_, minute_of_day % 60) && bit(hours_, minute_of_day / 60);
  }

  /// Fire instants in (start, end], simulating cron.c from `warmup` before `start` on.
  std::vector<date::sys_seconds> fires(const date::time_zone& zone, date::sys_seconds start,
                                       date::sys_seconds end,
                                       std::chrono::hours warmup = std::chrono::hours{30}) const {
    using std::chrono::minutes;
    std::vector<date::sys_seconds> out;
    date::sys_seconds t = date::floor<minutes>(start - warmup);
    date::sys_info info = zone.get_info(t);
    const auto wall_minute = [&](date::sys_seconds at) {
      if (at >= info.end || at < info.begin) info = zone.get_info(at);
      return floor_div((at.time_since_epoch() + info.offset).count(), 60);
    };
    std::int64_t time_running = wall_minute(t);
    std::int64_t virtual_time = time_running;
    for (t += minutes{1}; t <= end; t += minutes{1}) {
      const std::int64_t clock = wall_minute(t);
      if (clock == time_running) continue;  // cron sleeps until the wall clock moves on
      time_running = clock;
      const std::int64_t diff = time_running - virtual_time;
      bool run = false;
      const auto find_jobs = [&](std::int64_t v, bool wild, bool fixed) {
        if (matches(v) && (wildcard_ ? wild : fixed)) run = true;
      };
      if (diff == 1) {
        virtual_time = time_running;
        find_jobs(virtual_time, true, true);
      } else if (diff > 180 || diff < -180) {
        virtual_time = time_running;
        find_jobs(time_running, true, true);
      } else if (diff > 5) {
        find_jobs(time_running, true, false);
        do find_jobs(++virtual_time, false, true);
        while (virtual_time < time_running);
      } else if (diff > 0) {
        do find_jobs(++virtual_time, true, true);
        while (virtual_time < time_running);
      } else {
        find_jobs(time_running, true, false);
      }
      if (run && t > start) out.push_back(t);
    }
    return out;
  }

 private:
  static constexpr const char* month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",  "jul",
                                                "aug", "sep", "oct", "nov", "dec", nullptr};
  static constexpr const char* weekday_names[] = {"sun", "mon", "tue", "wed",
                                                  "thu", "fri", "sat", nullptr};

  static std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
  }
  static bool bit(std::uint64_t mask, int v) { return ((mask >> v) & 1u) != 0; }

  static int number(const std::string& s, int low, const char* const* names) {
    if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) return std::stoi(s);
    std::string key = s;
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (int i = 0; names != nullptr && names[i] != nullptr; ++i) {
      if (key == names[i]) return i + low;
    }
    throw std::invalid_argument("reference: bad value " + s);
  }

  static std::uint64_t parse_field(const std::string& text, int low, int high,
                                   const char* const* names) {
    std::uint64_t mask = 0;
    std::stringstream items(text);
    for (std::string item; std::getline(items, item, ',');) {
      const auto slash = item.find('/');
      const std::string range = item.substr(0, slash);
      const long long step = slash == std::string::npos ? 1 : std::stoll(item.substr(slash + 1));
      int first = low;
      int last = high;
      if (range != "*") {
        const auto dash = range.find('-');
        first = number(range.substr(0, dash), low, names);
        if (dash != std::string::npos) {
          last = number(range.substr(dash + 1), low, names);
          if (high == 7 && last == 0 && first > 0) last = 7;  // FRI-SUN (baton's extension)
        } else if (slash == std::string::npos) {
          last = first;
        }  // else "a/n" = a-high/n (baton's extension)
      }
      for (long long v = first; v <= last; v += step) mask |= std::uint64_t{1} << v;
    }
    return mask;
  }

  std::uint64_t minutes_ = 0, hours_ = 0, days_ = 0, months_ = 0, weekdays_ = 0;
  bool wildcard_ = false, dom_star_ = false, dow_star_ = false;
};

}  // namespace baton::test
