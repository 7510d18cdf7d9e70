#pragma once
// The daemon's HTTP side (`http.listen`, `baton run --http-listen`): a small HTTP/1.1 server
// (Boost.Beast) on a thread and io_context of its own, and the endpoints it serves: /metrics
// (Prometheus text), /healthz (the runtime's io threads answer) and /readyz (the scheduler runs
// and the backend answered a probe recently). Rules: daemon/README.md, "Metrics and health".
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "baton/config/config.hpp"
#include "baton/mutex/backend.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/scheduler.hpp"

namespace baton::daemon {

/// One request as the server read it.
struct http_request {
  std::string method;         ///< "GET", "HEAD", "POST", ... as sent
  std::string path;           ///< the target without its query
  std::string query;          ///< after '?', "" when none
  std::string authorization;  ///< the Authorization header, "" when none
  std::string host;           ///< the Host header, "" when none
  std::string body;           ///< at most limits::body_bytes
  std::string peer;           ///< the client's address, "127.0.0.1:50412"
  std::string peer_ip;        ///< the client's address without the port
};

/// One answer of the server.
struct http_reply {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// More header fields (name, value): Allow, WWW-Authenticate, Content-Security-Policy, ...
  std::vector<std::pair<std::string, std::string>> headers = {};
};

/// Answers a request: calls `respond` exactly once, either at once or later (from a handler it
/// started on `io`, a timer, or from another thread: respond posts the answer onto the server's
/// thread). Never blocks: the server has one thread.
using http_handler = std::function<void(const http_request& request, boost::asio::io_context& io,
                                        std::function<void(http_reply)> respond)>;

/// Paths served by another part of the daemon (the web console, console.hpp), checked before
/// the endpoints' own.
class http_routes {
 public:
  virtual ~http_routes() = default;
  /// True for the paths it answers (whatever the method).
  virtual bool serves(const std::string& path) const = 0;
  /// As http_handler.
  virtual void handle(const http_request& request, boost::asio::io_context& io,
                      std::function<void(http_reply)> respond) = 0;
  /// Ends its threads (after this no respond is called); idempotent.
  virtual void stop() noexcept = 0;
};

/// A small HTTP/1.1 server. Bounded: at most `max_connections` at once (further clients wait in
/// the listen backlog), request headers up to `header_bytes` (else 431), request bodies up to
/// `body_bytes` (else 413), `io_timeout` for each read and write (an idle keep-alive connection
/// is closed then). Every method reaches the handler, which answers 405 with Allow for a method
/// its path does not take. Never throws out of a handler. Every answer has Cache-Control:
/// no-store and X-Content-Type-Options: nosniff.
class http_server {
 public:
  struct limits {
    std::size_t max_connections = 32;
    std::size_t header_bytes = 8 * 1024;
    std::size_t body_bytes = 1024;
    std::chrono::milliseconds io_timeout{5000};
  };

  /// Listens on `address` ("localhost" binds 127.0.0.1) and serves on a thread of its own.
  /// Throws std::system_error whose what() names the address (port in use, no such address).
  http_server(const config::listen_address& address, http_handler handler, limits l);
  http_server(const config::listen_address& address, http_handler handler)
      : http_server(address, std::move(handler), limits{}) {}
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;
  /// stop().
  ~http_server();

  /// The address it listens on (the port it got when asked for port 0).
  boost::asio::ip::tcp::endpoint local_endpoint() const noexcept;
  /// Closes the listener and every connection and joins the thread; idempotent.
  void stop() noexcept;

  class impl;  ///< defined in http.cpp (its connections use it)

 private:
  std::unique_ptr<impl> impl_;
};

/// What `baton run` serves over HTTP and the state its answers come from. Created before the
/// backend (a listen failure ends the daemon before anything is contacted); the scheduler is
/// attached once it runs and detached (stop()) before it is destroyed.
class http_endpoints {
 public:
  /// Starts serving at `address`; throws std::system_error naming the address. `rt`: the
  /// runtime whose io threads /healthz checks (outlives this). `backend_type`: the configured
  /// backend's type, shown in /metrics before it counted anything.
  http_endpoints(const config::listen_address& address, runtime& rt, std::string version,
                 std::string backend_type);
  http_endpoints(const http_endpoints&) = delete;
  http_endpoints& operator=(const http_endpoints&) = delete;
  /// stop().
  ~http_endpoints();

  /// "127.0.0.1:40123": where it listens (the port it got for port 0).
  std::string address() const;

  /// The scheduler runs: /metrics shows its schedules; /readyz probes `backend` with
  /// read_owner(`probe_name`) on a thread of its own. `scrub` removes secrets from the
  /// backend's error messages. `s` must stay alive until stop().
  void attach(const scheduler& s, std::shared_ptr<mutex_backend> backend, std::string probe_name,
              std::function<std::string(const std::string&)> scrub);
  /// Serves the web console (console.hpp) from now on: the page at /, /console.js, /console.css
  /// and /api/v1/... go to `console` (null: 404 again). The console's blocking work runs on
  /// threads of its own.
  void set_console(std::shared_ptr<http_routes> console);
  /// A SIGHUP reload was applied (true) or rejected (false): baton_config_reloads_total.
  void count_reload(bool applied) noexcept;
  /// The daemon is stopping: /readyz answers 503 "stopping" from now on.
  void stopping() noexcept;
  /// Stops serving and the readiness prober (waits for a probe in progress: the backend's request
  /// timeouts bound it while the runtime's io threads run; a probe stuck on a wedged runtime holds
  /// this up, and then the daemon's stop_timeout ends the process) and lets go of the scheduler
  /// and backend; idempotent.
  void stop() noexcept;

 private:
  struct state;
  std::shared_ptr<state> state_;
  std::unique_ptr<http_server> server_;
};

/// The endpoints `baton run` was asked for (`http_listen`: --http-listen, else the config's
/// http.listen), serving, with their address logged; null when neither is given. Throws
/// std::runtime_error naming the address and where it was set when it cannot listen there.
std::unique_ptr<http_endpoints> start_http_endpoints(const std::optional<std::string>& http_listen,
                                                     const config::daemon_config& config,
                                                     runtime& rt, std::string version);

}  // namespace baton::daemon
