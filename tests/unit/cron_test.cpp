// Hand-checked cases for the cron trigger: syntax, errors, day rule, time zones and DST,
// leap days, seconds, and the RFC 3339 helpers. Instants are written in UTC ("...Z").
#include "baton/scheduler/cron.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;
using baton::cron_error;
using baton::cron_expression;
using time_point = std::chrono::system_clock::time_point;

namespace {

time_point at(const std::string& rfc3339) {
  const auto t = baton::parse_rfc3339(rfc3339);
  if (!t) throw std::logic_error("bad test instant " + rfc3339);
  return *t;
}

std::string next(const std::string& expr, const std::string& from,
                 const std::string& zone = "UTC") {
  const auto t = cron_expression::parse(expr, zone).next(at(from));
  return t ? baton::format_rfc3339_utc(*t) : "none";
}

std::vector<std::string> next_n(const std::string& expr, const std::string& from, std::size_t n,
                                const std::string& zone = "UTC") {
  std::vector<std::string> out;
  for (const auto& t : cron_expression::parse(expr, zone).next_n(at(from), n)) {
    out.push_back(baton::format_rfc3339_utc(t));
  }
  return out;
}

/// The message of the cron_error that parse() throws, or "" if it does not throw.
std::string parse_error(const std::string& expr, const std::string& zone = "UTC") {
  try {
    cron_expression::parse(expr, zone);
  } catch (const cron_error& e) {
    return e.what();
  }
  return "";
}

using strings = std::vector<std::string>;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Syntax

TEST(cron, five_fields_fire_at_second_zero) {
  const auto e = cron_expression::parse("30 9 * * *");
  EXPECT_FALSE(e.has_seconds());
  EXPECT_EQ(next("30 9 * * *", "2026-01-01T00:00:00Z"), "2026-01-01T09:30:00Z");
  EXPECT_EQ(next("30 9 * * *", "2026-01-01T09:30:00Z"), "2026-01-02T09:30:00Z");
  EXPECT_EQ(next("* * * * *", "2026-01-01T00:00:00.999Z"), "2026-01-01T00:01:00Z");
}

TEST(cron, six_fields_put_seconds_first) {
  const auto e = cron_expression::parse("15 30 9 * * *");
  EXPECT_TRUE(e.has_seconds());
  EXPECT_EQ(next("15 30 9 * * *", "2026-01-01T00:00:00Z"), "2026-01-01T09:30:15Z");
  EXPECT_EQ(next_n("*/20 * * * * *", "2026-01-01T00:00:00Z", 4),
            (strings{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z",
                     "2026-01-01T00:01:20Z"}));
  EXPECT_EQ(next_n("* * * * * *", "2026-12-31T23:59:58.5Z", 2),
            (strings{"2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"}));
}

TEST(cron, next_is_strictly_after) {
  EXPECT_EQ(next("0 12 * * *", "2026-05-05T12:00:00Z"), "2026-05-06T12:00:00Z");
  EXPECT_EQ(next("0 12 * * *", "2026-05-05T11:59:59.999999999Z"), "2026-05-05T12:00:00Z");
  EXPECT_EQ(next("0 12 * * *", "2026-05-05T12:00:00.000000001Z"), "2026-05-06T12:00:00Z");
}

TEST(cron, lists_ranges_and_steps) {
  EXPECT_EQ(next_n("0,30 8-10/2 * * *", "2026-01-01T00:00:00Z", 5),
            (strings{"2026-01-01T08:00:00Z", "2026-01-01T08:30:00Z", "2026-01-01T10:00:00Z",
                     "2026-01-01T10:30:00Z", "2026-01-02T08:00:00Z"}));
  EXPECT_EQ(next_n("5,1-3,59 0 1 1 *", "2026-01-01T00:00:00Z", 5),
            (strings{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z",
                     "2026-01-01T00:05:00Z", "2026-01-01T00:59:00Z"}));
}

TEST(cron, star_step_starts_at_the_field_minimum) {
  EXPECT_EQ(next_n("0 0 */10 * *", "2026-01-01T00:00:00Z", 4),
            (strings{"2026-01-11T00:00:00Z", "2026-01-21T00:00:00Z", "2026-01-31T00:00:00Z",
                     "2026-02-01T00:00:00Z"}));
  EXPECT_EQ(next_n("0 0 1 */5 *", "2026-01-01T00:00:00Z", 3),
            (strings{"2026-06-01T00:00:00Z", "2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z"}));
}

TEST(cron, value_with_step_runs_to_the_field_maximum) {
  EXPECT_EQ(next_n("50/5 * * * *", "2026-01-01T00:00:00Z", 3),
            (strings{"2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-01T01:50:00Z"}));
  // Weekdays run to 7, which is Sunday: MON/2 = MON,WED,FRI,SUN.
  EXPECT_EQ(next_n("0 0 * * MON/2", "2026-01-04T12:00:00Z", 4),  // a Sunday
            (strings{"2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-09T00:00:00Z",
                     "2026-01-11T00:00:00Z"}));
}

TEST(cron, month_and_weekday_names_are_case_insensitive) {
  EXPECT_EQ(next_n("0 0 1 jan,Jul *", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}));
  EXPECT_EQ(next_n("0 0 * * Mon-fRI", "2026-01-02T12:00:00Z", 3),  // a Friday
            (strings{"2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z", "2026-01-07T00:00:00Z"}));
  EXPECT_EQ(next("0 0 1 FEB-mar/1 *", "2026-01-01T00:00:00Z"), "2026-02-01T00:00:00Z");
}

