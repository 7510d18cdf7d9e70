#include "errors.hpp"

#include <soci/mysql/soci-mysql.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>

#include <typeinfo>

#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/errc.hpp"

namespace baton::backends::sql::detail {
namespace {

bool contains(const std::string& text, const char* what) {
  return text.find(what) != std::string::npos;
}

// libpq reports connect failures and broken connections without an SQLSTATE.
errc from_postgresql(const std::string& sqlstate, const std::string& message) {
  if (sqlstate.rfind("28", 0) == 0) return errc::auth_failed;
  if (sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03")
    return errc::connection_lost;
  if (sqlstate == "57014" || sqlstate == "55P03") return errc::timeout;  // statement/lock timeout
  if (!sqlstate.empty() && sqlstate != "00000") return errc::backend_error;
  if (contains(message, "password authentication failed") ||
      contains(message, "no password supplied") || contains(message, "authentication failed"))
    return errc::auth_failed;
  if (contains(message, "timeout expired")) return errc::timeout;
  if (contains(message, "Cannot establish connection") || contains(message, "connection") ||
      contains(message, "terminating") || contains(message, "server closed"))
    return errc::connection_lost;
  return errc::backend_error;
}

errc from_mysql(unsigned number) {
  switch (number) {
    case 1044:  // ER_DBACCESS_DENIED_ERROR
    case 1045:  // ER_ACCESS_DENIED_ERROR
    case 1698:  // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
      return errc::auth_failed;
    case 1053:  // ER_SERVER_SHUTDOWN
    case 1927:  // ER_CONNECTION_KILLED (MariaDB)
    case 2002:  // CR_CONNECTION_ERROR
    case 2003:  // CR_CONN_HOST_ERROR
    case 2005:  // CR_UNKNOWN_HOST
    case 2006:  // CR_SERVER_GONE_ERROR
    case 2013:  // CR_SERVER_LOST
    case 2026:  // CR_SSL_CONNECTION_ERROR
    case 2055:  // CR_SERVER_LOST_EXTENDED
    case 4031:  // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
      return errc::connection_lost;
    case 1205:  // ER_LOCK_WAIT_TIMEOUT
    case 1969:  // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
    case 3024:  // ER_QUERY_TIMEOUT (MySQL max_execution_time)
      return errc::timeout;
    default:
      return errc::backend_error;
  }
}

errc from_sqlite(int result) {
  switch (result & 0xff) {
    case 5:  // SQLITE_BUSY
    case 6:  // SQLITE_LOCKED
      return errc::timeout;
    case 23:  // SQLITE_AUTH
      return errc::auth_failed;
    default:
      return errc::backend_error;
  }
}

}  // namespace

sql_failure translate_error(dialect d, const std::exception_ptr& error, bool watchdog_fired,
                            const std::vector<std::string>& secrets) {
  sql_failure f;
  errc code = errc::backend_error;
  try {
    std::rethrow_exception(error);
  } catch (const soci::postgresql_soci_error& e) {
    f.message = e.what();
    code = from_postgresql(e.sqlstate(), f.message);
  } catch (const soci::mysql_soci_error& e) {
    f.message = e.what();
    code = from_mysql(e.err_num_);
  } catch (const soci::sqlite3_soci_error& e) {
    f.message = e.what();
    code = from_sqlite(e.result());
  } catch (const soci::soci_error& e) {
    f.message = e.what();
    if (e.get_error_category() == soci::soci_error::connection_error)
      code = errc::connection_lost;
    else if (d == dialect::postgresql)
      code = from_postgresql({}, f.message);
    else if (contains(f.message, "Cannot establish connection"))
      code = d == dialect::sqlite ? errc::backend_error : errc::connection_lost;
    else
      code = errc::backend_error;
  } catch (const reply_error& e) {
    f.message = e.what();
    code = errc::bad_reply;
  } catch (const std::bad_cast& e) {
    f.message = std::string("unexpected column type: ") + e.what();
    code = errc::bad_reply;
  } catch (const std::exception& e) {
    f.message = e.what();
    code = errc::backend_error;
  } catch (...) {
    f.message = "unknown exception";
    code = errc::backend_error;
  }
  if (watchdog_fired) {
    code = errc::timeout;
    f.message = "no reply within statement_timeout (connection closed): " + f.message;
  }
  f.message = scrub(std::move(f.message), secrets);
  // Messages from SOCI and the drivers often end in a newline.
  while (!f.message.empty() && (f.message.back() == '\n' || f.message.back() == ' '))
    f.message.pop_back();
  // SOCI appends the statement and its parameters (a state is up to 8 KiB of hex): keep logs
  // readable.
  constexpr std::size_t max_message = 600;
  if (f.message.size() > max_message) f.message = f.message.substr(0, max_message) + "...";
  f.code = make_error_code(code);
  return f;
}

}  // namespace baton::backends::sql::detail
