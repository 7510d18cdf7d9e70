// The daemon's JSON config: every error names the file and JSON path; all errors come at once.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/config/config.hpp"
#include "baton/config/duration.hpp"
#include "support/env.hpp"

namespace {

using namespace std::chrono_literals;
using baton::config::config_error;
using baton::config::daemon_config;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

const char* const minimal_backend = R"("backend": {"type": "memory"})";

baton::config::env_lookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

daemon_config parse(const std::string& text, std::map<std::string, std::string> env = {}) {
  return baton::config::parse_config(text, "test.json", "/etc/baton", fake_env(std::move(env)));
}

// The messages of the config_error that parsing `text` throws (fails the test if none).
std::vector<std::string> errors_of(const std::string& text,
                                   std::map<std::string, std::string> env = {}) {
  try {
    parse(text, std::move(env));
  } catch (const config_error& e) {
    EXPECT_FALSE(e.errors().empty());
    return e.errors();
  }
  ADD_FAILURE() << "no config_error for:\n" << text;
  return {};
}

// A config with one schedule whose body is `schedule` (without braces).
std::string with_schedule(const std::string& schedule, const std::string& extra = "") {
  return std::string("{") + minimal_backend + extra + R"(, "schedules": [{)" + schedule + "}]}";
}

std::string one_error(const std::string& text, std::map<std::string, std::string> env = {}) {
  auto errors = errors_of(text, std::move(env));
  EXPECT_THAT(errors, SizeIs(1));
  return errors.empty() ? std::string() : errors.front();
}

// ---------------------------------------------------------------------------------------------
// durations

TEST(config_duration, accepts_whole_numbers_with_a_unit) {
  using baton::config::parse_duration;
  EXPECT_EQ(parse_duration("250ms"), 250ms);
  EXPECT_EQ(parse_duration("10s"), 10s);
  EXPECT_EQ(parse_duration("5m"), 5min);
  EXPECT_EQ(parse_duration("2h"), 2h);
  EXPECT_EQ(parse_duration("1d"), 24h);
  EXPECT_EQ(parse_duration("0s"), 0ms);
}

TEST(config_duration, rejects_bare_numbers_signs_spaces_fractions_and_compounds) {
  using baton::config::parse_duration;
  for (const char* bad : {"10", "-5s", "+5s", "5 s", " 5s", "5s ", "1.5s", "1h30m", "5x", "s", "",
                          "5S", "5sec", "99999999999999999d"})
    EXPECT_EQ(parse_duration(bad), std::nullopt) << bad;
}

TEST(config_duration, formats_with_the_largest_exact_unit) {
  using baton::config::format_duration;
  EXPECT_EQ(format_duration(0ms), "0s");
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(90s), "90s");
  EXPECT_EQ(format_duration(2h), "2h");
  EXPECT_EQ(format_duration(48h), "2d");
}

// ---------------------------------------------------------------------------------------------
// a valid config

TEST(config, full_config_round_trips_into_typed_options) {
  const std::string text = R"({
    "backend": {"type": "sqlite", "path": "state/baton.db", "table": "locks",
                "create_table": false, "pool_size": 2, "poll_interval": "200ms",
                "statement_timeout": "1s"},
    "lease": {"ttl": "4s", "transition": "2s", "retry_period": "500ms", "poll_interval": "250ms",
              "drift_margin": "100ms", "max_backoff": "2s", "stop_grace": "800ms",
              "max_clock_offset": "30s"},
    "kill_grace": "500ms",
    "log_level": "debug",
    "schedules": [
      {"name": "heartbeat", "every": "5s", "mode": "fixed_delay", "initial_delay": "1s",
       "command": ["scripts/heartbeat.sh", "--verbose"], "env": {"COLOR": "blue"},
       "timeout": "3s", "kill_grace": "250ms", "misfire": "skip",
       "lease": {"ttl": "8s", "stop_grace": "1s"}},
      {"name": "nightly-report", "cron": "0 3 * * *", "time_zone": "Europe/Berlin",
       "command": ["date"]}
    ]
  })";
  const auto c = parse(text);
  EXPECT_EQ(c.source, "test.json");
  EXPECT_EQ(c.backend.type, "sqlite");
  EXPECT_EQ(c.backend.params.at("path"), "/etc/baton/state/baton.db");
  EXPECT_EQ(c.backend.params.at("table"), "locks");
  EXPECT_EQ(c.backend.params.at("create_table"), "false");
  EXPECT_EQ(c.backend.params.at("pool_size"), "2");
  EXPECT_EQ(c.backend.params.at("poll_interval"), "200ms");
  EXPECT_EQ(c.backend.params.at("statement_timeout"), "1s");
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.kill_grace, 500ms);
  ASSERT_THAT(c.schedules, SizeIs(2));

  const auto& hb = c.schedules[0];
  EXPECT_EQ(hb.name, "heartbeat");
  EXPECT_EQ(hb.path, "/schedules/0");
  const auto& every = std::get<baton::every_trigger>(hb.when);
  EXPECT_EQ(every.period, 5s);
  EXPECT_EQ(every.mode, baton::every_mode::fixed_delay);
  EXPECT_EQ(every.initial_delay, 1s);
  EXPECT_THAT(hb.command, ElementsAre("/etc/baton/scripts/heartbeat.sh", "--verbose"));
  EXPECT_EQ(hb.env.at("COLOR"), "blue");
  EXPECT_EQ(hb.timeout, 3s);
  EXPECT_EQ(hb.kill_grace, 250ms);
  EXPECT_EQ(hb.misfire, baton::misfire_policy::skip);

  const baton::contend_options backend_defaults{};
  const auto lease = c.lease_for(hb, backend_defaults);
  EXPECT_EQ(lease.ttl, 8s);  // the schedule's own
  EXPECT_EQ(lease.transition, 2s);
  EXPECT_EQ(lease.retry_period, 500ms);
  EXPECT_EQ(lease.poll_interval, 250ms);
  EXPECT_EQ(lease.drift_margin, 100ms);
  EXPECT_EQ(lease.max_backoff, 2s);
  EXPECT_EQ(lease.max_clock_offset, 30s);
  EXPECT_EQ(c.stop_grace_for(hb, backend_defaults), 1s);
  EXPECT_EQ(c.kill_grace_for(hb, backend_defaults), 250ms);

  const auto& report = c.schedules[1];
  const auto& cron = std::get<baton::cron_trigger>(report.when).expression;
  EXPECT_EQ(cron.text(), "0 3 * * *");
  EXPECT_EQ(cron.time_zone(), "Europe/Berlin");
  EXPECT_THAT(report.command, ElementsAre("date"));  // bare names are looked up in PATH
  EXPECT_EQ(report.timeout, 0ms);
  EXPECT_EQ(report.misfire, baton::misfire_policy::run_once);
  EXPECT_EQ(c.stop_grace_for(report, backend_defaults), 800ms);
  EXPECT_EQ(c.kill_grace_for(report, backend_defaults), 500ms);  // the top-level one

  auto opts = baton::config::make_schedule_options(c, hb, backend_defaults);
  EXPECT_EQ(opts.name, "heartbeat");
  EXPECT_TRUE(opts.job);
  ASSERT_TRUE(opts.lease);
  EXPECT_EQ(opts.lease->ttl, 8s);
  EXPECT_EQ(opts.stop_grace, 1s);
  EXPECT_EQ(opts.timeout, 3s);
  EXPECT_EQ(opts.misfire, baton::misfire_policy::skip);
  auto sched = baton::config::make_scheduler_options(c, backend_defaults, "node-1");
  EXPECT_EQ(sched.contender_id, "node-1");
  ASSERT_TRUE(sched.lease);
  EXPECT_EQ(sched.lease->ttl, 4s);
  EXPECT_GE(sched.job_threads, 2u);
}

TEST(config, defaults_are_the_backend_defaults_and_kill_grace_follows_stop_grace) {
  const auto c = parse(with_schedule(R"("name": "a", "every": "1m", "command": ["/bin/true"])"));
  EXPECT_EQ(c.log_level, "info");
  EXPECT_FALSE(c.kill_grace);
  baton::contend_options backend_defaults;
  backend_defaults.poll_interval = 123ms;
  const auto& s = c.schedules.at(0);
  EXPECT_EQ(c.lease_for(s, backend_defaults).poll_interval, 123ms);
  EXPECT_EQ(c.lease_for(s, backend_defaults).ttl, backend_defaults.ttl);
  // Unset kill_grace: a command ignoring SIGTERM is killed by the time the lease would end.
  EXPECT_EQ(c.kill_grace_for(s, backend_defaults), c.stop_grace_for(s, backend_defaults));
  EXPECT_GT(c.stop_grace_for(s, backend_defaults), 0ms);
  EXPECT_EQ(std::get<baton::cron_trigger>(
                parse(with_schedule(R"("name": "c", "cron": "0 3 * * *", "command": ["x"])"))
                    .schedules[0]
                    .when)
                .expression.time_zone(),
            "UTC");
}