TEST(cron, sunday_is_0_or_7_or_sun) {
  for (const char* dow : {"0", "7", "SUN", "sun", "0,7"}) {
    EXPECT_EQ(next_n(std::string("0 12 * * ") + dow, "2026-01-01T00:00:00Z", 2),
              (strings{"2026-01-04T12:00:00Z", "2026-01-11T12:00:00Z"}))
        << dow;
  }
}

TEST(cron, weekday_range_may_end_at_sunday) {
  const strings fri_sat_sun{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z",
                            "2026-01-09T00:00:00Z"};
  EXPECT_EQ(next_n("0 0 * * FRI-SUN", "2026-01-01T00:00:00Z", 4), fri_sat_sun);
  EXPECT_EQ(next_n("0 0 * * 5-7", "2026-01-01T00:00:00Z", 4), fri_sat_sun);
  EXPECT_EQ(next_n("0 0 * * 5-0", "2026-01-01T00:00:00Z", 4), fri_sat_sun);
}

TEST(cron, macros_expand_to_their_five_fields) {
  const char* const from = "2026-03-15T10:20:30Z";  // a Sunday
  EXPECT_EQ(next("@hourly", from), "2026-03-15T11:00:00Z");
  EXPECT_EQ(next("@daily", from), "2026-03-16T00:00:00Z");
  EXPECT_EQ(next("@midnight", from), "2026-03-16T00:00:00Z");
  EXPECT_EQ(next("@weekly", from), "2026-03-22T00:00:00Z");
  EXPECT_EQ(next("@monthly", from), "2026-04-01T00:00:00Z");
  EXPECT_EQ(next("@yearly", from), "2027-01-01T00:00:00Z");
  EXPECT_EQ(next("@annually", from), "2027-01-01T00:00:00Z");
  EXPECT_EQ(next("@Daily", from), "2026-03-16T00:00:00Z");
  EXPECT_FALSE(cron_expression::parse("@hourly").has_seconds());
}

TEST(cron, extra_whitespace_is_ignored_and_text_is_kept) {
  const auto e = cron_expression::parse("  0\t12  * *   *  ");
  EXPECT_EQ(e.text(), "  0\t12  * *   *  ");
  EXPECT_EQ(e.time_zone(), "UTC");
  EXPECT_EQ(baton::format_rfc3339_utc(*e.next(at("2026-01-01T00:00:00Z"))), "2026-01-01T12:00:00Z");
}

