#include "redis_config.hpp"

#include "baton/backends/redis/redis_backend.hpp"
#include "baton/mutex/detail/text.hpp"
#include "baton/mutex/duration.hpp"

#include <charconv>
#include <optional>
#include <stdexcept>

namespace baton::backends::redis::detail {
namespace {

constexpr std::string_view scheme = "redis://";

// A URL cut where parse_url() and mask() both cut it: "scheme://" (any scheme, or none), the
// user info up to the last '@' (so user and password may hold any character, '@' and '/'
// too), and the rest: host, port, path and whatever follows.
struct url_parts {
  std::string_view scheme;                   // "redis://", "rediss://", ""
  std::optional<std::string_view> user;      // before the first ':' of the user info
  std::optional<std::string_view> password;  // after it; the whole user info when it has no ':'
  std::string_view rest;
};

url_parts split_url(std::string_view url) {
  url_parts parts;
  if (auto sep = url.find("://"); sep != std::string_view::npos) {
    parts.scheme = url.substr(0, sep + 3);
    url.remove_prefix(sep + 3);
  }
  parts.rest = url;
  if (auto at = url.rfind('@'); at != std::string_view::npos) {
    const auto userinfo = url.substr(0, at);
    parts.rest = url.substr(at + 1);
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      parts.user = userinfo.substr(0, colon);
      parts.password = userinfo.substr(colon + 1);
    } else {
      parts.password = userinfo;  // "redis://secret@host": shown as *** all the same
    }
  }
  return parts;
}

bool parse_int(std::string_view text, long long& value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

masked_value mask_url(const std::string& url) {
  const auto parts = split_url(url);
  masked_value out;
  out.text = std::string(parts.scheme);
  if (parts.password) {
    if (parts.user) out.text += std::string(*parts.user) + ":";
    out.text += "***@";
    std::string decoded;
    if (baton::detail::percent_decode(*parts.password, decoded) && !decoded.empty())
      out.secrets.push_back(decoded);
    if (decoded != *parts.password && !parts.password->empty())
      out.secrets.emplace_back(*parts.password);
  }
  // A query or fragment is not part of a URL baton reads; it may carry a password elsewhere.
  const auto query = parts.rest.find_first_of("?#");
  out.text += std::string(parts.rest.substr(0, query));
  if (query != std::string_view::npos) out.text += std::string(1, parts.rest[query]) + "***";
  return out;
}

endpoint parse_url(const std::string& url) {
  endpoint ep;
  auto masked = mask_url(url);
  ep.display = std::move(masked.text);
  ep.secrets = std::move(masked.secrets);
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("redis backend: url '" + ep.display + "': " + what);
  };
  if (url.empty()) fail("is empty (expected redis://[[user]:password@]host[:port][/db])");
  const auto parts = split_url(url);
  if (parts.scheme != scheme)
    fail(
        "must start with redis:// (expected redis://[[user]:password@]host[:port][/db]; TLS "
        "(rediss://) and unix sockets are not supported)");
  std::string_view rest = parts.rest;

  // [[user]:password@]
  if (parts.password) {
    if (!parts.user)
      fail(
          "credentials need a ':' before the password (redis://:password@host or "
          "redis://user:password@host)");
    if (!baton::detail::percent_decode(*parts.user, ep.user))
      fail("bad percent-encoding in the user name");
    if (!baton::detail::percent_decode(*parts.password, ep.password))
      fail("bad percent-encoding in the password");
    if (ep.password.empty()) fail("the password is empty");
  }

  // host[:port][/db]
  std::string_view hostport = rest;
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (hostport.find_first_of("?#") != std::string_view::npos ||
      path.find_first_of("?#") != std::string_view::npos)
    fail("query strings and fragments are not supported");
  std::string_view port_text;
  if (!hostport.empty() && hostport.front() == '[') {
    auto close = hostport.find(']');
    if (close == std::string_view::npos) fail("unterminated '[' in an IPv6 host");
    ep.host = std::string(hostport.substr(1, close - 1));
    auto after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail("expected ':port' after the IPv6 host");
      port_text = after.substr(1);
      if (port_text.empty()) fail("the port is empty");
    }
  } else {
    auto colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      hostport = hostport.substr(0, colon);
      if (port_text.empty()) fail("the port is empty");
    }
    ep.host = std::string(hostport);
  }
  if (ep.host.empty()) fail("the host is missing");
  if (ep.host.find_first_of(" \t@/:") != std::string::npos && hostport.front() != '[')
    fail("bad host '" + ep.host + "'");
  if (!port_text.empty()) {
    long long port = 0;
    if (!parse_int(port_text, port) || port < 1 || port > 65535)
      fail("bad port '" + std::string(port_text) + "' (expected 1..65535)");
    ep.port = static_cast<int>(port);
  }
  if (!path.empty()) {
    long long db = 0;
    if (!parse_int(path, db) || db < 0 || db > 1'000'000)
      fail("bad database index '" + std::string(path) + "' (expected /0, /1, ...)");
    ep.db = static_cast<int>(db);
  }
  return ep;
}

