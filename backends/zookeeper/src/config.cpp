// Settings of the ZooKeeper backend and lock node names: pure functions, unit tested.
#include <algorithm>

#include <boost/uuid/uuid.hpp>
#include <boost/uuid/uuid_generators.hpp>
#include <cctype>
#include <charconv>
#include <stdexcept>
#include "baton/mutex/duration.hpp"

#include "baton/backends/zookeeper/detail.hpp"
#include "baton/backends/zookeeper/zookeeper_backend.hpp"

namespace baton::backends::zookeeper::detail {
namespace {

constexpr std::string_view lock_marker = "-lock-";
constexpr std::size_t sequence_digits = 10;  // ZooKeeper appends %010d

[[noreturn]] void bad(std::string_view param, const std::string& why) {
  throw backend_param_error(std::string(param),
                            "zookeeper backend: parameter '" + std::string(param) + "' " + why);
}

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// One "host[:port]" entry; returns it with the port made explicit.
std::string check_host_entry(std::string_view entry, std::string_view all) {
  auto fail = [&](const std::string& why) { bad("hosts", "('" + std::string(all) + "'): " + why); };
  if (entry.empty()) fail("has an empty host entry");
  std::string_view host = entry;
  std::string_view port;
  if (entry.front() == '[') {  // [IPv6]:port
    auto close = entry.find(']');
    if (close == std::string_view::npos) fail("'" + std::string(entry) + "' lacks a ']'");
    host = entry.substr(1, close - 1);
    auto rest = entry.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail("'" + std::string(entry) + "' has junk after ']'");
      port = rest.substr(1);
      if (port.empty()) fail("'" + std::string(entry) + "' has an empty port");
    }
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != host.npos)
      fail("'" + std::string(entry) + "' is not an IPv6 address");
  } else {
    auto colon = entry.rfind(':');
    if (colon != std::string_view::npos) {
      host = entry.substr(0, colon);
      port = entry.substr(colon + 1);
      if (port.empty()) fail("'" + std::string(entry) + "' has an empty port");
    }
    if (host.empty()) fail("'" + std::string(entry) + "' has an empty host name");
    if (!std::all_of(host.begin(), host.end(), host_char))
      fail("host '" + std::string(host) + "' has characters other than A-Z a-z 0-9 . - _");
  }
  if (port.empty()) return std::string(entry) + ":2181";
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535)
    fail("port '" + std::string(port) + "' of '" + std::string(entry) +
         "' is not a number in 1..65535");
  return std::string(entry);
}

}  // namespace

contend_options lease_defaults(const settings& s) {
  using std::chrono::milliseconds;
  const auto timeout = s.session_timeout;
  contend_options o;
  o.ttl = std::max(milliseconds{1}, timeout / 3);
  o.transition = timeout - o.ttl;
  o.retry_period = std::clamp(timeout / 4, milliseconds{50}, milliseconds{1'000});
  // Below ttl (baton::check): only matters for session timeouts under 150 ms.
  if (o.retry_period >= o.ttl) o.retry_period = std::max(milliseconds{1}, o.ttl / 2);
  o.poll_interval = timeout;
  o.max_backoff = std::max(o.retry_period, milliseconds{5'000});
  return o;
}

std::chrono::milliseconds session_drift_margin(std::chrono::milliseconds negotiated_timeout) {
  return std::max(std::chrono::milliseconds{50}, negotiated_timeout / 50);
}

std::chrono::steady_clock::time_point session_lease_deadline(
    std::chrono::steady_clock::time_point last_answer_sent,
    std::chrono::milliseconds negotiated_timeout) {
  if (last_answer_sent == std::chrono::steady_clock::time_point{} ||
      negotiated_timeout <= std::chrono::milliseconds::zero())
    return {};
  return last_answer_sent + negotiated_timeout - session_drift_margin(negotiated_timeout);
}

std::string path_error(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.front() != '/') return "does not start with '/'";
  if (path == "/") return "is the ZooKeeper root '/'";
  if (path.back() == '/') return "ends with '/'";
  std::size_t start = 1;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    auto part = path.substr(start, end - start);
    if (part.empty()) return "has an empty component ('//')";
    if (part == "." || part == "..") return "has a '.' or '..' component";
    for (char c : part) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) return "has a control character";
    }
    start = end + 1;
  }
  return {};
}

