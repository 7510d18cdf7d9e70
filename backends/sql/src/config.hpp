#pragma once
// Parameter parsing and the SOCI connection strings (with the timeouts baton adds).
#include <chrono>
#include <string>
#include <string_view>

#include "baton/backends/sql/sql_backend.hpp"

namespace baton::backends::sql::detail {

/// "250ms", "5s", "2m", "1h", "1d" -> milliseconds; throws std::invalid_argument naming the
/// backend `type` and `param`.
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view type,
                                         std::string_view param);

/// Throws std::invalid_argument naming the field when `options` are unusable.
void validate(const sql_options& options);

/// The connection string handed to SOCI: the configured one plus connect/read timeouts,
/// keepalives and the like derived from statement_timeout, where the user did not set them.
std::string soci_connect_string(const sql_options& options);

/// `timeout` in whole seconds, rounded up, at least `min_seconds`.
long long ceil_seconds(std::chrono::milliseconds timeout, long long min_seconds = 1);

}  // namespace baton::backends::sql::detail
