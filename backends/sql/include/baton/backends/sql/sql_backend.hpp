#pragma once
/// The SQL backend (SOCI): SQLite (embedded default), PostgreSQL and MySQL/MariaDB. One table, a
/// row per mutex; acquire/renew is one conditional UPDATE timed by the database clock. Run
/// history and controls (records()) live in `<table>_history` and `<table>_controls`.
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton::backends::sql {

/// The SQL dialects the backend speaks.
enum class dialect { sqlite, postgresql, mysql };

/// "sqlite", "postgresql" or "mysql".
std::string_view to_string(dialect d) noexcept;

/// Settings of an SQL backend. Built from a backend_config by parse_options().
struct sql_options {
  dialect kind = dialect::sqlite;
  /// SQLite: the database file. PostgreSQL: a libpq string ("dbname=.. host=.. port=.. user=..
  /// password=.."). MySQL: a SOCI mysql string ("db=.. host=.. port=.. user=.. password=..").
  std::string connection;
  /// The table of owner records ([A-Za-z_][A-Za-z0-9_]*, optionally schema-qualified). History
  /// and controls go to `<table>_history` and `<table>_controls`, whose names must fit the
  /// server's identifier limit too (PostgreSQL 63, MySQL 64 characters).
  std::string table = "baton_mutex";
  /// Creates the three tables when missing; when false a missing one is reported (by name) on
  /// every request: load schema_sql() first.
  bool create_table = true;
  /// Most connections kept open (at most one per blocking thread is ever in use).
  unsigned pool_size = 4;
  /// Waiters re-check a held mutex at least this often (the SQL backend has no wake-ups).
  std::chrono::milliseconds poll_interval{500};
  /// Upper bound for one statement, connect or lock wait; keep it well below the lease's
  /// transition time so a renewal that hangs fails before the lease runs out.
  std::chrono::milliseconds statement_timeout{2000};
  /// Inspect only (backend_config::read_only): SQLite opens the file read-only and leaves its
  /// journal mode alone, no table is created, and a missing file or table makes reads throw
  /// baton::store_missing. History and controls writes are refused (errc::invalid_argument);
  /// their reads answer empty where the tables are missing (a database of an older baton).
  bool read_only = false;
};

/// Reads `config`: type "sqlite" needs `path`, "postgresql"/"mysql" need `connection`; optional
/// `table`, `create_table` (true/false), `pool_size`, `poll_interval`, `statement_timeout`
/// (durations like "250ms", "5s"). Throws std::invalid_argument naming the parameter.
sql_options parse_options(const backend_config& config);

/// An SQL backend. Connects lazily: a server that is down shows up as errc::connection_lost from
/// requests, not here. Throws std::invalid_argument for bad options.
std::shared_ptr<mutex_backend> make_backend(const sql_options& options, runtime& rt);

/// make_backend(parse_options(config), rt).
std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt);

/// The "sqlite", "postgresql" or "mysql" type: its parameters (sql_options), its default lease
/// and make_backend().
const backend_descriptor& descriptor(dialect d);

/// The DDL shipped as backends/sql/schema/<dialect>.sql, for table `table` (three CREATE TABLE
/// IF NOT EXISTS statements: owner records, history, controls); the backend runs exactly these
/// when it creates the tables.
std::string schema_sql(dialect d, std::string_view table = "baton_mutex");

}  // namespace baton::backends::sql
