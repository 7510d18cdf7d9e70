// The `baton` daemon as real processes: config and argument errors (exit 2, file and JSON path
// named), and three `baton run` nodes on one backend: one fires at a time, fences only go up,
// SIGTERM hands over within the poll interval, SIGKILL within the lease, the cadence carries on,
// and a leader that loses its backend stops its command before anyone else starts one.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <soci/soci.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/scheduler/cron.hpp"
#include "support/daemon.hpp"
#include "support/env.hpp"
#include "support/store_probe.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

using baton::test::count_of;
using baton::test::daemon_path;
using baton::test::json_string;
using baton::test::process;
using baton::test::read_file;
using baton::test::write_file;

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct result {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs `baton args...` to completion.
result run_baton(const std::vector<std::string>& args, milliseconds timeout = 20s) {
  static std::atomic<int> counter{0};
  const fs::path dir = baton::test::temp_dir("baton-cli");
  const auto n = std::to_string(++counter);
  std::vector<std::string> argv{daemon_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  process p(argv, dir / ("out" + n), dir / ("err" + n));
  result r;
  auto status = p.wait_exit(timeout);
  EXPECT_TRUE(status) << "baton did not exit within " << timeout.count() << " ms";
  r.status = status.value_or(-1);
  r.out = read_file(dir / ("out" + n));
  r.err = read_file(dir / ("err" + n));
  return r;
}

// ---------------------------------------------------------------------------------------------
// command line

TEST(daemon_cli, version_and_help) {
  auto v = run_baton({"--version"});
  EXPECT_EQ(v.status, 0);
  EXPECT_THAT(v.out, HasSubstr("baton 0."));
  auto h = run_baton({"--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_THAT(h.out, AllOf(HasSubstr("baton run"), HasSubstr("baton calendar")));
}

TEST(daemon_cli, bad_arguments_exit_2_naming_the_argument) {
  struct bad {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad> cases{
      {{}, "no command given"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"run"}, "--config FILE is required"},
      {{"validate", "--config"}, "--config needs a value"},
      {{"validate", "--config", "x.json", "--bogus"}, "unknown option '--bogus'"},
      {{"status", "--config", "x.json", "--count", "3"}, "belong to calendar"},
      {{"validate", "--config", "x.json", "--log-level", "loud"}, "--log-level: unknown level"},
      {{"calendar"}, "missing the cron expression"},
      {{"calendar", "0", "3", "*", "*", "*"}, "quote the expression"},
      {{"calendar", "0 3 * * *", "--count", "0"}, "--count: '0'"},
      {{"calendar", "0 25 * * *"}, "EXPR '0 25 * * *'"},
      {{"calendar", "0 3 * * *", "--time-zone", "Mars/Base"}, "--time-zone"},
      {{"calendar", "0 3 * * *", "--from", "yesterday"}, "--from: 'yesterday'"},
      // An expression beginning with '-' is a cron error, with or without "--" before it.
      {{"calendar", "-1 * * * *"}, "EXPR '-1 * * * *': cron field 1 (minute) '-1'"},
      {{"calendar", "--", "-1 * * * *"}, "EXPR '-1 * * * *': cron field 1 (minute) '-1'"},
      {{"calendar", "-x"}, "unknown option '-x' (put -- before an expression"},
  };
  for (const auto& c : cases) {
    auto r = run_baton(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << joined;
  }
}

TEST(daemon_cli, missing_config_file_exits_2_naming_it) {
  for (const char* command : {"run", "validate", "status"}) {
    auto r = run_baton({command, "--config", "/nonexistent/baton.json"});
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_THAT(r.err, AllOf(HasSubstr("/nonexistent/baton.json"), HasSubstr("cannot read")));
  }
}

TEST(daemon_cli, calendar_prints_the_next_fire_times_in_utc_and_the_time_zone) {
  auto r = run_baton({"calendar", "0 3 * * *", "--time-zone", "Europe/Berlin", "--from",
                      "2026-03-27T00:00:00Z", "--count", "3"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "2026-03-27T02:00:00Z  2026-03-27 03:00:00 CET (+01:00)\n"
            "2026-03-28T02:00:00Z  2026-03-28 03:00:00 CET (+01:00)\n"
            "2026-03-29T01:00:00Z  2026-03-29 03:00:00 CEST (+02:00)\n");
  auto plain = run_baton({"calendar", "*/15 * * * *", "--from", "2026-01-01T00:00:00Z"});
  EXPECT_EQ(plain.status, 0);
  EXPECT_THAT(plain.out, HasSubstr("2026-01-01T00:15:00Z\n2026-01-01T00:30:00Z\n"));
  EXPECT_EQ(std::count(plain.out.begin(), plain.out.end(), '\n'), 10);
}

TEST(daemon_cli, calendar_takes_the_expression_after_a_double_dash) {
  auto r =
      run_baton({"calendar", "--count", "2", "--from", "2026-01-01T00:00:00Z", "--", "0 3 * * *"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "2026-01-01T03:00:00Z\n2026-01-02T03:00:00Z\n");
}

TEST(daemon_cli, calendar_and_validate_warn_when_an_expression_never_fires) {
  auto r = run_baton({"calendar", "--", "0 0 30 2 *"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("warning: '0 0 30 2 *' can never fire"));

  const fs::path dir = baton::test::temp_dir("daemon-validate-never");
  write_file(dir / "baton.json", R"({
    "backend": {"type": "sqlite", "path": "state.db"},
    "schedules": [
      {"name": "ok", "cron": "0 3 * * *", "command": ["/bin/true"]},
      {"name": "never", "cron": "0 0 31 4,6,9,11 *", "command": ["/bin/true"]}
    ]})");
  auto v = run_baton({"validate", "--config", (dir / "baton.json").string()});
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_THAT(v.err, HasSubstr((dir / "baton.json").string() +
                               ": /schedules/1/cron: warning: '0 0 31 4,6,9,11 *' can never fire"));
  EXPECT_THAT(v.err, Not(HasSubstr("/schedules/0")));
  EXPECT_THAT(v.out, HasSubstr("next fires: none (never"));
}

TEST(daemon_cli, validate_prints_each_schedule_with_its_next_fire_times) {
  const fs::path dir = baton::test::temp_dir("daemon-validate");
  write_file(dir / "baton.json", R"({
    "backend": {"type": "sqlite", "path": "state.db"},
    "lease": {"ttl": "4s", "transition": "2s"},
    "schedules": [
      {"name": "beat", "every": "5s", "command": ["/bin/true"]},
      {"name": "report", "cron": "0 3 * * *", "time_zone": "Asia/Tokyo", "command": ["date"]}
    ]})");
  auto r = run_baton({"validate", "--config", (dir / "baton.json").string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("OK, 2 schedules"));
  EXPECT_THAT(r.out, HasSubstr((dir / "state.db").string()));
  EXPECT_THAT(r.out, AllOf(HasSubstr("beat"), HasSubstr("every 5s (fixed_rate)")));
  EXPECT_THAT(r.out, AllOf(HasSubstr("cron \"0 3 * * *\" in Asia/Tokyo"), HasSubstr("18:00:00Z"),
                           HasSubstr("03:00:00 JST (+09:00)")));
}

// validate names (never shows) the variables a schedule's jobs will not get: the ones the config
// references as ${NAME}, unless the schedule inherits the daemon's whole environment.
TEST(daemon_cli, validate_names_the_variables_withheld_from_the_jobs) {
  const fs::path dir = baton::test::temp_dir("daemon-validate-env");
  write_file(dir / "baton.json", R"({
    "backend": {"type": "sqlite", "path": "${BATON_TEST_DB_DIR}/state.db"},
    "schedules": [
      {"name": "plain", "every": "5s", "command": ["/bin/true"]},
      {"name": "secret", "every": "5s", "command": ["/bin/true", "${BATON_TEST_TOKEN}"]},
      {"name": "all", "every": "5s", "command": ["/bin/true"], "inherit_env": true}
    ]})");
  ASSERT_EQ(::setenv("BATON_TEST_DB_DIR", dir.c_str(), 1), 0);
  ASSERT_EQ(::setenv("BATON_TEST_TOKEN", "Tok3nValue", 1), 0);
  auto r = run_baton({"validate", "--config", (dir / "baton.json").string()});
  ::unsetenv("BATON_TEST_DB_DIR");
  ::unsetenv("BATON_TEST_TOKEN");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out,
                     "job env:    the daemon's without BATON_TEST_DB_DIR BATON_TEST_TOKEN "
                     "(referenced as ${NAME})"),
            2u)
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("job env:    the daemon's whole environment (inherit_env)"));
}

// ---------------------------------------------------------------------------------------------
// config errors through validate and run

struct bad_config {
  std::string name;
  std::string json;
  std::string expected;  // in stderr, after "<file>: "
};

std::string base_with(const std::string& schedule, const std::string& top = "") {
  return R"({"backend": {"type": "sqlite", "path": "x.db"})" + top + R"(, "schedules": [{)" +
         schedule + "}]}";
}

const std::string ok_schedule = R"("name": "a", "every": "1s", "command": ["/bin/true"])";

std::vector<bad_config> bad_configs() {
  return {
      {"syntax_error",
       "{\"backend\": {\"type\": \"sqlite\", \"path\": \"x.db\"},\n \"schedules\": [}",
       "line 2, column"},
      {"unknown_key", base_with(R"("name": "a", "evrey": "1s", "every": "1s", "command": ["x"])"),
       "/schedules/0/evrey: unknown key \"evrey\" (did you mean \"every\"?)"},
      {"wrong_type", base_with(R"("name": "a", "every": 5, "command": ["x"])"),
       "/schedules/0/every: expected a duration string"},
      {"bad_duration", base_with(R"("name": "a", "every": "5x", "command": ["x"])"),
       "/schedules/0/every: invalid duration \"5x\" (use 250ms, 10s, 5m, 2h, 1d)"},
      {"bad_cron", base_with(R"("name": "a", "cron": "61 * * * *", "command": ["x"])"),
       "/schedules/0/cron: "},
      {"unknown_time_zone",
       base_with(R"("name": "a", "cron": "0 3 * * *", "time_zone": "Mars/Base", "command": ["x"])"),
       "/schedules/0/time_zone: "},
      {"duplicate_name",
       R"({"backend": {"type": "sqlite", "path": "x.db"}, "schedules": [)"
       R"({"name": "a", "every": "1s", "command": ["x"]}, {"name": "a", "every": "2s", "command": ["x"]}]})",
       "/schedules/1/name: duplicate schedule name \"a\""},
      {"invalid_name", base_with(R"("name": "a b", "every": "1s", "command": ["x"])"),
       "/schedules/0/name: invalid schedule name \"a b\""},
      {"empty_command", base_with(R"("name": "a", "every": "1s", "command": [])"),
       "/schedules/0/command: is empty"},
      {"missing_backend", R"({"schedules": [{)" + ok_schedule + "}]}", "/backend: missing"},
      {"unknown_backend",
       R"({"backend": {"type": "oracle"}, "schedules": [{)" + ok_schedule + "}]}",
       "/backend/type: unknown backend type \"oracle\""},
      {"missing_name", base_with(R"("every": "1s", "command": ["x"])"),
       "/schedules/0/name: missing"},
      {"unset_variable",
       R"({"backend": {"type": "sqlite", "path": "${BATON_TEST_SURELY_UNSET}"}, "schedules": [{)" +
           ok_schedule + "}]}",
       "/backend/path: environment variable BATON_TEST_SURELY_UNSET is not set"},
      {"lease_cross_field",
       base_with(ok_schedule, R"(, "lease": {"ttl": "1s", "retry_period": "2s"})"),
       "/lease/retry_period: retry_period (2s) must be less than ttl (1s)"},
      {"mode_with_cron",
       base_with(R"("name": "a", "cron": "* * * * *", "mode": "fixed_delay", "command": ["x"])"),
       "/schedules/0/mode: \"mode\" applies only to \"every\" schedules"},
      {"kill_grace_beyond_stop_grace",
       base_with(ok_schedule, R"(, "lease": {"stop_grace": "1s"}, "kill_grace": "5s")"),
       "/kill_grace: kill_grace (5s) must not exceed the lease's stop_grace (1s)"},
      {"unknown_user", base_with(ok_schedule + R"(, "user": "baton-no-such-user")"),
       "/schedules/0/user: user 'baton-no-such-user': no such user"},
      {"unknown_group", base_with(ok_schedule + R"(, "group": "baton-no-such-group")"),
       "/schedules/0/group: group 'baton-no-such-group': no such group"},
      {"sqlite_temp_table",
       R"({"backend": {"type": "sqlite", "path": "x.db", "table": "temp.baton_mutex"}, )"
       R"("schedules": [{)" +
           ok_schedule + "}]}",
       "/backend/table: sqlite backend: parameter 'table': 'temp.baton_mutex' is a temporary "
       "table, private to one connection"},
      {"sqlite_memory",
       R"({"backend": {"type": "sqlite", "path": ":memory:"}, "schedules": [{)" + ok_schedule +
           "}]}",
       "/backend/path: sqlite backend: parameter 'path': ':memory:' is an in-memory database"},
      {"sqlite_memory_uri",
       R"({"backend": {"type": "sqlite", "path": "file:x.db?mode=memory&cache=shared"}, )"
       R"("schedules": [{)" +
           ok_schedule + "}]}",
       "/backend/path: sqlite backend: parameter 'path': 'file:x.db?mode=memory&cache=shared' is "
       "an in-memory database"},
      {"name_dot", base_with(R"("name": ".", "every": "1s", "command": ["x"])"),
       "/schedules/0/name: invalid schedule name \".\": mutex name '.' is reserved"},
      {"name_dot_dot", base_with(R"("name": "..", "every": "1s", "command": ["x"])"),
       "/schedules/0/name: invalid schedule name \"..\": mutex name '..' is reserved"},
      {"missing_working_directory",
       base_with(ok_schedule + R"(, "working_directory": "/nonexistent-baton-dir")"),
       "/schedules/0/working_directory: \"/nonexistent-baton-dir\" is not an existing directory"},
      // Issue 14: SIGSEGV (recursion in the serializer building the message).
      {"deep_nesting",
       R"({"backend": {"type": "sqlite", "path": "x.db", "pool_size": )" +
           std::string(100000, '[') + std::string(100000, ']') + R"(}, "schedules": [{)" +
           ok_schedule + "}]}",
       "/backend/pool_size/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/"
       "0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested deeper than 64 levels"},
      // Issue 14: "[json.exception.out_of_range.406] ...", exit 1, no path.
      {"number_out_of_range", base_with(ok_schedule, R"(, "kill_grace": 1e400)"),
       "/kill_grace: number out of range: 1e400 at line 1, column 63"},
  };
}

class daemon_config_error : public ::testing::TestWithParam<bad_config> {};

TEST_P(daemon_config_error, validate_and_run_exit_2_naming_file_and_json_path) {
  const auto& c = GetParam();
  const fs::path dir = baton::test::temp_dir("daemon-bad-config");
  const fs::path file = dir / (c.name + ".json");
  write_file(file, c.json);
  for (const char* command : {"validate", "run"}) {
    auto r = run_baton({command, "--config", file.string()}, 15s);
    EXPECT_EQ(r.status, 2) << command << " stderr:\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(file.string() + ": ")) << command;
    EXPECT_THAT(r.err, HasSubstr(c.expected)) << command;
    EXPECT_THAT(r.out, Not(HasSubstr("OK"))) << command;
  }
}

INSTANTIATE_TEST_SUITE_P(all, daemon_config_error, ::testing::ValuesIn(bad_configs()),
                         [](const auto& info) { return info.param.name; });

// validate and run check against the same lease defaults: a ZooKeeper lease follows its
// session_timeout (ttl 1s, transition 2s for 3s), so a stop_grace of 2.5s fails both, with the
// same message, before any server is contacted (nothing listens on port 1). So does an unknown
// parameter, which the ZooKeeper backend used to ignore with a warning.
// Issue 14: `--config /dev/zero` grew to 2.1 GB in 15 s; a directory is named as such.
TEST(daemon_config_error_input, dev_zero_and_a_directory_exit_2_at_once) {
  const fs::path dir = baton::test::temp_dir("daemon-input");
  for (const char* command : {"validate", "run", "status"}) {
    auto zero = run_baton({command, "--config", "/dev/zero"}, 15s);
    EXPECT_EQ(zero.status, 2) << command << " stderr:\n" << zero.err;
    EXPECT_EQ(
        zero.err,
        "/dev/zero: is larger than 4 MiB, the limit for a config file\n1 error in /dev/zero\n")
        << command;
    auto directory = run_baton({command, "--config", dir.string()}, 15s);
    EXPECT_EQ(directory.status, 2) << command << " stderr:\n" << directory.err;
    EXPECT_THAT(directory.err, HasSubstr(dir.string() + ": is a directory, not a config file"));
  }
}

// Issue 14: a ${VAR} that is not UTF-8 ended with "[json.exception.type_error.316] ...", exit 1,
// no path: in validate when a message quoted it, in run for any value (the schedule's
// fingerprint). An argument of any bytes is valid; a bad value is an error at its path.
TEST(daemon_config_error_input, variables_that_are_not_utf8) {
  const fs::path dir = baton::test::temp_dir("daemon-utf8");
  ASSERT_EQ(::setenv("BATON_TEST_NOT_UTF8", "\xff\xfe", 1), 0);
  write_file(dir / "bad.json", base_with(R"("name": "a", "every": "${BATON_TEST_NOT_UTF8}",
                                           "command": ["/bin/true"])"));
  write_file(dir / "ok.json", R"({"backend": {"type": "sqlite", "path": "x.db"}, "schedules": [
      {"name": "a", "every": "1h", "command": ["/bin/echo", "${BATON_TEST_NOT_UTF8}"]}]})");
  const std::string shown = "\"\xEF\xBF\xBD\xEF\xBF\xBD\"";  // U+FFFD twice, quoted
  for (const char* command : {"validate", "run"}) {
    auto r = run_baton({command, "--config", (dir / "bad.json").string()}, 15s);
    EXPECT_EQ(r.status, 2) << command << " stderr:\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr((dir / "bad.json").string() +
                                 ": /schedules/0/every: invalid duration " + shown));
  }
  auto v = run_baton({"validate", "--config", (dir / "ok.json").string()});
  EXPECT_EQ(v.status, 0) << v.err;
  // run starts (it took the fingerprint) and fires; SIGTERM ends it normally.
  process p({daemon_path(), "run", "--config", (dir / "ok.json").string()}, dir / "run.out",
            dir / "run.err");
  EXPECT_TRUE(baton::test::wait_until(
      [&] {
        return read_file(dir / "run.err").find("[a] exited with status 0") != std::string::npos;
      },
      15s))
      << read_file(dir / "run.err");
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(15s), 0) << read_file(dir / "run.err");
  ::unsetenv("BATON_TEST_NOT_UTF8");
}

