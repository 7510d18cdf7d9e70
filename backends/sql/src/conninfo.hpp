#pragma once
// Connection strings as the drivers read them: PostgreSQL through libpq's own parser
// (PQconninfoParse: key=value with quotes and escapes, and postgresql:// URIs), MySQL the way
// SOCI's MySQL backend reads it. Validation, the keys baton adds to and the masked text for
// output all come from this one parse.
#include <string>
#include <string_view>
#include <vector>

#include "baton/backends/sql/sql_backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"

namespace baton::backends::sql::detail {

/// One option of a connection string, as the driver will use it.
struct conn_option {
  std::string key;
  std::string value;
  bool secret = false;  ///< a password (libpq: the options it marks "*"; SOCI: pass, password)
};

/// The options of a `d` (postgresql or mysql) connection string, in the order the driver lists
/// them. Throws backend_param_error (parameter "connection") for a string the driver would
/// refuse; its message never quotes a value of the string.
std::vector<conn_option> parse_connection(dialect d, std::string_view text);

/// The connection string for output, rebuilt from parse_connection() as `key=value ...` with
/// every secret value ***, and the secrets; a string that does not parse is masked whole.
masked_value mask_connection(dialect d, const std::string& text);

}  // namespace baton::backends::sql::detail
