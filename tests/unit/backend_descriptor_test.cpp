// Backend descriptors: the registry, the unknown-key policy, the README table, and the agreement
// of `baton validate` and `baton run` on a corpus of configs (every backend type, good and bad).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/config/config.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/env.hpp"

namespace {

using ::testing::HasSubstr;

bool built(const std::string& type) {
  const auto types = baton::available_backends();
  return std::find(types.begin(), types.end(), type) != types.end();
}

// Parameters that reach no server (ports 1): a backend built from them never answers.
baton::backend_config unreachable(const std::string& type) {
  if (type == "sqlite") return {type, {{"path", baton::test::temp_dir("descriptor") + "/x.db"}}};
  if (type == "postgresql") return {type, {{"connection", "host=127.0.0.1 port=1 dbname=x"}}};
  if (type == "mysql") return {type, {{"connection", "host=127.0.0.1 port=1 db=x"}}};
  if (type == "redis") return {type, {{"url", "redis://127.0.0.1:1"}}};
  if (type == "zookeeper") return {type, {{"hosts", "127.0.0.1:1"}, {"session_timeout", "300ms"}}};
  return {type, {}};
}

std::string describe(const baton::contend_options& o) {
  std::ostringstream out;
  out << "ttl " << o.ttl.count() << " transition " << o.transition.count() << " retry "
      << o.retry_period.count() << " poll " << o.poll_interval.count() << " drift "
      << o.drift_margin.count() << " backoff " << o.max_backoff.count();
  return out.str();
}

TEST(backend_descriptor, every_type_of_the_build_is_registered_once) {
  std::vector<std::string> types;
  for (const auto* d : baton::backend_descriptors()) {
    ASSERT_NE(d, nullptr);
    types.push_back(d->type);
    EXPECT_EQ(baton::find_backend(d->type), d);
    EXPECT_FALSE(d->doc.empty()) << d->type;
    EXPECT_TRUE(d->default_lease && d->make) << d->type;
    for (const auto& p : d->params) EXPECT_FALSE(p.doc.empty()) << d->type << "." << p.name;
  }
  EXPECT_EQ(types, baton::available_backends());
  EXPECT_EQ(types.front(), "memory");
  EXPECT_EQ(baton::find_backend("etcd"), nullptr);
}

// The descriptor's default lease is what the built backend reports as default_options(): what
// `validate` checks against is what `run` gets. No server is reached (the SQL backends and Redis
// connect lazily; ZooKeeper waits its 300ms session timeout for a server that is not there).
TEST(backend_descriptor, default_lease_is_the_built_backends_default_options) {
  baton::runtime rt(baton::runtime::options{1, 1});
  for (const auto* d : baton::backend_descriptors()) {
    const auto config = unreachable(d->type);
    const auto expected = describe(baton::default_lease(config));
    auto backend = baton::make_backend(config, rt);
    EXPECT_EQ(describe(backend->default_options()), expected) << d->type;
  }
  if (built("zookeeper")) {
    auto lease = baton::default_lease({"zookeeper", {{"hosts", "h"}, {"session_timeout", "3s"}}});
    EXPECT_EQ(lease.ttl + lease.transition, std::chrono::seconds{3});
    EXPECT_TRUE(baton::check(lease).empty()) << baton::join_messages(baton::check(lease));
    lease = baton::default_lease({"zookeeper", {{"hosts", "h"}, {"session_timeout", "100ms"}}});
    EXPECT_TRUE(baton::check(lease).empty()) << baton::join_messages(baton::check(lease));
  }
}

TEST(backend_descriptor, an_unknown_parameter_is_the_same_error_for_every_backend) {
  for (const auto* d : baton::backend_descriptors()) {
    auto config = unreachable(d->type);
    config.params["tabel"] = "x";
    try {
      (void)baton::default_lease(config);
      ADD_FAILURE() << d->type << " accepted an unknown parameter";
    } catch (const baton::backend_param_error& e) {
      EXPECT_EQ(e.param(), "tabel");
      EXPECT_THAT(e.what(), HasSubstr(d->type + " backend: parameter 'tabel': unknown key"));
      if (d->find("table")) {
        EXPECT_THAT(e.what(), HasSubstr("did you mean \"table\"?"));
      }
    }
  }
}

// The README's table of backend parameters, one row per parameter, as the descriptors say.
std::string readme_table() {
  std::string out = "| type | parameter | default | |\n| --- | --- | --- | --- |\n";
  for (const auto* d : baton::backend_descriptors()) {
    if (d->params.empty()) out += "| `" + d->type + "` | | | " + d->doc + " |\n";
    for (const auto& p : d->params) {
      std::string def = p.required                ? "required"
                        : p.default_value.empty() ? ""
                                                  : "`" + p.default_value + "`";
      out += "| `" + d->type + "` | `" + p.name + "` | " + def + " | " + p.doc +
             (p.secret ? " (secret: shown as ***)" : "") + " |\n";
    }
  }
  return out;
}

TEST(backend_descriptor, the_daemon_readme_table_lists_every_parameter_as_described) {
  std::ifstream in(std::string(BATON_SOURCE_DIR) + "/daemon/README.md");
  ASSERT_TRUE(in) << "daemon/README.md";
  std::stringstream text;
  text << in.rdbuf();
  // A build without some backend checks the rows it has.
  const std::string table = readme_table();
  std::istringstream rows(table);
  for (std::string row; std::getline(rows, row);)
    EXPECT_NE(text.str().find(row + "\n"), std::string::npos)
        << "daemon/README.md lacks the row\n"
        << row << "\nthe whole table, from the descriptors:\n"
        << table;
}

// ---------------------------------------------------------------------------------------------
// validate == run

struct outcome {
  bool accepted = false;
  std::vector<std::string> messages;
};

baton::config::daemon_config load(const std::string& text) {
  return baton::config::parse_config(text, "c.json", "/tmp", [](const std::string&) {
    return std::optional<std::string>("secret");
  });
}

// What `baton validate` decides: the config loads (checked against the lease defaults of the
// configured backend, computed from its descriptor without contacting it).
outcome validate_mode(const std::string& text) {
  try {
    (void)load(text);
    return {true, {}};
  } catch (const baton::config::config_error& e) {
    return {false, e.errors()};
  }
}

// What `baton run` does up to (not including) connecting: load the config, then hand every
// schedule to a scheduler over a backend that reports the configured backend's default options
// (the same as the real backend's: default_lease_is_the_built_backends_default_options).
outcome run_mode(const std::string& text) {
  baton::config::daemon_config config;
  try {
    config = load(text);
  } catch (const baton::config::config_error& e) {
    return {false, e.errors()};
  }
  const auto defaults = baton::default_lease(config.backend);
  baton::runtime rt(baton::runtime::options{1, 1});
  auto store = std::make_shared<baton::memory_lease_store>();
  baton::lease_store_backend backend(config.backend.type, rt, store, store, defaults);
  try {
    baton::scheduler sched(backend, rt,
                           baton::config::make_scheduler_options(config, defaults, "node"));
    for (const auto& s : config.schedules)
      sched.add(baton::config::make_schedule_options(config, s, defaults));
  } catch (const std::invalid_argument& e) {
    return {false, {e.what()}};
  }
  return {true, {}};
}

struct corpus_entry {
  std::string type;      // the backend type (skipped when not built)
  std::string backend;   // the backend object
  std::string lease;     // the top-level lease object, or ""
  std::string schedule;  // extra keys of the one schedule, or ""
  std::string extra;     // extra top-level keys, or ""
  std::string expected;  // "" = accepted, else a substring of the first error
};

std::string text_of(const corpus_entry& c) {
  std::string text = "{\"backend\": " + c.backend;
  if (!c.lease.empty()) text += ", \"lease\": " + c.lease;
  text += c.extra;
  text += R"(, "schedules": [{"name": "job", "every": "5s", "command": ["/bin/true"])" +
          c.schedule + "}]}";
  return text;
}

const std::vector<corpus_entry>& corpus() {
  static const std::vector<corpus_entry> entries{
      // memory
      {"memory", R"({"type": "memory"})", "", "", "", ""},
      {"memory", R"({"type": "memory"})", R"({"ttl": "4s", "transition": "2s"})", "", "", ""},
      {"memory", R"({"type": "memory"})", R"({"ttl": "1s", "retry_period": "1s"})", "", "",
       "/lease/retry_period: retry_period (1s) must be less than ttl (1s)"},
      {"memory", R"({"type": "memory", "path": "x"})", "", "", "", "/backend/path: unknown key"},
      {"memory", R"({"type": "memory"})", R"({"ttl": "4s", "transition": "2s"})",
       R"(, "lease": {"stop_grace": "2s"})", "", "/schedules/0/lease/stop_grace: stop_grace (2s)"},
      // sqlite
      {"sqlite", R"({"type": "sqlite", "path": "/tmp/b.db", "poll_interval": "250ms"})", "", "", "",
       ""},
      {"sqlite", R"({"type": "sqlite", "path": "b.db", "tabel": "t"})", "", "", "",
       "/backend/tabel: unknown key \"tabel\" (did you mean \"table\"?)"},
      {"sqlite", R"({"type": "sqlite", "path": "b.db", "table": "no-dashes"})", "", "", "",
       "/backend/table: sqlite backend: parameter 'table'"},
      {"sqlite", R"({"type": "sqlite", "path": "b.db"})", R"({"stop_grace": "6s"})", "", "",
       "/lease/stop_grace: stop_grace (6s) must be less than transition - drift margin"},
      // postgresql
      {"postgresql", R"({"type": "postgresql", "connection": "host=db password=${PW}"})",
       R"({"ttl": "20s", "transition": "10s", "stop_grace": "5s"})", "", "", ""},
      {"postgresql", R"({"type": "postgresql"})", "", "", "",
       "/backend/connection: missing: a postgresql backend needs \"connection\""},
      {"postgresql", R"({"type": "postgresql", "connection": "host=db"})",
       R"({"ttl": "1s", "transition": "1s", "retry_period": "100ms", "drift_margin": "2s"})", "",
       "", "/lease/drift_margin: drift_margin (2s) must be less than ttl + transition (2s)"},
      // PostgreSQL allows 63 characters per name: <table>_controls must fit too
      {"postgresql",
       R"({"type": "postgresql", "connection": "host=db", "table": ")" + std::string(54, 't') +
           "\"}",
       "", "", "", ""},
      {"postgresql",
       R"({"type": "postgresql", "connection": "host=db", "table": "s.)" + std::string(55, 't') +
           "\"}",
       "", "", "",
       "/backend/table: postgresql backend: parameter 'table': 's." + std::string(55, 't') +
           "' is too long: the derived table '" + std::string(55, 't') + "_controls' has 64"},
      // mysql
      {"mysql", R"({"type": "mysql", "connection": "db=x host=h"})", "", "", "", ""},
      {"mysql",
       R"({"type": "mysql", "connection": "db=x", "table": ")" + std::string(56, 't') + "\"}", "",
       "", "",
       "/backend/table: mysql backend: parameter 'table': '" + std::string(56, 't') +
           "' is too long"},
      {"mysql", R"({"type": "mysql", "connection": "db=x reconnect=1"})", "", "", "",
       "/backend/connection: mysql backend: parameter 'connection': 'reconnect' is not allowed"},
      // redis
      {"redis", R"({"type": "redis", "url": "redis://:${PW}@h:6379/1", "poll_interval": "2s"})", "",
       "", "", ""},
      {"redis", R"({"type": "redis", "url": "http://h"})", "", "", "",
       "/backend/url: redis backend: url 'http://h': must start with redis://"},
      {"redis", R"({"type": "redis", "url": "redis://h", "hosts": "h"})", "", "", "",
       "/backend/hosts: unknown key \"hosts\""},
      {"redis", R"({"type": "redis", "url": "redis://h", "key_prefix": "{x}"})", "", "", "",
       "/backend/key_prefix: redis backend: key_prefix '{x}' must not contain"},
      {"redis",
       R"({"type": "redis", "sentinels": "127.0.0.1:26379,127.0.0.1:26380", "master": "mymaster",
           "password": "${PW}", "sentinel_password": "${PW}"})",
       "", "", "", ""},
      {"redis", R"({"type": "redis", "url": "redis://h", "sentinels": "h:1", "master": "m"})", "",
       "", "", "/backend/sentinels: redis backend: url and sentinels are mutually exclusive"},
      {"redis", R"({"type": "redis", "sentinels": "h:1,h:x", "master": "m"})", "", "", "",
       "/backend/sentinels: redis backend: sentinels 'h:1,h:x': entry 2 'h:x': bad port 'x'"},
      {"redis", R"({"type": "redis", "sentinels": "h:1"})", "", "", "",
       "/backend/master: redis backend: sentinels need master"},
      {"redis", R"({"type": "redis", "sentinels": "h:1", "master": ""})", "", "", "",
       "/backend/master: must not be empty"},
      {"redis", R"({"type": "redis"})", "", "", "",
       "/backend/url: redis backend: missing: give url"},
      // zookeeper: the lease follows session_timeout (ttl a third, transition the rest)
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181"})", "", "", "", ""},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "30s"})",
       R"({"stop_grace": "2500ms"})", "", "", ""},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "3s"})",
       R"({"stop_grace": "2500ms"})", "", "",
       "/lease/stop_grace: stop_grace (2500ms) must be less than transition - drift margin (2s - "
       "60ms = 1940ms)"},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "3s"})", "",
       R"(, "lease": {"stop_grace": "2500ms"})", "",
       "/schedules/0/lease/stop_grace: stop_grace (2500ms) must be less than transition"},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "3s"})", "",
       R"(, "lease": {"ttl": "20s", "transition": "10s", "stop_grace": "2500ms"})", "", ""},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "1s"})", "", "",
       R"(, "kill_grace": "2s")",
       "/kill_grace: kill_grace (2s) must not exceed the lease's stop_grace (308ms, the default"},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "session_timeout": "50ms"})", "",
       "", "", "/backend/session_timeout: zookeeper backend: parameter 'session_timeout'"},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:2181", "sesion_timeout": "5s"})", "", "",
       "", "/backend/sesion_timeout: unknown key \"sesion_timeout\" (did you mean "},
      {"zookeeper", R"({"type": "zookeeper", "hosts": "h:99999"})", "", "", "",
       "/backend/hosts: zookeeper backend: parameter 'hosts'"},
  };
  return entries;
}

