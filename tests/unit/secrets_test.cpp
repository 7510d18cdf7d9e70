// No secret is ever printed: a table of real-world connection strings and URLs (libpq key=value
// and URIs, SOCI/MySQL pass= and password=, Redis URLs with any character in the password,
// ZooKeeper digest auth), each run through every text baton makes of a backend config, none of
// which may contain the secret. The daemon-level twin (validate, status, run's log against real
// servers) is daemon_secrets in tests/integration/daemon_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "output.hpp"

namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

struct secret_case {
  std::string name;  // the gtest parameter name
  baton::backend_config config;
  std::vector<std::string> secrets;  // none of these may appear in any output
  std::string uses;  // the password the driver will use (secrets_of() has it); "": rejected
};

void PrintTo(const secret_case& c, std::ostream* os) { *os << c.name; }

// clang-format off
const std::vector<secret_case> cases{
    // PostgreSQL: libpq key=value (quotes, \' and \\ escapes, spaces around '=') and URIs.
    {"pg_quoted_escaped_quote", {"postgresql", {{"connection",
        R"(host=127.0.0.1 user=u password='Wrong\'Secret77')"}}},
     {"Secret77", "Wrong\\'", "Wrong'"}, "Wrong'Secret77"},
    {"pg_plain", {"postgresql", {{"connection",
        "host=db.example.com port=5432 dbname=app user=app password=S3cr3tPg"}}},
     {"S3cr3tPg"}, "S3cr3tPg"},
    {"pg_spaces_and_backslash", {"postgresql", {{"connection",
        R"(dbname = app password = 'Two Words\\Back' host=h)"}}},
     {"Two Words", "Words\\Back", "Back"}, "Two Words\\Back"},
    {"pg_uri_percent_encoded", {"postgresql", {{"connection",
        "postgresql://app:Pc%2Ft%40pg%3A%20x@db:5432/app?sslmode=require"}}},
     {"Pc/t@pg: x", "Pc%2Ft%40pg%3A%20x", "Pc%2F", "t@pg"}, "Pc/t@pg: x"},
    {"pg_uri_and_query_password", {"postgresql", {{"connection",
        "postgresql://user:UriSecret9@host/db?password=QuerySecret9"}}},
     {"UriSecret9", "QuerySecret9"}, "QuerySecret9"},
    {"pg_uri_password_only", {"postgresql", {{"connection", "postgres://:OnlyPass7@h/db"}}},
     {"OnlyPass7"}, "OnlyPass7"},
    {"pg_ssl_key_password", {"postgresql", {{"connection",
        "dbname=x sslkey=/etc/k.pem sslpassword=KeyPass55"}}},
     {"KeyPass55"}, "KeyPass55"},
    {"pg_uri_unencoded_at", {"postgresql", {{"connection", "postgresql://u:Pre@Post9@h/db"}}},
     {"Pre@Post9", "Post9"}, ""},
    {"pg_unquoted_space", {"postgresql", {{"connection", "host=h password=Half Other9"}}},
     {"Other9"}, ""},
    {"pg_unterminated_quote", {"postgresql", {{"connection", "host=h password='Open9 secret"}}},
     {"Open9"}, ""},
    {"pg_uri_bad_encoding", {"postgresql", {{"connection", "postgresql://u:Bad%zzEnc9@h/db"}}},
     {"Bad%zzEnc9", "zzEnc9"}, ""},
    // SOCI/MySQL: pass and password, 'quoted', \ escapes (in and out of quotes), first one wins.
    {"mysql_pass", {"mysql", {{"connection", "db=x user=u pass=SociPass1 host=127.0.0.1"}}},
     {"SociPass1"}, "SociPass1"},
    {"mysql_password_quoted", {"mysql", {{"connection",
        R"(db=x user=u password='My\'Pa ss\\w0rd' host=h)"}}},
     {"My'Pa ss\\w0rd", "Pa ss", "w0rd"}, "My'Pa ss\\w0rd"},
    {"mysql_unquoted_escapes", {"mysql", {{"connection", R"(host=h pass=Un\ quot\'Pw9 db=x)"}}},
     {"quot", "Pw9"}, "Un quot'Pw9"},
    {"mysql_spaces_around_equals", {"mysql", {{"connection", "db=x password = 'Spaced9' host=h"}}},
     {"Spaced9"}, "Spaced9"},
    {"mysql_two_keys_first_wins", {"mysql", {{"connection", "password=First1x pass=Second2x db=x"}}},
     {"First1x", "Second2x"}, "First1x"},
    {"mysql_quote_in_unquoted_value", {"mysql", {{"connection", "db=x password=Lea'kMe9 host=h"}}},
     {"Lea", "kMe9"}, ""},
    {"mysql_unknown_key", {"mysql", {{"connection", "db=x pasword=Typo99x host=h"}}},
     {"Typo99x"}, ""},
    {"mysql_unterminated_quote", {"mysql", {{"connection", "db=x password='Open8 host=h"}}},
     {"Open8"}, ""},
    // Redis: the user info runs to the last '@'; any character; %XX decoded.
    {"redis_slash_in_password", {"redis", {{"url", "redis://baton:Us3r/Pass@127.0.0.1:7381"}}},
     {"Us3r/Pass", "Us3r", "/Pass"}, "Us3r/Pass"},
    {"redis_password_only", {"redis", {{"url", "redis://:S3cretOnly@host"}}},
     {"S3cretOnly"}, "S3cretOnly"},
    {"redis_at_and_colon", {"redis", {{"url", "redis://user:se@cr:et9@host:6380/2"}}},
     {"se@cr:et9", "se@cr", "cr:et9"}, "se@cr:et9"},
    {"redis_percent_encoded", {"redis", {{"url", "redis://u:Pa%2Fss%40x9@h"}}},
     {"Pa/ss@x9", "Pa%2Fss%40x9", "ss@x9"}, "Pa/ss@x9"},
    {"redis_space_quote_backslash", {"redis", {{"url", R"(redis://u:sp ace'q\b9@h)"}}},
     {"sp ace", "q\\b9"}, "sp ace'q\\b9"},
    {"redis_tls_scheme", {"redis", {{"url", "rediss://:TlsSecret9@h:6380"}}},
     {"TlsSecret9"}, ""},
    {"redis_query_password", {"redis", {{"url", "redis://h:6379/0?password=QuerySecret8"}}},
     {"QuerySecret8"}, ""},
    {"redis_no_colon", {"redis", {{"url", "redis://JustPass9@h"}}}, {"JustPass9"}, ""},
    {"redis_bad_encoding", {"redis", {{"url", "redis://u:Bad%zzPct9@h"}}}, {"zzPct9"}, ""},
    // ZooKeeper: digest auth, a whole-value secret.
    {"zookeeper_digest", {"zookeeper", {{"hosts", "127.0.0.1:2181"}, {"username", "baton"},
        {"password", "Zk:Digest@9"}}},
     {"Zk:Digest@9", "Digest@9"}, "Zk:Digest@9"},
};
// clang-format on

