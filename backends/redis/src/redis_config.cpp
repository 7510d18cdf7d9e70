#include "redis_config.hpp"

#include "baton/backends/redis/redis_backend.hpp"
#include "baton/mutex/duration.hpp"

#include <charconv>
#include <stdexcept>

namespace baton::backends::redis::detail {
namespace {

constexpr std::string_view scheme = "redis://";

// The URL with the password (between the first ':' after the scheme and the last '@') masked.
std::string mask_password(const std::string& url) {
  if (url.compare(0, scheme.size(), scheme) != 0) return url;
  auto at = url.rfind('@');
  if (at == std::string::npos) return url;
  auto colon = url.find(':', scheme.size());
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool parse_int(std::string_view text, long long& value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

endpoint parse_url(const std::string& url) {
  endpoint ep;
  ep.display = mask_password(url);
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("redis backend: url '" + ep.display + "': " + what);
  };
  if (url.empty()) fail("is empty (expected redis://[[user]:password@]host[:port][/db])");
  if (url.compare(0, scheme.size(), scheme) != 0)
    fail(
        "must start with redis:// (expected redis://[[user]:password@]host[:port][/db]; TLS "
        "(rediss://) and unix sockets are not supported)");
  std::string_view rest(url);
  rest.remove_prefix(scheme.size());

  // [[user]:password@]
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    auto userinfo = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string_view::npos)
      fail(
          "credentials need a ':' before the password (redis://:password@host or "
          "redis://user:password@host)");
    if (!percent_decode(userinfo.substr(0, colon), ep.user))
      fail("bad percent-encoding in the user name");
    if (!percent_decode(userinfo.substr(colon + 1), ep.password))
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
