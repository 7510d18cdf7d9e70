#include "baton/mutex/names.hpp"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/mutex/errc.hpp"
#include "baton/mutex/options.hpp"

TEST(mutex_name, accepts_letters_digits_dot_underscore_dash_up_to_128) {
  EXPECT_NO_THROW(baton::validate_mutex_name("nightly-report_v2.daily"));
  EXPECT_NO_THROW(baton::validate_mutex_name(std::string(128, 'a')));
  EXPECT_NO_THROW(baton::validate_mutex_name("a"));
}

TEST(mutex_name, rejects_bad_names_with_clear_messages) {
  auto message = [](std::string_view name) { return baton::mutex_name_error(name); };
  EXPECT_EQ(message(""), "mutex name is empty");
  EXPECT_NE(message(std::string(129, 'a')).find("129 characters long, at most 128"),
            std::string::npos);
  EXPECT_NE(message("a b").find("' ' at position 1"), std::string::npos);
  EXPECT_NE(message("a/b").find("'/' at position 1"), std::string::npos);
  EXPECT_NE(message("caf\xc3\xa9").find("0xc3 at position 3"), std::string::npos);
  EXPECT_NE(message(std::string("a\0b", 3)).find("0x00"), std::string::npos);
  EXPECT_THROW(baton::validate_mutex_name("{x}"), std::invalid_argument);
  // Path components on ZooKeeper: no backend can keep them apart from their parent.
  EXPECT_NE(message(".").find("'.' is reserved"), std::string::npos) << message(".");
  EXPECT_NE(message("..").find("'..' is reserved"), std::string::npos) << message("..");
  EXPECT_EQ(message("..."), "");
  EXPECT_EQ(message(".a"), "");
}

TEST(contender_id, default_ids_are_unique_and_name_pid_and_host) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(baton::make_contender_id());
  EXPECT_EQ(ids.size(), 1000u);
  auto id = baton::make_contender_id();
  EXPECT_NE(id.find(':' + std::to_string(::getpid()) + '@'), std::string::npos) << id;
}

TEST(contender_id, uuid_ids_are_version_4_and_unique) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    auto id = baton::make_uuid_contender_id();
    ASSERT_EQ(id.size(), 36u);
    ASSERT_EQ(id[14], '4');
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(contend_options, validation_names_the_bad_field) {
  using namespace std::chrono_literals;
  baton::contend_options o;
  EXPECT_NO_THROW(baton::validate(o));
  o.ttl = 0ms;
  try {
    baton::validate(o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ttl must be greater than 0"), std::string::npos);
  }
  o = {};
  o.transition = -1ms;
  EXPECT_THROW(baton::validate(o), std::invalid_argument);
  o = {};
  o.drift_margin = 20s;
  EXPECT_THROW(baton::validate(o), std::invalid_argument);
  EXPECT_EQ(baton::contend_options{}.effective_drift_margin(), 320ms);  // 2% of 16 s
}

TEST(contend_options, lapse_jitter_is_checked_against_zero_and_the_lease) {
  using namespace std::chrono_literals;
  const auto fields = [](const baton::contend_options& o) {
    std::vector<std::string> out;
    for (const auto& p : baton::check(o)) out.push_back(p.field);
    return out;
  };
  baton::contend_options o;
  EXPECT_EQ(o.lapse_jitter, 100ms);
  o.lapse_jitter = 0ms;
  EXPECT_TRUE(baton::check(o).empty());
  o.lapse_jitter = -1ms;
  EXPECT_EQ(fields(o), std::vector<std::string>{"lapse_jitter"});
  o.lapse_jitter = o.lease();
  EXPECT_TRUE(baton::check(o).empty());
  o.lapse_jitter = o.lease() + 1ms;
  ASSERT_EQ(fields(o), std::vector<std::string>{"lapse_jitter"});
  EXPECT_NE(baton::join_messages(baton::check(o)).find("at most ttl + transition (16s)"),
            std::string::npos)
      << baton::join_messages(baton::check(o));
}

TEST(errc, retryable_classification) {
  EXPECT_TRUE(baton::is_retryable(baton::errc::connection_lost));
  EXPECT_TRUE(baton::is_retryable(baton::errc::timeout));
  EXPECT_FALSE(baton::is_retryable(baton::errc::not_owner));
  EXPECT_FALSE(baton::is_retryable(baton::errc::auth_failed));
  EXPECT_EQ(std::error_code(baton::errc::not_owner).message(),
            "not the owner of the mutex (or a stale fence)");
}
