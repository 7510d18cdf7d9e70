// The SQL backend's configuration and shipped schema (no database needed).
#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "baton/backends/factory.hpp"
#include "baton/backends/sql/sql_backend.hpp"
#include "support/env.hpp"

using namespace std::chrono_literals;
using baton::backends::sql::dialect;
using baton::backends::sql::parse_options;
using params = std::map<std::string, std::string>;

namespace {

// The message of the std::invalid_argument parse_options throws, or "(no error)".
std::string config_error(const std::string& type, params p) {
  try {
    parse_options({type, std::move(p)});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

std::string existing_dir() { return baton::test::temp_dir("sqlcfg"); }

TEST(sql_options, missing_path_or_connection_is_named) {
  EXPECT_NE(config_error("sqlite", {}).find("'path'"), std::string::npos);
  EXPECT_NE(config_error("postgresql", {}).find("'connection'"), std::string::npos);
  EXPECT_NE(config_error("mysql", {}).find("'connection'"), std::string::npos);
  EXPECT_NE(config_error("postgresql", {{"connection", ""}}).find("'connection'"),
            std::string::npos);
}

TEST(sql_options, unknown_parameters_are_named) {
  EXPECT_NE(config_error("sqlite", {{"path", existing_dir() + "/a.db"}, {"colour", "red"}})
                .find("'colour'"),
            std::string::npos);
  EXPECT_NE(config_error("mysql", {{"connection", "db=x"}, {"path", "x"}}).find("'path'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", "a.db"}, {"connection", "x"}}).find("'connection'"),
            std::string::npos);
}

TEST(sql_options, bad_values_name_the_parameter) {
  const std::string db = existing_dir() + "/a.db";
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"poll_interval", "5"}}).find("'poll_interval'"),
            std::string::npos);
  EXPECT_NE(
      config_error("sqlite", {{"path", db}, {"poll_interval", "0ms"}}).find("'poll_interval'"),
      std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"statement_timeout", "fast"}})
                .find("'statement_timeout'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"statement_timeout", "-1s"}})
                .find("'statement_timeout'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"create_table", "yes"}}).find("'create_table'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"pool_size", "0"}}).find("'pool_size'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"pool_size", "4x"}}).find("'pool_size'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"table", "t; DROP TABLE x"}}).find("'table'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", db}, {"table", "1abc"}}).find("'table'"),
            std::string::npos);
  EXPECT_NE(config_error("sqlite", {{"path", existing_dir() + "/no/such/dir/a.db"}}).find("'path'"),
            std::string::npos);
}

TEST(sql_options, mysql_reconnect_is_refused) {
  auto message = config_error("mysql", {{"connection", "db=x reconnect=1"}});
  EXPECT_NE(message.find("'connection'"), std::string::npos);
  EXPECT_NE(message.find("reconnect"), std::string::npos);
}

// Settings under which every node would think itself the only leader: each is refused, naming
// the parameter and why, and the settings next to them that do share a file are accepted.
TEST(sql_options, settings_that_cannot_give_exclusion_across_processes_are_refused) {
  const std::string db = existing_dir() + "/a.db";
  struct refused {
    std::string type, param, value, because;
  };
  const std::vector<refused> cases{
      {"sqlite", "table", "temp.baton_mutex", "temporary table"},
      {"sqlite", "table", "TEMP.baton_mutex", "temporary table"},
      {"sqlite", "table", "temporary.baton_mutex", "temporary table"},
      {"sqlite", "table", "other.baton_mutex", "no schema 'other'"},
      {"sqlite", "path", ":memory:", "in-memory database"},
      {"sqlite", "path", "file::memory:", "in-memory database"},
      {"sqlite", "path", "file::memory:?cache=shared", "in-memory database"},
      {"sqlite", "path", "file:" + db + "?mode=memory", "in-memory database"},
      {"sqlite", "path", "FILE:" + db + "?cache=shared&mode=Memory", "in-memory database"},
      {"sqlite", "path", "file:" + db + "?mode=%6demory", "in-memory database"},
      {"sqlite", "path", "file:/one?vfs=memdb", "in-memory database"},
      {"sqlite", "path", "file:" + db + "?vfs=unix-none", "no file locks"},
      {"sqlite", "path", "file:" + db + "?nolock=1", "nolock"},
      {"sqlite", "path", "file:" + db + "?nolock=true", "nolock"},
      {"sqlite", "path", "file:" + db + "?immutable=yes", "immutable"},
      {"sqlite", "path", "file:", "names no file"},
      {"sqlite", "path", "file:?mode=rwc", "names no file"},
      {"sqlite", "path", "file://localhost", "names no file"},
      {"postgresql", "table", "pg_temp.baton_mutex", "temporary schema"},
      {"postgresql", "table", "PG_TEMP.baton_mutex", "temporary schema"},
      {"postgresql", "table", "pg_temp_3.baton_mutex", "temporary schema"},
  };
  for (const auto& c : cases) {
    params p{{"table", "baton_mutex"}};
    p[c.type == "sqlite" ? "path" : "connection"] = c.type == "sqlite" ? db : "dbname=x";
    p[c.param] = c.value;
    const auto message = config_error(c.type, p);
    EXPECT_NE(message.find("'" + c.param + "'"), std::string::npos) << c.value << ": " << message;
    EXPECT_NE(message.find(c.because), std::string::npos) << c.value << ": " << message;
  }
  for (const std::string& shared :
       {db, "file:" + db, "file:" + db + "?cache=shared&mode=rwc", "file://localhost" + db,
        "file:" + db + "?nolock=0", "file:" + db + "?vfs=unix-dotfile"})
    EXPECT_EQ(config_error("sqlite", {{"path", shared}}), "(no error)") << shared;
  EXPECT_EQ(config_error("sqlite", {{"path", db}, {"table", "main.baton_mutex"}}), "(no error)");
  EXPECT_EQ(config_error("postgresql", {{"connection", "dbname=x"}, {"table", "pg_tempo.t"}}),
            "(no error)");
  const std::string temp_path = "dbname=x options='-c search_path=pg_temp,public'";
  EXPECT_NE(config_error("postgresql", {{"connection", temp_path}}).find("temporary table"),
            std::string::npos)
      << config_error("postgresql", {{"connection", temp_path}});
  EXPECT_NE(config_error("postgresql",
                         {{"connection", "postgresql://h/x?options=-c%20search_path%3Dpg_temp"}})
                .find("'connection'"),
            std::string::npos);
  EXPECT_EQ(config_error("postgresql", {{"connection", temp_path}, {"table", "public.t"}}),
            "(no error)");
  EXPECT_EQ(config_error("postgresql", {{"connection", "dbname=x options='-c search_path=app'"}}),
            "(no error)");
  EXPECT_EQ(config_error("mysql", {{"connection", "db=x"}, {"table", "temp.baton_mutex"}}),
            "(no error)");
}