TEST(daemon_config_error_backend, validate_and_run_agree_on_a_zookeeper_lease_and_unknown_keys) {
  const fs::path dir = baton::test::temp_dir("daemon-validate-run");
  const std::string schedules =
      R"("schedules": [{"name": "a", "every": "5s", "command": ["/bin/true"]}]})";
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"backend": {"type": "zookeeper", "hosts": "127.0.0.1:1", "session_timeout": "3s"},
           "lease": {"stop_grace": "2500ms"}, )" +
           schedules,
       "/lease/stop_grace: stop_grace (2500ms) must be less than transition - drift margin (2s - "
       "60ms = 1940ms)"},
      {R"({"backend": {"type": "zookeeper", "hosts": "127.0.0.1:1", "sesion_timeout": "3s"}, )" +
           schedules,
       "/backend/sesion_timeout: unknown key \"sesion_timeout\" (did you mean "
       "\"session_timeout\"?)"},
  };
  for (const auto& [json, expected] : cases) {
    write_file(dir / "baton.json", json);
    auto v = run_baton({"validate", "--config", (dir / "baton.json").string()}, 15s);
    auto r = run_baton({"run", "--config", (dir / "baton.json").string()}, 15s);
    EXPECT_EQ(v.status, 2) << v.err;
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_THAT(v.err, HasSubstr((dir / "baton.json").string() + ": " + expected));
    EXPECT_EQ(v.err, r.err);
  }
}