TEST(config, every_backend_type_takes_its_parameters_as_strings) {
  auto backend = [](const std::string& b) {
    return parse(std::string("{\"backend\": ") + b +
                 R"(, "schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})")
        .backend;
  };
  auto available = baton::available_backends();
  auto has = [&](const char* t) {
    return std::find(available.begin(), available.end(), t) != available.end();
  };
  if (has("postgresql")) {
    auto pg = backend(R"({"type": "postgresql", "connection": "dbname=x host=h"})");
    EXPECT_EQ(pg.params.at("connection"), "dbname=x host=h");
  }
  if (has("redis")) {
    auto redis = backend(R"({"type": "redis", "url": "redis://h:1", "key_prefix": "p:",
                            "poll_interval": "250ms", "connect_timeout": "2s",
                            "command_timeout": "1s"})");
    EXPECT_EQ(redis.params.at("url"), "redis://h:1");
    EXPECT_EQ(redis.params.at("command_timeout"), "1s");
  }
  if (has("zookeeper")) {
    auto zk = backend(R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "4s",
                         "username": "u", "password": "p", "root": "/baton"})");
    EXPECT_EQ(zk.params.at("session_timeout"), "4s");
    EXPECT_EQ(zk.params.at("root"), "/baton");
  }
  EXPECT_EQ(backend(R"({"type": "sqlite", "path": "/abs/x.db"})").params.at("path"), "/abs/x.db");
  EXPECT_EQ(
      backend(R"({"type": "sqlite", "path": "file:/abs/x.db?cache=shared"})").params.at("path"),
      "file:/abs/x.db?cache=shared");
  EXPECT_TRUE(backend(R"({"type": "memory"})").params.empty());
}

TEST(config, load_config_resolves_relative_paths_against_the_file_directory) {
  const auto dir = std::filesystem::path(baton::test::temp_dir("config"));
  std::filesystem::create_directories(dir / "conf");
  const auto file = dir / "conf" / "baton.json";
  std::ofstream(file) << R"({"backend": {"type": "sqlite", "path": "../data/b.db"},
    "schedules": [{"name": "a", "every": "1s", "command": ["./run.sh", "x/y"]}]})";
  const auto c = baton::config::load_config(file);
  EXPECT_EQ(c.source, file.string());
  EXPECT_EQ(c.backend.params.at("path"), (dir / "data" / "b.db").string());
  EXPECT_THAT(c.schedules.at(0).command, ElementsAre((dir / "conf" / "run.sh").string(), "x/y"));
}

TEST(config, missing_or_unreadable_file_is_an_error_naming_it) {
  try {
    baton::config::load_config("/nonexistent/baton.json");
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("/nonexistent/baton.json"), HasSubstr("cannot read")));
  }
}

// ---------------------------------------------------------------------------------------------
// environment substitution

TEST(config_env, whole_and_embedded_references_take_values_from_the_environment) {
  const auto c = parse(
      R"({"backend": {"type": "sqlite", "path": "${DB_PATH}"},
         "schedules": [{"name": "a", "every": "${PERIOD}",
           "command": ["/bin/echo", "user=${USER_NAME}!", "$${LITERAL}", "cost $5"],
           "env": {"TOKEN": "${SECRET}"}}]})",
      {{"DB_PATH", "/var/lib/baton.db"},
       {"PERIOD", "5s"},
       {"USER_NAME", "ann"},
       {"SECRET", "s3cr3t"}});
  EXPECT_EQ(c.backend.params.at("path"), "/var/lib/baton.db");
  EXPECT_EQ(std::get<baton::every_trigger>(c.schedules[0].when).period, 5s);
  EXPECT_THAT(c.schedules[0].command,
              ElementsAre("/bin/echo", "user=ann!", "${LITERAL}", "cost $5"));
  EXPECT_EQ(c.schedules[0].env.at("TOKEN"), "s3cr3t");
}

TEST(config_env, unset_variable_names_the_path_and_the_variable) {
  auto error = one_error(
      R"({"backend": {"type": "postgresql", "connection": "password=${PG_PASSWORD} host=h"},
         "schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})");
  EXPECT_THAT(error, AllOf(HasSubstr("test.json: /backend/connection:"),
                           HasSubstr("PG_PASSWORD is not set")));
}

TEST(config_env, malformed_references_are_errors) {
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["${X"])")),
              AllOf(HasSubstr("/schedules/0/command/0:"), HasSubstr("unterminated")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["${1X}"])")),
              AllOf(HasSubstr("/schedules/0/command/0:"), HasSubstr("not a variable reference")));
}

// ---------------------------------------------------------------------------------------------
// what jobs get: the environment without the config's ${NAME} variables, capped output

TEST(config_job_env, every_variable_referenced_anywhere_is_recorded) {
  const auto c = parse(
      R"({"backend": {"type": "sqlite", "path": "${DB_DIR}/baton.db"},
         "lease": {"ttl": "${TTL}"},
         "schedules": [{"name": "a", "every": "${PERIOD}",
           "command": ["/bin/echo", "user=${USER_NAME}!", "$${LITERAL}", "cost $5"],
           "env": {"PGPASSWORD": "${PG_PASSWORD}"}},
          {"name": "b", "cron": "0 3 * * *", "time_zone": "${ZONE}", "command": ["x"]}]})",
      {{"DB_DIR", "/var/lib"},
       {"TTL", "10s"},
       {"PERIOD", "5s"},
       {"USER_NAME", "ann"},
       {"PG_PASSWORD", "s3cr3t"},
       {"ZONE", "Asia/Tokyo"}});
  EXPECT_EQ(c.referenced_env,
            (std::set<std::string>{"DB_DIR", "PERIOD", "PG_PASSWORD", "TTL", "USER_NAME", "ZONE"}));
  // The job's TZ is the substituted time zone, not the reference.
  EXPECT_EQ(c.schedules[1].time_zone, "Asia/Tokyo");
  // Nothing referenced: nothing withheld.
  EXPECT_THAT(
      parse(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])")).referenced_env,
      SizeIs(0));
}

TEST(config_job_env, jobs_do_not_get_referenced_variables_unless_they_inherit_the_environment) {
  const std::string schedules = R"("schedules": [
      {"name": "plain", "every": "1s", "command": ["x", "${TZ}"],
       "env": {"PGPASSWORD": "${PG_PASSWORD}"}},
      {"name": "inherits", "every": "1s", "command": ["x"], "inherit_env": true},
      {"name": "withholds", "every": "1s", "command": ["x"], "inherit_env": false}]})";
  const std::map<std::string, std::string> env{{"PG_PASSWORD", "s3cr3t"}, {"TZ", "UTC"}};
  const auto c = parse(R"({"backend": {"type": "memory"}, )" + schedules, env);
  EXPECT_FALSE(c.inherit_env);
  // TZ is referenced but never withheld: not a secret, and the job's clock is the daemon's.
  EXPECT_EQ(c.withheld_env_for(c.schedules[0]), std::set<std::string>{"PG_PASSWORD"});
  EXPECT_THAT(c.withheld_env_for(c.schedules[1]), SizeIs(0));
  EXPECT_EQ(c.withheld_env_for(c.schedules[2]), std::set<std::string>{"PG_PASSWORD"});

  const auto g = parse(R"({"backend": {"type": "memory"}, "inherit_env": true,
                           "kill_grace": "${GRACE}", )" +
                           schedules,
                       {{"PG_PASSWORD", "s3cr3t"}, {"GRACE", "1s"}, {"TZ", "UTC"}});
  EXPECT_TRUE(g.inherit_env);
  EXPECT_THAT(g.withheld_env_for(g.schedules[0]), SizeIs(0));
  EXPECT_THAT(g.withheld_env_for(g.schedules[1]), SizeIs(0));
  EXPECT_EQ(g.withheld_env_for(g.schedules[2]), (std::set<std::string>{"GRACE", "PG_PASSWORD"}));
}

