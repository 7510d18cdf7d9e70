#pragma once
// Parameter parsing and the SOCI connection strings (with the timeouts baton adds).
#include <chrono>
#include <string>
#include <string_view>

#include "baton/backends/sql/sql_backend.hpp"

namespace baton::backends::sql::detail {

/// Why SQLite `path` cannot give exclusion across processes (`:memory:`, a `file:` URI with
/// `mode=memory`, `vfs=memdb`, `nolock`, ...), or empty when it can.
std::string sqlite_exclusion_error(std::string_view path);

/// Why `table` cannot give exclusion across processes in dialect `d` (SQLite's `temp` schema,
/// PostgreSQL's `pg_temp`), or empty when it can.
std::string table_exclusion_error(dialect d, std::string_view table);

/// parse_options(); `host_checks` false skips what depends on this host (the sqlite file's
/// directory exists), for computing defaults before the backend is built.
sql_options parse_options(const backend_config& config, bool host_checks);

/// Throws backend_param_error naming the field when `options` are unusable; `host_checks`:
/// also check this host (the sqlite file's directory exists).
void validate(const sql_options& options, bool host_checks = true);

/// The backend's default_options(): baton's defaults with the configured poll_interval.
contend_options lease_defaults(const sql_options& options);

/// The connection string handed to SOCI: the configured one plus connect/read timeouts,
/// keepalives and the like derived from statement_timeout, where the user did not set them.
std::string soci_connect_string(const sql_options& options);

/// `timeout` in whole seconds, rounded up, at least `min_seconds`.
long long ceil_seconds(std::chrono::milliseconds timeout, long long min_seconds = 1);

}  // namespace baton::backends::sql::detail