// Every text baton makes of a backend config outside the daemon: the description (validate,
// status, run's log) and the error for a bad value (validate and run, config error). Add an
// output here (e.g. --json) and every row checks it.
std::vector<std::pair<std::string, std::string>> outputs_of(const baton::backend_config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("describe", baton::describe(baton::find_backend(config.type), config));
  // --json of validate and status: the backend object, as dumped (and its values unescaped).
  const auto json = baton::daemon::backend_json(config);
  out.emplace_back("--json", baton::daemon::dump_json(json));
  for (const auto& [name, value] : json["parameters"].items())
    out.emplace_back("--json /backend/parameters/" + name, value.get<std::string>());
  try {
    (void)baton::default_lease(config);
  } catch (const std::exception& e) {
    out.emplace_back("config error", e.what());
  }
  return out;
}

class secrets : public ::testing::TestWithParam<secret_case> {};

TEST_P(secrets, appear_in_no_output) {
  const auto& c = GetParam();
  const auto* d = baton::find_backend(c.config.type);
  ASSERT_NE(d, nullptr) << c.config.type << " is not in this build";
  const auto outputs = outputs_of(c.config);
  for (const auto& [what, text] : outputs) {
    for (const auto& secret : c.secrets)
      EXPECT_THAT(text, Not(HasSubstr(secret))) << what << ": " << text;
  }
  EXPECT_THAT(outputs.front().second, HasSubstr("***"));
  // A string the driver accepts is accepted, one it refuses is refused (with a message).
  const auto rejected = std::count_if(outputs.begin(), outputs.end(),
                                      [](const auto& o) { return o.first == "config error"; });
  EXPECT_EQ(rejected, c.uses.empty() ? 1 : 0) << (rejected ? "rejected" : "accepted");
  // The mask parsed the value as the driver does: it found the password the driver will use.
  const auto found = baton::secrets_of(d, c.config);
  if (!c.uses.empty()) {
    EXPECT_THAT(found, Contains(c.uses));
  }
  // A native message that echoed the password would be scrubbed.
  if (!c.uses.empty()) {
    EXPECT_THAT(baton::scrub("server said: '" + c.uses + "' refused", found),
                Not(HasSubstr(c.uses)));
  }
}

INSTANTIATE_TEST_SUITE_P(connection_strings, secrets, ::testing::ValuesIn(cases),
                         [](const auto& info) { return info.param.name; });

TEST(secrets_display, keeps_what_is_not_secret) {
  auto show = [](const std::string& type, const std::string& key, const std::string& value) {
    return baton::describe(baton::find_backend(type), {type, {{key, value}}});
  };
  EXPECT_EQ(show("postgresql", "connection",
                 "postgresql://app:x%2Fy@db.example.com:5433/app?sslmode=require"),
            "postgresql connection=user=app password=*** dbname=app host=db.example.com "
            "port=5433 sslmode=require");
  EXPECT_EQ(show("mysql", "connection", R"(db=x user='a b' pass=p host=h)"),
            "mysql connection=db=x user='a b' pass=*** host=h");
  EXPECT_EQ(show("redis", "url", "redis://baton:Us3r/Pass@127.0.0.1:7381/2"),
            "redis url=redis://baton:***@127.0.0.1:7381/2");
  EXPECT_EQ(show("redis", "url", "redis://127.0.0.1:6379"), "redis url=redis://127.0.0.1:6379");
  EXPECT_EQ(show("zookeeper", "password", "pw"), "zookeeper password=***");
  // A type or parameter the build does not know: masked whole.
  EXPECT_EQ(show("etcd", "endpoint", "http://u:p@h"), "etcd endpoint=***");
}

TEST(secrets_scrub, replaces_a_secret_standing_on_its_own) {
  const std::vector<std::string> secrets{"baton", "/Pass"};
  EXPECT_EQ(baton::scrub("user 'baton'@'localhost' (using password: YES)", secrets),
            "user '***'@'localhost' (using password: YES)");
  EXPECT_EQ(baton::scrub("table baton_mutex of baton_test", secrets),
            "table baton_mutex of baton_test");
  EXPECT_EQ(baton::scrub("baton:Us3r/Pass@h and /Pass and /Passx", secrets),
            "***:Us3r***@h and *** and /Passx");
  EXPECT_EQ(baton::scrub("nothing", {}), "nothing");
  EXPECT_EQ(baton::scrub("baton", {""}), "baton");
}

}  // namespace