TEST(config_job_output, log_output_defaults_to_64KiB_per_stream_and_takes_sizes) {
  const auto c = parse(R"({"backend": {"type": "memory"}, "log_output": "1MiB", "schedules": [
      {"name": "a", "every": "1s", "command": ["x"]},
      {"name": "b", "every": "1s", "command": ["x"], "log_output": "0B"},
      {"name": "c", "every": "1s", "command": ["x"], "log_output": "512B"},
      {"name": "d", "every": "1s", "command": ["x"], "log_output": "${CAP}"},
      {"name": "e", "every": "1s", "command": ["x"], "log_output": "2GiB"}]})",
                       {{"CAP", "64KiB"}});
  EXPECT_EQ(c.log_output, 1024u * 1024);
  EXPECT_EQ(c.log_output_for(c.schedules[0]), 1024u * 1024);
  EXPECT_EQ(c.log_output_for(c.schedules[1]), 0u);
  EXPECT_EQ(c.log_output_for(c.schedules[2]), 512u);
  EXPECT_EQ(c.log_output_for(c.schedules[3]), 64u * 1024);
  EXPECT_EQ(c.log_output_for(c.schedules[4]), 2ull << 30);
  const auto d = parse(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])"));
  EXPECT_EQ(d.log_output, 64u * 1024);
  EXPECT_EQ(d.log_output_for(d.schedules[0]), 64u * 1024);
}

TEST(config_job_output, bad_inherit_env_and_log_output_values_name_their_path) {
  auto error = [](const std::string& top, const std::string& schedule) {
    return one_error(
        with_schedule(R"("name": "a", "every": "1s", "command": ["x"])" + schedule, top));
  };
  EXPECT_THAT(error(R"(, "log_output": 65536)", ""),
              HasSubstr("test.json: /log_output: expected a size string, found the number 65536 "
                        "(use 0B, 512B, 64KiB, 1MiB, 1GiB)"));
  EXPECT_THAT(error("", R"(, "log_output": "64k")"),
              HasSubstr("/schedules/0/log_output: invalid size \"64k\" (use 0B, 512B, 64KiB"));
  for (const char* bad : {"-1B", "1.5KiB", "1 KiB", "KiB", "64KB", "", "99999999999999GiB"})
    EXPECT_THAT(error("", std::string(R"(, "log_output": ")") + bad + "\""),
                HasSubstr("/schedules/0/log_output: invalid size"))
        << bad;
  EXPECT_THAT(error(R"(, "inherit_env": "yes")", ""),
              HasSubstr("test.json: /inherit_env: expected true or false, found a string"));
  EXPECT_THAT(error("", R"(, "inherit_env": 1)"),
              HasSubstr("/schedules/0/inherit_env: expected true or false, found a number"));
}

TEST(config_job_output, inherit_env_log_output_and_the_withheld_names_are_part_of_the_fingerprint) {
  const baton::contend_options defaults{};
  auto fingerprint = [&](const std::string& top, const std::string& schedule,
                         std::map<std::string, std::string> env = {}) {
    const auto c = parse(std::string("{") + minimal_backend + top +
                             R"(, "schedules": [{"name": "a", "every": "1s", "command": ["x"])" +
                             schedule + "}]}",
                         std::move(env));
    return baton::config::fingerprint(c, c.schedules.at(0), defaults);
  };
  const auto base = fingerprint("", "");
  EXPECT_EQ(fingerprint("", R"(, "log_output": "64KiB")"), base);  // the default, spelt out
  EXPECT_EQ(fingerprint(R"(, "inherit_env": false)", ""), base);
  EXPECT_NE(fingerprint("", R"(, "log_output": "1KiB")"), base);
  EXPECT_NE(fingerprint(R"(, "log_output": "1KiB")", ""), base);
  // A new ${NAME} elsewhere in the file changes what this schedule's job gets, unless it inherits
  // the daemon's whole environment.
  const std::map<std::string, std::string> env{{"GRACE", "1s"}};
  const auto referenced = fingerprint(R"(, "kill_grace": "${GRACE}")", "", env);
  EXPECT_NE(referenced, fingerprint(R"(, "kill_grace": "1s")", ""));
  EXPECT_NE(fingerprint(R"(, "kill_grace": "${GRACE}")", R"(, "inherit_env": true)", env),
            referenced);
  EXPECT_NE(fingerprint(R"(, "kill_grace": "${GRACE}", "inherit_env": true)", "", env), referenced);
  EXPECT_EQ(fingerprint(R"(, "kill_grace": "${GRACE}", "inherit_env": true)", "", env),
            fingerprint(R"(, "kill_grace": "1s")", ""));
}

TEST(config_run_records, history_retries_and_backoff_default_and_override_per_schedule) {
  const baton::contend_options defaults{};
  const auto c = parse(R"({"backend": {"type": "memory"}, "history": 20, "history_output": "1KiB",
      "retries": 2, "retry_backoff": "30s", "schedules": [
      {"name": "a", "every": "1s", "command": ["x"]},
      {"name": "b", "every": "1s", "command": ["x"], "history": 0, "history_output": "0B",
       "retries": 0, "retry_backoff": "1m"}]})");
  const auto a = baton::config::make_schedule_options(c, c.schedules[0], defaults);
  EXPECT_EQ(a.history, 20u);
  EXPECT_EQ(a.history_output, 1024u);
  EXPECT_EQ(a.retries, 2u);
  EXPECT_EQ(a.retry_backoff, std::chrono::seconds{30});
  const auto b = baton::config::make_schedule_options(c, c.schedules[1], defaults);
  EXPECT_EQ(b.history, 0u);
  EXPECT_EQ(b.history_output, 0u);
  EXPECT_EQ(b.retries, 0u);
  EXPECT_EQ(b.retry_backoff, std::chrono::minutes{1});
  const auto plain = parse(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])"));
  const auto p = baton::config::make_schedule_options(plain, plain.schedules[0], defaults);
  EXPECT_EQ(p.history, 50u);
  EXPECT_EQ(p.history_output, 4096u);
  EXPECT_EQ(p.retries, 0u);
  EXPECT_EQ(p.retry_backoff, std::chrono::seconds{10});
  // They change how a schedule runs: part of the fingerprint.
  EXPECT_NE(baton::config::fingerprint(c, c.schedules[0], defaults),
            baton::config::fingerprint(plain, plain.schedules[0], defaults));
}

TEST(config_run_records, bad_values_name_their_path) {
  auto error = [](const std::string& top, const std::string& schedule) {
    return one_error(
        with_schedule(R"("name": "a", "every": "1s", "command": ["x"])" + schedule, top));
  };
  EXPECT_THAT(error(R"(, "history": -1)", ""),
              HasSubstr("test.json: /history: expected a whole number of records from 0 to 10000"));
  EXPECT_THAT(error("", R"(, "history": 10001)"),
              HasSubstr("/schedules/0/history: must be at most 10000 records"));
  EXPECT_THAT(error("", R"(, "history": "50")"),
              HasSubstr("/schedules/0/history: expected a whole number"));
  EXPECT_THAT(error("", R"(, "history_output": "64KiB")"),
              HasSubstr("/schedules/0/history_output: must be at most 8KiB"));
  EXPECT_THAT(error(R"(, "history_output": 4096)", ""),
              HasSubstr("/history_output: expected a size string"));
  EXPECT_THAT(error("", R"(, "retries": 1.5)"),
              HasSubstr("/schedules/0/retries: expected a whole number of retries"));
  EXPECT_THAT(error(R"(, "retries": 101)", ""), HasSubstr("/retries: must be at most 100"));
  EXPECT_THAT(error("", R"(, "retry_backoff": "0s")"),
              HasSubstr("/schedules/0/retry_backoff: must be greater than 0s"));
  EXPECT_THAT(error(R"(, "retry_backoff": "soon")", ""), HasSubstr("/retry_backoff: "));
}

// ---------------------------------------------------------------------------------------------
// one error per class, each naming file and JSON path

// ---------------------------------------------------------------------------------------------
// http

