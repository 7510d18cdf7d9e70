// The Redis backend's URL and parameter parsing, and its error translation (no server needed).
// Built only when the Redis backend is (BATON_WITH_REDIS): its public header is on the
// include path exactly then.
#if __has_include(<baton/backends/redis/redis_backend.hpp>)
#include <gtest/gtest.h>

#include <algorithm>

#include "../../backends/redis/src/redis_config.hpp"
#include "../../backends/redis/src/reply.hpp"
#include "baton/backends/redis/redis_backend.hpp"
#include "baton/mutex/errc.hpp"

using namespace std::chrono_literals;
namespace rd = baton::backends::redis::detail;

TEST(redis_url, host_and_port_with_defaults) {
  auto ep = rd::parse_url("redis://127.0.0.1:6380");
  EXPECT_EQ(ep.host, "127.0.0.1");
  EXPECT_EQ(ep.port, 6380);
  EXPECT_EQ(ep.db, 0);
  EXPECT_TRUE(ep.user.empty());
  EXPECT_TRUE(ep.password.empty());
  auto defaults = rd::parse_url("redis://cache.example");
  EXPECT_EQ(defaults.host, "cache.example");
  EXPECT_EQ(defaults.port, 6379);
}

TEST(redis_url, password_user_and_database) {
  auto ep = rd::parse_url("redis://:s3cret@localhost:7000/4");
  EXPECT_EQ(ep.user, "");
  EXPECT_EQ(ep.password, "s3cret");
  EXPECT_EQ(ep.db, 4);
  auto acl = rd::parse_url("redis://baton:pa%40ss%3Aword@10.0.0.1/2");
  EXPECT_EQ(acl.user, "baton");
  EXPECT_EQ(acl.password, "pa@ss:word");
  EXPECT_EQ(acl.port, 6379);
  EXPECT_EQ(acl.db, 2);
  // An '@' inside the password (unencoded): the last '@' ends the credentials.
  EXPECT_EQ(rd::parse_url("redis://:a@b@host:1").password, "a@b");
}

TEST(redis_url, ipv6_host_in_brackets) {
  auto ep = rd::parse_url("redis://[::1]:6390/1");
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 6390);
  EXPECT_EQ(ep.db, 1);
  EXPECT_EQ(rd::parse_url("redis://[::1]").port, 6379);
}

TEST(redis_url, the_password_is_masked_in_the_display_form_and_in_errors) {
  EXPECT_EQ(rd::parse_url("redis://u:hunter2@h:1").display, "redis://u:***@h:1");
  EXPECT_EQ(rd::parse_url("redis://h:1").display, "redis://h:1");
  try {
    rd::parse_url("redis://:hunter2@h:99999");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("redis://:***@h:99999"), std::string::npos) << e.what();
  }
}