TEST(cron, copies_share_the_parsed_state) {
  const auto a = cron_expression::parse("0 9 * * *", "Europe/Berlin");
  const cron_expression b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(&a.text(), &b.text());
  EXPECT_EQ(b.time_zone(), "Europe/Berlin");
  EXPECT_EQ(a.next(at("2026-01-01T00:00:00Z")), b.next(at("2026-01-01T00:00:00Z")));
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(cron, error_type_is_invalid_argument) {
  static_assert(std::is_base_of_v<std::invalid_argument, cron_error>);
  EXPECT_THROW(cron_expression::parse("nonsense"), std::invalid_argument);
}

TEST(cron, empty_expression_is_rejected) {
  EXPECT_EQ(parse_error(""), "empty cron expression");
  EXPECT_EQ(parse_error(" \t "), "empty cron expression");
}

TEST(cron, wrong_field_count_is_rejected) {
  EXPECT_EQ(parse_error("* * * *"),
            "cron expression '* * * *' has 4 fields, expected 5 (minute hour day-of-month "
            "month day-of-week) or 6 (second first)");
  EXPECT_NE(parse_error("* * * * * * *").find("has 7 fields"), std::string::npos);
  EXPECT_NE(parse_error("nonsense").find("has 1 fields"), std::string::npos);
}

TEST(cron, value_out_of_range_names_field_and_text) {
  EXPECT_EQ(parse_error("0 25 * * *"), "cron field 2 (hour) '25': value 25 out of range 0-23");
  EXPECT_EQ(parse_error("60 * * * *"), "cron field 1 (minute) '60': value 60 out of range 0-59");
  EXPECT_EQ(parse_error("0 0 0 * *"), "cron field 3 (day of month) '0': value 0 out of range 1-31");
  EXPECT_EQ(parse_error("0 0 1 1,13 *"), "cron field 4 (month) '1,13': value 13 out of range 1-12");
  EXPECT_EQ(parse_error("0 0 * * 1-8"),
            "cron field 5 (day of week) '1-8': value 8 out of range 0-7");
  EXPECT_EQ(parse_error("60 0 0 * * *"), "cron field 1 (second) '60': value 60 out of range 0-59");
  EXPECT_EQ(parse_error("0 0 24 * * *"), "cron field 3 (hour) '24': value 24 out of range 0-23");
  EXPECT_EQ(parse_error("99999999999999 * * * *"),
            "cron field 1 (minute) '99999999999999': value 99999999999999 out of range 0-59");
}

TEST(cron, step_must_be_positive) {
  EXPECT_EQ(parse_error("*/0 * * * *"), "cron field 1 (minute) '*/0': step 0 must be 1 or more");
  EXPECT_EQ(parse_error("0 1-5/0 * * *"), "cron field 2 (hour) '1-5/0': step 0 must be 1 or more");
  EXPECT_EQ(parse_error("*/ * * * *"),
            "cron field 1 (minute) '*/': step after '/' must be a number in '*/'");
  EXPECT_EQ(parse_error("*/x * * * *"),
            "cron field 1 (minute) '*/x': step after '/' must be a number in '*/x'");
}

TEST(cron, step_beyond_the_range_selects_its_start_like_isc) {
  EXPECT_EQ(next_n("*/90 * * * *", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}));
  EXPECT_EQ(next_n("0 0 * * */8", "2026-01-01T00:00:00Z", 2),  // Sunday only
            (strings{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}));
  EXPECT_EQ(next("10-20/99999999999 * * * *", "2026-01-01T00:00:00Z"), "2026-01-01T00:10:00Z");
}

TEST(cron, inverted_range_is_rejected) {
  EXPECT_EQ(parse_error("0 5-3 * * *"),
            "cron field 2 (hour) '5-3': inverted range '5-3' (start after end)");
  EXPECT_EQ(parse_error("0 0 * * FRI-MON"),
            "cron field 5 (day of week) 'FRI-MON': inverted range 'FRI-MON' (start after end)");
  EXPECT_EQ(parse_error("0 0 * DEC-JAN *"),
            "cron field 4 (month) 'DEC-JAN': inverted range 'DEC-JAN' (start after end)");
}

TEST(cron, unknown_name_is_rejected) {
  EXPECT_EQ(parse_error("0 0 * FOO *"),
            "cron field 4 (month) 'FOO': unknown month name 'FOO' (expected JAN-DEC)");
  EXPECT_EQ(parse_error("0 0 * * mon,Funday"),
            "cron field 5 (day of week) 'mon,Funday': unknown weekday name 'Funday' (expected "
            "SUN-SAT)");
  EXPECT_EQ(parse_error("0 0 * January *"),
            "cron field 4 (month) 'January': unknown month name 'January' (expected JAN-DEC)");
  EXPECT_EQ(parse_error("MON * * * *"),
            "cron field 1 (minute) 'MON': 'MON' is not a number (names are only allowed for "
            "month and day of week)");
  EXPECT_EQ(parse_error("0 0 L * *"),
            "cron field 3 (day of month) 'L': 'L' is not a number (names are only allowed for "
            "month and day of week)");
}

TEST(cron, garbage_is_rejected) {
  EXPECT_EQ(parse_error("1,,2 * * * *"), "cron field 1 (minute) '1,,2': empty list element");
  EXPECT_EQ(parse_error("1, * * * *"), "cron field 1 (minute) '1,': empty list element");
  EXPECT_EQ(parse_error("1-2-3 * * * *"), "cron field 1 (minute) '1-2-3': unexpected text '-3'");
  EXPECT_EQ(parse_error("*-5 * * * *"), "cron field 1 (minute) '*-5': unexpected text '-5'");
  EXPECT_EQ(parse_error("? * * * *"), "cron field 1 (minute) '?': unexpected text '?'");
  EXPECT_EQ(parse_error("0 0 * * 5#2"), "cron field 5 (day of week) '5#2': unexpected text '#2'");
  EXPECT_EQ(parse_error("0 0 1- * *"),
            "cron field 3 (day of month) '1-': expected a value at the end of '1-'");
  EXPECT_EQ(parse_error("-1 * * * *"), "cron field 1 (minute) '-1': unexpected text '-1'");
  EXPECT_EQ(parse_error("1.5 * * * *"), "cron field 1 (minute) '1.5': unexpected text '.5'");
}