TEST(config_http, listen_is_off_by_default_and_takes_ip_literals_and_localhost) {
  const auto schedule = R"("name": "a", "every": "1s", "command": ["x"])";
  EXPECT_FALSE(parse(with_schedule(schedule)).http_listen.has_value());
  EXPECT_FALSE(parse(with_schedule(schedule, R"(, "http": {})")).http_listen.has_value());
  struct good {
    std::string text;
    std::string host;
    std::uint16_t port;
  };
  for (const auto& g : std::vector<good>{{"127.0.0.1:9464", "127.0.0.1", 9464},
                                         {"0.0.0.0:0", "0.0.0.0", 0},
                                         {"localhost:65535", "localhost", 65535},
                                         {"[::1]:9464", "::1", 9464},
                                         {"[::]:80", "::", 80}}) {
    const auto config =
        parse(with_schedule(schedule, R"(, "http": {"listen": ")" + g.text + R"("})"));
    ASSERT_TRUE(config.http_listen.has_value()) << g.text;
    EXPECT_EQ(config.http_listen->host, g.host) << g.text;
    EXPECT_EQ(config.http_listen->port, g.port) << g.text;
    EXPECT_EQ(config.http_listen->text(), g.text);  // reads back as written
  }
  // From the environment, like any string.
  const auto from_env = parse(with_schedule(schedule, R"(, "http": {"listen": "${LISTEN}"})"),
                              {{"LISTEN", "127.0.0.1:1234"}});
  ASSERT_TRUE(from_env.http_listen.has_value());
  EXPECT_EQ(from_env.http_listen->port, 1234);
}

TEST(config_http, bad_listen_values_and_unknown_keys_name_their_path) {
  const auto schedule = R"("name": "a", "every": "1s", "command": ["x"])";
  for (const char* bad : {"9464", "127.0.0.1", "host.example:80", "::1:80", "[::1]80", "[::1",
                          "[zz]:80", "127.0.0.1:65536", "127.0.0.1:+80", "127.0.0.1:8 0",
                          "127.0.0.1:", ":80", "1.2.3:80", "127.0.0.1:123456", ""}) {
    const auto error = one_error(
        with_schedule(schedule, R"(, "http": {"listen": ")" + std::string(bad) + R"("})"));
    EXPECT_THAT(error, AllOf(StartsWith("test.json: /http/listen: "), HasSubstr("HOST:PORT")))
        << bad;
    EXPECT_THROW(baton::config::parse_listen_address(bad), std::invalid_argument) << bad;
  }
  // inet_pton would stop at a NUL and take "127.0.0.1" for the whole host.
  EXPECT_THROW(baton::config::parse_listen_address(std::string("127.0.0.1\0x:80", 14)),
               std::invalid_argument);
  EXPECT_THAT(one_error(with_schedule(schedule, R"(, "http": {"listen": 80})")),
              HasSubstr("test.json: /http/listen: "));
  EXPECT_THAT(one_error(with_schedule(schedule, R"(, "http": {"lisen": "127.0.0.1:1"})")),
              AllOf(HasSubstr("test.json: /http/lisen: unknown key"), HasSubstr("listen")));
  EXPECT_THAT(one_error(with_schedule(schedule, R"(, "http": "127.0.0.1:1")")),
              HasSubstr("test.json: /http: "));
}

TEST(config_http, console_is_off_by_default_and_control_needs_the_console_and_one_token_source) {
  const auto schedule = R"("name": "a", "every": "1s", "command": ["x"])";
  const auto off = parse(with_schedule(schedule));
  EXPECT_FALSE(off.console.enabled);
  EXPECT_FALSE(off.console.allow_control);
  EXPECT_EQ(baton::config::read_console_token(off), "");
  const auto on = parse(with_schedule(
      schedule,
      R"(, "http": {"console": true, "allow_control": true, "token_file": "secret/token"})"));
  EXPECT_TRUE(on.console.enabled);
  EXPECT_TRUE(on.console.allow_control);
  EXPECT_EQ(on.console.token_file, "/etc/baton/secret/token");  // the config's directory
  struct bad_case {
    const char* http;
    const char* error;
  };
  for (const auto& c : std::vector<bad_case>{
           {R"({"console": 1})", "test.json: /http/console: expected true or false"},
           {R"({"allow_control": true, "token_env": "T"})",
            "test.json: /http/allow_control: needs \"console\": true"},
           {R"({"console": true, "allow_control": true})",
            "test.json: /http/allow_control: needs a token"},
           {R"({"console": true, "token_env": "A-B"})",
            "test.json: /http/token_env: expected the name of an environment variable"},
           {R"({"console": true, "token_env": ""})", "test.json: /http/token_env: expected"},
           {R"({"console": true, "token_file": ""})", "test.json: /http/token_file: must not"},
           {R"({"console": true, "token_env": "A", "token_file": "f"})",
            "test.json: /http/token_file: set one of token_env and token_file"},
           {R"({"console": true, "token": "abc"})", "test.json: /http/token: unknown key"}}) {
    EXPECT_THAT(one_error(with_schedule(schedule, std::string(R"(, "http": )") + c.http)),
                StartsWith(c.error))
        << c.http;
  }
}

TEST(config_http, the_token_comes_from_the_variable_or_a_file_only_its_owner_may_read) {
  const auto schedule = R"("name": "a", "every": "1s", "command": ["x"])";
  const std::string token(32, 'k');
  auto env_config = parse(with_schedule(
      schedule, R"(, "http": {"console": true, "allow_control": true, "token_env": "TOK"})"));
  EXPECT_EQ(baton::config::read_console_token(env_config, fake_env({{"TOK", token}})), token);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const baton::config::config_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([&] { baton::config::read_console_token(env_config, fake_env({})); }),
              StartsWith("test.json: /http/token_env: the variable TOK is not set or empty"));
  EXPECT_THAT(message([&] {
                baton::config::read_console_token(env_config, fake_env({{"TOK", "short"}}));
              }),
              AllOf(StartsWith("test.json: /http/token_env: the token is 5 bytes; at least 16"),
                    Not(HasSubstr("short"))));

  const auto dir = std::filesystem::path(baton::test::temp_dir("console-token"));
  auto file_config = env_config;
  file_config.console.token_env.clear();
  file_config.console.token_file = (dir / "token").string();
  EXPECT_THAT(message([&] { baton::config::read_console_token(file_config); }),
              AllOf(StartsWith("test.json: /http/token_file: cannot open"),
                    HasSubstr(file_config.console.token_file)));
  {
    std::ofstream out(dir / "token");
    out << token << "\nsecond line ignored\n";
  }
  std::filesystem::permissions(dir / "token", std::filesystem::perms::owner_read |
                                                  std::filesystem::perms::owner_write |
                                                  std::filesystem::perms::group_read);
  EXPECT_THAT(message([&] { baton::config::read_console_token(file_config); }),
              AllOf(StartsWith("test.json: /http/token_file: '" + file_config.console.token_file +
                               "' has mode 0640: group and others must have no access"),
                    Not(HasSubstr(token))));
  std::filesystem::permissions(dir / "token", std::filesystem::perms::owner_read);
  EXPECT_EQ(baton::config::read_console_token(file_config), token);
  file_config.console.token_file = dir.string();
  EXPECT_THAT(message([&] { baton::config::read_console_token(file_config); }),
              HasSubstr("is not a regular file"));
}

TEST(config_errors, json_syntax_error_gives_line_and_column) {
  auto error = one_error("{\n  \"backend\": {\"type\": \"memory\"},\n  \"schedules\": [,]\n}");
  EXPECT_THAT(error, AllOf(HasSubstr("test.json:"), HasSubstr("line 3, column")));
}

TEST(config_errors, top_level_must_be_an_object) {
  EXPECT_THAT(one_error("[1, 2]"), AllOf(HasSubstr("test.json: /:"), HasSubstr("found an array")));
}

TEST(config_errors, unknown_keys_are_named_with_a_suggestion) {
  auto errors = errors_of(std::string("{") + minimal_backend + R"(, "leese": {},
    "schedules": [{"name": "a", "evrey": "1s", "every": "1s", "command": ["x"]}]})");
  EXPECT_THAT(errors, Contains(AllOf(HasSubstr("test.json: /leese: unknown key \"leese\""),
                                     HasSubstr("did you mean \"lease\"?"))));
  EXPECT_THAT(errors, Contains(AllOf(HasSubstr("/schedules/0/evrey: unknown key"),
                                     HasSubstr("did you mean \"every\"?"))));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "lease": {"ttl": "1s", "tll": "2s"})")),
              HasSubstr("/lease/tll: unknown key"));
  EXPECT_THAT(one_error(R"({"backend": {"type": "sqlite", "path": "x", "url": "y"},
                           "schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})"),
              HasSubstr("/backend/url: unknown key"));
}

