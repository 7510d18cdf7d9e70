// The web console: routes, bearer-token checks, per-address rate limits, and a pool of its own
// for the backend work (console.hpp; daemon/README.md, "Web console").
#include "console.hpp"

#include <atomic>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "baton/backends/factory.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/records.hpp"
#include "commands.hpp"
#include "console_assets.hpp"
#include "output.hpp"
#include "report.hpp"

namespace baton::daemon {

using steady = std::chrono::steady_clock;

namespace {

// Every console answer: the page may load only its own script, style and API, and nothing may
// frame it.
const std::vector<std::pair<std::string, std::string>>& security_headers() {
  static const std::vector<std::pair<std::string, std::string>> h{
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"}};
  return h;
}

http_reply reply(unsigned status, std::string content_type, std::string body) {
  return {status, std::move(content_type), std::move(body), security_headers()};
}

http_reply json_reply(unsigned status, const nlohmann::json& doc) {
  return reply(status, "application/json",
               doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

http_reply error_reply(unsigned status, const std::string& message) {
  return json_reply(status, {{"error", message}});
}

http_reply method_not_allowed(const std::string& allow) {
  auto r = error_reply(405, "method not allowed (" + allow + ")");
  r.headers.emplace_back("Allow", allow);
  return r;
}

// %XX decoded; nullopt when malformed.
std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (ec != std::errc{} || end != s.data() + i + 3) return std::nullopt;
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

// The value of `key` in a query string ("limit=20&x=y"), raw.
std::optional<std::string> query_value(const std::string& query, std::string_view key) {
  std::size_t pos = 0;
  while (pos <= query.size()) {  // one pair per round
    const auto amp = std::min(query.find('&', pos), query.size());
    const std::string_view pair(query.data() + pos, amp - pos);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == key)
      return eq == std::string_view::npos ? std::string() : std::string(pair.substr(eq + 1));
    pos = amp + 1;
  }
  return std::nullopt;
}

// The path split at '/': "/api/v1/schedules/x/history" -> api, v1, schedules, x, history.
std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::size_t pos = 1;
  while (pos <= path.size()) {  // one segment per round
    const auto slash = std::min(path.find('/', pos), path.size());
    out.emplace_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

// True for "127.0.0.1", "[::1]:9464", "localhost:80": a Host header naming an address, not a
// name that DNS could point anywhere.
bool literal_host(std::string_view host) {
  if (host.empty()) return false;
  std::string_view name = host;
  if (host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return false;
    name = host.substr(1, close - 1);
  } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
  }
  if (name == "localhost") return true;
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(std::string(name), ec);
  return !ec;
}

bool loopback_peer(const std::string& ip) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(ip, ec);
  if (ec) return false;
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  return a.is_loopback();
}

// A token bucket per client address.
struct bucket {
  double tokens = 0;
  steady::time_point at;
};

// Most client addresses remembered; beyond it the full buckets are forgotten.
constexpr std::size_t max_buckets = 4096;
constexpr std::size_t default_history_limit = 20;
constexpr std::size_t max_history_limit = 1000;

}  // namespace

bool equal_constant_time(std::string_view a, std::string_view b) noexcept {
  // Every byte of `b` is compared whatever differs first; `a`'s length only sets the result.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = diff | (x ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

struct console::impl {
  impl(config::daemon_config c, std::string v, std::string id, std::string t, console_limits l)
      : config(std::move(c)),
        version(std::move(v)),
        contender_id(std::move(id)),
        token(std::move(t)),
        limits(l),
        pool(l.threads) {}

  const config::daemon_config config;
  const std::string version;
  const std::string contender_id;
  const std::string token;  // never logged, never sent
  const console_limits limits;

  // The server's thread only.
  std::map<std::string, bucket> buckets;

  std::atomic<std::size_t> in_flight{0};
  std::atomic<bool> stopped{false};

  // The pool's threads: the console's own backend, built on first use (after the daemon's has
  // created the store), with a runtime of its own.
  std::mutex backend_mutex;
  std::unique_ptr<runtime> rt;
  std::shared_ptr<mutex_backend> backend;

  boost::asio::thread_pool pool;

  bool allow(const std::string& address);
  std::shared_ptr<mutex_backend> get_backend();
  const config::schedule_config* schedule(const std::string& name) const;
  // Runs `work` on the pool (503 when max_in_flight are running); its answer goes to `respond`.
  void blocking(std::function<http_reply(mutex_backend&)> work,
                std::function<void(http_reply)> respond);
  http_reply node() const;
  void control(const http_request& request, const std::string& name, const std::string& action,
               std::function<void(http_reply)> respond);
};

bool console::impl::allow(const std::string& address) {
  const auto now = steady::now();
  if (buckets.size() >= max_buckets && buckets.find(address) == buckets.end()) {
    for (auto it = buckets.begin(); it != buckets.end();) {
      const double dt = std::chrono::duration<double>(now - it->second.at).count();
      if (it->second.tokens + dt * limits.rate_per_second >= limits.burst)
        it = buckets.erase(it);
      else
        ++it;
    }
    if (buckets.size() >= max_buckets) return false;  // a flood of addresses: refuse new ones
  }
  auto [it, added] = buckets.try_emplace(address, bucket{limits.burst, now});
  auto& b = it->second;
  if (!added) {
    const double dt = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(limits.burst, b.tokens + dt * limits.rate_per_second);
    b.at = now;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

std::shared_ptr<mutex_backend> console::impl::get_backend() {
  std::lock_guard lock(backend_mutex);
  if (backend) return backend;
  if (!rt) rt = std::make_unique<runtime>(runtime::options{.io_threads = 1, .blocking_threads = 2});
  backend_config b = config.backend;
  // Looking only: nothing is created or changed unless the controls may write.
  b.read_only = !config.console.allow_control;
  try {
    backend = make_backend(b, *rt);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot set up the console's " + config.backend.type +
                             " backend: " + scrub_secrets(config.backend, e.what()));
  }
  return backend;
}

const config::schedule_config* console::impl::schedule(const std::string& name) const {
  for (const auto& s : config.schedules)
    if (s.name == name) return &s;
  return nullptr;
}

void console::impl::blocking(std::function<http_reply(mutex_backend&)> work,
                             std::function<void(http_reply)> respond) {
  if (stopped)
    return respond(error_reply(503, "the console is stopping (daemon stop or reload); retry"));
  if (in_flight.fetch_add(1) >= limits.max_in_flight) {
    --in_flight;
    auto r = error_reply(503, "busy: " + std::to_string(limits.max_in_flight) +
                                  " console requests are reading the backend; retry");
    r.headers.emplace_back("Retry-After", "1");
    return respond(std::move(r));
  }
  boost::asio::post(pool, [this, work = std::move(work), respond = std::move(respond)] {
    http_reply r;
    try {
      r = work(*get_backend());
    } catch (const std::exception& e) {
      r = error_reply(503, scrub_secrets(config.backend, e.what()));
    }
    --in_flight;
    respond(std::move(r));
  });
}

http_reply console::impl::node() const {
  nlohmann::json offset = nullptr;
  for (const auto& m : backend_metrics_snapshot())
    if (m.type == config.backend.type && m.clock_offset) offset = m.clock_offset->count();
  const auto& id = config.balance.node_id;
  return json_reply(200, {{"schema", 1},
                          {"id", id.empty() ? nlohmann::json(nullptr) : nlohmann::json(id)},
                          {"contender_id", contender_id},
                          {"version", version},
                          {"backend", backend_json(config.backend)},
                          {"clock_offset_ms", offset},
                          {"time", utc(std::chrono::system_clock::now())},
                          {"console", {{"allow_control", config.console.allow_control}}}});
}

void console::impl::control(const http_request& request, const std::string& name,
                            const std::string& action, std::function<void(http_reply)> respond) {
  auto refuse = [&](http_reply r, const std::string& why) {
    detail::log({.schedule = name, .event = "console.control_refused"})
        .warn("console: {} '{}' from {} refused ({}): {}", action, name, request.peer, r.status,
              why);
    respond(std::move(r));
  };
  if (!config.console.allow_control)
    return refuse(error_reply(403, "control is off on this node (http.allow_control)"),
                  "control is off");
  static constexpr std::string_view scheme = "Bearer ";
  const std::string& auth = request.authorization;
  const bool bearer = auth.size() > scheme.size() &&
                      std::equal(scheme.begin(), scheme.end(), auth.begin(), [](char a, char b) {
                        return std::tolower(static_cast<unsigned char>(a)) ==
                               std::tolower(static_cast<unsigned char>(b));
                      });
  if (!bearer) {
    auto r = error_reply(401, "an Authorization: Bearer TOKEN header is needed");
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"baton\"");
    return refuse(std::move(r), auth.empty() ? "no credentials" : "malformed credentials");
  }
  if (!equal_constant_time(std::string_view(auth).substr(scheme.size()), token)) {
    auto r = error_reply(401, "the token is not valid");
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"baton\", error=\"invalid_token\"");
    return refuse(std::move(r), "wrong token");
  }
  if (schedule(name) == nullptr)
    return respond(error_reply(404, "no schedule '" + name + "' in this node's config"));
  std::string reason;
  if (!request.body.empty()) {
    try {
      const auto body = nlohmann::json::parse(request.body);
      if (!body.is_object()) throw std::invalid_argument("not an object");
      if (auto it = body.find("reason"); it != body.end()) reason = it->get<std::string>();
    } catch (const std::exception&) {
      return respond(
          error_reply(400, "the body must be a JSON object, e.g. {\"reason\": \"...\"}"));
    }
  }
  const std::string by = "console " + request.peer_ip;
  const std::string peer = request.peer;
  blocking(
      [this, name, action, reason, by, peer](mutex_backend& b) {
        control_result r;
        try {
          r = apply_control(b, name, action, reason, by);
        } catch (const std::exception& e) {
          const auto why = scrub_secrets(config.backend, e.what());
          detail::log({.schedule = name, .event = "console.control_failed"})
              .warn("console: {} '{}' from {} failed: {}", action, name, peer, why);
          return error_reply(503, "cannot change '" + name + "': " + why);
        }
        detail::log({.schedule = name, .event = "console.control"})
            .info("console: {} '{}' from {} applied (paused {} -> {}, trigger requests {})", action,
                  name, peer, r.before.paused, r.after.paused, r.after.trigger_requests);
        auto controls = nlohmann::json::parse(to_json(r.after));
        controls["version"] = r.after.version;
        return json_reply(200, {{"schema", 1},
                                {"schedule", name},
                                {"action", action},
                                {"owner", r.owner.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(r.owner.owner_id)},
                                {"controls", std::move(controls)}});
      },
      std::move(respond));
}

console::console(config::daemon_config config, std::string version, std::string contender_id,
                 std::string token, console_limits limits)
    : impl_(std::make_unique<impl>(std::move(config), std::move(version), std::move(contender_id),
                                   std::move(token), limits)) {}

console::~console() { stop(); }

bool console::serves(const std::string& path) const {
  return path == "/" || path == "/index.html" || path == "/console.js" || path == "/console.css" ||
         path == "/api" || path.rfind("/api/", 0) == 0;
}

void console::handle(const http_request& request, boost::asio::io_context&,
                     std::function<void(http_reply)> respond) {
  auto& m = *impl_;
  if (!m.allow(request.peer_ip)) {
    auto r = error_reply(429, "too many requests from " + request.peer_ip + " (" +
                                  std::to_string(static_cast<int>(m.limits.rate_per_second)) +
                                  " per second)");
    r.headers.emplace_back("Retry-After", "1");
    return respond(std::move(r));
  }
  // DNS rebinding: a page of another site whose name now resolves to 127.0.0.1 reaches this
  // listener from the local browser with that name in Host. Local clients must use an address.
  if (loopback_peer(request.peer_ip) && !literal_host(request.host))
    return respond(error_reply(
        421, "Host '" + request.host +
                 "' refused: from this machine, open the console by address (127.0.0.1, [::1] "
                 "or localhost), not by a name"));
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (path == "/" || path == "/index.html" || path == "/console.js" || path == "/console.css") {
    if (!get) return respond(method_not_allowed("GET, HEAD"));
    if (path == "/console.js")
      return respond(reply(200, "text/javascript; charset=utf-8", std::string(console_js)));
    if (path == "/console.css")
      return respond(reply(200, "text/css; charset=utf-8", std::string(console_css)));
    return respond(reply(200, "text/html; charset=utf-8", std::string(console_html)));
  }
  const auto parts = segments(path);
  auto not_found = [&] {
    respond(
        error_reply(404, "not found: " + path +
                             " (the API has /api/v1/schedules, /api/v1/schedules/NAME/history, "
                             "/api/v1/node and POST /api/v1/schedules/NAME/pause|resume|trigger)"));
  };
  if (parts.size() < 3 || parts[0] != "api" || parts[1] != "v1") return not_found();
  if (parts.size() == 3 && parts[2] == "node") {
    if (!get) return respond(method_not_allowed("GET, HEAD"));
    return respond(m.node());
  }
  if (parts[2] != "schedules") return not_found();
  if (parts.size() == 3) {
    if (!get) return respond(method_not_allowed("GET, HEAD"));
    return m.blocking(
        [&m](mutex_backend& b) {
          auto report = build_status(m.config, b);
          for (const auto& w : report.warnings)
            detail::log({.event = "console.read_failed"}).debug("console: {}", w);
          if (!report.error.empty()) return error_reply(503, report.error);
          return json_reply(200, report.doc);
        },
        std::move(respond));
  }
  if (parts.size() != 5) return not_found();
  const auto name = percent_decode(parts[3]);
  if (!name) return respond(error_reply(400, "malformed %-escape in the schedule's name"));
  const std::string& what = parts[4];
  if (what == "history") {
    if (!get) return respond(method_not_allowed("GET, HEAD"));
    if (m.schedule(*name) == nullptr)
      return respond(error_reply(404, "no schedule '" + *name + "' in this node's config"));
    std::size_t limit = default_history_limit;
    if (auto v = query_value(request.query, "limit")) {
      const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), limit);
      if (ec != std::errc{} || end != v->data() + v->size() || limit == 0 ||
          limit > max_history_limit)
        return respond(error_reply(
            400, "limit must be a whole number from 1 to " + std::to_string(max_history_limit)));
    }
    return m.blocking(
        [name = *name, limit](mutex_backend& b) {
          std::vector<run_record> records;
          try {
            records = read_run_history(b, name, limit);
          } catch (const store_missing&) {
            // Nothing has run on this store yet: no history.
          }
          return json_reply(200, history_document(name, limit, records));
        },
        std::move(respond));
  }
  if (is_control_action(what)) {
    if (request.method != "POST") return respond(method_not_allowed("POST"));
    return m.control(request, *name, what, std::move(respond));
  }
  not_found();
}

void console::stop() noexcept {
  auto& m = *impl_;
  m.stopped = true;
  m.pool.join();  // waits for the requests it runs (the backend's timeouts bound them)
  std::lock_guard lock(m.backend_mutex);
  m.backend.reset();
  if (m.rt) m.rt->stop();
  m.rt.reset();
}

}  // namespace baton::daemon