std::vector<endpoint> parse_host_list(const std::string& list) {
  std::vector<endpoint> out;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("redis backend: sentinels '" + list + "': " + what +
                                " (expected host[:port][,host[:port]...], port 26379 when "
                                "omitted)");
  };
  if (list.empty()) fail("is empty");
  std::size_t start = 0;
  for (int index = 1;; ++index) {
    const auto comma = list.find(',', start);
    const std::string_view entry = std::string_view(list).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string at = "entry " + std::to_string(index) + " '" + std::string(entry) + "'";
    if (entry.empty()) fail("entry " + std::to_string(index) + " is empty");
    endpoint ep;
    ep.port = 26379;
    std::string_view host = entry;
    std::string_view port_text;
    bool has_port = false;
    if (entry.front() == '[') {
      const auto close = entry.find(']');
      if (close == std::string_view::npos) fail(at + ": unterminated '[' in an IPv6 host");
      host = entry.substr(1, close - 1);
      const auto after = entry.substr(close + 1);
      if (!after.empty()) {
        if (after.front() != ':') fail(at + ": expected ':port' after the IPv6 host");
        port_text = after.substr(1);
        has_port = true;
      }
    } else if (const auto colon = entry.rfind(':'); colon != std::string_view::npos) {
      host = entry.substr(0, colon);
      port_text = entry.substr(colon + 1);
      has_port = true;
    }
    if (host.empty()) fail(at + ": the host is missing");
    if (host.find_first_of(" \t@/:?#") != std::string_view::npos && entry.front() != '[')
      fail(at + ": bad host '" + std::string(host) + "'");
    if (has_port) {
      long long port = 0;
      if (!parse_int(port_text, port) || port < 1 || port > 65535)
        fail(at + ": bad port '" + std::string(port_text) + "' (expected 1..65535)");
      ep.port = static_cast<int>(port);
    }
    ep.host = std::string(host);
    ep.display = std::string(entry.front() == '[' ? "[" + ep.host + "]" : ep.host) + ":" +
                 std::to_string(ep.port);
    for (const auto& seen : out)
      if (seen.host == ep.host && seen.port == ep.port) fail(at + ": named twice");
    out.push_back(std::move(ep));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

// A duration parameter; throws naming `what` when malformed or not positive.
std::chrono::milliseconds duration_param(const std::string& what, const std::string& value) {
  auto d = baton::parse_duration(value);
  if (!d || d->count() <= 0)
    throw backend_param_error(what, "redis backend: " + what + " '" + value +
                                        "' is not a positive duration (" +
                                        std::string(duration_hint) + ")");
  return *d;
}

}  // namespace

contend_options lease_defaults(const settings& s) {
  contend_options defaults;
  defaults.poll_interval = s.poll_interval;
  return defaults;
}