TEST(config_errors, duplicate_keys_are_errors) {
  auto errors = errors_of(with_schedule(R"("name": "a", "every": "1s", "every": "2s",
                                           "command": ["x"])"));
  EXPECT_THAT(errors, ElementsAre(AllOf(HasSubstr("test.json: /schedules/0/every:"),
                                        HasSubstr("duplicate key"))));
}

TEST(config_errors, wrong_types_name_the_expected_type) {
  EXPECT_THAT(
      one_error(with_schedule(R"("name": 7, "every": "1s", "command": ["x"])")),
      AllOf(HasSubstr("/schedules/0/name:"), HasSubstr("expected a string, found a number")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": 5, "command": ["x"])")),
              AllOf(HasSubstr("/schedules/0/every:"), HasSubstr("expected a duration string")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": "ls -l")")),
              AllOf(HasSubstr("/schedules/0/command:"), HasSubstr("expected an array of strings")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["ls", 1])")),
              HasSubstr("/schedules/0/command/1: expected a string, found a number"));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"],
                                         "env": {"PORT": 8080})")),
              AllOf(HasSubstr("/schedules/0/env/PORT:"), HasSubstr("quote it")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "lease": "10s")")),
              HasSubstr("/lease: expected an object, found a string"));
  EXPECT_THAT(one_error(std::string("{") + minimal_backend + R"(, "schedules": {}})"),
              HasSubstr("/schedules: expected an array"));
  EXPECT_THAT(one_error(R"({"backend": {"type": "sqlite", "path": "x", "create_table": "yes"},
                           "schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})"),
              HasSubstr("/backend/create_table: expected true or false"));
  EXPECT_THAT(one_error(R"({"backend": {"type": "sqlite", "path": "x", "pool_size": -1},
                           "schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})"),
              HasSubstr("/backend/pool_size: expected a positive whole number"));
}

TEST(config_errors, bad_durations_say_which_forms_are_accepted) {
  EXPECT_EQ(one_error(with_schedule(R"("name": "a", "every": "5x", "command": ["x"])")),
            "test.json: /schedules/0/every: invalid duration \"5x\" (use 250ms, 10s, 5m, 2h, 1d)");
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"],
                                         "timeout": "1.5s")")),
              HasSubstr("/schedules/0/timeout: invalid duration \"1.5s\""));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "lease": {"ttl": "-5s"})")),
              HasSubstr("/lease/ttl: invalid duration \"-5s\""));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "kill_grace": "10")")),
              HasSubstr("/kill_grace: invalid duration \"10\""));
  EXPECT_THAT(one_error(R"({"backend": {"type": "sqlite", "path": "x", "poll_interval": "5 s"},
                           "schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})"),
              HasSubstr("/backend/poll_interval: invalid duration \"5 s\""));
}

TEST(config_errors, bad_cron_expression_uses_the_parser_message) {
  auto error = one_error(with_schedule(R"("name": "a", "cron": "0 25 * * *", "command": ["x"])"));
  EXPECT_THAT(
      error, AllOf(HasSubstr("test.json: /schedules/0/cron:"), HasSubstr("hour"), HasSubstr("25")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "cron": "* * *", "command": ["x"])")),
              HasSubstr("/schedules/0/cron:"));
}

TEST(config_errors, unknown_time_zone_is_named) {
  auto error = one_error(with_schedule(
      R"("name": "a", "cron": "0 3 * * *", "time_zone": "Mars/Base", "command": ["x"])"));
  EXPECT_THAT(error, AllOf(HasSubstr("/schedules/0/time_zone:"), HasSubstr("Mars/Base")));
}

TEST(config_errors, invalid_and_duplicate_schedule_names) {
  EXPECT_THAT(one_error(with_schedule(R"("name": "my job", "every": "1s", "command": ["x"])")),
              AllOf(HasSubstr("/schedules/0/name: invalid schedule name \"my job\""),
                    HasSubstr("only A-Z a-z 0-9 . _ - are allowed")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "", "every": "1s", "command": ["x"])")),
              HasSubstr("/schedules/0/name: invalid schedule name \"\": mutex name is empty"));
  auto error = one_error(std::string("{") + minimal_backend + R"(, "schedules": [
      {"name": "a", "every": "1s", "command": ["x"]},
      {"name": "b", "every": "1s", "command": ["x"]},
      {"name": "a", "every": "2s", "command": ["y"]}]})");
  EXPECT_EQ(error,
            "test.json: /schedules/2/name: duplicate schedule name \"a\" (also at "
            "/schedules/0/name)");
}

TEST(config_errors, empty_commands) {
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": [])")),
              HasSubstr("/schedules/0/command: is empty"));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": [""])")),
              HasSubstr("/schedules/0/command/0: the program must not be empty"));
}

TEST(config_errors, missing_backend_and_missing_required_fields) {
  EXPECT_THAT(one_error(R"({"schedules": [{"name": "a", "every": "1s", "command": ["x"]}]})"),
              AllOf(HasSubstr("test.json: /backend: missing"), HasSubstr("\"type\": \"sqlite\"")));
  EXPECT_THAT(one_error(R"({"backend": {}, "schedules": [{"name": "a", "every": "1s",
                           "command": ["x"]}]})"),
              HasSubstr("/backend/type: missing"));
  EXPECT_THAT(one_error(R"({"backend": {"type": "sqlite"}, "schedules": [{"name": "a",
                           "every": "1s", "command": ["x"]}]})"),
              HasSubstr("/backend/path: missing"));
  EXPECT_THAT(
      one_error(R"({"backend": {"type": "oracle"}, "schedules": [{"name": "a",
                           "every": "1s", "command": ["x"]}]})"),
      AllOf(HasSubstr("/backend/type: unknown backend type \"oracle\""), HasSubstr("sqlite")));
  EXPECT_THAT(one_error(std::string("{") + minimal_backend + "}"),
              HasSubstr("/schedules: missing"));
  EXPECT_THAT(one_error(std::string("{") + minimal_backend + R"(, "schedules": []})"),
              HasSubstr("/schedules: is empty"));
  EXPECT_THAT(one_error(with_schedule(R"("every": "1s", "command": ["x"])")),
              HasSubstr("/schedules/0/name: missing"));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s")")),
              HasSubstr("/schedules/0/command: missing"));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "command": ["x"])")),
              HasSubstr("/schedules/0: missing trigger"));
}

TEST(config_errors, trigger_fields_must_match_the_trigger) {
  EXPECT_THAT(one_error(with_schedule(
                  R"("name": "a", "every": "1s", "cron": "* * * * *", "command": ["x"])")),
              HasSubstr("/schedules/0: both \"every\" and \"cron\" are set"));
  EXPECT_THAT(one_error(with_schedule(
                  R"("name": "a", "cron": "* * * * *", "mode": "fixed_rate", "command": ["x"])")),
              HasSubstr("/schedules/0/mode: \"mode\" applies only to \"every\" schedules"));
  EXPECT_THAT(one_error(with_schedule(
                  R"("name": "a", "cron": "* * * * *", "initial_delay": "1s", "command": ["x"])")),
              HasSubstr("/schedules/0/initial_delay: \"initial_delay\" applies only"));
  EXPECT_THAT(one_error(with_schedule(
                  R"("name": "a", "every": "1s", "time_zone": "UTC", "command": ["x"])")),
              HasSubstr("/schedules/0/time_zone: \"time_zone\" applies only to \"cron\""));
  EXPECT_THAT(
      one_error(with_schedule(R"("name": "a", "every": "1s", "mode": "fixed", "command": ["x"])")),
      HasSubstr("/schedules/0/mode: invalid value \"fixed\" (expected one of "
                "\"fixed_rate\", \"fixed_delay\")"));
  EXPECT_THAT(
      one_error(with_schedule(R"("name": "a", "every": "1s", "misfire": "all", "command": ["x"])")),
      HasSubstr("/schedules/0/misfire: invalid value \"all\""));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "0s", "command": ["x"])")),
              HasSubstr("/schedules/0/every: must be greater than 0s"));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "timeout": "0s",
                                         "command": ["x"])")),
              HasSubstr("/schedules/0/timeout: must be greater than 0s"));
}

TEST(config_errors, reserved_environment_names) {
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"],
                                         "env": {"BATON_FENCING_TOKEN": "1"})")),
              HasSubstr("/schedules/0/env/BATON_FENCING_TOKEN: \"BATON_FENCING_TOKEN\" is set by "
                        "baton"));
}

