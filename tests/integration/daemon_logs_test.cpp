// The daemon's log: job output with control bytes cannot forge log lines or drive a terminal
// (escaped), --log-format json writes one JSON object per line with the structured fields, and
// "warning" is accepted as a level in the config and on the command line.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon.hpp"
#include "support/env.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using baton::test::daemon_path;
using baton::test::json_string;
using baton::test::process;
using baton::test::read_file;
using baton::test::run_baton_command;
using baton::test::wait_until;
using baton::test::write_file;
using ::testing::HasSubstr;
using ::testing::Not;

/// A config on a fresh SQLite file with one schedule running `script` (sh -c) at once.
fs::path write_config(const fs::path& dir, const std::string& name, const std::string& script,
                      const std::string& extra = "") {
  write_file(dir / "baton.json", "{\"backend\": {\"type\": \"sqlite\", \"path\": " +
                                     json_string((dir / "baton.db").string()) + "},\n" + extra +
                                     " \"schedules\": [{\"name\": " + json_string(name) +
                                     ", \"every\": \"1h\", \"command\": [\"/bin/sh\", \"-c\", " +
                                     json_string(script) + "]}]}\n");
  return dir / "baton.json";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(daemon_logs, job_output_control_bytes_are_escaped_not_forged) {
  const fs::path dir = baton::test::temp_dir("logs-escape");
  const std::string name = baton::test::unique_name("esc");
  const auto config = write_config(
      dir, name,
      "printf 'ok\\r2026-01-01T00:00:00Z error [other] forged\\n'; printf '\\033[2J\\n'; "
      "printf 'bad \\377 byte\\n'; printf 'bell\\007 del\\177 end\\n'");
  process daemon({daemon_path(), "run", "--config", config.string()}, dir / "out", dir / "err");
  auto err = [&] { return read_file(dir / "err"); };
  ASSERT_TRUE(
      wait_until([&] { return err().find("exited with status 0") != std::string::npos; }, 30s))
      << err();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(20s), std::optional<int>(0)) << err();
  const std::string log = err();
  const std::string tag = "[" + name + "] stdout: ";
  EXPECT_THAT(log, HasSubstr(tag + "ok\\r2026-01-01T00:00:00Z error [other] forged\n")) << log;
  EXPECT_THAT(log, HasSubstr(tag + "\\e[2J\n")) << log;
  EXPECT_THAT(log, HasSubstr(tag + "bad \\xff byte\n")) << log;
  EXPECT_THAT(log, HasSubstr(tag + "bell\\a del\\x7f end\n")) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw ESC reached the log";
  EXPECT_EQ(log.find('\r'), std::string::npos) << "a raw CR reached the log";
  EXPECT_EQ(log.find('\x7f'), std::string::npos) << "a raw DEL reached the log";
  // The forged text stays inside the job's line: no line of the log begins with it.
  for (const auto& line : lines_of(log))
    EXPECT_NE(line.rfind("2026-01-01T00:00:00Z", 0), 0u) << line;
}

TEST(daemon_logs, json_format_writes_one_object_per_line_with_fields) {
  const fs::path dir = baton::test::temp_dir("logs-json");
  const std::string name = baton::test::unique_name("json");
  // The config asks for text; --log-format json overrides it. Job output with a quote, a
  // backslash, ESC and an invalid byte must still give valid JSON.
  const auto config = write_config(
      dir, name, "printf 'hello \"quoted\" back\\\\slash \\033[1m \\377\\n'; echo second >&2",
      " \"log_format\": \"text\",\n");
  process daemon({daemon_path(), "run", "--config", config.string(), "--log-format", "json"},
                 dir / "out", dir / "err");
  auto err = [&] { return read_file(dir / "err"); };
  ASSERT_TRUE(
      wait_until([&] { return err().find("\"event\":\"job.exited\"") != std::string::npos; }, 30s))
      << err();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(20s), std::optional<int>(0)) << err();

  bool saw_stdout = false, saw_stderr = false, saw_acquired = false, saw_started = false;
  std::size_t lines = 0;
  for (const auto& line : lines_of(err())) {
    ++lines;
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << line;
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_TRUE(j.contains("time") && j["time"].is_string()) << line;
    EXPECT_TRUE(j.contains("level") && j["level"].is_string()) << line;
    EXPECT_TRUE(j.contains("msg") && j["msg"].is_string()) << line;
    const std::string msg = j["msg"];
    const std::string event = j.value("event", "");
    if (event == "job.output") {
      EXPECT_EQ(j.value("schedule", ""), name) << line;
      EXPECT_GT(j.value("fence", 0), 0) << line;
      if (msg.rfind("stdout: ", 0) == 0) {
        saw_stdout = true;
        EXPECT_EQ(msg, "stdout: hello \"quoted\" back\\slash \\e[1m \\xff") << line;
      }
      if (msg == "stderr: second") saw_stderr = true;
    }
    if (event == "lease.acquired") {
      saw_acquired = true;
      EXPECT_EQ(j.value("schedule", ""), name) << line;
      EXPECT_GT(j.value("fence", 0), 0) << line;
      EXPECT_FALSE(j.value("node", "").empty()) << line;
      EXPECT_THAT(msg, Not(HasSubstr(name))) << "the schedule is a field, not in the message";
    }
    if (event == "daemon.started") saw_started = true;
  }
  EXPECT_GT(lines, 3u);
  EXPECT_TRUE(saw_stdout) << err();
  EXPECT_TRUE(saw_stderr) << err();
  EXPECT_TRUE(saw_acquired) << err();
  EXPECT_TRUE(saw_started) << err();
}

TEST(daemon_logs, warning_is_accepted_as_a_level_in_config_and_command_line) {
  const fs::path dir = baton::test::temp_dir("logs-warning");
  const auto config = write_config(dir, baton::test::unique_name("warning"), "true",
                                   " \"log_level\": \"warning\",\n");
  auto r = run_baton_command({"validate", "--config", config.string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("log: level warn, format text")) << r.out;
  r = run_baton_command(
      {"validate", "--config", config.string(), "--log-level", "warning", "--log-format", "json"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = run_baton_command({"validate", "--config", config.string(), "--log-format", "xml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--log-format: unknown format 'xml'"));
  write_config(dir, "bad", "true", " \"log_format\": \"yaml\",\n");
  r = run_baton_command({"validate", "--config", config.string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("/log_format: invalid value \"yaml\"")) << r.err;
}

}  // namespace