TEST(cron, unknown_time_zone_is_rejected) {
  EXPECT_EQ(parse_error("* * * * *", "Mars/Base"), "unknown time zone 'Mars/Base'");
  EXPECT_EQ(parse_error("* * * * *", ""), "unknown time zone ''");
  EXPECT_EQ(parse_error("* * * * *", "../../etc/passwd"), "unknown time zone '../../etc/passwd'");
  // The expression is checked first.
  EXPECT_EQ(parse_error("0 25 * * *", "Mars/Base"),
            "cron field 2 (hour) '25': value 25 out of range 0-23");
}

TEST(cron, unknown_macro_is_rejected) {
  const std::string expected =
      " (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)";
  EXPECT_EQ(parse_error("@fortnightly"), "unknown cron macro '@fortnightly'" + expected);
  EXPECT_EQ(parse_error("@reboot"),
            "cron macro '@reboot' is not supported: a cluster-wide schedule has no boot to run at");
  EXPECT_EQ(parse_error("@REBOOT"),
            "cron macro '@reboot' is not supported: a cluster-wide schedule has no boot to run at");
  EXPECT_EQ(parse_error("@daily 0"), "unknown cron macro '@daily 0'" + expected);
}

// ---------------------------------------------------------------------------------------------
// Day-of-month / day-of-week rule

TEST(cron, or_rule_when_neither_day_field_begins_with_a_star) {
  // The 13th OR any Friday.
  EXPECT_EQ(next_n("0 0 13 * 5", "2026-01-01T00:00:00Z", 6),
            (strings{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z",
                     "2026-01-16T00:00:00Z", "2026-01-23T00:00:00Z", "2026-01-30T00:00:00Z"}));
}

