// The pure parts of the ZooKeeper backend: settings, lock node names, error translation.
#if __has_include("baton/backends/zookeeper/detail.hpp")  // a build with the ZooKeeper backend
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include "baton/backends/zookeeper/detail.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/errc.hpp"

using namespace std::chrono_literals;
namespace zk = baton::backends::zookeeper::detail;

namespace {

baton::backend_config config(std::map<std::string, std::string> params) {
  return baton::backend_config{"zookeeper", std::move(params)};
}

// The message of the invalid_argument that parse_settings throws, or "" if it accepts.
std::string rejection(std::map<std::string, std::string> params) {
  try {
    zk::parse_settings(config(std::move(params)));
    return {};
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

}  // namespace

TEST(zookeeper_settings, defaults_and_a_plain_host_list) {
  auto s = zk::parse_settings(config({{"hosts", "127.0.0.1:2181,zk-2.example:2182"}}));
  EXPECT_EQ(s.hosts, "127.0.0.1:2181,zk-2.example:2182");
  EXPECT_EQ(s.chroot, "");
  EXPECT_EQ(s.root, "/baton");
  EXPECT_EQ(s.session_timeout, 6s);
  EXPECT_EQ(s.mutex_dir("jobs.nightly"), "/baton/jobs.nightly");
}

TEST(zookeeper_settings, chroot_is_split_off_and_prefixed_to_every_path) {
  auto s = zk::parse_settings(
      config({{"hosts", "a:1,b:2/apps/cron"}, {"root", "/locks"}, {"session_timeout", "2s"}}));
  EXPECT_EQ(s.hosts, "a:1,b:2");
  EXPECT_EQ(s.chroot, "/apps/cron");
  EXPECT_EQ(s.base(), "/apps/cron/locks");
  EXPECT_EQ(s.mutex_dir("m"), "/apps/cron/locks/m");
  EXPECT_EQ(s.session_timeout, 2s);
  EXPECT_EQ(zk::parse_settings(config({{"hosts", "a:1/"}})).chroot, "");
}

TEST(zookeeper_settings, a_missing_port_means_2181) {
  EXPECT_EQ(zk::parse_settings(config({{"hosts", "zk1,zk2:2000"}})).hosts, "zk1:2181,zk2:2000");
  EXPECT_EQ(zk::parse_settings(config({{"hosts", "[::1]:2000"}})).hosts, "[::1]:2000");
}

TEST(zookeeper_settings, malformed_hosts_are_rejected_naming_the_parameter) {
  for (std::string bad :
       {"", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:2181bad", ",127.0.0.1:2181",
        "127.0.0.1:2181,", "host name:2181", ":2181", "[::1", "[zz]:1"}) {
    auto why = rejection({{"hosts", bad}});
    EXPECT_NE(why.find("'hosts'"), std::string::npos) << "accepted '" << bad << "': " << why;
  }
  EXPECT_NE(rejection({}).find("'hosts' is missing"), std::string::npos);
}

TEST(zookeeper_settings, invalid_chroots_are_rejected_with_the_reason) {
  EXPECT_NE(rejection({{"hosts", "127.0.0.1:2181/a//b"}}).find("empty component"),
            std::string::npos);
  EXPECT_NE(rejection({{"hosts", "127.0.0.1:2181/a/"}}).find("ends with '/'"), std::string::npos);
  EXPECT_NE(rejection({{"hosts", "127.0.0.1:2181/a/../b"}}).find("'..'"), std::string::npos);
  EXPECT_NE(rejection({{"hosts", "127.0.0.1:2181"}, {"root", "bad"}}).find("start with '/'"),
            std::string::npos);
  EXPECT_NE(rejection({{"hosts", "127.0.0.1:2181"}, {"root", "/"}}).find("'root'"),
            std::string::npos);
}

TEST(zookeeper_settings, session_timeout_and_credentials_are_checked) {
  EXPECT_NE(rejection({{"hosts", "a:1"}, {"session_timeout", "6"}}).find("not a duration"),
            std::string::npos);
  EXPECT_NE(rejection({{"hosts", "a:1"}, {"session_timeout", "10ms"}}).find("between"),
            std::string::npos);
  EXPECT_NE(rejection({{"hosts", "a:1"}, {"username", "u"}}).find("'password' is missing"),
            std::string::npos);
  EXPECT_NE(rejection({{"hosts", "a:1"}, {"password", "p"}}).find("'username' is missing"),
            std::string::npos);
  EXPECT_NE(rejection({{"hosts", "a:1"}, {"username", "u:x"}, {"password", "p"}}).find("':'"),
            std::string::npos);
  auto s = zk::parse_settings(config({{"hosts", "a:1"}, {"username", "u"}, {"password", "p"}}));
  EXPECT_EQ(s.username, "u");
  EXPECT_EQ(s.password, "p");
}

TEST(zookeeper_settings, durations) {
  auto timeout = [](const char* text) {
    return zk::parse_settings(config({{"hosts", "a:1"}, {"session_timeout", text}}))
        .session_timeout;
  };
  EXPECT_EQ(timeout("250ms"), 250ms);
  EXPECT_EQ(timeout("6s"), 6s);
  EXPECT_EQ(timeout("5m"), 5min);
  EXPECT_EQ(timeout("1h"), 1h);
  for (const char* bad : {"", "s", "1", "1.5s", "-1s", "1 s", "1sec", "2h"})
    EXPECT_THROW(timeout(bad), std::invalid_argument) << bad;
}

TEST(zookeeper_settings, an_unknown_parameter_is_an_error_like_every_backend) {
  try {
    zk::parse_settings(config({{"hosts", "a:1"}, {"sesion_timeout", "5s"}}));
    FAIL() << "accepted";
  } catch (const baton::backend_param_error& e) {
    EXPECT_EQ(e.param(), "sesion_timeout");
    EXPECT_NE(std::string(e.what()).find("did you mean \"session_timeout\"?"), std::string::npos)
        << e.what();
  }
}

TEST(zookeeper_lock_names, carry_the_guid_and_sort_by_sequence) {
  const auto guid = zk::make_guid();
  ASSERT_EQ(guid.size(), 32u);
  EXPECT_NE(guid, zk::make_guid());
  const auto prefix = zk::lock_prefix(guid);
  EXPECT_EQ(prefix, "_c_" + guid + "-lock-");
  EXPECT_EQ(zk::lock_sequence(prefix + "0000000042"), 42);
  EXPECT_EQ(zk::lock_sequence("_c_x-lock-0000000000"), 0);
  EXPECT_EQ(zk::lock_sequence("something-else"), -1);
  EXPECT_EQ(zk::lock_sequence(prefix + "00000000x2"), -1);
  EXPECT_EQ(zk::lock_sequence("lock-0000000001"), -1);
  auto sorted = zk::sorted_locks(
      {"_c_b-lock-0000000010", "junk", "_c_a-lock-0000000002", "_c_c-lock-0000000007"});
  EXPECT_EQ(sorted, (std::vector<std::string>{"_c_a-lock-0000000002", "_c_c-lock-0000000007",
                                              "_c_b-lock-0000000010"}));
}

TEST(zookeeper_errors, translate_in_one_place) {
  using baton::errc;
  EXPECT_FALSE(zk::translate(ZOK));
  EXPECT_EQ(zk::translate(ZCONNECTIONLOSS), errc::connection_lost);
  EXPECT_EQ(zk::translate(ZOPERATIONTIMEOUT), errc::timeout);
  EXPECT_EQ(zk::translate(ZSESSIONEXPIRED), errc::session_expired);
  EXPECT_EQ(zk::translate(ZINVALIDSTATE), errc::session_expired);
  EXPECT_EQ(zk::translate(ZNOAUTH), errc::auth_failed);
  EXPECT_EQ(zk::translate(ZAUTHFAILED), errc::auth_failed);
  EXPECT_EQ(zk::translate(ZNONODE), errc::not_owner);
  EXPECT_EQ(zk::translate(ZBADVERSION), errc::not_owner);
  EXPECT_EQ(zk::translate(ZCLOSING), errc::stopped);
  EXPECT_EQ(zk::translate(ZBADARGUMENTS), errc::invalid_argument);
  EXPECT_EQ(zk::translate(ZMARSHALLINGERROR), errc::bad_reply);
  EXPECT_EQ(zk::translate(ZSYSTEMERROR), errc::backend_error);
  EXPECT_EQ(zk::translate(ZTHROTTLEDOP), errc::backend_error);
  EXPECT_TRUE(baton::is_retryable(zk::translate(ZCONNECTIONLOSS)));
  EXPECT_FALSE(baton::is_retryable(zk::translate(ZNOAUTH)));
}

TEST(zookeeper_lease, the_deadline_is_the_last_answered_send_time_plus_the_timeout_minus_a_margin) {
  using steady = std::chrono::steady_clock;
  const steady::time_point sent{std::chrono::seconds{1000}};  // a fake clock's reading
  // 4 s negotiated: margin max(50 ms, 4000/50 = 80 ms).
  EXPECT_EQ(zk::session_drift_margin(4s), 80ms);
  EXPECT_EQ(zk::session_lease_deadline(sent, 4s), sent + 4s - 80ms);
  // Short sessions keep at least 50 ms.
  EXPECT_EQ(zk::session_drift_margin(1s), 50ms);
  EXPECT_EQ(zk::session_lease_deadline(sent, 1s), sent + 950ms);
  // A disconnect changes nothing: only a later answered request moves the deadline.
  EXPECT_EQ(zk::session_lease_deadline(sent + 1333ms, 4s), sent + 1333ms + 4s - 80ms);
  // Before the server ends the session (send time + timeout), never after.
  EXPECT_LT(zk::session_lease_deadline(sent, 10s), sent + 10s);
}

TEST(zookeeper_lease, no_deadline_before_an_answer_or_a_negotiated_timeout) {
  using steady = std::chrono::steady_clock;
  EXPECT_EQ(zk::session_lease_deadline(steady::time_point{}, 4s), steady::time_point{});
  EXPECT_EQ(zk::session_lease_deadline(steady::time_point{std::chrono::seconds{5}}, 0ms),
            steady::time_point{});
}

#endif  // __has_include(baton/backends/zookeeper/detail.hpp)
