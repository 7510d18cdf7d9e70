// The config's `node`, `balance` and a schedule's `requires` / `prefers`: defaults (balance on in
// the daemon), the scheduler options they become, every error at its JSON path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "baton/config/config.hpp"
#include "baton/scheduler/balance.hpp"

namespace {

using namespace std::chrono_literals;
using baton::config::config_error;
using baton::config::daemon_config;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

daemon_config parse(const std::string& text, std::map<std::string, std::string> env = {}) {
  return baton::config::parse_config(text, "test.json", "/etc/baton",
                                     [env](const std::string& name) -> std::optional<std::string> {
                                       auto it = env.find(name);
                                       if (it == env.end()) return std::nullopt;
                                       return it->second;
                                     });
}

std::vector<std::string> errors_of(const std::string& text) {
  try {
    parse(text);
  } catch (const config_error& e) {
    return e.errors();
  }
  ADD_FAILURE() << "no config_error for:\n" << text;
  return {};
}

// A config with `top` (top-level members after the backend, each with a leading comma) and one
// schedule with the members `schedule`.
std::string config_with(const std::string& top, const std::string& schedule = "") {
  return R"({"backend": {"type": "memory"})" + top +
         R"(, "schedules": [{"name": "job", "every": "1m", "command": ["/bin/true"])" + schedule +
         "}]}";
}

std::string one_error(const std::string& text) {
  const auto errors = errors_of(text);
  EXPECT_THAT(errors, SizeIs(1)) << text;
  return errors.empty() ? std::string() : errors.front();
}

// ---------------------------------------------------------------------------------------------
// defaults and values

TEST(config_balance, is_on_by_default_without_node_id_or_tags) {
  const auto c = parse(config_with(""));
  EXPECT_TRUE(c.balance.enabled);
  EXPECT_EQ(c.balance.node_id, "");
  EXPECT_THAT(c.balance.tags, IsEmpty());
  const baton::balance_options library;
  EXPECT_EQ(c.balance.heartbeat, library.heartbeat);
  EXPECT_EQ(c.balance.member_timeout, library.member_timeout);
  EXPECT_EQ(c.balance.settle, library.settle);
  EXPECT_EQ(c.balance.handoff_rate, library.handoff_rate);
  EXPECT_THAT(c.schedules.at(0).required_tags, IsEmpty());
  EXPECT_THAT(c.schedules.at(0).preferred_tags, IsEmpty());
  EXPECT_TRUE(baton::config::make_scheduler_options(c, c.backend_defaults).balance.enabled);
}

TEST(config_balance, node_id_and_tags_become_the_balance_options_tags_sorted) {
  const auto c = parse(
      config_with(R"(, "node": {"id": "web-1.eu_west", "tags": ["gpu", "eu-west", "Z.9_x"]})"));
  EXPECT_EQ(c.balance.node_id, "web-1.eu_west");
  EXPECT_THAT(c.balance.tags, ElementsAre("Z.9_x", "eu-west", "gpu"));
  const auto opts = baton::config::make_scheduler_options(c, c.backend_defaults, "contender-7");
  EXPECT_EQ(opts.balance.node_id, "web-1.eu_west");
  EXPECT_THAT(opts.balance.tags, ElementsAre("Z.9_x", "eu-west", "gpu"));
  EXPECT_EQ(opts.contender_id, "contender-7");
}

TEST(config_balance, node_id_takes_a_variable_from_the_environment) {
  const auto c = parse(config_with(R"(, "node": {"id": "${NODE}"})"), {{"NODE", "host-3"}});
  EXPECT_EQ(c.balance.node_id, "host-3");
  EXPECT_THAT(c.referenced_env, ElementsAre("NODE"));
}

TEST(config_balance, a_boolean_turns_it_on_or_off) {
  EXPECT_FALSE(parse(config_with(R"(, "balance": false)")).balance.enabled);
  EXPECT_TRUE(parse(config_with(R"(, "balance": true)")).balance.enabled);
  const auto off = parse(config_with(R"(, "balance": false, "node": {"tags": ["gpu"]})"));
  const auto opts = baton::config::make_scheduler_options(off, off.backend_defaults);
  EXPECT_FALSE(opts.balance.enabled);
  EXPECT_THAT(opts.balance.tags, ElementsAre("gpu"));  // tags apply with balance off too
}

TEST(config_balance, an_object_sets_each_field_and_enabled_defaults_to_true) {
  const auto c = parse(config_with(
      R"(, "balance": {"heartbeat": "500ms", "member_timeout": "4s", "settle": "3s", "handoff_rate": 2.5})"));
  EXPECT_TRUE(c.balance.enabled);
  EXPECT_EQ(c.balance.heartbeat, 500ms);
  EXPECT_EQ(c.balance.member_timeout, 4s);
  EXPECT_EQ(c.balance.settle, 3s);
  EXPECT_EQ(c.balance.handoff_rate, 2.5);
  const auto opts = baton::config::make_scheduler_options(c, c.backend_defaults);
  EXPECT_EQ(opts.balance.heartbeat, 500ms);
  EXPECT_EQ(opts.balance.member_timeout, 4s);
  EXPECT_EQ(opts.balance.settle, 3s);
  EXPECT_EQ(opts.balance.handoff_rate, 2.5);
  EXPECT_FALSE(parse(config_with(R"(, "balance": {"enabled": false})")).balance.enabled);
  EXPECT_EQ(parse(config_with(R"(, "balance": {"handoff_rate": 10})")).balance.handoff_rate, 10.0);
}

TEST(config_balance, member_timeout_and_settle_default_from_the_lease_and_heartbeat) {
  // member_timeout: the lease transition, at least 3 heartbeats; settle: 2 heartbeats.
  auto c = parse(config_with(R"(, "lease": {"ttl": "10s", "transition": "6s"})"));
  EXPECT_EQ(c.member_timeout_for(c.backend_defaults), 6s);
  EXPECT_EQ(c.settle_for(c.backend_defaults), 2s);
  c = parse(config_with(
      R"(, "lease": {"ttl": "10s", "transition": "2s"}, "balance": {"heartbeat": "1s"})"));
  EXPECT_EQ(c.member_timeout_for(c.backend_defaults), 3s);
  c = parse(config_with(R"(, "balance": {"member_timeout": "9s", "settle": "5s"})"));
  EXPECT_EQ(c.member_timeout_for(c.backend_defaults), 9s);
  EXPECT_EQ(c.settle_for(c.backend_defaults), 5s);
}

TEST(config_balance, requires_and_prefers_become_sorted_schedule_tags) {
  const auto c = parse(config_with(R"(, "node": {"tags": ["gpu"]})",
                                   R"(, "requires": ["ssd", "gpu"], "prefers": ["eu-west"])"));
  const auto& s = c.schedules.at(0);
  EXPECT_THAT(s.required_tags, ElementsAre("gpu", "ssd"));
  EXPECT_THAT(s.preferred_tags, ElementsAre("eu-west"));
  const auto opts = baton::config::make_schedule_options(c, s, c.backend_defaults);
  EXPECT_THAT(opts.required_tags, ElementsAre("gpu", "ssd"));
  EXPECT_THAT(opts.preferred_tags, ElementsAre("eu-west"));
  // Empty arrays are allowed (no constraint).
  const auto none = parse(config_with("", R"(, "requires": [], "prefers": [])"));
  EXPECT_THAT(none.schedules.at(0).required_tags, IsEmpty());
}

TEST(config_balance, requires_and_prefers_are_part_of_the_fingerprint_order_is_not) {
  auto fingerprint = [](const std::string& schedule) {
    const auto c = parse(config_with("", schedule));
    return baton::config::fingerprint(c, c.schedules.at(0), c.backend_defaults);
  };
  const auto plain = fingerprint("");
  const auto gpu = fingerprint(R"(, "requires": ["gpu"])");
  EXPECT_NE(plain, gpu);
  EXPECT_NE(gpu, fingerprint(R"(, "requires": ["gpu", "ssd"])"));
  EXPECT_EQ(fingerprint(R"(, "requires": ["gpu", "ssd"])"),
            fingerprint(R"(, "requires": ["ssd", "gpu"])"));
  EXPECT_NE(plain, fingerprint(R"(, "prefers": ["gpu"])"));
  EXPECT_NE(gpu, fingerprint(R"(, "prefers": ["gpu"])"));  // required is not preferred
  EXPECT_EQ(plain, fingerprint(R"(, "requires": [])"));
}

// ---------------------------------------------------------------------------------------------
// errors

TEST(config_balance_errors, bad_node_ids_name_the_path) {
  EXPECT_THAT(one_error(config_with(R"(, "node": {"id": ""})")),
              AllOf(HasSubstr("test.json: /node/id: "), HasSubstr("must not be empty")));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"id": "web 1"})")),
              AllOf(HasSubstr("/node/id: invalid node id \"web 1\""),
                    HasSubstr("letters, digits, '.', '_' and '-'")));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"id": ")" + std::string(101, 'a') + "\"}")),
              AllOf(HasSubstr("/node/id: "), HasSubstr("at most 100")));
  EXPECT_NO_THROW(parse(config_with(R"(, "node": {"id": ")" + std::string(100, 'a') + "\"}")));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"id": 7})")),
              HasSubstr("/node/id: expected a string, found a number"));
  EXPECT_THAT(one_error(config_with(R"(, "node": "web-1")")),
              HasSubstr("/node: expected an object, found a string"));
  EXPECT_THAT(
      one_error(config_with(R"(, "node": {"name": "web-1"})")),
      AllOf(HasSubstr("/node/name: unknown key \"name\""), HasSubstr("allowed here: id, tags")));
}