TEST(redis_url, malformed_urls_say_what_is_wrong) {
  auto message = [](const std::string& url) {
    try {
      rd::parse_url(url);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("").find("empty"), std::string::npos);
  EXPECT_NE(message("http://h").find("must start with redis://"), std::string::npos);
  EXPECT_NE(message("redis://").find("host is missing"), std::string::npos);
  EXPECT_NE(message("redis://h:").find("port is empty"), std::string::npos);
  EXPECT_NE(message("redis://h:65536").find("bad port"), std::string::npos);
  EXPECT_NE(message("redis://h:1/one").find("bad database index"), std::string::npos);
  EXPECT_NE(message("redis://user@h").find("':'"), std::string::npos);
  EXPECT_NE(message("redis://:@h").find("password is empty"), std::string::npos);
  EXPECT_NE(message("redis://:%4@h").find("percent-encoding"), std::string::npos);
  EXPECT_NE(message("redis://a:b:c@").find("host is missing"), std::string::npos);
  EXPECT_NE(message("redis://h:1#x").find("not supported"), std::string::npos);
  EXPECT_NE(message("redis://[::1").find("IPv6"), std::string::npos);
  EXPECT_NE(message("redis://h h:1").find("bad host"), std::string::npos);
}

TEST(redis_settings, durations_take_a_unit) {
  auto poll = [](const char* text) {
    return rd::parse_settings({"redis", {{"url", "redis://h"}, {"poll_interval", text}}})
        .poll_interval;
  };
  EXPECT_EQ(poll("250ms"), 250ms);
  EXPECT_EQ(poll("2s"), 2000ms);
  EXPECT_EQ(poll("1m"), 60000ms);
  EXPECT_EQ(poll("1h"), 3'600'000ms);  // the grammar of every baton duration
  for (auto bad : {"", "10", "ms", "-1s", "0s", "1.5s", "1h30m", "5 s", "s1"})
    EXPECT_THROW(poll(bad), std::invalid_argument) << bad;
}

TEST(redis_settings, parameters_and_defaults) {
  baton::backend_config c{"redis", {{"url", "redis://h"}}};
  auto s = rd::parse_settings(c);
  EXPECT_EQ(s.key_prefix, "baton:");
  EXPECT_EQ(s.poll_interval, 1000ms);
  EXPECT_EQ(s.connect_timeout, 2000ms);
  EXPECT_EQ(s.command_timeout, 2000ms);
  EXPECT_EQ(s.handoff_window, 500ms);
  c.params = {{"url", "redis://h"},      {"key_prefix", "app:"},       {"poll_interval", "250ms"},
              {"connect_timeout", "1s"}, {"command_timeout", "750ms"}, {"handoff_window", "300ms"}};
  s = rd::parse_settings(c);
  EXPECT_EQ(s.key_prefix, "app:");
  EXPECT_EQ(s.poll_interval, 250ms);
  EXPECT_EQ(s.connect_timeout, 1000ms);
  EXPECT_EQ(s.command_timeout, 750ms);
  EXPECT_EQ(s.handoff_window, 300ms);
}

TEST(redis_settings, bad_parameters_are_named) {
  auto message = [](std::map<std::string, std::string> params) {
    try {
      rd::parse_settings(baton::backend_config{"redis", std::move(params)});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({}).find("missing: give url"), std::string::npos);
  EXPECT_NE(message({{"url", "redis://h"}, {"key_prefix", "{x}"}}).find("key_prefix"),
            std::string::npos);
  EXPECT_NE(message({{"url", "redis://h"}, {"poll_interval", "soon"}}).find("poll_interval"),
            std::string::npos);
  EXPECT_NE(message({{"url", "redis://h"}, {"hosts", "h"}}).find("unknown key \"hosts\""),
            std::string::npos);
}

// ------------------------------------------------------------------------------ Sentinel

TEST(redis_sentinel_settings, sentinels_master_and_both_logins_are_read) {
  baton::backend_config c{"redis",
                          {{"sentinels", "10.0.0.1:26379,sentinel-b,[::1]:26380"},
                           {"master", "mymaster"},
                           {"user", "app"},
                           {"password", "m-secret"},
                           {"sentinel_user", "watcher"},
                           {"sentinel_password", "s-secret"}}};
  const auto s = rd::parse_settings(c);
  ASSERT_TRUE(s.sentinel);
  EXPECT_EQ(s.sentinel->master, "mymaster");
  ASSERT_EQ(s.sentinel->sentinels.size(), 3u);
  const auto& list = s.sentinel->sentinels;
  EXPECT_EQ(list[0].host, "10.0.0.1");
  EXPECT_EQ(list[0].port, 26379);
  EXPECT_EQ(list[1].host, "sentinel-b");
  EXPECT_EQ(list[1].port, 26379);  // the default sentinel port
  EXPECT_EQ(list[2].host, "::1");
  EXPECT_EQ(list[2].port, 26380);
  EXPECT_EQ(list[2].display, "[::1]:26380");
  for (const auto& sentinel : list) {
    EXPECT_EQ(sentinel.user, "watcher");
    EXPECT_EQ(sentinel.password, "s-secret");
  }
  EXPECT_EQ(s.server.user, "app");
  EXPECT_EQ(s.server.password, "m-secret");
  EXPECT_EQ(s.server.display, "master 'mymaster'");
  // Both passwords are scrubbed from messages about any connection.
  EXPECT_NE(std::find(s.server.secrets.begin(), s.server.secrets.end(), "s-secret"),
            s.server.secrets.end());
  EXPECT_NE(std::find(list[0].secrets.begin(), list[0].secrets.end(), "m-secret"),
            list[0].secrets.end());
  // The url mode has no sentinel settings.
  EXPECT_FALSE(rd::parse_settings({"redis", {{"url", "redis://h"}}}).sentinel);
}

TEST(redis_sentinel_settings, bad_combinations_and_lists_are_named_with_their_parameter) {
  struct bad_case {
    std::map<std::string, std::string> params;
    std::string param, message;
  };
  const std::vector<bad_case> cases = {
      {{{"url", "redis://h"}, {"sentinels", "h:1"}, {"master", "m"}},
       "sentinels",
       "url and sentinels are mutually exclusive"},
      {{{"master", "m"}}, "url", "missing: give url"},
      {{{"sentinels", "h:1"}}, "master", "sentinels need master"},
      {{{"sentinels", "h:1"}, {"master", ""}}, "master", "sentinels need master"},
      {{{"sentinels", "h:1"}, {"master", "my master"}}, "master", "must not contain white space"},
      {{{"url", "redis://h"}, {"master", "m"}}, "master", "master is for sentinel mode"},
      {{{"url", "redis://h"}, {"password", "x"}}, "password", "put the login in the url"},
      {{{"url", "redis://h"}, {"sentinel_password", "x"}},
       "sentinel_password",
       "is for sentinel mode"},
      {{{"sentinels", "h:1"}, {"master", "m"}, {"user", "u"}}, "user", "user needs password"},
      {{{"sentinels", "h:1"}, {"master", "m"}, {"sentinel_user", "u"}},
       "sentinel_user",
       "sentinel_user needs sentinel_password"},
      {{{"sentinels", ""}, {"master", "m"}}, "sentinels", "sentinels '': is empty"},
      {{{"sentinels", "a:1,,b:2"}, {"master", "m"}}, "sentinels", "entry 2 is empty"},
      {{{"sentinels", "a:1,b:99999"}, {"master", "m"}},
       "sentinels",
       "entry 2 'b:99999': bad port '99999'"},
      {{{"sentinels", "a:"}, {"master", "m"}}, "sentinels", "entry 1 'a:': bad port ''"},
      {{{"sentinels", ":26379"}, {"master", "m"}}, "sentinels", "the host is missing"},
      {{{"sentinels", "a:1,a:1"}, {"master", "m"}}, "sentinels", "named twice"},
      {{{"sentinels", "[::1:5"}, {"master", "m"}}, "sentinels", "unterminated '['"},
      {{{"sentinels", "a b:1"}, {"master", "m"}}, "sentinels", "bad host 'a b'"},
  };
  for (const auto& c : cases) {
    try {
      rd::parse_settings(baton::backend_config{"redis", c.params});
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const baton::backend_param_error& e) {
      EXPECT_EQ(e.param(), c.param) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

TEST(redis_sentinel_settings, describe_shows_sentinels_and_master_and_masks_both_passwords) {
  const auto& d = baton::backends::redis::descriptor();
  const baton::backend_config c{"redis",
                                {{"sentinels", "127.0.0.1:26379,127.0.0.1:26380"},
                                 {"master", "mymaster"},
                                 {"password", "m-secret"},
                                 {"sentinel_password", "s-secret"}}};
  const auto text = baton::describe(&d, c);
  EXPECT_NE(text.find("sentinels=127.0.0.1:26379,127.0.0.1:26380"), std::string::npos) << text;
  EXPECT_NE(text.find("master=mymaster"), std::string::npos) << text;
  EXPECT_NE(text.find("password=***"), std::string::npos) << text;
  EXPECT_EQ(text.find("m-secret"), std::string::npos) << text;
  EXPECT_EQ(text.find("s-secret"), std::string::npos) << text;
  const auto secrets = baton::secrets_of(&d, c);
  EXPECT_EQ(secrets.size(), 2u);
}

TEST(redis_errors, native_errors_map_to_baton_errc) {
  auto reply_error = [](const char* text) { return rd::translate({0, text}); };
  using baton::errc;
  EXPECT_EQ(reply_error("NOAUTH Authentication required."), errc::auth_failed);
  EXPECT_EQ(reply_error("WRONGPASS invalid username-password pair"), errc::auth_failed);
  EXPECT_EQ(reply_error("NOPERM this user has no permissions"), errc::auth_failed);
  EXPECT_EQ(reply_error("ERR AUTH <password> called without any password configured"),
            errc::auth_failed);
  EXPECT_EQ(reply_error("ERR invalid password"), errc::auth_failed);
  EXPECT_EQ(reply_error("NOT_OWNER the mutex has another owner or fence"), errc::not_owner);
  EXPECT_EQ(reply_error("ERR DB index is out of range"), errc::invalid_argument);
  for (auto retryable :
       {"LOADING Redis is loading the dataset in memory", "BUSY script",
        "READONLY You can't write against a read only replica.", "NOSCRIPT No matching script",
        "OOM command not allowed", "ERR something else"}) {
    EXPECT_EQ(reply_error(retryable), errc::backend_error) << retryable;
    EXPECT_TRUE(baton::is_retryable(reply_error(retryable)));
  }
  EXPECT_EQ(rd::translate({1 /* REDIS_ERR_IO */, "Connection refused"}), errc::connection_lost);
  EXPECT_EQ(rd::translate({3 /* REDIS_ERR_EOF */, "Server closed the connection"}),
            errc::connection_lost);
  EXPECT_EQ(rd::translate({4 /* REDIS_ERR_PROTOCOL */, "Protocol error"}), errc::bad_reply);
  EXPECT_FALSE(baton::is_retryable(reply_error("WRONGPASS x")));
}

TEST(redis_errors, error_reply_codes_match_whole_words) {
  rd::reply r;
  r.type = rd::reply::kind::error;
  r.str = "NOSCRIPT No matching script. Please use EVAL.";
  EXPECT_TRUE(r.is_error("NOSCRIPT"));
  EXPECT_FALSE(r.is_error("NOSCRIPTS"));
  EXPECT_FALSE(r.is_error("NOS"));
  r.type = rd::reply::kind::string;
  EXPECT_FALSE(r.is_error("NOSCRIPT"));
}

#endif  // the Redis backend is built