TEST(config_errors, bad_log_level) {
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "log_level": "verbose")")),
              HasSubstr("/log_level: invalid value \"verbose\""));
}

TEST(config_errors, bad_log_format) {
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "log_format": "yaml")")),
              HasSubstr("test.json: /log_format: invalid value \"yaml\""));
}

TEST(config_log, warning_is_read_as_warn_and_log_format_json_is_kept) {
  const auto c = parse(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                     R"(, "log_level": "warning", "log_format": "json")"));
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.log_format, "json");
  const auto d = parse(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])"));
  EXPECT_EQ(d.log_format, "text");
}

// ---------------------------------------------------------------------------------------------
// cross-field rules

std::string lease_error(const std::string& lease, const std::string& extra = "") {
  return one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                 R"(, "lease": )" + lease + extra));
}

TEST(config_lease, ttl_must_be_positive) {
  EXPECT_THAT(lease_error(R"({"ttl": "0s"})"),
              HasSubstr("/lease/ttl: ttl must be greater than 0s"));
}

TEST(config_lease, retry_period_must_be_below_ttl) {
  EXPECT_THAT(lease_error(R"({"ttl": "1s", "transition": "1s", "retry_period": "2s"})"),
              AllOf(HasSubstr("/lease/retry_period: retry_period (2s) must be less than ttl (1s)"),
                    HasSubstr("lower retry_period or raise ttl")));
  // With the default retry_period (1s), a small ttl names the ttl.
  EXPECT_THAT(lease_error(R"({"ttl": "500ms", "transition": "1s"})"),
              HasSubstr("/lease/ttl: retry_period (1s) must be less than ttl (500ms)"));
}

TEST(config_lease, poll_interval_must_be_positive) {
  EXPECT_THAT(lease_error(R"({"poll_interval": "0ms"})"),
              HasSubstr("/lease/poll_interval: poll_interval must be greater than 0s"));
}

TEST(config_lease, stop_grace_must_leave_room_before_the_lease_ends) {
  EXPECT_THAT(lease_error(R"({"ttl": "4s", "transition": "2s", "stop_grace": "3s"})"),
              AllOf(HasSubstr("/lease/stop_grace: stop_grace (3s) must be less than transition - "
                              "drift margin"),
                    HasSubstr("lower stop_grace or raise transition")));
  EXPECT_THAT(lease_error(R"({"ttl": "4s", "transition": "0s"})"),
              AllOf(HasSubstr("/lease/transition: transition (0s) must be greater than the drift "
                              "margin"),
                    HasSubstr("raise transition")));
}

TEST(config_lease, max_backoff_and_drift_margin) {
  EXPECT_THAT(lease_error(R"({"ttl": "20s", "retry_period": "6s"})"),
              HasSubstr("/lease: max_backoff (5s) must be at least retry_period (6s)"));
  EXPECT_THAT(lease_error(R"({"ttl": "1s", "transition": "1s", "retry_period": "100ms",
                             "drift_margin": "2s"})"),
              HasSubstr("/lease/drift_margin: drift_margin (2s) must be less than ttl + "
                        "transition (2s)"));
}

TEST(config_lease, max_clock_offset_is_a_duration_and_off_by_default) {
  EXPECT_THAT(lease_error(R"({"max_clock_offset": "soon"})"), HasSubstr("/lease/max_clock_offset"));
  EXPECT_THAT(lease_error(R"({"max_clock_offset": 5})"), HasSubstr("/lease/max_clock_offset"));
  EXPECT_EQ(baton::contend_options{}.max_clock_offset, 0ms);
}

TEST(config_lease, lapse_jitter_is_read_overridden_per_schedule_and_bounded_by_the_lease) {
  const std::string schedule = R"("name": "a", "every": "1s", "command": ["x"])";
  const baton::contend_options defaults;
  const auto global = parse(with_schedule(schedule, R"(, "lease": {"lapse_jitter": "0ms"})"));
  EXPECT_EQ(global.lease_for(global.schedules.at(0), defaults).lapse_jitter, 0ms);
  const auto own = parse(R"({"backend": {"type": "memory"}, "lease": {"lapse_jitter": "0ms"},
                             "schedules": [{"name": "a", "every": "1s", "command": ["x"],
                                            "lease": {"lapse_jitter": "250ms"}}]})");
  EXPECT_EQ(own.lease_for(own.schedules.at(0), defaults).lapse_jitter, 250ms);
  const auto unset = parse(with_schedule(schedule));
  EXPECT_EQ(unset.lease_for(unset.schedules.at(0), defaults).lapse_jitter, 100ms);
  EXPECT_THAT(lease_error(R"({"lapse_jitter": "-1s"})"), HasSubstr("/lease/lapse_jitter"));
  EXPECT_THAT(lease_error(R"({"ttl": "1s", "transition": "1s", "retry_period": "100ms",
                             "lapse_jitter": "3s"})"),
              HasSubstr("/lease/lapse_jitter: lapse_jitter (3s) must be at most ttl + transition "
                        "(2s)"));
}

TEST(config_lease, kill_grace_must_not_outlast_stop_grace) {
  EXPECT_THAT(lease_error(R"({"ttl": "4s", "transition": "2s", "stop_grace": "1s"})",
                          R"(, "kill_grace": "5s")"),
              AllOf(HasSubstr("/kill_grace: kill_grace (5s) must not exceed the lease's stop_grace "
                              "(1s)"),
                    HasSubstr("Lower kill_grace, or raise lease.stop_grace")));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"],
                                         "kill_grace": "2s", "lease": {"stop_grace": "1s"})")),
              HasSubstr("/schedules/0/kill_grace: kill_grace (2s) must not exceed"));
}

TEST(config_lease, stop_timeout_defaults_to_the_job_wait_plus_10s_and_must_exceed_it) {
  const std::string schedule = R"("name": "a", "every": "1s", "command": ["x"])";
  const baton::contend_options defaults;
  const auto unset = parse(with_schedule(schedule, R"(, "kill_grace": "2s")"));
  EXPECT_FALSE(unset.stop_timeout);
  EXPECT_EQ(unset.stop_timeout_for(defaults), 12s);  // kill_grace 2s + 1s job wait + 9s
  const auto set = parse(with_schedule(schedule, R"(, "kill_grace": "2s", "stop_timeout": "1m")"));
  EXPECT_EQ(set.stop_timeout_for(defaults), 1min);
  EXPECT_THAT(one_error(with_schedule(schedule, R"(, "kill_grace": "2s", "stop_timeout": "3s")")),
              HasSubstr("test.json: /stop_timeout: stop_timeout (3s) must be longer than the "
                        "longest kill_grace + 1s (3s)"));
  EXPECT_THAT(one_error(with_schedule(schedule, R"(, "stop_timeout": "soon")")),
              HasSubstr("/stop_timeout: invalid duration \"soon\""));
}

TEST(config_lease, per_schedule_override_is_checked_at_its_own_path) {
  auto error = one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x"],
                                          "lease": {"retry_period": "20s"})"));
  EXPECT_THAT(error, HasSubstr("/schedules/0/lease/retry_period: retry_period (20s) must be less "
                               "than ttl (10s)"));
}

TEST(config_lease, malformed_values_are_not_also_reported_as_cross_field_errors) {
  // "ten" is reported once; no rule is checked against the default that would stand in for it.
  EXPECT_THAT(errors_of(with_schedule(R"("name": "a", "every": "1s", "command": ["x"],
                                         "lease": {"ttl": "ten", "retry_period": "20s"})",
                                      R"(, "lease": {"ttl": "2s"})")),
              ElementsAre(HasSubstr("/schedules/0/lease/ttl: invalid duration \"ten\"")));
  EXPECT_THAT(errors_of(with_schedule(R"("name": "a", "every": "1s", "command": ["x"])",
                                      R"(, "lease": {"ttl": "1x", "stop_grace": "9s"})")),
              ElementsAre(HasSubstr("/lease/ttl: invalid duration \"1x\"")));
}

// ---------------------------------------------------------------------------------------------