TEST(validate_run_agreement, every_config_of_the_corpus_gets_the_same_verdict_and_messages) {
  std::size_t checked = 0;
  for (const auto& c : corpus()) {
    if (!built(c.type)) continue;
    const auto text = text_of(c);
    SCOPED_TRACE(text);
    const auto v = validate_mode(text);
    const auto r = run_mode(text);
    EXPECT_EQ(v.accepted, r.accepted);
    EXPECT_EQ(v.messages, r.messages);
    if (c.expected.empty()) {
      EXPECT_TRUE(v.accepted) << ::testing::PrintToString(v.messages);
    } else {
      EXPECT_FALSE(v.accepted);
      ASSERT_FALSE(v.messages.empty());
      EXPECT_THAT(v.messages.front(), HasSubstr("c.json: " + c.expected));
    }
    ++checked;
  }
  EXPECT_GE(checked, 5u);  // memory and sqlite at least
}

// The corpus has good and bad configs of every backend type.
TEST(validate_run_agreement, the_corpus_covers_every_backend_type_good_and_bad) {
  for (const std::string type : {"memory", "sqlite", "postgresql", "mysql", "redis", "zookeeper"}) {
    bool good = false, bad = false;
    for (const auto& c : corpus())
      if (c.type == type) (c.expected.empty() ? good : bad) = true;
    EXPECT_TRUE(good && bad) << type;
  }
}

