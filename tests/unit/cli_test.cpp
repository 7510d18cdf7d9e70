// The `baton` command line (daemon/cli): `drain` and its options, parsed without running anything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {

using namespace std::chrono_literals;
using baton::daemon::command_line;
using baton::daemon::parse_command_line;
using baton::daemon::usage_error;
using ::testing::AllOf;
using ::testing::HasSubstr;

command_line parse(const std::vector<std::string>& args) { return parse_command_line(args); }

// The message of the usage_error that parsing `args` throws (fails the test if none).
std::string usage_error_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const usage_error& e) {
    return e.what();
  }
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  ADD_FAILURE() << "no usage_error for: " << joined;
  return {};
}

TEST(cli_drain, defaults_wait_five_minutes_for_the_configs_node) {
  const auto cl = parse({"drain", "--config", "baton.json"});
  EXPECT_EQ(cl.command, "drain");
  EXPECT_EQ(cl.config, "baton.json");
  EXPECT_EQ(cl.node, "");  // the config's node.id
  EXPECT_FALSE(cl.undo);
  EXPECT_FALSE(cl.no_wait);
  EXPECT_EQ(cl.timeout, 5min);
}

TEST(cli_drain, takes_node_undo_no_wait_and_timeout) {
  auto cl = parse({"drain", "--config", "baton.json", "--node", "web-1.eu_west", "--timeout=90s"});
  EXPECT_EQ(cl.node, "web-1.eu_west");
  EXPECT_EQ(cl.timeout, 90s);
  cl = parse({"drain", "-c", "baton.json", "--node=web-2", "--undo"});
  EXPECT_EQ(cl.node, "web-2");
  EXPECT_TRUE(cl.undo);
  cl = parse({"drain", "--no-wait", "--config", "baton.json"});
  EXPECT_TRUE(cl.no_wait);
  cl = parse({"--log-level", "debug", "drain", "--config", "baton.json", "--timeout", "1h"});
  EXPECT_EQ(cl.timeout, 1h);
  EXPECT_EQ(cl.log_level, "debug");
}

TEST(cli_drain, bad_arguments_name_the_option) {
  EXPECT_THAT(usage_error_of({"drain"}), HasSubstr("drain: --config FILE is required"));
  EXPECT_THAT(usage_error_of({"drain", "--config", "b.json", "--node"}),
              HasSubstr("--node needs a value"));
  EXPECT_THAT(usage_error_of({"drain", "--config", "b.json", "--node", "web 1"}),
              AllOf(HasSubstr("--node: 'web 1' is not a node id"),
                    HasSubstr("letters, digits, '.', '_' and '-'")));
  EXPECT_THAT(usage_error_of({"drain", "--config", "b.json", "--node="}),
              HasSubstr("--node: '' is not a node id: must not be empty"));
  for (const char* bad : {"5", "0s", "1.5m", "soon", "-1s"})
    EXPECT_THAT(usage_error_of({"drain", "--config", "b.json", "--timeout", bad}),
                AllOf(HasSubstr("--timeout: '" + std::string(bad) + "'"),
                      HasSubstr("is not a positive duration")))
        << bad;
  EXPECT_THAT(
      usage_error_of({"drain", "--config", "b.json", "--undo", "--timeout", "1m"}),
      HasSubstr("drain: --timeout is how long to wait for the drain; --undo does not wait"));
  EXPECT_THAT(usage_error_of({"drain", "--config", "b.json", "--no-wait", "--timeout", "1m"}),
              HasSubstr("--no-wait does not wait"));
  EXPECT_THAT(usage_error_of({"drain", "web-1", "--config", "b.json"}),
              HasSubstr("drain: unexpected argument 'web-1'"));
  EXPECT_THAT(usage_error_of({"drain", "--config", "b.json", "--json"}),
              HasSubstr("drain: --json is not an option of drain"));
}

TEST(cli_drain, its_options_belong_to_drain_only) {
  EXPECT_THAT(usage_error_of({"status", "--config", "b.json", "--node", "web-1"}),
              HasSubstr("status: --node is not an option of status"));
  EXPECT_THAT(usage_error_of({"run", "--config", "b.json", "--undo"}),
              HasSubstr("run: --undo is not an option of run"));
  EXPECT_THAT(usage_error_of({"pause", "x", "--config", "b.json", "--timeout", "1m"}),
              HasSubstr("pause: --timeout is not an option of pause"));
}

TEST(cli_drain, help_lists_the_verb_its_options_and_the_signals) {
  const auto usage = baton::daemon::usage();
  EXPECT_THAT(usage, HasSubstr("baton drain --config FILE [--node ID] [--undo] [--no-wait]"));
  const auto help = baton::daemon::command_help("drain");
  EXPECT_THAT(help,
              AllOf(HasSubstr("Usage: baton drain"), HasSubstr("--node ID"), HasSubstr("--undo"),
                    HasSubstr("--no-wait"), HasSubstr("--timeout DURATION"), HasSubstr("SIGUSR1")));
  EXPECT_THAT(baton::daemon::command_help("run"),
              AllOf(HasSubstr("SIGUSR1"), HasSubstr("SIGUSR2")));
  const auto cl = parse({"help", "drain"});
  EXPECT_TRUE(cl.help);
  EXPECT_EQ(cl.command, "drain");
}

}  // namespace