TEST(cron, only_day_of_week_counts_when_day_of_month_is_star) {
  EXPECT_EQ(next_n("0 0 * * 5", "2026-01-01T00:00:00Z", 3),
            (strings{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-16T00:00:00Z"}));
}

TEST(cron, only_day_of_month_counts_when_day_of_week_is_star) {
  EXPECT_EQ(next_n("0 0 13 * *", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z"}));
}

TEST(cron, star_step_day_field_counts_as_a_star_like_isc) {
  // "*/10" begins with '*' (DOM_STAR): days 1, 11, 21, 31 that are Mondays (croniter, robfig
  // and the old baton would take days 1, 11, 21, 31 OR Mondays).
  EXPECT_EQ(next_n("0 0 */10 * 1", "2026-01-01T00:00:00Z", 4),
            (strings{"2026-05-11T00:00:00Z", "2026-06-01T00:00:00Z", "2026-08-31T00:00:00Z",
                     "2026-09-21T00:00:00Z"}));
  // A list beginning with '*' counts too; one with '*' later does not.
  EXPECT_EQ(next_n("0 0 */100,1-7 * MON", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-01-05T00:00:00Z", "2026-02-02T00:00:00Z"}));
  EXPECT_EQ(next_n("0 0 13,* * MON", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}));
}

TEST(cron, full_range_day_field_is_not_a_star_like_isc) {
  // "1-31" does not begin with '*': OR, and it matches every day.
  EXPECT_EQ(next_n("0 0 1-31 * MON", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}));
  for (const char* dow : {"0-6", "1-7", "SUN-SAT"}) {
    EXPECT_EQ(next_n(std::string("0 0 13 * ") + dow, "2026-01-01T00:00:00Z", 2),
              (strings{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}))
        << dow;
  }
  // "*/1" begins with '*': AND, so only the 13th counts.
  EXPECT_EQ(next_n("0 0 13 * */1", "2026-01-01T00:00:00Z", 2),
            (strings{"2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z"}));
}

TEST(cron, never_fires_when_day_and_month_exclude_each_other) {
  EXPECT_TRUE(cron_expression::parse("0 0 30 2 *").never_fires());
  EXPECT_TRUE(cron_expression::parse("0 0 31 4,6,9,11 *").never_fires());
  EXPECT_TRUE(cron_expression::parse("0 0 30 2 */2").never_fires());
  EXPECT_FALSE(cron_expression::parse("0 0 30 2 1").never_fires());  // OR: Mondays in February
  EXPECT_FALSE(cron_expression::parse("0 0 29 2 *").never_fires());
  EXPECT_FALSE(cron_expression::parse("0 0 30,1 2 *").never_fires());
  EXPECT_FALSE(cron_expression::parse("@daily").never_fires());
}

TEST(cron, wildcard_means_minute_or_hour_text_begins_with_a_star) {
  for (const char* e : {"* 3 * * *", "7 * * * *", "0 */3 * * *", "*/5 1-6 * * *", "@hourly",
                        "*/10 0 3 * * *", "*,5 3 * * *"}) {
    EXPECT_TRUE(cron_expression::parse(e).is_wildcard()) << e;
  }
  for (const char* e : {"0 3 * * *", "0-59 0-23 * * *", "0 1,* * * *", "5,* 3 * * *", "@daily",
                        "0 0 3 * * *", "0 30 3,4 * * *"}) {
    EXPECT_FALSE(cron_expression::parse(e).is_wildcard()) << e;
  }
}

// ---------------------------------------------------------------------------------------------
// Calendar

TEST(cron, year_rollover) {
  EXPECT_EQ(next_n("59 23 31 12 *", "2026-06-01T00:00:00Z", 2),
            (strings{"2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"}));
  EXPECT_EQ(next("0 0 1 1 *", "2026-12-31T23:59:59.500Z"), "2027-01-01T00:00:00Z");
  EXPECT_EQ(next("*/7 * * * *", "2026-12-31T23:58:00Z"), "2027-01-01T00:00:00Z");
}

TEST(cron, leap_day_fires_only_on_february_29) {
  EXPECT_EQ(next_n("0 0 29 2 *", "2025-03-01T00:00:00Z", 3),
            (strings{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"}));
  // 2100 is not a leap year: the longest gap any expression can have (8 years) is still found.
  EXPECT_EQ(next("0 0 29 2 *", "2096-03-01T00:00:00Z"), "2104-02-29T00:00:00Z");
}

TEST(cron, leap_day_or_monday_in_february) {
  // The month field still applies: February 29 OR a Monday in February.
  EXPECT_EQ(next_n("0 0 29 2 1", "2025-03-01T00:00:00Z", 2),
            (strings{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"}));
  EXPECT_EQ(next_n("0 0 29 2 1", "2028-02-20T00:00:00Z", 3),
            (strings{"2028-02-21T00:00:00Z", "2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z"}));
  EXPECT_EQ(next("0 0 29 2 1", "2028-02-29T00:00:00Z"), "2029-02-05T00:00:00Z");
}

TEST(cron, impossible_dates_give_nullopt) {
  EXPECT_EQ(next("0 0 30 2 *", "2026-01-01T00:00:00Z"), "none");
  EXPECT_EQ(next("0 0 31 4,6,9,11 *", "2026-01-01T00:00:00Z"), "none");
  EXPECT_EQ(next("* * * 30 2 *", "2026-01-01T00:00:00Z"), "none");
  EXPECT_TRUE(cron_expression::parse("0 0 30 2 *").next_n(at("2026-01-01T00:00:00Z"), 5).empty());
  // With a restricted weekday the OR rule makes "30 FEB" fire on February Mondays.
  EXPECT_EQ(next("0 0 30 2 1", "2026-03-01T00:00:00Z"), "2027-02-01T00:00:00Z");
}

TEST(cron, next_steps_by_fields_not_by_minutes) {
  // A per-second scan would take ~250 million steps for each of these calls.
  const auto never = cron_expression::parse("* * * 30 2 *");
  const auto leap = cron_expression::parse("0 0 29 2 1");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    EXPECT_FALSE(never.next(at("2026-01-01T00:00:00Z") + std::chrono::hours{i}).has_value());
    EXPECT_TRUE(leap.next(at("2026-01-01T00:00:00Z") + std::chrono::hours{24 * i}).has_value());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(cron, next_n_is_ascending_and_may_stop_early) {
  const auto e = cron_expression::parse("0 0 29 2 *");
  EXPECT_TRUE(e.next_n(at("2026-01-01T00:00:00Z"), 0).empty());
  const auto times = e.next_n(at("2026-01-01T00:00:00Z"), 5);
  ASSERT_EQ(times.size(), 5u);
  for (std::size_t i = 1; i < times.size(); ++i) EXPECT_LT(times[i - 1], times[i]);
}

TEST(cron, end_of_the_clock_gives_nullopt) {
  const auto e = cron_expression::parse("0 0 1 1 *");
  EXPECT_FALSE(e.next(time_point::max()).has_value());
  EXPECT_FALSE(e.next(time_point::max() - std::chrono::hours{24}).has_value());
  EXPECT_TRUE(e.next(time_point::min()).has_value());
}

// ---------------------------------------------------------------------------------------------
// Time zones and DST

TEST(cron, evaluates_in_the_local_time_of_the_zone) {
  EXPECT_EQ(next("0 9 * * *", "2026-01-15T00:00:00Z", "America/New_York"), "2026-01-15T14:00:00Z");
  EXPECT_EQ(next("0 9 * * *", "2026-07-15T00:00:00Z", "America/New_York"), "2026-07-15T13:00:00Z");
  EXPECT_EQ(next("0 9 * * *", "2026-01-15T00:00:00Z", "Asia/Kolkata"), "2026-01-15T03:30:00Z");
  // Day and weekday are local too: Monday 00:30 in Tokyo is Sunday 15:30 UTC.
  EXPECT_EQ(next("30 0 * * MON", "2026-01-01T00:00:00Z", "Asia/Tokyo"), "2026-01-04T15:30:00Z");
}

// Europe/Berlin 2026-03-29: at 01:00Z the clock jumps from 02:00 CET to 03:00 CEST.
TEST(cron, berlin_spring_gap_fires_once_when_the_gap_ends) {
  const std::string berlin = "Europe/Berlin";
  EXPECT_EQ(next_n("30 2 * * *", "2026-03-28T12:00:00Z", 2, berlin),
            (strings{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}));
  EXPECT_EQ(next("30 30 2 * * *", "2026-03-28T12:00:00Z", berlin), "2026-03-29T01:00:00Z");
  // Several skipped matches in the gap fire once together.
  EXPECT_EQ(next_n("0,15,30,45 2 * * *", "2026-03-28T12:00:00Z", 3, berlin),
            (strings{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:15:00Z"}));
  // A job at 03:00 and one at 02:30 both fire at 03:00 CEST.
  EXPECT_EQ(next("0 3 * * *", "2026-03-28T12:00:00Z", berlin), "2026-03-29T01:00:00Z");
  // Starting inside the day, at the gap end itself: the skipped 02:30 has already fired.
  EXPECT_EQ(next("30 2 * * *", "2026-03-29T01:00:00Z", berlin), "2026-03-30T00:30:00Z");
}

TEST(cron, berlin_spring_gap_skips_the_missed_times_of_wildcard_jobs) {
  const std::string berlin = "Europe/Berlin";
  EXPECT_EQ(next_n("30 * * * *", "2026-03-29T00:00:00Z", 2, berlin),
            (strings{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"}));
  EXPECT_EQ(next("* 2 * * *", "2026-03-28T12:00:00Z", berlin), "2026-03-30T00:00:00Z");
  EXPECT_EQ(next("*/10 30 2 * * *", "2026-03-28T12:00:00Z", berlin), "2026-03-30T00:30:00Z");
}

TEST(cron, berlin_spring_gap_for_frequent_jobs) {
  EXPECT_EQ(next_n("*/15 * * * *", "2026-03-29T00:30:00Z", 4, "Europe/Berlin"),
            (strings{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z",
                     "2026-03-29T01:30:00Z"}));
}

// Europe/Berlin 2026-10-25: at 01:00Z the clock goes back from 03:00 CEST to 02:00 CET, so
// 02:00-02:59 local happens at 00:00Z-00:59Z and again at 01:00Z-01:59Z.
TEST(cron, berlin_fall_repeat_fires_once_for_a_specific_hour) {
  const std::string berlin = "Europe/Berlin";
  EXPECT_EQ(next_n("30 2 * * *", "2026-10-24T12:00:00Z", 2, berlin),
            (strings{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}));
  // Starting in the second pass: 02:30 already fired in the first one.
  EXPECT_EQ(next("30 2 * * *", "2026-10-25T01:10:00Z", berlin), "2026-10-26T01:30:00Z");
  EXPECT_EQ(next("30 2 * * *", "2026-10-25T00:40:00Z", berlin), "2026-10-26T01:30:00Z");
  // A fixed-time job fires once at 02:00, even when its hours cover the whole day.
  EXPECT_EQ(next_n("0 1-3 * * *", "2026-10-24T23:30:00Z", 3, berlin),
            (strings{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-26T00:00:00Z"}));
  EXPECT_EQ(next_n("0 0-23 * * *", "2026-10-24T23:30:00Z", 3, berlin),
            (strings{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"}));
}

TEST(cron, berlin_fall_repeat_fires_every_real_instant_for_a_wildcard_job) {
  const std::string berlin = "Europe/Berlin";
  EXPECT_EQ(next_n("*/15 * * * *", "2026-10-24T23:50:00Z", 9, berlin),
            (strings{"2026-10-25T00:00:00Z", "2026-10-25T00:15:00Z", "2026-10-25T00:30:00Z",
                     "2026-10-25T00:45:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:15:00Z",
                     "2026-10-25T01:30:00Z", "2026-10-25T01:45:00Z", "2026-10-25T02:00:00Z"}));
  EXPECT_EQ(next_n("0 * * * *", "2026-10-24T23:30:00Z", 3, berlin),
            (strings{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}));
  // From inside the first pass, the second 02:00 comes next.
  EXPECT_EQ(next("0 * * * *", "2026-10-25T00:30:00Z", berlin), "2026-10-25T01:00:00Z");
  // From inside the second pass.
  EXPECT_EQ(next("*/15 * * * *", "2026-10-25T01:30:00Z", berlin), "2026-10-25T01:45:00Z");
  // Any minute or hour text beginning with '*' makes a wildcard job.
  EXPECT_EQ(next_n("0 */2 * * *", "2026-10-24T21:30:00Z", 3, berlin),
            (strings{"2026-10-24T22:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z"}));
  EXPECT_EQ(next_n("* 2 * * *", "2026-10-25T00:59:00Z", 2, berlin),
            (strings{"2026-10-25T01:00:00Z", "2026-10-25T01:01:00Z"}));
  // A day-restricted job with a wildcard hour repeats too; seconds work the same way.
  EXPECT_EQ(next_n("0 30 * 25 10 *", "2026-10-25T00:00:00Z", 3, berlin),
            (strings{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}));
}

// America/New_York 2026-03-08: at 07:00Z the clock jumps from 02:00 EST to 03:00 EDT.
TEST(cron, new_york_spring_gap_fires_once_when_the_gap_ends) {
  const std::string ny = "America/New_York";
  EXPECT_EQ(next_n("30 2 * * *", "2026-03-07T12:00:00Z", 2, ny),
            (strings{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}));
  EXPECT_EQ(next_n("*/30 * * * *", "2026-03-08T06:40:00Z", 2, ny),
            (strings{"2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}));
  EXPECT_EQ(next_n("0 2 8 3 *", "2026-01-01T00:00:00Z", 2, ny),
            (strings{"2026-03-08T07:00:00Z", "2027-03-08T07:00:00Z"}));
}

// America/New_York 2026-11-01: at 06:00Z the clock goes back from 02:00 EDT to 01:00 EST, so
// 01:00-01:59 local happens at 05:00Z-05:59Z and again at 06:00Z-06:59Z.
TEST(cron, new_york_fall_repeat) {
  const std::string ny = "America/New_York";
  EXPECT_EQ(next_n("30 1 * * *", "2026-10-31T12:00:00Z", 2, ny),
            (strings{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}));
  EXPECT_EQ(next_n("0 1-2 * * *", "2026-11-01T04:30:00Z", 2, ny),
            (strings{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"}));
  EXPECT_EQ(next_n("30 * * * *", "2026-11-01T04:00:00Z", 4, ny),
            (strings{"2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z",
                     "2026-11-01T07:30:00Z"}));
  EXPECT_EQ(next("30 * * * *", "2026-11-01T06:30:00Z", ny), "2026-11-01T07:30:00Z");
}

TEST(cron, half_hour_shift_in_lord_howe) {
  // Australia/Lord_Howe 2026-04-05 local: at 2026-04-04T15:00Z the clock goes back from 02:00
  // (+11) to 01:30 (+10:30), so 01:30-01:59 repeats. A wildcard-hour job sees both passes, a
  // specific hour only the first.
  const std::string lh = "Australia/Lord_Howe";
  EXPECT_EQ(next_n("45 * * * *", "2026-04-04T14:00:00Z", 3, lh),
            (strings{"2026-04-04T14:45:00Z", "2026-04-04T15:15:00Z", "2026-04-04T16:15:00Z"}));
  EXPECT_EQ(next_n("45 1 * * *", "2026-04-04T14:00:00Z", 2, lh),
            (strings{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}));
  EXPECT_EQ(next_n("15 1 * * *", "2026-04-04T14:00:00Z", 2, lh),
            (strings{"2026-04-04T14:15:00Z", "2026-04-05T14:45:00Z"}));
}

// ---------------------------------------------------------------------------------------------
// RFC 3339

TEST(rfc3339, formats_utc_with_milliseconds_only_when_nonzero) {
  EXPECT_EQ(baton::format_rfc3339_utc(time_point{}), "1970-01-01T00:00:00Z");
  const time_point t = time_point{} + std::chrono::seconds{1795316400};
  EXPECT_EQ(baton::format_rfc3339_utc(t), "2026-11-22T03:00:00Z");
  EXPECT_EQ(baton::format_rfc3339_utc(t + 250ms), "2026-11-22T03:00:00.250Z");
  EXPECT_EQ(baton::format_rfc3339_utc(t + 250999us), "2026-11-22T03:00:00.250Z");
  EXPECT_EQ(baton::format_rfc3339_utc(t + 999us), "2026-11-22T03:00:00Z");
  EXPECT_EQ(baton::format_rfc3339_utc(time_point{} - 500ms), "1969-12-31T23:59:59.500Z");
}

TEST(rfc3339, parses_z_offsets_and_fractions) {
  const time_point t = time_point{} + std::chrono::seconds{1795316400};  // 2026-11-22T03:00:00Z
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T03:00:00Z"), t);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22t03:00:00z"), t);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22 03:00:00Z"), t);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T04:00:00+01:00"), t);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-21T21:30:00-05:30"), t);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T03:00:00-00:00"), t);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T03:00:00.25Z"), t + 250ms);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T03:00:00.123456789Z"), t + 123456789ns);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T03:00:00.1234567891234Z"), t + 123456789ns);
  EXPECT_EQ(baton::parse_rfc3339("2026-11-22T04:00:00.5+01:00"), t + 500ms);
  EXPECT_EQ(baton::parse_rfc3339("2028-02-29T00:00:00Z"), at("2028-02-29T00:00:00Z"));
}

TEST(rfc3339, rejects_malformed_text) {
  for (const char* bad :
       {"", "2026-11-22", "2026-11-22T03:00:00", "2026-11-22T03:00Z", "2026-1-22T03:00:00Z",
        "2026-13-22T03:00:00Z", "2026-02-29T00:00:00Z", "2026-11-22T24:00:00Z",
        "2026-11-22T23:60:00Z", "2026-11-22T23:59:60Z", "2026-11-22T03:00:00.Z",
        "2026-11-22T03:00:00+0100", "2026-11-22T03:00:00+24:00", "2026-11-22T03:00:00Zjunk",
        "2026-11-22X03:00:00Z", " 2026-11-22T03:00:00Z", "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z"}) {
    EXPECT_FALSE(baton::parse_rfc3339(bad).has_value()) << bad;
  }
}

TEST(rfc3339, round_trips) {
  for (const char* text :
       {"2026-11-22T03:00:00Z", "2026-11-22T03:00:00.250Z", "1999-12-31T23:59:59.999Z",
        "2000-02-29T12:00:00Z", "1969-07-20T20:17:40Z", "2262-01-01T00:00:00Z"}) {
    const auto t = baton::parse_rfc3339(text);
    ASSERT_TRUE(t.has_value()) << text;
    EXPECT_EQ(baton::format_rfc3339_utc(*t), text);
  }
  const time_point t = time_point{} + std::chrono::milliseconds{1'795'316'400'123};
  EXPECT_EQ(baton::parse_rfc3339(baton::format_rfc3339_utc(t)), t);
}

// ---------------------------------------------------------------------------------------------
// ISC cron 4.1 / Debian cron semantics (issue 12): the measurements from the "Why".

TEST(cron_isc, day_rule_follows_the_star_in_the_field_text) {
  // "*/7" starts with '*', so ISC sets DOW_STAR and ANDs the fields: the first Sunday.
  EXPECT_EQ(next_n("1 1 1-7 * */7", "2020-01-01T00:00:00Z", 2),
            (strings{"2020-01-05T01:01:00Z", "2020-02-02T01:01:00Z"}));
  // Neither "1-31" nor "1" starts with '*': OR, and day 1-31 matches every day.
  EXPECT_EQ(next_n("0 12 1-31 * 1", "2026-01-01T00:00:00Z", 3),
            (strings{"2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z", "2026-01-03T12:00:00Z"}));
}

// Europe/London 2025-03-30: at 01:00Z the clock jumps from 01:00 GMT to 02:00 BST.
TEST(cron_isc, spring_gap_does_not_catch_up_wildcard_jobs) {
  EXPECT_EQ(next_n("7 * * * *", "2025-03-30T00:00:00Z", 3, "Europe/London"),
            (strings{"2025-03-30T00:07:00Z", "2025-03-30T01:07:00Z", "2025-03-30T02:07:00Z"}));
}

// Pacific/Apia skipped 2011-12-30: 2011-12-29 24:00 -10 became 2011-12-31 00:00 +14 at 10:00Z.
TEST(cron_isc, a_gap_of_three_hours_or_more_is_not_caught_up) {
  EXPECT_EQ(next("0 12 * * *", "2011-12-29T22:00:00Z", "Pacific/Apia"), "2011-12-30T22:00:00Z");
  EXPECT_EQ(next("0 12 30 12 *", "2011-12-29T22:00:00Z", "Pacific/Apia"), "2012-12-29T22:00:00Z");
}

// Europe/Riga 2021-10-31: at 01:00Z the clock goes back from 04:00 EEST to 03:00 EET.
TEST(cron_isc, fall_repeat_follows_the_star_in_the_minute_or_hour_text) {
  const std::string riga = "Europe/Riga";
  EXPECT_EQ(next_n("0 */3 * * *", "2021-10-30T22:30:00Z", 3, riga),
            (strings{"2021-10-31T00:00:00Z", "2021-10-31T01:00:00Z", "2021-10-31T04:00:00Z"}));
  EXPECT_EQ(next_n("* 1-6 * * *", "2021-10-31T00:58:00Z", 3, riga),
            (strings{"2021-10-31T00:59:00Z", "2021-10-31T01:00:00Z", "2021-10-31T01:01:00Z"}));
  // A 24-item hour list is fixed-time to ISC: 03:00 runs once.
  EXPECT_EQ(next_n("0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *",
                   "2021-10-30T22:30:00Z", 3, riga),
            (strings{"2021-10-30T23:00:00Z", "2021-10-31T00:00:00Z", "2021-10-31T02:00:00Z"}));
}