// The memory backend is allowed (one process, trying things out) but never quietly: validate
// warns on stderr, run logs it at warn level before it starts.
TEST(daemon_memory_backend, validate_and_run_say_it_is_single_process_only) {
  const fs::path dir = baton::test::temp_dir("daemon-memory");
  const fs::path file = dir / "baton.json";
  write_file(file, R"({"backend": {"type": "memory"},
                 "schedules": [{"name": "a", "every": "1h", "command": ["/bin/true"]}]})");
  auto v = run_baton({"validate", "--config", file.string()});
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_THAT(v.err, HasSubstr(file.string() + ": /backend/type: warning: the memory backend "
                                               "keeps leases in this process only"));
  process run({daemon_path(), "run", "--config", file.string()}, dir / "out", dir / "err");
  EXPECT_TRUE(baton::test::wait_until(
      [&] { return read_file(dir / "err").find("SINGLE PROCESS ONLY") != std::string::npos; }, 10s))
      << read_file(dir / "err");
  EXPECT_THAT(read_file(dir / "err"), HasSubstr("no exclusion between processes"));
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait_exit(10s), std::optional<int>(0)) << read_file(dir / "err");
}

TEST(daemon_config_error_backend, run_reports_a_parameter_the_backend_rejects_with_exit_2) {
  const fs::path dir = baton::test::temp_dir("daemon-bad-backend");
  write_file(dir / "baton.json",
             R"({"backend": {"type": "sqlite", "path": "/nonexistent-dir/x.db"},
                 "schedules": [{"name": "a", "every": "1s", "command": ["/bin/true"]}]})");
  auto r = run_baton({"run", "--config", (dir / "baton.json").string()});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, AllOf(HasSubstr((dir / "baton.json").string() + ": /backend: "),
                           HasSubstr("/nonexistent-dir")));
}