TEST(config_balance_errors, bad_tags_name_the_element) {
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": "gpu"})")),
              HasSubstr("/node/tags: expected an array of tags"));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": ["gpu", 3]})")),
              HasSubstr("/node/tags/1: expected a string, found a number"));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": ["gpu", "eu/west"]})")),
              HasSubstr("/node/tags/1: invalid tag \"eu/west\""));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": [""]})")),
              HasSubstr("/node/tags/0: invalid tag \"\": must not be empty"));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": [")" + std::string(65, 't') + "\"]}")),
              AllOf(HasSubstr("/node/tags/0: "), HasSubstr("at most 64")));
  EXPECT_NO_THROW(parse(config_with(R"(, "node": {"tags": [")" + std::string(64, 't') + "\"]}")));
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": ["gpu", "ssd", "gpu"]})")),
              HasSubstr("/node/tags/2: duplicate tag \"gpu\" (also at /node/tags/0)"));
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += (i ? ", \"t" : "\"t") + std::to_string(i) + "\"";
  many += "]";
  EXPECT_THAT(one_error(config_with(R"(, "node": {"tags": )" + many + "}")),
              HasSubstr("/node/tags: has 65 tags, at most 64"));
}

TEST(config_balance_errors, bad_requires_and_prefers_name_the_schedule_and_element) {
  EXPECT_THAT(one_error(config_with("", R"(, "requires": "gpu")")),
              HasSubstr("/schedules/0/requires: expected an array of tags"));
  EXPECT_THAT(one_error(config_with("", R"(, "requires": ["gpu", "g p u"])")),
              HasSubstr("/schedules/0/requires/1: invalid tag \"g p u\""));
  EXPECT_THAT(
      one_error(config_with("", R"(, "prefers": ["a", "a"])")),
      HasSubstr("/schedules/0/prefers/1: duplicate tag \"a\" (also at /schedules/0/prefers/0)"));
  EXPECT_THAT(one_error(config_with("", R"(, "prefers": [null])")),
              HasSubstr("/schedules/0/prefers/0: expected a string, found null"));
  EXPECT_THAT(
      one_error(config_with("", R"(, "require": ["gpu"])")),
      HasSubstr("/schedules/0/require: unknown key \"require\" (did you mean \"requires\"?)"));
}

