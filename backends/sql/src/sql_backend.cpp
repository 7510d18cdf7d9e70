#include "baton/backends/sql/sql_backend.hpp"

#include <filesystem>
#include <mutex>

#include "baton/mutex/duration.hpp"
#include "config.hpp"
#include "conninfo.hpp"
#include "dialect.hpp"
#include "sql_store.hpp"

namespace baton::backends::sql {
namespace {

// A read-only SQL backend (sql_options::read_only): before its first read it checks that the
// store exists, and throws store_missing when the SQLite file or the table does not, rather
// than answering "never held" from a database it would otherwise have had to create.
class read_only_sql_backend final : public lease_store_backend {
 public:
  read_only_sql_backend(runtime& rt, std::shared_ptr<detail::sql_store> store)
      : lease_store_backend(std::string(to_string(store->options().kind)), rt, store, store,
                            detail::lease_defaults(store->options())),
        sql_(std::move(store)) {}

  mutex_owner read_owner(const std::string& name) override {
    check_store();
    return lease_store_backend::read_owner(name);
  }
  std::string read_state(const std::string& name) override {
    check_store();
    return lease_store_backend::read_state(name);
  }

 private:
  void check_store() {
    std::lock_guard lock(mutex_);
    if (checked_) return;
    const auto& o = sql_->options();
    std::error_code ec;
    // A plain path is looked at before SQLite opens it (read-only, so it would not create it
    // anyway, but the message says why); a file: URI is left to SQLite.
    if (o.kind == dialect::sqlite && o.connection.rfind("file:", 0) != 0 &&
        !std::filesystem::exists(o.connection, ec) && !ec)
      throw store_missing("no database at " + o.connection + " (nothing has run yet)");
    if (!sql_->table_exists())
      throw store_missing("no table '" + o.table + "' in the " + std::string(to_string(o.kind)) +
                          " database (nothing has run yet, or create_table is false and schema/" +
                          std::string(to_string(o.kind)) + ".sql was not loaded)");
    checked_ = true;
  }

  std::shared_ptr<detail::sql_store> sql_;
  std::mutex mutex_;
  bool checked_ = false;
};

}  // namespace

std::shared_ptr<mutex_backend> make_backend(const sql_options& options, runtime& rt) {
  detail::validate(options);
  auto store = std::make_shared<detail::sql_store>(options, rt);
  if (options.read_only) return std::make_shared<read_only_sql_backend>(rt, std::move(store));
  return std::make_shared<lease_store_backend>(std::string(to_string(options.kind)), rt, store,
                                               store, detail::lease_defaults(options));
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
                            "the database file every node opens (relative: to the config "
                            "file's directory; file: URIs too; :memory: and URIs that share "
                            "nothing or take no locks are refused)"});
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
        "the table of owner records ([A-Za-z_][A-Za-z0-9_]*, optionally schema.table); run "
        "history and controls go to TABLE_history and TABLE_controls"},
       {"create_table", param_kind::boolean, false, defaults.create_table ? "true" : "false", false,
        "create the three tables when missing (false: load the shipped schema/" + out.type +
            ".sql first)"},
       {"pool_size", param_kind::count, false, std::to_string(defaults.pool_size), false,
        d == dialect::postgresql
            ? "most connections kept open (1-64), the LISTEN connection included (at least one "
              "is left for statements)"
            : "most connections kept open (1-64)"},
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
