// SQLite lease times on the host's monotonic clock (backends/sql/src/sqlite_clock.hpp) and the
// schema splitter that keeps trigger bodies whole (no database needed).
#include "sqlite_clock.hpp"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "baton/backends/sql/sql_backend.hpp"
#include "dialect.hpp"

namespace sql = baton::backends::sql::detail;

namespace {

long long steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

long long system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(sqlite_clock_math, raw_clocks_are_the_kernels_monotonic_and_wall_clocks) {
  // This process runs without a faked clock: the raw system call and libc agree.
  const auto before = steady_ms();
  const auto mono = sql::monotonic_ms();
  const auto after = steady_ms();
  EXPECT_GE(mono, before);
  EXPECT_LE(mono, after);
  const auto wall_before = system_ms();
  const auto wall = sql::realtime_ms();
  EXPECT_GE(wall, wall_before);
  EXPECT_LE(wall, system_ms());
  EXPECT_NEAR(sql::wall_minus_monotonic_ms(), system_ms() - steady_ms(), 5);
}

TEST(sqlite_clock_math, the_display_offset_ignores_millisecond_jitter_and_follows_steps) {
  EXPECT_EQ(sql::settled_offset_ms(1000, 1001), 1000);
  EXPECT_EQ(sql::settled_offset_ms(1000, 998), 1000);
  EXPECT_EQ(sql::settled_offset_ms(1000, 1003), 1003);
  EXPECT_EQ(sql::settled_offset_ms(1000, -3'600'000), -3'600'000);
  const auto a = sql::display_offset_ms();
  EXPECT_EQ(sql::display_offset_ms(), a);
  EXPECT_NEAR(a, sql::wall_minus_monotonic_ms(), 2);
}

TEST(sqlite_clock_math, boot_id_is_the_kernels) {
  const auto id = sql::boot_id();
  EXPECT_EQ(id.size(), 36u) << id;
  EXPECT_EQ(id, sql::boot_id());
}

TEST(sqlite_clock_math, shown_times_keep_their_distance_from_now_and_zero_means_never) {
  constexpr long long offset = 1'700'000'000'000LL;  // wall - mono
  constexpr long long now = 5'000'000, transition_at = now + 3000;
  EXPECT_EQ(sql::to_wall_ms(transition_at, offset) - sql::to_wall_ms(now, offset), 3000);
  EXPECT_EQ(sql::to_wall_ms(now, offset), now + offset);
  EXPECT_EQ(sql::to_wall_ms(0, offset), 0);
}

TEST(sqlite_clock_math, an_older_files_wall_clock_times_convert_to_monotonic_and_back) {
  constexpr long long offset = 1'700'000'000'000LL;
  constexpr long long wall = 1'700'000'123'456LL;
  const auto mono = sql::legacy_to_monotonic_ms(wall, offset);
  EXPECT_EQ(mono, 123'456);
  EXPECT_EQ(sql::to_wall_ms(mono, offset), wall);
  EXPECT_EQ(sql::legacy_to_monotonic_ms(0, offset), 0);
}

TEST(sqlite_clock_math, times_of_another_boot_are_past_deadlines_but_keep_their_wall_time) {
  // Old boot: wall - mono = 1000; this boot: wall - mono = 5000 (booted 4 s later on the wall
  // clock), so delta = -4000. A lease of the old boot that ended far in the future (by its own
  // monotonic clock) is past now; acquired_at keeps its wall-clock meaning.
  constexpr long long delta = 1000 - 5000, now = 20'000;
  EXPECT_EQ(sql::rebased_ms(900'000, delta, now, true), now - 1);
  EXPECT_EQ(sql::rebased_ms(10'000, delta, now, true), 6'000);
  EXPECT_EQ(sql::rebased_ms(900'000, delta, now, false), 896'000);
  EXPECT_EQ(sql::rebased_ms(0, delta, now, true), 0);
}

TEST(sql_schema, split_sql_keeps_a_trigger_body_whole) {
  const auto statements = sql::split_sql(
      "CREATE TABLE t (a INT);\n"
      "-- a comment; with a semicolon\n"
      "CREATE TRIGGER IF NOT EXISTS t_guard BEFORE UPDATE ON t\n"
      "WHEN f() IS NULL\nBEGIN\n  SELECT RAISE(ABORT, 'x; y');\n  SELECT 1;\nend;\n"
      "CREATE TABLE u (b INT);");
  ASSERT_EQ(statements.size(), 3u);
  EXPECT_EQ(statements[0], "CREATE TABLE t (a INT)");
  EXPECT_EQ(statements[1].rfind("CREATE TRIGGER", 0), 0u);
  EXPECT_NE(statements[1].find("SELECT 1;\nend"), std::string::npos) << statements[1];
  EXPECT_EQ(statements[2], "CREATE TABLE u (b INT)");
}

TEST(sql_schema, the_sqlite_schema_has_the_meta_table_and_the_clock_triggers_renamed) {
  const auto statements = sql::split_sql(
      sql::with_table(sql::schema_file(baton::backends::sql::dialect::sqlite), "my_locks"));
  std::string all;
  for (const auto& s : statements) all += s + "\n;\n";
  EXPECT_NE(all.find("CREATE TABLE IF NOT EXISTS my_locks_meta ("), std::string::npos) << all;
  EXPECT_NE(all.find("CREATE TRIGGER IF NOT EXISTS my_locks_clock_update BEFORE UPDATE ON "
                     "my_locks\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("CREATE TRIGGER IF NOT EXISTS my_locks_clock_insert BEFORE INSERT ON "
                     "my_locks\n"),
            std::string::npos)
      << all;
  EXPECT_EQ(statements.size(), 6u) << all;
}

}  // namespace