TEST(config_balance_errors, bad_balance_values_name_the_path) {
  EXPECT_THAT(one_error(config_with(R"(, "balance": "on")")),
              HasSubstr("/balance: expected true, false or an object"));
  EXPECT_THAT(one_error(config_with(R"(, "balance": {"enabled": "yes"})")),
              HasSubstr("/balance/enabled: expected true or false, found a string"));
  EXPECT_THAT(one_error(config_with(R"(, "balance": {"heartbeat": 1})")),
              HasSubstr("/balance/heartbeat: expected a duration string"));
  EXPECT_THAT(one_error(config_with(R"(, "balance": {"settle": "2 s"})")),
              HasSubstr("/balance/settle: invalid duration \"2 s\""));
  EXPECT_THAT(one_error(config_with(R"(, "balance": {"member_timeout": "x"})")),
              HasSubstr("/balance/member_timeout: invalid duration"));
  for (const char* rate : {"0", "-1", "\"5\"", "null"})
    EXPECT_THAT(
        one_error(config_with(R"(, "balance": {"handoff_rate": )" + std::string(rate) + "}")),
        HasSubstr("/balance/handoff_rate: expected a positive number of schedules per second"))
        << rate;
  EXPECT_THAT(
      one_error(config_with(R"(, "balance": {"heartbeats": "1s"})")),
      HasSubstr("/balance/heartbeats: unknown key \"heartbeats\" (did you mean \"heartbeat\"?)"));
}

TEST(config_balance_errors, the_schedulers_own_checks_are_reported_at_the_balance_path) {
  // A member_timeout under two heartbeats (baton::check(balance_options)); a heartbeat of 0 is
  // the default.
  const auto error =
      one_error(config_with(R"(, "balance": {"heartbeat": "1s", "member_timeout": "1s"})"));
  EXPECT_THAT(error, HasSubstr("test.json: /balance/member_timeout: "));
  EXPECT_EQ(parse(config_with(R"(, "balance": {"heartbeat": "0s"})")).balance.heartbeat, 0ms);
}

TEST(config_balance_errors, membership_record_names_are_reserved_for_schedules) {
  for (const char* name : {"baton.nodes", "baton.node.web-1"}) {
    const std::string text = R"({"backend": {"type": "memory"}, "schedules": [{"name": ")" +
                             std::string(name) + R"(", "every": "1m", "command": ["/bin/true"]}]})";
    EXPECT_THAT(one_error(text), AllOf(HasSubstr("/schedules/0/name: schedule name"),
                                       HasSubstr("is reserved"), HasSubstr(name)))
        << name;
  }
  // Only those: a name that merely starts with "baton." is a schedule like any other.
  EXPECT_NO_THROW(parse(R"({"backend": {"type": "memory"}, "schedules": [{"name": "baton.report",
      "every": "1m", "command": ["/bin/true"]}]})"));
}

TEST(config_balance_errors, every_problem_of_node_balance_and_tags_is_reported_at_once) {
  const auto errors = errors_of(
      config_with(R"(, "node": {"id": "a b", "tags": ["x", "x"]}, "balance": {"handoff_rate": 0})",
                  R"(, "requires": ["?"])"));
  EXPECT_THAT(errors, SizeIs(4));
}

}  // namespace
