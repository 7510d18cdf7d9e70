#pragma once
// The one place where SOCI / driver errors become baton::errc.
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "baton/backends/sql/sql_backend.hpp"

namespace baton::backends::sql::detail {

/// The database answered something the backend's invariants rule out (errc::bad_reply).
struct reply_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A failed request: the baton error code and the native message for the log.
struct sql_failure {
  std::error_code code;
  std::string message;
};

/// Translates the exception in `error` (soci_error and its dialect subclasses, std::bad_cast,
/// anything else) thrown while talking to a `d` database. `watchdog_fired`: the request outlived
/// statement_timeout and its socket was shut down, so it counts as errc::timeout. The message
/// has each of `secrets` (the connection string's passwords) scrubbed, should a driver echo one.
sql_failure translate_error(dialect d, const std::exception_ptr& error, bool watchdog_fired,
                            const std::vector<std::string>& secrets);

}  // namespace baton::backends::sql::detail
