#include "baton/backends/sql/sql_backend.hpp"

#include "baton/mutex/duration.hpp"
#include "config.hpp"
#include "conninfo.hpp"
#include "dialect.hpp"
#include "sql_store.hpp"

namespace baton::backends::sql {

std::shared_ptr<mutex_backend> make_backend(const sql_options& options, runtime& rt) {
  detail::validate(options);
  auto store = std::make_shared<detail::sql_store>(options, rt);
  return std::make_shared<lease_store_backend>(std::string(to_string(options.kind)), rt,
                                               std::move(store), detail::lease_defaults(options));
}

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  return make_backend(parse_options(config), rt);
}

namespace {

// The connection string for output, parsed as the driver parses it (conninfo.hpp).
std::function<masked_value(const std::string&)> mask_for(dialect d) {
  return [d](const std::string& value) { return detail::mask_connection(d, value); };
}

backend_descriptor make_descriptor(dialect d) {
  const sql_options defaults;
  backend_descriptor out;
  out.type = std::string(to_string(d));
  switch (d) {
    case dialect::sqlite:
      out.doc = "SQLite: one database file shared by the nodes of one host (embedded default)";
      out.params.push_back({"path", param_kind::text, true, "", false,
                            "the database file (relative: to the config file's directory; "
                            "also :memory: and file: URIs)"});
      break;
    case dialect::postgresql:
      out.doc = "PostgreSQL: a row per mutex, timed by now(); LISTEN/NOTIFY wakes waiters";
      out.params.push_back({"connection", param_kind::text, true, "", false,
                            "libpq string or URI (\"dbname=.. host=.. user=.. "
                            "password=${PG_PASSWORD}\"), read by libpq's own parser; shown with "
                            "the password as ***",
                            mask_for(d)});
      break;
    case dialect::mysql:
      out.doc = "MySQL/MariaDB: a row per mutex, timed by the server's clock";
      out.params.push_back({"connection", param_kind::text, true, "", false,
                            "SOCI string \"db=.. host=.. port=.. user=.. password=..\" ('quoted' "
                            "values, \\ escapes; no reconnect=); shown with pass/password as ***",
                            mask_for(d)});
      break;
  }
  out.params.insert(
      out.params.end(),
      {{"table", param_kind::text, false, defaults.table, false,
        "the table of owner records ([A-Za-z_][A-Za-z0-9_]*, optionally schema.table)"},
       {"create_table", param_kind::boolean, false, defaults.create_table ? "true" : "false", false,
        "create the table when missing"},
       {"pool_size", param_kind::count, false, std::to_string(defaults.pool_size), false,
        "most connections kept open (1-64)"},
       {"poll_interval", param_kind::duration, false, format_duration(defaults.poll_interval),
        false, "the lease's default poll_interval: waiters re-check this often"},
       {"statement_timeout", param_kind::duration, false,
        format_duration(defaults.statement_timeout), false,
        "bound of one statement, connect or lock wait (keep it well below transition)"}});
  out.default_lease = [](const backend_config& config) {
    return detail::lease_defaults(detail::parse_options(config, false));
  };
  out.make = [](const backend_config& config, runtime& rt) { return make_backend(config, rt); };
  return out;
}

}  // namespace

const backend_descriptor& descriptor(dialect d) {
  static const backend_descriptor sqlite = make_descriptor(dialect::sqlite);
  static const backend_descriptor postgresql = make_descriptor(dialect::postgresql);
  static const backend_descriptor mysql = make_descriptor(dialect::mysql);
  switch (d) {
    case dialect::postgresql:
      return postgresql;
    case dialect::mysql:
      return mysql;
    default:
      return sqlite;
  }
}

std::string schema_sql(dialect d, std::string_view table) {
  return detail::with_table(detail::schema_file(d), table);
}

}  // namespace baton::backends::sql