TEST(config_errors, all_errors_of_a_file_are_reported_at_once) {
  auto errors = errors_of(R"({
    "backend": {"type": "sqlite"},
    "lease": {"ttl": "ten seconds"},
    "log_level": "loud",
    "schedules": [
      {"name": "ok", "every": "1s", "command": ["x"]},
      {"name": "bad name", "every": "5x", "command": []},
      {"name": "c", "cron": "61 * * * *", "time_zone": "Nowhere/Land", "command": ["${NOPE}"]},
      {"name": "ok", "every": "1s", "command": ["y"]}
    ]
  })");
  EXPECT_THAT(errors, Contains(HasSubstr("/backend/path: missing")));
  EXPECT_THAT(errors, Contains(HasSubstr("/lease/ttl: invalid duration \"ten seconds\"")));
  EXPECT_THAT(errors, Contains(HasSubstr("/log_level: invalid value \"loud\"")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/1/name: invalid schedule name")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/1/every: invalid duration \"5x\"")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/1/command: is empty")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/2/time_zone:")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/2/cron:")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/2/command/0: environment variable NOPE")));
  EXPECT_THAT(errors, Contains(HasSubstr("/schedules/3/name: duplicate schedule name \"ok\"")));
  EXPECT_THAT(errors, SizeIs(10));
  for (const auto& e : errors) EXPECT_THAT(e, HasSubstr("test.json: /")) << e;
}

// ---------------------------------------------------------------------------------------------
// hostile input: no crash, no hang, every failure a config_error naming the file and the place

const std::string ok_schedule = R"("name": "a", "every": "1s", "command": ["/bin/true"])";

std::string with_backend(const std::string& backend) {
  return R"({"backend": )" + backend + R"(, "schedules": [{)" + ok_schedule + "}]}";
}

// Each message names the file and a place, is valid UTF-8 (nlohmann's strict dump() accepts
// it) and stays short whatever the input.
void expect_well_formed(const std::vector<std::string>& errors) {
  for (const auto& e : errors) {
    const auto head = e.substr(0, 200);
    EXPECT_THAT(e, StartsWith("test.json: ")) << head;
    EXPECT_LE(e.size(), 1100u) << head;
    EXPECT_NO_THROW((void)nlohmann::json(e).dump()) << "not UTF-8: " << head;
  }
}

std::string repeated(const std::string& s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Issue 14: 100,000 nested arrays in pool_size crashed validate and run (SIGSEGV, recursion in
// the serializer that built the message).
TEST(config_input, deep_nesting_in_pool_size_is_an_error_at_its_path) {
  const auto errors = errors_of(with_backend(R"({"type": "sqlite", "path": "x.db", "pool_size": )" +
                                             repeated("[", 100000) + repeated("]", 100000) + "}"));
  expect_well_formed(errors);
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_THAT(errors[0], AllOf(StartsWith("test.json: /backend/pool_size/0/0/0/"),
                               HasSubstr(": nested deeper than 64 levels of arrays and objects")));
}

TEST(config_input, deep_nesting_anywhere_stops_at_the_limit) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {repeated("[", 100000), "test.json: /0/0/0/"},
      {repeated(R"({"a": )", 100000), "test.json: /a/a/a/"},
      {with_schedule(ok_schedule + R"(, "env": {"X": )" + repeated(R"({"": [)", 50000)),
       "test.json: /schedules/0/env/X//0//0/"},
  };
  for (const auto& [text, start] : cases) {
    const auto errors = errors_of(text);
    expect_well_formed(errors);
    EXPECT_THAT(errors, Contains(AllOf(StartsWith(start), HasSubstr("nested deeper than 64"))));
  }
  // 64 levels are read (and the value is shown shortened); 65 are not.
  const auto at_limit =
      one_error(with_backend(R"({"type": "sqlite", "path": "x.db", "pool_size": )" +
                             repeated("[", 62) + repeated("]", 62) + "}"));
  EXPECT_THAT(at_limit, StartsWith("test.json: /backend/pool_size: expected a positive whole "
                                   "number, found [[[["));
  EXPECT_THAT(at_limit, HasSubstr("... (124 bytes of JSON)"));
  EXPECT_THAT(one_error(with_backend(R"({"type": "sqlite", "path": "x.db", "pool_size": )" +
                                     repeated("[", 63) + repeated("]", 63) + "}")),
              HasSubstr("nested deeper than 64"));
}

// Issue 14: 1e400 ended with "[json.exception.out_of_range.406] ...", exit 1, no path.
TEST(config_input, a_number_beyond_a_double_is_out_of_range_at_its_path) {
  EXPECT_THAT(one_error(with_backend(R"({"type": "sqlite", "path": "x.db", "pool_size": 1e400})")),
              StartsWith("test.json: /backend/pool_size: number out of range: 1e400 at line 1, "
                         "column 61"));
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s", "command": ["x", -1e400])")),
              StartsWith("test.json: /schedules/0/command/1: number out of range: -1e400"));
  EXPECT_THAT(one_error(R"({"lease": {"ttl": 1e999999999999}})"),
              StartsWith("test.json: /lease/ttl: number out of range: 1e999999999999"));
  // Beyond 64 bits but within a double: an ordinary wrong value.
  EXPECT_THAT(one_error(with_backend(
                  R"({"type": "sqlite", "path": "x.db", "pool_size": 18446744073709551616})")),
              StartsWith("test.json: /backend/pool_size: expected a positive whole number, found "
                         "1.8446744073709552e+19"));
}

// Issue 14: a ${VAR} whose value is not UTF-8 ended with "[json.exception.type_error.316] ...",
// exit 1, no path, when a message quoted it.
TEST(config_input, values_that_are_not_utf8_are_quoted_with_replacement_characters) {
  const auto errors = errors_of(
      R"({"backend": {"type": "${BAD}"}, "log_level": "${BAD}",
          "schedules": [{"name": "${BAD}", "every": "${BAD}", "command": ["x"],
                         "working_directory": "${BAD}", "user": "${BAD}",
                         "env": {"A": "${BAD}"}}]})",
      {{"BAD", "\xff\xfe"}});
  expect_well_formed(errors);
  const std::string shown = "\"\xEF\xBF\xBD\xEF\xBF\xBD\"";  // U+FFFD twice, quoted
  EXPECT_THAT(errors, Contains(StartsWith("test.json: /backend/type: unknown backend type " +
                                          shown + " (one of: ")));
  EXPECT_THAT(errors, Contains(StartsWith("test.json: /log_level: invalid value " + shown)));
  EXPECT_THAT(errors,
              Contains(StartsWith("test.json: /schedules/0/name: invalid schedule name " + shown)));
  EXPECT_THAT(errors,
              Contains(StartsWith("test.json: /schedules/0/every: invalid duration " + shown)));
  EXPECT_THAT(errors, Contains(StartsWith("test.json: /schedules/0/working_directory: ")));
  EXPECT_THAT(errors, Contains(StartsWith("test.json: /schedules/0/user: ")));
}

// Any bytes are a valid argument or variable: `run` took the schedule's fingerprint with
// nlohmann's dump(), which threw (exit 1); two values must also not look the same to a reload.
TEST(config_input, arguments_that_are_not_utf8_are_kept_and_fingerprinted_exactly) {
  const std::string text = with_schedule(
      R"("name": "a", "every": "1s", "command": ["/bin/echo", "${BAD}"], "env": {"A": "${BAD}"})");
  const auto a = parse(text, {{"BAD", "\xff\xfe"}});
  const auto b = parse(text, {{"BAD", "\xff\xfd"}});
  EXPECT_EQ(a.schedules.at(0).command.at(1), "\xff\xfe");
  EXPECT_EQ(a.schedules.at(0).env.at("A"), "\xff\xfe");
  const auto fa = baton::config::fingerprint(a, a.schedules[0], a.backend_defaults);
  EXPECT_EQ(fa, baton::config::fingerprint(a, a.schedules[0], a.backend_defaults));
  EXPECT_NE(fa, baton::config::fingerprint(b, b.schedules[0], b.backend_defaults));
}

TEST(config_input, invalid_utf8_in_the_text_is_a_json_error_shown_as_valid_utf8) {
  for (const std::string text : {"{\"backend\": \"\xff\"}", "{\"\xc0\x80\": 1}",
                                 "{\"a\": \"\xed\xa0\x80\"}", "{\"k\": \"\\ud800\"}"}) {
    const auto errors = errors_of(text);
    expect_well_formed(errors);
    EXPECT_THAT(errors, ElementsAre(StartsWith("test.json: invalid JSON: parse error at line 1")));
  }
}

