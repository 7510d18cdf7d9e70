#pragma once
// The Redis backend's configuration: the URL and the optional parameters, checked up front.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"

namespace baton::backends::redis::detail {

/// Where the server is and how to log in, from redis://[[user]:password@]host[:port][/db].
struct endpoint {
  std::string host;
  int port = 6379;
  std::string user;      ///< ACL user; empty: AUTH with the password only (the default user)
  std::string password;  ///< empty: no AUTH
  int db = 0;
  std::string display;  ///< the URL with the password masked (mask_url), for logs and errors
  std::vector<std::string> secrets;  ///< the password, decoded and as written: scrubbed from
                                     ///< server and hiredis messages
};

/// Redis Sentinel: where the sentinels are and which master they name (sentinel mode).
struct sentinel_settings {
  std::vector<endpoint> sentinels;  ///< in the order they are asked; user/password: the sentinels'
  std::string master;               ///< the master name the sentinels monitor
};

/// Every setting of one backend instance.
struct settings {
  /// url mode: the server. Sentinel mode: the master's login (user, password, secrets) and a
  /// display name; host and port come from the sentinels on every connect.
  endpoint server;
  std::optional<sentinel_settings> sentinel;  ///< set in sentinel mode (sentinels + master)
  std::string key_prefix = "baton:";
  std::chrono::milliseconds poll_interval{1'000};
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds command_timeout{2'000};
  std::chrono::milliseconds handoff_window{500};
};

/// Parses a redis:// URL; throws std::invalid_argument naming the URL (password masked) and
/// what is wrong.
endpoint parse_url(const std::string& url);

/// `url` for output, cut the way parse_url() cuts it (the user info runs to the last '@'), with
/// the password as *** (the whole user info when it has no ':'), any query or fragment as ***,
/// and the password decoded and as written; works on any text, a URL parse_url() refuses too.
masked_value mask_url(const std::string& url);

/// A sentinel list "host[:port][,host[:port]...]" (port 26379 when omitted; IPv6 in [...]);
/// throws std::invalid_argument naming the list and the bad entry.
std::vector<endpoint> parse_host_list(const std::string& list);

/// All settings of `config` (type "redis"); throws backend_param_error naming the parameter.
settings parse_settings(const backend_config& config);

/// The backend's default_options(): baton's defaults with the configured poll_interval (waiters
/// are woken over pub/sub; polling only covers a lost message or a crashed owner).
contend_options lease_defaults(const settings& s);

}  // namespace baton::backends::redis::detail
