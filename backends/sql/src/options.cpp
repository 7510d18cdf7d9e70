// Reading the backend_config of an SQL backend, and building SOCI connection strings.
#include <algorithm>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <set>
#include <stdexcept>
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/detail/text.hpp"
#include "baton/mutex/duration.hpp"

#include "config.hpp"
#include "conninfo.hpp"
#include "dialect.hpp"

namespace baton::backends::sql {

std::string_view to_string(dialect d) noexcept {
  switch (d) {
    case dialect::sqlite:
      return "sqlite";
    case dialect::postgresql:
      return "postgresql";
    case dialect::mysql:
      return "mysql";
  }
  return "?";
}

namespace detail {
namespace {

[[noreturn]] void bad_param(std::string_view type, std::string_view param, const std::string& why) {
  throw backend_param_error(std::string(param), std::string(type) + " backend: parameter '" +
                                                    std::string(param) + "': " + why);
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool is_uri(std::string_view s) {
  return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

// The keys the user set in a connection string (parse_connection() has accepted it).
std::set<std::string> keys_of(dialect d, std::string_view s) {
  std::set<std::string> keys;
  for (const auto& o : parse_connection(d, s)) keys.insert(o.key);
  return keys;
}

// Appends `key=value` unless the user set `key`.
class connect_string_builder {
 public:
  connect_string_builder(std::string base, std::set<std::string> keys, bool uri)
      : text_(std::move(base)), keys_(std::move(keys)), uri_(uri) {}
  void add(const std::string& key, const std::string& value) {
    if (keys_.count(key) != 0) return;
    if (uri_)
      text_ += (text_.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
    else
      text_ += (text_.empty() ? "" : " ") + key + "=" + value;
    keys_.insert(key);
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
  std::set<std::string> keys_;
  bool uri_;
};

bool valid_table(std::string_view t) {
  auto valid_part = [](std::string_view p) {
    if (p.empty() || p.size() > 63) return false;
    if (!std::isalpha(static_cast<unsigned char>(p[0])) && p[0] != '_') return false;
    return std::all_of(p.begin(), p.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
    });
  };
  auto dot = t.find('.');
  if (dot == std::string_view::npos) return valid_part(t);
  return valid_part(t.substr(0, dot)) && valid_part(t.substr(dot + 1));
}

// SQLite decodes %HH in URI file names and parameters; text that is not valid %-encoding is
// taken as written.
std::string percent_decoded(std::string_view s) {
  std::string out;
  return baton::detail::percent_decode(s, out) ? out : std::string(s);
}

bool uri_true(std::string_view v) {
  const auto l = baton::detail::ascii_lower(v);
  return l == "1" || l == "true" || l == "yes" || l == "on";
}

}  // namespace

std::string sqlite_exclusion_error(std::string_view path) {
  constexpr std::string_view why_memory =
      "is an in-memory database, private to one process: nodes would not see each other's "
      "leases and every node would run every job; give a file every node opens";
  if (path == ":memory:") return "':memory:' " + std::string(why_memory);
  if (baton::detail::ascii_lower(path.substr(0, 5)) != "file:") return {};
  // A URI filename (SQLite's URI rules: file:[//authority]path[?query][#fragment]).
  std::string_view rest = path.substr(5);
  rest = rest.substr(0, rest.find('#'));
  const auto q = rest.find('?');
  std::string_view file = rest.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view{} : rest.substr(q + 1);
  if (file.rfind("//", 0) == 0) {
    const auto slash = file.find('/', 2);
    file = slash == std::string_view::npos ? std::string_view{} : file.substr(slash);
  }
  const std::string shown = "'" + std::string(path) + "' ";
  if (percent_decoded(file) == ":memory:") return shown + std::string(why_memory);
  if (file.empty())
    return shown +
           "names no file: SQLite makes a private temporary database for it, so nodes would not "
           "see each other's leases";
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto part = query.substr(0, amp);
    const auto eq = part.find('=');
    const auto key = baton::detail::ascii_lower(percent_decoded(part.substr(0, eq)));
    const auto value =
        eq == std::string_view::npos ? std::string{} : percent_decoded(part.substr(eq + 1));
    if (key == "mode" && baton::detail::ascii_lower(value) == "memory")
      return shown + std::string(why_memory);
    if (key == "vfs" && baton::detail::ascii_lower(value) == "memdb")
      return shown + std::string(why_memory);
    if (key == "vfs" && baton::detail::ascii_lower(value) == "unix-none")
      return shown +
             "uses the 'unix-none' VFS, which takes no file locks: two nodes could both "
             "write a lease";
    if (key == "nolock" && uri_true(value))
      return shown +
             "sets nolock: SQLite would take no file locks and two nodes could both "
             "write a lease";
    if (key == "immutable" && uri_true(value))
      return shown +
             "sets immutable: SQLite would take no locks and never see another node's "
             "lease";
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

std::string table_exclusion_error(dialect d, std::string_view table) {
  const auto dot = table.find('.');
  if (dot == std::string_view::npos) return {};
  const auto schema = baton::detail::ascii_lower(table.substr(0, dot));
  if (d == dialect::sqlite) {
    if (schema == "temp" || schema == "temporary")
      return "'" + std::string(table) +
             "' is a temporary table, private to one connection: nodes would not see each "
             "other's leases and every node would run every job; drop the '" +
             std::string(table.substr(0, dot)) + ".' prefix";
    if (schema != "main")
      return "'" + std::string(table) + "': SQLite has no schema '" +
             std::string(table.substr(0, dot)) +
             "' here (only 'main', the file itself; attached databases are not supported)";
  } else if (d == dialect::postgresql) {
    if (schema == "pg_temp" || (schema.rfind("pg_temp_", 0) == 0 && schema.size() > 8))
      return "'" + std::string(table) +
             "' is in PostgreSQL's temporary schema, private to one session: nodes would not see "
             "each other's leases and every node would run every job; use a regular schema";
  }
  return {};
}

long long ceil_seconds(std::chrono::milliseconds timeout, long long min_seconds) {
  return std::max(min_seconds, static_cast<long long>((timeout.count() + 999) / 1000));
}

namespace {

std::chrono::milliseconds duration_param(std::string_view text, std::string_view type,
                                         std::string_view param) {
  if (auto d = baton::parse_duration(text)) return *d;
  bad_param(type, param,
            "bad duration '" + std::string(text) + "' (" + std::string(duration_hint) + ")");
}

}  // namespace

contend_options lease_defaults(const sql_options& o) {
  contend_options defaults;
  defaults.poll_interval = o.poll_interval;
  return defaults;
}

void validate(const sql_options& o, bool host_checks) {
  const auto type = to_string(o.kind);
  const char* conn_param = o.kind == dialect::sqlite ? "path" : "connection";
  if (o.connection.empty()) bad_param(type, conn_param, "must not be empty");
  if (!valid_table(o.table))
    bad_param(type, "table",
              "'" + o.table +
                  "' is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 "
                  "characters, optionally schema-qualified)");
  // The derived tables <table>_history and <table>_controls must fit the server's identifier
  // limit too (PostgreSQL would silently cut the name, MySQL refuse it at the first write).
  if (o.kind != dialect::sqlite) {
    const std::size_t limit = o.kind == dialect::postgresql ? 63 : 64;
    const auto dot = o.table.find('.');
    const auto part = dot == std::string::npos ? o.table : o.table.substr(dot + 1);
    const auto longest = part + std::string(controls_suffix);
    if (longest.size() > limit)
      bad_param(type, "table",
                "'" + o.table + "' is too long: the derived table '" + longest + "' has " +
                    std::to_string(longest.size()) + " characters, more than " + std::string(type) +
                    " allows (" + std::to_string(limit) + "); use at most " +
                    std::to_string(limit - controls_suffix.size()) + " characters");
  }
  if (o.pool_size < 1 || o.pool_size > 64) bad_param(type, "pool_size", "must be 1 to 64");
  if (o.poll_interval <= std::chrono::milliseconds::zero())
    bad_param(type, "poll_interval", "must be positive");
  if (o.statement_timeout <= std::chrono::milliseconds::zero())
    bad_param(type, "statement_timeout", "must be positive");
  if (auto why = table_exclusion_error(o.kind, o.table); !why.empty())
    bad_param(type, "table", why);
  if (o.kind == dialect::sqlite) {
    if (o.connection.find('"') != std::string::npos)
      bad_param(type, "path", "must not contain '\"'");
    if (auto why = sqlite_exclusion_error(o.connection); !why.empty()) bad_param(type, "path", why);
    const bool uri =
        baton::detail::ascii_lower(std::string_view(o.connection).substr(0, 5)) == "file:";
    std::filesystem::path dir = std::filesystem::path(o.connection).parent_path();
    std::error_code ec;
    if (host_checks && !uri && !dir.empty() && !std::filesystem::is_directory(dir, ec))
      bad_param(type, "path", "directory '" + dir.string() + "' does not exist");
  } else {
    // The driver's own parse (libpq's for PostgreSQL): what it refuses is refused here.
    const auto options = parse_connection(o.kind, o.connection);
    std::set<std::string> keys;
    for (const auto& opt : options) keys.insert(opt.key);
    // search_path=pg_temp first makes an unqualified CREATE TABLE create a temporary table.
    for (const auto& opt : options)
      if (o.kind == dialect::postgresql && opt.key == "options" &&
          o.table.find('.') == std::string::npos &&
          baton::detail::ascii_lower(opt.value).find("search_path") != std::string::npos &&
          baton::detail::ascii_lower(opt.value).find("pg_temp") != std::string::npos)
        bad_param(type, "connection",
                  "its 'options' put pg_temp in search_path: the unqualified table '" + o.table +
                      "' would be a temporary table, private to one session, and every node "
                      "would run every job; qualify the table (schema.table) or drop pg_temp");
    if (o.kind == dialect::mysql && keys.count("reconnect") != 0)
      bad_param(type, "connection",
                "'reconnect' is not allowed: a silent reconnect would hide a lost lease");
  }
}

std::string soci_connect_string(const sql_options& o) {
  const auto seconds = std::to_string(ceil_seconds(o.statement_timeout));
  switch (o.kind) {
    case dialect::sqlite: {
      const bool quote = std::any_of(o.connection.begin(), o.connection.end(), is_space);
      return "db=" + (quote ? "\"" + o.connection + "\"" : o.connection) + " timeout=" + seconds +
             (o.read_only ? " readonly=1" : "");
    }
    case dialect::postgresql: {
      const bool uri = is_uri(o.connection);
      connect_string_builder b(o.connection, keys_of(o.kind, o.connection), uri);
      b.add("connect_timeout", std::to_string(ceil_seconds(o.statement_timeout, 2)));
      b.add("keepalives", "1");
      b.add("keepalives_idle", seconds);
      b.add("keepalives_interval", "1");
      b.add("keepalives_count", "3");
      b.add("tcp_user_timeout", std::to_string(o.statement_timeout.count()));
      b.add("application_name", "baton");
      return b.str();
    }
    case dialect::mysql: {
      connect_string_builder b(o.connection, keys_of(o.kind, o.connection), false);
      b.add("connect_timeout", seconds);
      b.add("read_timeout", seconds);
      b.add("write_timeout", seconds);
      // History and controls are UTF-8 text in utf8mb4 columns.
      b.add("charset", "utf8mb4");
      return b.str();
    }
  }
  return o.connection;
}

}  // namespace detail

sql_options parse_options(const backend_config& config) {
  return detail::parse_options(config, true);
}

sql_options detail::parse_options(const backend_config& config, bool host_checks) {
  sql_options o;
  if (config.type == "sqlite")
    o.kind = dialect::sqlite;
  else if (config.type == "postgresql")
    o.kind = dialect::postgresql;
  else if (config.type == "mysql")
    o.kind = dialect::mysql;
  else
    throw std::invalid_argument("sql backend: unknown type '" + config.type +
                                "' (expected sqlite, postgresql or mysql)");
  check_params(descriptor(o.kind), config);
  const std::string_view type = config.type;
  const std::string conn_param = o.kind == dialect::sqlite ? "path" : "connection";
  for (const auto& [key, value] : config.params) {
    if (key == conn_param) {
      o.connection = value;
    } else if (key == "table") {
      o.table = value;
    } else if (key == "create_table") {
      if (value == "true")
        o.create_table = true;
      else if (value == "false")
        o.create_table = false;
      else
        detail::bad_param(type, key, "expected true or false, got '" + value + "'");
    } else if (key == "pool_size") {
      unsigned n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || end != value.data() + value.size())
        detail::bad_param(type, key, "expected a number, got '" + value + "'");
      o.pool_size = n;
    } else if (key == "poll_interval") {
      o.poll_interval = detail::duration_param(value, type, key);
    } else if (key == "statement_timeout") {
      o.statement_timeout = detail::duration_param(value, type, key);
    }  // check_params() refused every other key
  }
  o.read_only = config.read_only;
  detail::validate(o, host_checks);
  return o;
}

}  // namespace baton::backends::sql