TEST(daemon_status, unreachable_backend_fails_with_1_and_a_clear_message) {
  // Port 1 on loopback: nothing listens there, connections are refused at once.
  const std::map<std::string, std::string> unreachable{
      {"postgresql",
       R"({"type": "postgresql", "connection": "dbname=x user=x host=127.0.0.1 port=1"})"},
      {"mysql", R"({"type": "mysql", "connection": "db=x user=x host=127.0.0.1 port=1"})"},
      {"redis", R"({"type": "redis", "url": "redis://127.0.0.1:1"})"},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "127.0.0.1:1", "session_timeout": "2s"})"},
  };
  int checked = 0;
  for (const auto& type : baton::available_backends()) {
    auto it = unreachable.find(type);
    if (it == unreachable.end()) continue;  // sqlite, memory: no server
    SCOPED_TRACE(type);
    const fs::path dir = baton::test::temp_dir("daemon-status-down");
    write_file(dir / "baton.json", R"({"backend": )" + it->second + R"(,
                 "schedules": [{"name": "a", "every": "1s", "command": ["/bin/true"]}]})");
    auto r = run_baton({"status", "--config", (dir / "baton.json").string()}, 60s);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_THAT(r.err, AllOf(HasSubstr("cannot read schedule 'a' from the " + type + " backend"),
                             HasSubstr("connection")));
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no networked backend in this build";
}

// `status` only reads: on a store where nothing has run yet it creates nothing (no SQLite file,
// table, key or ZooKeeper node) and says so where it can tell.
TEST(daemon_status, creates_and_changes_nothing_on_a_store_where_nothing_ran_yet) {
  const std::string unique = std::to_string(::getpid()) + "_" + std::to_string(now_ns() % 1000000);
  const fs::path dir = baton::test::temp_dir("daemon-status-fresh");
  std::vector<baton::backend_config> stores;
  for (const auto& type : baton::available_backends()) {
    if (type == "memory") continue;
    auto backend = baton::test::backend_config_for(type);
    if (type == "sqlite") {
      backend.params["path"] = (dir / "missing.db").string();
      stores.push_back(backend);
      // An empty file is an SQLite database without the table.
      backend.params["path"] = (dir / "empty.db").string();
      write_file(dir / "empty.db", "");
    } else if (type == "postgresql" || type == "mysql") {
      backend.params["table"] = "baton_status_" + unique;
    } else if (type == "redis") {
      backend.params["url"] += "/9";  // a database no other test uses
    } else if (type == "zookeeper") {
      backend.params["root"] = "/baton-status-" + unique;
    }
    stores.push_back(backend);
  }
  for (const auto& backend : stores) {
    std::string json = R"({"backend": {"type": )" + json_string(backend.type);
    for (const auto& [key, value] : backend.params)
      json += ", " + json_string(key) + ": " + json_string(value);
    write_file(dir / "baton.json", json + R"(},
                 "schedules": [{"name": "a", "every": "1s", "command": ["/bin/true"]}]})");
    const auto before = baton::test::store_footprint(backend);
    SCOPED_TRACE(before);
    auto r = run_baton({"status", "--config", (dir / "baton.json").string()}, 60s);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("owner:      none (never held)"));
    EXPECT_EQ(baton::test::store_footprint(backend), before);
    EXPECT_THAT(before, Not(AnyOf(HasSubstr("exists"), HasSubstr("rows"))));
    // The SQL stores say what is missing; on Redis and ZooKeeper nothing stored means unowned.
    const auto table = backend.params.count("table") ? backend.params.at("table") : "baton_mutex";
    if (backend.type == "sqlite" && before.find("file: absent") != std::string::npos) {
      EXPECT_THAT(r.out, HasSubstr("no database at " + backend.params.at("path") +
                                   " (nothing has run yet); every schedule is unowned"));
    } else if (backend.type != "redis" && backend.type != "zookeeper") {
      EXPECT_THAT(r.out, HasSubstr("no table '" + table + "'"));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// secrets: no password in validate, status or run's log (startup, connect errors, retries),
// against the test servers and their users with awkward passwords (scripts/servers.sh)

// One config of the table. The rows are built in the test, from the servers' ports.
struct secret_row {
  std::string backend;               // the backend JSON object
  std::string password;              // as configured, decoded; also a command argument
  std::vector<std::string> secrets;  // none of these may appear in any output
  bool connects = true;              // the credentials are right: run fires the job
  std::string failure{};             // else: what run's log says on every failed attempt
};

secret_row secret_row_for(const std::string& name) {
  using baton::test::require_env;
  const std::string pg = "127.0.0.1 port=" + require_env("BATON_TEST_POSTGRES_PORT");
  const std::string pg_uri = "127.0.0.1:" + require_env("BATON_TEST_POSTGRES_PORT");
  const std::string my = "127.0.0.1 port=" + require_env("BATON_TEST_MYSQL_PORT");
  const std::string redis = "127.0.0.1:" + require_env("BATON_TEST_REDIS_AUTH_PORT");
  auto sql = [](const std::string& type, const std::string& connection) {
    return R"({"type": ")" + type + R"(", "connection": )" + json_string(connection) + "}";
  };
  auto url = [](const std::string& u) {
    return R"({"type": "redis", "url": )" + json_string(u) + "}";
  };
  // The servers' baton_secret users: Pg'Zq9 \x@:/, My'Zq8 \x@:/, Rd/Zq6@x:y.
  if (name == "pg_keyword_string")
    return {sql("postgresql",
                "host=" + pg + R"( dbname=baton_test user=baton_secret password='Pg\'Zq9 \\x@:/')"),
            R"(Pg'Zq9 \x@:/)",
            {"Zq9"}};
  if (name == "pg_uri")
    return {sql("postgresql",
                "postgresql://baton_secret:Pg%27Zq9%20%5Cx%40%3A%2F@" + pg_uri + "/baton_test"),
            R"(Pg'Zq9 \x@:/)",
            {"Zq9"}};
  if (name == "pg_wrong_password")
    return {
        sql("postgresql",
            "host=" + pg + R"( dbname=baton_test user=baton_secret password='Wrong\'Secret77')"),
        "Wrong'Secret77",
        {"Secret77"},
        false,
        "password authentication failed"};
  if (name == "pg_unreachable")
    return {sql("postgresql", "postgresql://baton_secret:Unreach6Zq@127.0.0.1:" +
                                  std::to_string(baton::test::unused_loopback_port()) + "/x"),
            "Unreach6Zq",
            {"Unreach6Zq"},
            false,
            "Connection refused"};
  if (name == "mysql_pass")
    return {sql("mysql", R"(db=baton_test user=baton_secret pass='My\'Zq8 \\x@:/' host=)" + my),
            R"(My'Zq8 \x@:/)",
            {"Zq8"}};
  if (name == "mysql_wrong_password")
    return {sql("mysql", "db=baton_test user=baton_secret pass=Wr0ngZq7 host=" + my),
            "Wr0ngZq7",
            {"Wr0ngZq7"},
            false,
            "Access denied"};
  if (name == "redis_raw_slash_at_colon")
    return {url("redis://baton_secret:Rd/Zq6@x:y@" + redis), "Rd/Zq6@x:y", {"Zq6"}};
  if (name == "redis_percent_encoded")
    return {url("redis://baton_secret:Rd%2FZq6%40x%3Ay@" + redis), "Rd/Zq6@x:y", {"Zq6"}};
  if (name == "redis_wrong_password")
    return {url("redis://baton:Us3r/Pass@" + redis), "Us3r/Pass", {"Us3r"}, false, "WRONGPASS"};
  if (name == "zookeeper_digest")  // its own root: the digest ACL of its folders shuts others out
    return {R"({"type": "zookeeper", "hosts": )" +
                json_string(require_env("BATON_TEST_ZOOKEEPER")) +
                R"(, "session_timeout": "2s", "root": )" +
                json_string("/baton-secrets-" + std::to_string(::getpid())) +
                R"(, "username": "baton", "password": "Zk:Zq5@x"})",
            "Zk:Zq5@x",
            {"Zq5"}};
  ADD_FAILURE() << "no row " << name;
  return {};
}

class daemon_secrets : public ::testing::TestWithParam<std::string> {};

TEST_P(daemon_secrets, appear_in_no_output_of_validate_status_and_run) {
  const auto row = secret_row_for(GetParam());
  const fs::path dir = baton::test::temp_dir("daemon-secrets");
  const std::string schedule = "secrets-" + GetParam() + "-" + std::to_string(::getpid());
  write_file(dir / "baton.json", R"({"backend": )" + row.backend + R"(,
      "schedules": [{"name": )" + json_string(schedule) +
                                     R"(, "every": "1s",
                     "command": ["/bin/sh", "-c", "echo ran >> ran.log", )" +
                                     json_string(row.password) + R"(],
                     "working_directory": )" +
                                     json_string(dir.string()) + "}]}");
  const std::string config = (dir / "baton.json").string();
  // Every output baton makes of this config, --json included.
  std::vector<std::pair<std::string, std::string>> outputs;

  auto v = run_baton({"validate", "--config", config});
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_THAT(v.out, HasSubstr("***"));
  outputs.emplace_back("validate", v.out + v.err);
  auto vj = run_baton({"validate", "--config", config, "--json"});
  EXPECT_EQ(vj.status, 0) << vj.err;
  EXPECT_THAT(vj.out, HasSubstr("***"));
  outputs.emplace_back("validate --json", vj.out + vj.err);

  {
    process node({daemon_path(), "run", "--config", config, "--log-level", "debug"}, dir / "out",
                 dir / "err");
    auto attempts = [&] {
      const std::string log = read_file(dir / "err");
      std::size_t n = 0;
      for (auto p = log.find(row.failure); p != std::string::npos; p = log.find(row.failure, p + 1))
        ++n;
      return n;
    };
    if (row.connects)
      EXPECT_TRUE(baton::test::wait_until([&] { return fs::exists(dir / "ran.log"); }, 30s))
          << read_file(dir / "err");
    else  // a failed connect and its retry
      EXPECT_TRUE(baton::test::wait_until([&] { return attempts() >= 2; }, 30s))
          << read_file(dir / "err");
    node.signal(SIGTERM);
    EXPECT_EQ(node.wait_exit(30s), std::optional<int>(0));
  }
  outputs.emplace_back("run", read_file(dir / "out") + read_file(dir / "err"));

  auto s = run_baton({"status", "--config", config}, 60s);
  EXPECT_EQ(s.status, row.connects ? 0 : 1) << s.err;
  outputs.emplace_back("status", s.out + s.err);
  auto sj = run_baton({"status", "--config", config, "--json"}, 60s);
  EXPECT_EQ(sj.status, row.connects ? 0 : 1) << sj.err;
  outputs.emplace_back("status --json", sj.out + sj.err);

  for (const auto& [command, text] : outputs)
    for (const auto& secret : row.secrets)
      EXPECT_THAT(text, Not(HasSubstr(secret))) << command << " printed the secret:\n" << text;
}

INSTANTIATE_TEST_SUITE_P(connection_strings, daemon_secrets,
                         ::testing::Values("pg_keyword_string", "pg_uri", "pg_wrong_password",
                                           "pg_unreachable", "mysql_pass", "mysql_wrong_password",
                                           "redis_raw_slash_at_colon", "redis_percent_encoded",
                                           "redis_wrong_password", "zookeeper_digest"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// signals

// A `baton run` node in `dir` (log: dir/err) whose one schedule runs a job that ignores SIGTERM
// (and so does its sleep), so that a graceful stop waits its `kill_grace`. Once the job runs
// (its pid in `job`) it sends the node `first` and returns when the daemon has taken it (two
// signals sent at once would merge into one). `job` is -1 if any of that did not happen.
std::unique_ptr<process> stopping_stubborn_node(const fs::path& dir, const std::string& kill_grace,
                                                int first, pid_t& job) {
  write_file(dir / "stubborn.sh", "#!/bin/sh\ntrap '' TERM\necho \"pid $$\" >> \"$1\"\nsleep 30\n",
             true);
  write_file(dir / "baton.json",
             R"({"backend": {"type": "sqlite", "path": "s.db"},
                 "lease": {"ttl": "5s", "transition": "5s", "stop_grace": "4s"},
                 "kill_grace": )" +
                 json_string(kill_grace) + R"(,
                 "schedules": [{"name": "stubborn", "every": "1s",
                                "command": ["./stubborn.sh", )" +
                 json_string((dir / "jobs.log").string()) + R"(]}]})");
  auto node = std::make_unique<process>(
      std::vector<std::string>{daemon_path(), "run", "--config", (dir / "baton.json").string()},
      dir / "out", dir / "err");
  job = -1;
  if (!baton::test::wait_until(
          [&] { return read_file(dir / "jobs.log").find("pid ") != std::string::npos; }, 20s))
    return node;
  node->signal(first);
  if (baton::test::wait_until(
          [&] { return read_file(dir / "err").find("received SIG") != std::string::npos; }, 5s))
    job = std::stoi(read_file(dir / "jobs.log").substr(4));
  return node;
}

// A SIGINT while stopping (Ctrl-C pressed again), whether SIGTERM or SIGINT began the stop.
TEST(daemon_signals, sigint_while_stopping_exits_at_once_and_the_job_dies_within_kill_grace) {
  for (const int first : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(first == SIGTERM ? "SIGTERM, then SIGINT" : "SIGINT twice");
    const fs::path dir = baton::test::temp_dir("daemon-second-signal");
    pid_t job = -1;
    auto started = stopping_stubborn_node(dir, "4s", first, job);
    process& node = *started;
    ASSERT_GT(job, 0) << read_file(dir / "err");
    const auto second = std::chrono::steady_clock::now();
    node.signal(SIGINT);
    auto status = node.wait_exit(3s);
    ASSERT_TRUE(status) << read_file(dir / "err");
    EXPECT_EQ(*status, 128 + SIGINT);
    EXPECT_LT(std::chrono::steady_clock::now() - second, 2s);
    // The job's supervisor sees the daemon gone: SIGTERM (ignored), SIGKILL after kill_grace.
    auto dead = [&] {
      std::ifstream stat("/proc/" + std::to_string(job) + "/stat");
      std::string line;
      if (!std::getline(stat, line)) return true;
      auto close = line.rfind(')');
      return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
    };
    EXPECT_TRUE(baton::test::wait_until(dead, 4s + 1s + 500ms))
        << "job pid " << job << " outlived the daemon by more than kill_grace + 1 s";
    EXPECT_GE(std::chrono::steady_clock::now() - second, 3500ms) << "killed before kill_grace";
  }
}

// GNU timeout (and systemd) may deliver SIGTERM twice: the second, milliseconds after the first,
// must not turn the graceful stop into an exit without releasing.
TEST(daemon_signals, sigterm_twice_within_ms_still_releases_and_exits_0) {
  const fs::path dir = baton::test::temp_dir("daemon-sigterm-twice");
  // The job ignores SIGTERM, so the stop takes its kill_grace (2s): the second SIGTERM surely
  // comes while stopping.
  pid_t job = -1;
  auto started = stopping_stubborn_node(dir, "2s", SIGTERM, job);
  process& node = *started;
  ASSERT_GT(job, 0) << read_file(dir / "err");
  node.signal(SIGTERM);
  auto status = node.wait_exit(15s);
  const auto log = read_file(dir / "err");
  ASSERT_TRUE(status) << log;
  EXPECT_EQ(*status, 0) << log;
  EXPECT_THAT(log, AllOf(HasSubstr("the same stop, delivered twice"), HasSubstr("stopped"),
                         Not(HasSubstr("exiting at once"))));
  // Released: the mutex is free for the next node at once.
  auto r = run_baton({"status", "--config", (dir / "baton.json").string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("owner:      none (last fence 1)"));
}

// A graceful stop that takes longer than stop_timeout (its release waits for a database that
// the test keeps locked) gives up: exit 1, and the log says why.
TEST(daemon_signals, a_stop_that_outlasts_stop_timeout_gives_up_with_exit_1) {
  const fs::path dir = baton::test::temp_dir("daemon-stop-timeout");
  write_file(dir / "baton.json",
             R"({"backend": {"type": "sqlite", "path": "s.db", "statement_timeout": "4s"},
                 "kill_grace": "500ms", "stop_timeout": "2s",
                 "schedules": [{"name": "once", "every": "1h", "command": ["/bin/true"]}]})");
  process node({daemon_path(), "run", "--config", (dir / "baton.json").string()}, dir / "out",
               dir / "err");
  ASSERT_TRUE(baton::test::wait_until(
      [&] { return read_file(dir / "err").find("finished in") != std::string::npos; }, 20s))
      << read_file(dir / "err");
  soci::session admin("sqlite3", "db=" + (dir / "s.db").string() + " timeout=5");
  admin << "BEGIN IMMEDIATE";  // the release's UPDATE now waits statement_timeout (4s)
  const auto sent = std::chrono::steady_clock::now();
  node.signal(SIGTERM);
  auto status = node.wait_exit(10s);
  const auto took = std::chrono::steady_clock::now() - sent;
  admin << "ROLLBACK";
  const auto log = read_file(dir / "err");
  ASSERT_TRUE(status) << log;
  EXPECT_EQ(*status, 1) << log;
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 3500ms) << "waited for the release rather than giving up at stop_timeout";
  EXPECT_THAT(log, HasSubstr("stop_timeout 2s passed since SIGTERM: exiting without waiting "
                             "longer"));
}

// ---------------------------------------------------------------------------------------------
// several nodes on one backend

// The server scripts/server-ctl.sh knows a backend type by.
std::string server_of(const std::string& type) {
  if (type == "postgresql") return "postgres";
  if (type == "mysql") return "mariadb";
  return type;  // redis, zookeeper
}

// Every backend this build has, except the in-process memory one.
std::vector<std::string> cluster_backends() {
  std::vector<std::string> out;
  for (const auto& t : baton::available_backends())
    if (t != "memory") out.push_back(t);
  return out;
}

// One line the job script wrote.
struct job_event {
  std::string kind;  // start, run (finished), terminated
  std::uint64_t fence = 0;
  long long start_ns = 0;  // start/run
  long long end_ns = 0;    // run: end; terminated: when the TERM trap ran
  std::string node;
  std::string fire_time;
};

std::vector<job_event> read_events(const fs::path& log) {
  std::vector<job_event> events;
  std::istringstream in(read_file(log));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    job_event e;
    fields >> e.kind >> e.fence;
    if (e.kind == "start")
      fields >> e.start_ns >> e.node >> e.fire_time;
    else if (e.kind == "run")
      fields >> e.start_ns >> e.end_ns >> e.node >> e.fire_time;
    else if (e.kind == "terminated")
      fields >> e.end_ns >> e.node;
    else
      continue;
    if (fields.fail()) continue;  // a line being written
    events.push_back(e);
  }
  return events;
}

// One run: [start, end] on `node` under `fence`; end is max() while unknown.
struct interval {
  std::uint64_t fence;
  long long start;
  long long end;
  std::string node;
  bool terminated = false;
};

std::vector<interval> intervals_of(const std::vector<job_event>& events,
                                   const std::map<std::string, long long>& killed_at) {
  std::vector<interval> out;
  for (const auto& e : events) {
    if (e.kind != "start") continue;
    interval i{e.fence, e.start_ns, std::numeric_limits<long long>::max(), e.node};
    for (const auto& f : events) {
      if (f.node != e.node || f.fence != e.fence) continue;
      if (f.kind == "run" && f.start_ns == e.start_ns) i.end = f.end_ns;
      if (f.kind == "terminated" && f.end_ns >= e.start_ns && f.end_ns < i.end)
        i.end = f.end_ns, i.terminated = true;
    }
    if (auto k = killed_at.find(e.node);
        k != killed_at.end() && i.end > k->second && e.start_ns < k->second)
      i.end = k->second;  // died with its daemon (SIGKILL)
    out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return out;
}

// The time of the first daemon log line containing `text`, in ns since the epoch.
std::optional<long long> log_time(const fs::path& log, const std::string& text) {
  std::istringstream in(read_file(log));
  for (std::string line; std::getline(in, line);) {
    if (line.find(text) == std::string::npos) continue;
    auto t = baton::parse_rfc3339(line.substr(0, line.find(' ')));
    if (!t) continue;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t->time_since_epoch()).count();
  }
  return std::nullopt;
}

double ms(long long ns) { return static_cast<double>(ns) / 1e6; }

// Three `baton run` nodes sharing one backend and one job log.
class cluster {
 public:
  static constexpr milliseconds ttl{1000};
  static constexpr milliseconds transition{1000};
  static constexpr milliseconds poll{100};
  static constexpr milliseconds period{500};

  /// `under_sh`: the command is a `sh -c` wrapper around job.sh (job.sh is a grandchild).
  cluster(const std::string& type, const std::string& job_seconds, bool under_sh = false)
      : type_(type) {
    static std::atomic<int> counter{0};
    dir_ = baton::test::temp_dir("daemon-cluster-" + type);
    schedule_ =
        "daemon-" + type + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    backend_ = baton::test::backend_config_for(type);
    write_file(dir_ / "job.sh",
               "#!/bin/sh\n"
               "# job.sh LOG NODE SECONDS: logs start, then run (end) or terminated (SIGTERM)\n"
               "log=\"$1\"; node=\"$2\"\n"
               "start=$(date +%s%N)\n"
               "trap 'echo \"terminated $BATON_FENCING_TOKEN $(date +%s%N) $node\" >> \"$log\"; "
               "exit 143' TERM\n"
               "echo \"start $BATON_FENCING_TOKEN $start $node $BATON_FIRE_TIME\" >> \"$log\"\n"
               "sleep \"$3\" & wait $!\n"
               "end=$(date +%s%N)\n"
               "echo \"run $BATON_FENCING_TOKEN $start $end $node $BATON_FIRE_TIME\" >> \"$log\"\n",
               true);
    std::string backend = "{\"type\": " + json_string(type);
    for (const auto& [k, v] : backend_.params)
      backend += ", " + json_string(k) + ": " + json_string(v);
    backend += "}";
    for (int n = 1; n <= 3; ++n) {
      const std::string node = "n" + std::to_string(n);
      write_file(dir_ / (node + ".json"),
                 "{\"backend\": " + backend +
                     ",\n \"lease\": {\"ttl\": \"1s\", \"transition\": \"1s\", "
                     "\"retry_period\": \"200ms\", \"poll_interval\": \"100ms\"},\n"
                     " \"log_level\": \"debug\",\n"
                     " \"schedules\": [{\"name\": " +
                     json_string(schedule_) + ", \"every\": \"500ms\", \"command\": [" +
                     (under_sh ? "\"/bin/sh\", \"-c\", \"\\\"$0\\\" \\\"$1\\\" \\\"$2\\\" "
                                 "\\\"$3\\\"; true\", " +
                                     json_string((dir_ / "job.sh").string()) + ", "
                               : std::string("\"./job.sh\", ")) +
                     json_string(log().string()) + ", " + json_string(node) + ", " +
                     json_string(job_seconds) + "]}]}\n");
    }
  }

  void start_all() {
    for (int n = 1; n <= 3; ++n) start("n" + std::to_string(n));
  }
  void start(const std::string& node) {
    nodes_.emplace(node, std::make_unique<process>(
                             std::vector<std::string>{daemon_path(), "run", "--config",
                                                      (dir_ / (node + ".json")).string()},
                             dir_ / (node + ".out"), daemon_log(node)));
  }
  process& node(const std::string& name) { return *nodes_.at(name); }
  fs::path daemon_log(const std::string& node) const { return dir_ / (node + ".log"); }
  fs::path log() const { return dir_ / "jobs.log"; }
  const std::string& schedule() const { return schedule_; }
  const fs::path& dir() const { return dir_; }
  const baton::backend_config& backend() const { return backend_; }
  std::vector<job_event> events() const { return read_events(log()); }

  std::size_t finished_runs(const std::string& node = "", long long after_ns = 0) const {
    std::size_t n = 0;
    for (const auto& e : events())
      if (e.kind == "run" && (node.empty() || e.node == node) && e.start_ns > after_ns) ++n;
    return n;
  }
  /// The node that finished the latest run.
  std::string leader() const {
    std::string who;
    for (const auto& e : events())
      if (e.kind == "run") who = e.node;
    return who;
  }
  /// Waits for `count` finished runs by a node other than `not_node` that started after `after`.
  bool wait_runs_elsewhere(const std::string& not_node, long long after, std::size_t count,
                           milliseconds timeout) const {
    return baton::test::wait_until(
        [&] {
          std::size_t n = 0;
          for (const auto& e : events())
            if (e.kind == "run" && e.node != not_node && e.start_ns > after) ++n;
          return n >= count;
        },
        timeout);
  }
  std::string diagnostics() const {
    std::string out = "job log:\n" + read_file(log());
    for (const auto& [name, p] : nodes_) {
      auto text = read_file(daemon_log(name));
      if (text.size() > 6000) text = "..." + text.substr(text.size() - 6000);
      out += "\n--- " + name + " ---\n" + text;
    }
    return out;
  }

 private:
  std::string type_;
  fs::path dir_;
  std::string schedule_;
  baton::backend_config backend_;
  std::map<std::string, std::unique_ptr<process>> nodes_;
};

// The checks every scenario ends with: one run at a time, fences never go down, a new node
// always has a higher fence.
void expect_one_at_a_time(const std::vector<interval>& runs) {
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const auto& a = runs[i - 1];
    const auto& b = runs[i];
    EXPECT_LE(a.end, b.start) << "runs overlap: " << a.node << " fence " << a.fence << " ["
                              << a.start << ", " << a.end << "] and " << b.node << " fence "
                              << b.fence << " [" << b.start << ", " << b.end << "]";
    EXPECT_LE(a.fence, b.fence) << "fence went down from " << a.fence << " (" << a.node << ") to "
                                << b.fence << " (" << b.node << ")";
    if (a.node != b.node) {
      EXPECT_LT(a.fence, b.fence) << "new leader " << b.node << " has the fence of " << a.node;
    }
  }
}

class daemon_cluster : public ::testing::TestWithParam<std::string> {};

TEST_P(daemon_cluster, one_node_fires_at_a_time_and_hands_over_on_sigterm_and_sigkill) {
  cluster c(GetParam(), "0.05");
  c.start_all();
  ASSERT_TRUE(baton::test::wait_until([&] { return c.finished_runs() >= 4; }, 30s))
      << c.diagnostics();

  // `baton status` reads the owner record and the recorded last fire from the backend.
  auto st = run_baton({"status", "--config", (c.dir() / "n1.json").string()}, 60s);
  EXPECT_EQ(st.status, 0) << st.err;
  EXPECT_THAT(st.out,
              AllOf(HasSubstr(c.schedule() + ": every 500ms"), HasSubstr("owner:      1:"),
                    HasSubstr("(fence "), HasSubstr("transition: "), HasSubstr("last fire:  20")));

  // SIGTERM the leader: it releases, another node takes over at once.
  const std::string first = c.leader();
  const long long term_ns = now_ns();
  c.node(first).signal(SIGTERM);
  auto status = c.node(first).wait_exit(10s);
  ASSERT_TRUE(status) << "no exit after SIGTERM\n" << c.diagnostics();
  EXPECT_EQ(*status, 0);
  ASSERT_TRUE(c.wait_runs_elsewhere(first, term_ns, 3, 20s)) << c.diagnostics();

  // SIGKILL the new leader: the others take over when its lease runs out.
  const std::string second = c.leader();
  ASSERT_NE(second, first);
  const long long kill_ns = now_ns();
  c.node(second).signal(SIGKILL);
  ASSERT_TRUE(c.node(second).wait_exit(5s));
  ASSERT_TRUE(c.wait_runs_elsewhere(second, kill_ns, 4, 20s)) << c.diagnostics();
  const std::string third = c.leader();
  ASSERT_NE(third, second);
  c.node(third).signal(SIGTERM);
  EXPECT_EQ(c.node(third).wait_exit(10s), std::optional<int>(0));

  const auto events = c.events();
  const auto runs = intervals_of(events, {{second, kill_ns}});
  expect_one_at_a_time(runs);

  // Handover gaps measured on the job runs.
  auto first_run_after = [&](const std::string& not_node, long long after) -> const interval* {
    for (const auto& r : runs)
      if (r.node != not_node && r.start > after) return &r;
    return nullptr;
  };
  auto last_run_before = [&](const std::string& node, long long before) -> const interval* {
    const interval* last = nullptr;
    for (const auto& r : runs)
      if (r.node == node && r.start < before) last = &r;
    return last;
  };
  const auto* term_old = last_run_before(first, term_ns);
  const auto* term_new = first_run_after(first, term_ns);
  const auto* kill_old = last_run_before(second, kill_ns);
  const auto* kill_new = first_run_after(second, kill_ns);
  ASSERT_TRUE(term_old && term_new && kill_old && kill_new) << c.diagnostics();

  // From the daemon logs: SIGTERM received -> the next leader logs its acquisition.
  const auto acquired = [&](const std::string& node, std::uint64_t fence) {
    return log_time(c.daemon_log(node), "leader with fence " + std::to_string(fence));
  };
  const auto term_received = log_time(c.daemon_log(first), "received SIGTERM");
  const auto term_acquired = acquired(term_new->node, term_new->fence);
  const auto kill_acquired = acquired(kill_new->node, kill_new->fence);
  ASSERT_TRUE(term_received && term_acquired && kill_acquired) << c.diagnostics();

  const double sigterm_release_to_acquire = ms(*term_acquired - *term_received);
  const double sigterm_run_gap = ms(term_new->start - term_old->end);
  const double sigterm_fire_gap = ms(term_new->start - term_old->start);
  const double sigkill_to_acquire = ms(*kill_acquired - kill_ns);
  const double sigkill_to_first_run = ms(kill_new->start - kill_ns);
  const double sigkill_run_gap = ms(kill_new->start - kill_old->end);
  RecordProperty("sigterm_release_to_acquire_ms", std::to_string(sigterm_release_to_acquire));
  RecordProperty("sigterm_last_end_to_first_start_ms", std::to_string(sigterm_run_gap));
  RecordProperty("sigkill_to_acquire_ms", std::to_string(sigkill_to_acquire));
  RecordProperty("sigkill_last_end_to_first_start_ms", std::to_string(sigkill_run_gap));
  std::cout << "[ handover ] " << GetParam() << ": SIGTERM: received -> new leader "
            << sigterm_release_to_acquire << " ms, last run end -> first run start "
            << sigterm_run_gap << " ms (fire gap " << sigterm_fire_gap
            << " ms); SIGKILL: kill -> new leader " << sigkill_to_acquire
            << " ms, kill -> first run " << sigkill_to_first_run
            << " ms, last run end -> first run start " << sigkill_run_gap << " ms\n";

  const double margin = 700;  // scheduling noise on a loaded 2-core machine
  EXPECT_LE(sigterm_release_to_acquire, cluster::poll.count() + margin);
  // The new leader continues the cadence: its first fire is the next slot (or a catch-up now).
  EXPECT_LE(sigterm_fire_gap, cluster::period.count() + cluster::poll.count() + margin);
  const double lease_bound =
      (cluster::ttl + cluster::transition + cluster::poll).count() + 50 /* jitter */ + margin;
  EXPECT_LE(sigkill_to_acquire, lease_bound);
  EXPECT_LE(sigkill_to_first_run, lease_bound);

  // Cadence: planned fire times stay on one grid across both handovers, and the starts keep
  // the period except for at most one catch-up run per failover.
  std::vector<long long> fires;
  for (const auto& e : events)
    if (e.kind == "start") {
      auto t = baton::parse_rfc3339(e.fire_time);
      ASSERT_TRUE(t) << e.fire_time;
      fires.push_back(
          std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count());
    }
  std::sort(fires.begin(), fires.end());
  for (std::size_t i = 1; i < fires.size(); ++i) {
    const long long gap = fires[i] - fires[i - 1];
    EXPECT_GT(gap, 0) << "fire time repeated";
    EXPECT_EQ(gap % cluster::period.count(), 0) << "fire " << i << " left the grid: gap " << gap;
  }
  int short_gaps = 0;
  std::ostringstream gaps;  // each short gap, to tell a catch-up from a late start
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const long long gap = runs[i].start - runs[i - 1].start;
    if (gap < cluster::period.count() * 800'000LL) {
      ++short_gaps;
      gaps << "\n  run " << i << ": " << gap / 1'000'000 << " ms after the one before ("
           << runs[i - 1].node << " fence " << runs[i - 1].fence << " -> " << runs[i].node
           << " fence " << runs[i].fence << ")";
    }
  }
  EXPECT_LE(short_gaps, 2) << "more than one catch-up run per failover; short gaps:" << gaps.str();
}

TEST_P(daemon_cluster, leader_that_loses_its_backend_stops_its_job_before_another_node_starts) {
  const std::string type = GetParam();
  cluster c(type, "10");
  c.start_all();
  auto started = [&](long long after) -> std::optional<job_event> {
    for (const auto& e : c.events())
      if (e.kind == "start" && e.start_ns > after) return e;
    return std::nullopt;
  };
  ASSERT_TRUE(baton::test::wait_until([&] { return started(0).has_value(); }, 30s))
      << c.diagnostics();
  const job_event running = *started(0);

  // Cut the backend for longer than the lease (ttl + transition = 2 s), then bring it back.
  const long long cut_ns = now_ns();
  long long restored_ns = 0;
  if (type == "sqlite") {
    // An EXCLUSIVE transaction held from outside: every node's writes (renewals) block.
    const std::string path = c.backend().params.at("path");
    process holder({"/usr/bin/sqlite3", path, ".timeout 5000", "BEGIN EXCLUSIVE;", ".print locked",
                    ".shell sleep 4", "COMMIT;"},
                   c.dir() / "sqlite3.out", c.dir() / "sqlite3.err");
    ASSERT_TRUE(baton::test::wait_until(
        [&] { return read_file(c.dir() / "sqlite3.out").find("locked") != std::string::npos; },
        10s))
        << read_file(c.dir() / "sqlite3.err");
    ASSERT_EQ(holder.wait_exit(15s), std::optional<int>(0)) << read_file(c.dir() / "sqlite3.err");
    restored_ns = now_ns();
  } else {
    ASSERT_TRUE(baton::test::server_ctl("stop", server_of(type)));
    std::this_thread::sleep_for(3s);  // the outage itself: longer than the lease
    ASSERT_TRUE(baton::test::server_ctl("start", server_of(type)));
    restored_ns = now_ns();
  }

  // Somebody (maybe the same node, with a new fence) starts the job again.
  ASSERT_TRUE(baton::test::wait_until([&] { return started(running.start_ns).has_value(); }, 40s))
      << c.diagnostics();
  const job_event next = *started(running.start_ns);
  std::optional<job_event> terminated;
  for (const auto& e : c.events())
    if (e.kind == "terminated" && e.node == running.node && e.fence == running.fence)
      terminated = e;
  ASSERT_TRUE(terminated) << "the cut-off leader's job was not stopped\n" << c.diagnostics();
  EXPECT_LT(terminated->end_ns, next.start_ns)
      << "the new run started before the old one was stopped\n"
      << c.diagnostics();
  EXPECT_GT(next.fence, running.fence);
  const double stop_after_cut = ms(terminated->end_ns - cut_ns);
  RecordProperty("job_stopped_after_cut_ms", std::to_string(stop_after_cut));
  RecordProperty("next_start_after_restore_ms", std::to_string(ms(next.start_ns - restored_ns)));
  std::cout << "[ backend lost ] " << type << ": job stopped " << stop_after_cut
            << " ms after the cut; next run " << ms(next.start_ns - terminated->end_ns)
            << " ms after that, " << ms(next.start_ns - restored_ns) << " ms after restore\n";
  // The leader gives up at its local lease end (at most ttl + transition after the cut).
  EXPECT_LE(stop_after_cut, (cluster::ttl + cluster::transition).count() + 700);

  for (int n = 1; n <= 3; ++n) c.node("n" + std::to_string(n)).signal(SIGTERM);
  for (int n = 1; n <= 3; ++n)
    EXPECT_EQ(c.node("n" + std::to_string(n)).wait_exit(15s), std::optional<int>(0));
  expect_one_at_a_time(intervals_of(c.events(), {}));
}

// The most common job form, a shell wrapper, and `kill -9` of the leader mid-run: the job (a
// grandchild of the daemon) must end before another node starts the schedule.
class daemon_cluster_sh : public ::testing::TestWithParam<std::string> {};

TEST_P(daemon_cluster_sh,
       sigkill_of_the_leader_mid_run_ends_the_sh_c_grandchild_before_anyone_starts) {
  cluster c(GetParam(), "6", /*under_sh=*/true);
  c.start_all();
  auto started = [&](long long after, const std::string& not_node) -> std::optional<job_event> {
    for (const auto& e : c.events())
      if (e.kind == "start" && e.start_ns > after && e.node != not_node) return e;
    return std::nullopt;
  };
  ASSERT_TRUE(baton::test::wait_until([&] { return started(0, "").has_value(); }, 30s))
      << c.diagnostics();
  const job_event running = *started(0, "");
  const long long kill_ns = now_ns();
  c.node(running.node).signal(SIGKILL);
  ASSERT_TRUE(c.node(running.node).wait_exit(5s));
  ASSERT_TRUE(
      baton::test::wait_until([&] { return started(kill_ns, running.node).has_value(); }, 30s))
      << c.diagnostics();
  const job_event next = *started(kill_ns, running.node);
  for (int n = 1; n <= 3; ++n)
    if (const std::string node = "n" + std::to_string(n); node != running.node) {
      c.node(node).signal(SIGTERM);
      EXPECT_EQ(c.node(node).wait_exit(15s), std::optional<int>(0));
    }
  const auto events = c.events();
  std::optional<job_event> ended;
  for (const auto& e : events)
    if (e.node == running.node && e.fence == running.fence && e.kind != "start") ended = e;
  ASSERT_TRUE(ended) << "the killed leader's run never ended\n" << c.diagnostics();
  EXPECT_EQ(ended->kind, "terminated") << "the orphaned run went on to its end";
  EXPECT_LT(ended->end_ns, next.start_ns) << c.diagnostics();
  std::cout << "[ sh -c kill -9 ] " << GetParam() << ": grandchild ended "
            << ms(ended->end_ns - kill_ns) << " ms after the kill; next run started "
            << ms(next.start_ns - kill_ns) << " ms after the kill\n";
  // Real ends only (no "died with its daemon" assumption): one run at a time.
  expect_one_at_a_time(intervals_of(events, {}));
}

INSTANTIATE_TEST_SUITE_P(sqlite_and_redis, daemon_cluster_sh,
                         ::testing::Values(std::string("sqlite"), std::string("redis")),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(backends, daemon_cluster, ::testing::ValuesIn(cluster_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