settings parse_settings(const backend_config& config) {
  check_params(descriptor(), config);
  auto param = [&](const char* key) -> const std::string* {
    auto it = config.params.find(key);
    return it == config.params.end() ? nullptr : &it->second;
  };

  settings s;
  const std::string* hosts = param("hosts");
  if (hosts == nullptr || hosts->empty())
    bad("hosts", "is missing: give \"host:port[,host:port...][/chroot]\"");
  std::string_view all = *hosts;
  std::string_view list = all;
  if (auto slash = all.find('/'); slash != std::string_view::npos) {
    list = all.substr(0, slash);
    std::string_view chroot = all.substr(slash);
    if (chroot != "/") {
      if (auto why = path_error(chroot); !why.empty())
        bad("hosts", "('" + std::string(all) + "'): chroot '" + std::string(chroot) + "' " + why);
      s.chroot = std::string(chroot);
    }
  }
  std::size_t start = 0;
  while (true) {
    auto comma = list.find(',', start);
    auto entry = list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
    if (!s.hosts.empty()) s.hosts += ',';
    s.hosts += check_host_entry(entry, all);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }

  if (const auto* t = param("session_timeout")) {
    auto timeout = baton::parse_duration(*t);
    if (!timeout)
      bad("session_timeout",
          "('" + *t + "') is not a duration (" + std::string(duration_hint) + ")");
    s.session_timeout = *timeout;
    if (s.session_timeout < std::chrono::milliseconds{100} ||
        s.session_timeout > std::chrono::hours{1})
      bad("session_timeout", "('" + *t + "') must be between 100ms and 1h");
  }
  if (const auto* r = param("root")) {
    if (auto why = path_error(*r); !why.empty()) bad("root", "('" + *r + "') " + why);
    s.root = *r;
  } else {
    s.root = "/baton";
  }
  const std::string* user = param("username");
  const std::string* password = param("password");
  if ((user && !user->empty()) != (password && !password->empty()))
    bad(user && !user->empty() ? "password" : "username",
        "is missing: digest authentication needs both username and password");
  if (user && !user->empty()) {
    if (user->find(':') != std::string::npos) bad("username", "must not contain ':'");
    s.username = *user;
    s.password = *password;
  }
  return s;
}

std::string lock_prefix(std::string_view guid) {
  return "_c_" + std::string(guid) + std::string(lock_marker);
}

std::int64_t lock_sequence(std::string_view node) {
  if (node.substr(0, 3) != "_c_" || node.size() < sequence_digits + lock_marker.size() + 3)
    return -1;
  auto digits = node.substr(node.size() - sequence_digits);
  if (node.substr(node.size() - sequence_digits - lock_marker.size(), lock_marker.size()) !=
      lock_marker)
    return -1;
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || value < 0) return -1;
  return value;
}

std::vector<std::string> sorted_locks(std::vector<std::string> children) {
  std::vector<std::pair<std::int64_t, std::string>> keyed;
  keyed.reserve(children.size());
  for (auto& c : children)
    if (auto seq = lock_sequence(c); seq >= 0) keyed.emplace_back(seq, std::move(c));
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> out;
  out.reserve(keyed.size());
  for (auto& k : keyed) out.push_back(std::move(k.second));
  return out;
}

std::string make_guid() {
  thread_local boost::uuids::random_generator generator;
  auto id = generator();
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (auto byte : id) {
    out += hex[byte >> 4];
    out += hex[byte & 0xf];
  }
  return out;
}

}  // namespace baton::backends::zookeeper::detail