// The library rules the config applies are the scheduler's: what add() rejects with a lease the
// config would have built, the config rejects with the same message.
TEST(validate_run_agreement, the_scheduler_rejects_what_the_config_rejects_with_its_message) {
  ASSERT_TRUE(built("zookeeper"))
      << "the official build has every backend; this one lacks ZooKeeper";
  baton::runtime rt(baton::runtime::options{1, 1});
  const auto lease =
      baton::default_lease({"zookeeper", {{"hosts", "h"}, {"session_timeout", "3s"}}});
  auto store = std::make_shared<baton::memory_lease_store>();
  baton::lease_store_backend backend("zookeeper", rt, store, store, lease);
  baton::scheduler sched(backend, rt);
  baton::schedule_options s;
  s.name = "job";
  s.when = baton::every_trigger{std::chrono::seconds{5}};
  s.job = [](const baton::job_context&) {};
  s.stop_grace = std::chrono::milliseconds{2500};
  std::string library;
  try {
    sched.add(s);
  } catch (const std::invalid_argument& e) {
    library = e.what();
  }
  const auto zk = std::find_if(corpus().begin(), corpus().end(), [](const auto& c) {
    return c.expected.find("60ms = 1940ms") != c.expected.npos;
  });
  ASSERT_NE(zk, corpus().end());
  const auto v = validate_mode(text_of(*zk));
  ASSERT_FALSE(v.accepted);
  const std::string message = v.messages.front().substr(v.messages.front().find("stop_grace ("));
  EXPECT_EQ(library, "schedule 'job': " + message);
}

}  // namespace