TEST(sql_options, malformed_connection_strings_are_refused) {
  EXPECT_NE(config_error("postgresql", {{"connection", "dbname"}}).find("'connection'"),
            std::string::npos);
  EXPECT_NE(config_error("mysql", {{"connection", "db='unterminated"}}).find("'connection'"),
            std::string::npos);
  EXPECT_EQ(
      config_error("postgresql", {{"connection", "postgresql://u@h:5432/db?sslmode=disable"}}),
      "(no error)");
  EXPECT_EQ(config_error("mysql", {{"connection", "db=x password='a b\\'c'"}}), "(no error)");
}

TEST(sql_options, durations_and_defaults) {
  auto o = parse_options({"sqlite",
                          {{"path", existing_dir() + "/a.db"},
                           {"poll_interval", "250ms"},
                           {"statement_timeout", "5s"}}});
  EXPECT_EQ(o.kind, dialect::sqlite);
  EXPECT_EQ(o.poll_interval, 250ms);
  EXPECT_EQ(o.statement_timeout, 5s);
  EXPECT_EQ(o.table, "baton_mutex");
  EXPECT_TRUE(o.create_table);
  EXPECT_EQ(o.pool_size, 4u);

  auto p = parse_options({"postgresql",
                          {{"connection", "dbname=x"},
                           {"table", "app.locks"},
                           {"create_table", "false"},
                           {"pool_size", "2"},
                           {"poll_interval", "2m"}}});
  EXPECT_EQ(p.kind, dialect::postgresql);
  EXPECT_EQ(p.table, "app.locks");
  EXPECT_FALSE(p.create_table);
  EXPECT_EQ(p.pool_size, 2u);
  EXPECT_EQ(p.poll_interval, 2min);
  EXPECT_EQ(p.statement_timeout, 2s);
}

TEST(sql_options, backend_is_made_without_a_reachable_server) {
  baton::runtime rt;
  auto backend = baton::make_backend({"mysql", {{"connection", "db=x host=127.0.0.1 port=1"}}}, rt);
  EXPECT_EQ(backend->type(), "mysql");
  EXPECT_EQ(backend->default_options().poll_interval, 500ms);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(sql_schema, code_runs_the_shipped_files) {
  for (auto [d, file] :
       {std::pair{dialect::sqlite, "sqlite"}, std::pair{dialect::postgresql, "postgresql"},
        std::pair{dialect::mysql, "mysql"}}) {
    const auto shipped =
        read_file(std::string(BATON_SOURCE_DIR) + "/backends/sql/schema/" + file + ".sql");
    ASSERT_FALSE(shipped.empty()) << file;
    EXPECT_EQ(baton::backends::sql::schema_sql(d), shipped) << file;
    auto renamed = baton::backends::sql::schema_sql(d, "my_locks");
    EXPECT_NE(renamed.find("CREATE TABLE IF NOT EXISTS my_locks ("), std::string::npos) << file;
    EXPECT_NE(renamed.find("CREATE TABLE IF NOT EXISTS my_locks_history ("), std::string::npos)
        << file;
    EXPECT_NE(renamed.find("CREATE TABLE IF NOT EXISTS my_locks_controls ("), std::string::npos)
        << file;
    EXPECT_EQ(renamed.find("baton_mutex"), std::string::npos) << file;
  }
}

}  // namespace