settings parse_settings(const backend_config& config) {
  check_params(descriptor(), config);
  settings s;
  const auto& params = config.params;
  const bool by_url = params.count("url") != 0;
  const bool by_sentinels = params.count("sentinels") != 0;
  if (by_url && by_sentinels)
    throw backend_param_error("sentinels",
                              "redis backend: url and sentinels are mutually exclusive (url: one "
                              "server; sentinels and master: the master Redis Sentinel names)");
  if (!by_url && !by_sentinels)
    throw backend_param_error("url",
                              "redis backend: missing: give url (one server, "
                              "redis://[[user]:password@]host[:port][/db]) or sentinels and "
                              "master (Redis Sentinel)");
  // The parameters of sentinel mode, each refused with a url (its login goes in the url).
  for (const char* key : {"master", "user", "password", "sentinel_user", "sentinel_password"}) {
    if (by_sentinels || params.count(key) == 0) continue;
    throw backend_param_error(
        key, std::string("redis backend: ") + key +
                 " is for sentinel mode (with sentinels); with url, " +
                 (std::string_view(key).find("master") == 0 ? "the url names the server"
                                                            : "put the login in the url"));
  }
  if (by_sentinels) {
    s.sentinel.emplace();
    const auto master = params.find("master");
    if (master == params.end() || master->second.empty())
      throw backend_param_error("master",
                                "redis backend: sentinels need master: the name the sentinels "
                                "monitor (sentinel monitor NAME ...)");
    if (master->second.find_first_of(" \t\r\n") != std::string::npos)
      throw backend_param_error(
          "master", "redis backend: master '" + master->second + "' must not contain white space");
    s.sentinel->master = master->second;
    auto pair = [&](const char* user_key, const char* password_key, std::string& user,
                    std::string& password) {
      const auto u = params.find(user_key);
      const auto p = params.find(password_key);
      if (u != params.end() && p == params.end())
        throw backend_param_error(
            user_key, std::string("redis backend: ") + user_key + " needs " + password_key);
      if (u != params.end()) user = u->second;
      if (p != params.end()) {
        if (p->second.empty())
          throw backend_param_error(password_key,
                                    std::string("redis backend: ") + password_key + " is empty");
        password = p->second;
      }
    };
    std::string sentinel_user, sentinel_password;
    pair("user", "password", s.server.user, s.server.password);
    pair("sentinel_user", "sentinel_password", sentinel_user, sentinel_password);
    if (!s.server.password.empty()) s.server.secrets.push_back(s.server.password);
    try {
      s.sentinel->sentinels = parse_host_list(params.at("sentinels"));
    } catch (const std::invalid_argument& e) {
      throw backend_param_error("sentinels", e.what());
    }
    for (auto& ep : s.sentinel->sentinels) {
      ep.user = sentinel_user;
      ep.password = sentinel_password;
      if (!sentinel_password.empty()) ep.secrets = {sentinel_password};
      // Either password may show up in a message about any connection.
      if (!s.server.password.empty()) ep.secrets.push_back(s.server.password);
    }
    if (!sentinel_password.empty()) s.server.secrets.push_back(sentinel_password);
    s.server.display = "master '" + s.sentinel->master + "'";
  }
  for (const auto& [key, value] : config.params) {
    if (key == "url") {
      try {
        s.server = parse_url(value);
      } catch (const std::invalid_argument& e) {
        throw backend_param_error("url", e.what());
      }
    } else if (key == "key_prefix") {
      if (value.find_first_of("{}") != std::string::npos)
        throw backend_param_error("key_prefix", "redis backend: key_prefix '" + value +
                                                    "' must not contain '{' or '}' (the mutex "
                                                    "name is the hash tag)");
      s.key_prefix = value;
    } else if (key == "poll_interval") {
      s.poll_interval = duration_param(key, value);
    } else if (key == "connect_timeout") {
      s.connect_timeout = duration_param(key, value);
    } else if (key == "command_timeout") {
      s.command_timeout = duration_param(key, value);
    } else if (key == "handoff_window") {
      s.handoff_window = duration_param(key, value);
    }  // check_params() refused every other key
  }
  return s;
}

}  // namespace baton::backends::redis::detail