TEST(config_input, long_values_keys_and_tokens_are_shortened_in_messages) {
  const std::string huge(1 << 20, 'x');
  const auto errors = errors_of(R"({"backend": {"type": ")" + huge + R"("}, ")" + huge +
                                R"(": 1, "schedules": [{)" + ok_schedule + "}]}");
  expect_well_formed(errors);
  EXPECT_THAT(errors, Contains(AllOf(StartsWith("test.json: /backend/type: unknown backend type "
                                                "\"xxxx"),
                                     HasSubstr("xxx...\" (1048576 bytes)"))));
  EXPECT_THAT(errors, Contains(AllOf(StartsWith("test.json: /xxxx"), HasSubstr("xxx...xxx"),
                                     HasSubstr(": unknown key \"xxx"),
                                     HasSubstr("...\" (1048576 bytes)"))));
  // An unterminated string: nlohmann's message quotes the whole token it read.
  const auto unterminated = errors_of(R"({"backend": ")" + huge);
  expect_well_formed(unterminated);
  EXPECT_THAT(unterminated, ElementsAre(AllOf(StartsWith("test.json: invalid JSON: parse error"),
                                              HasSubstr("...' (1048577 bytes)"))));
}

TEST(config_input, variable_expansion_is_bounded) {
  const std::map<std::string, std::string> env{{"V", std::string(1 << 20, 'v')}};
  EXPECT_THAT(one_error(with_schedule(R"("name": "a", "every": "1s",
                                         "command": ["x", "${V}${V}${V}${V}${V}"])"),
                        env),
              StartsWith("test.json: /schedules/0/command/1: with ${V} replaced, the value is "
                         "longer than 4 MiB (the limit)"));
  EXPECT_THAT(
      one_error(
          with_schedule(
              R"("name": "a", "every": "1s", "command": ["x", "${V}", "${V}", "${V}", "${V}", "${V}", "${V}"])"),
          env),
      StartsWith("test.json: /schedules/0/command/5: the ${NAME} references of this file add more "
                 "than 4 MiB to it in all (the limit)"));
}

TEST(config_input, thousands_of_errors_list_the_first_thousand_and_count_all) {
  std::string keys;
  for (int i = 0; i < 1500; ++i) keys += ", \"k" + std::to_string(i) + "\": 0";
  try {
    parse(std::string("{") + minimal_backend + keys + R"(, "schedules": [{)" + ok_schedule + "}]}");
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_EQ(e.count(), 1500u);
    ASSERT_THAT(e.errors(), SizeIs(1001));
    EXPECT_THAT(e.errors()[999], AllOf(StartsWith("test.json: /k"), HasSubstr(": unknown key")));
    EXPECT_EQ(e.errors()[1000], "test.json: 500 more errors not listed (only the first 1000 are)");
  }
}

// nlohmann's parser callback rescans the enclosing array after each element: 200,000 schedules
// took 9 s, 300,000 about 20 s, 500,000 (a 4 MiB file) over 3 minutes. Measured as a ratio, not
// against a wall-clock bound (a loaded or sanitized machine is slower, but alike for both sizes):
// 8 times the elements take about 8 times as long when linear, 64 times when quadratic. Each
// size is timed three times and the fastest run counts (load only ever adds time).
TEST(config_input, a_long_array_of_objects_is_read_in_linear_time) {
  auto fastest_parse = [](std::size_t elements) {
    const std::string text = std::string("{") + minimal_backend + R"(, "schedules": [)" +
                             repeated(R"({"x": 0},)", elements - 1) + R"({"x": 0}]})";
    auto best = std::chrono::steady_clock::duration::max();
    for (int run = 0; run < 3; ++run) {
      const auto start = std::chrono::steady_clock::now();
      try {
        parse(text);
        ADD_FAILURE() << "no error";
      } catch (const config_error& e) {
        EXPECT_EQ(e.count(), 4 * elements);  // each: unknown key, no name, no trigger, no command
      }
      best = std::min(best, std::chrono::steady_clock::now() - start);
    }
    return std::chrono::duration<double>(best).count();
  };
  const double small = fastest_parse(10'000);
  const double large = fastest_parse(80'000);
  EXPECT_LT(large / small, 24.0) << "10,000 elements: " << small << " s, 80,000: " << large
                                 << " s (linear: about 8 times, quadratic: 64 times)";
}

TEST(config_input, text_beyond_the_size_limit_is_refused) {
  baton::config::config_limits limits;
  limits.max_bytes = 100;
  const std::string text = with_schedule(ok_schedule) + std::string(200, ' ');
  try {
    baton::config::parse_config(text, "test.json", "/etc/baton", fake_env({}), limits);
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_THAT(e.errors(),
                ElementsAre("test.json: is " + std::to_string(text.size()) +
                            " bytes, larger than 100 bytes, the limit for a config file"));
  }
  EXPECT_THAT(one_error("  \n "),
              "test.json: is empty: expected a JSON object with \"backend\" and \"schedules\"");
}

// ---------------------------------------------------------------------------------------------
// reading the file: bounded in size and time

// The messages of the config_error that load_config(file) throws.
std::vector<std::string> load_errors(const std::filesystem::path& file,
                                     const baton::config::config_limits& limits = {}) {
  try {
    baton::config::load_config(file, fake_env({}), limits);
  } catch (const config_error& e) {
    return e.errors();
  }
  ADD_FAILURE() << "no config_error for " << file;
  return {};
}

// Issue 14: `--config /dev/zero` grew to 2.1 GB in 15 s.
TEST(config_file, dev_zero_stops_at_the_size_limit) {
  EXPECT_THAT(load_errors("/dev/zero"),
              ElementsAre("/dev/zero: is larger than 4 MiB, the limit for a config file"));
}

TEST(config_file, a_file_beyond_the_size_limit_is_refused_before_reading) {
  const auto dir = std::filesystem::path(baton::test::temp_dir("config-size"));
  std::ofstream(dir / "big.json") << std::string((4 << 20) + 1, ' ');
  EXPECT_THAT(load_errors(dir / "big.json"),
              ElementsAre((dir / "big.json").string() +
                          ": is 4194305 bytes, larger than 4 MiB, the limit for a config file"));
  std::ofstream(dir / "at-limit.json") << with_schedule(ok_schedule) << std::string(1000, ' ');
  baton::config::config_limits limits;
  limits.max_bytes = std::filesystem::file_size(dir / "at-limit.json");
  EXPECT_NO_THROW(baton::config::load_config(dir / "at-limit.json", fake_env({}), limits));
  limits.max_bytes -= 1;
  EXPECT_THAT(load_errors(dir / "at-limit.json", limits),
              ElementsAre(HasSubstr("larger than " + std::to_string(limits.max_bytes) + " bytes")));
}

TEST(config_file, directories_sockets_and_empty_files_are_named) {
  const auto dir = std::filesystem::path(baton::test::temp_dir("config-kinds"));
  EXPECT_THAT(load_errors(dir), ElementsAre(dir.string() + ": is a directory, not a config file"));

  const auto socket_path = dir / "sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_THAT(load_errors(socket_path),
              ElementsAre(socket_path.string() + ": is a socket, not a config file"));
  ::close(fd);

  std::ofstream(dir / "empty.json").flush();
  EXPECT_THAT(load_errors(dir / "empty.json"), ElementsAre(HasSubstr("empty.json: is empty")));
}

TEST(config_file, a_fifo_nobody_writes_to_fails_after_the_read_timeout) {
  const auto dir = std::filesystem::path(baton::test::temp_dir("config-fifo"));
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  baton::config::config_limits limits;
  limits.read_timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(load_errors(fifo, limits),
              ElementsAre(fifo.string() +
                          ": did not deliver the whole config within 300ms (a pipe or FIFO that "
                          "nobody writes to or closes?)"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST(config_file, a_fifo_with_a_writer_is_read_like_a_file) {
  const auto dir = std::filesystem::path(baton::test::temp_dir("config-fifo"));
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string text = with_schedule(ok_schedule);
  std::thread writer([&] {
    int fd = -1;  // opening without O_NONBLOCK would wait for ever if the reader failed
    baton::test::wait_until(
        [&] { return (fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0; }, 5s);
    if (fd < 0) return;
    for (char c : text) ASSERT_EQ(::write(fd, &c, 1), 1);  // in many small pieces
    ::close(fd);
  });
  baton::config::config_limits limits;
  limits.read_timeout = 10s;
  std::optional<daemon_config> c;
  EXPECT_NO_THROW(c = baton::config::load_config(fifo, fake_env({}), limits));
  writer.join();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->schedules.at(0).name, "a");
}

}  // namespace
