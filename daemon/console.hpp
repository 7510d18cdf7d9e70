#pragma once
// The web console (`http.console`): one page at / (HTML, /console.css, /console.js, embedded in
// the binary), the read-only JSON API under /api/v1 (the documents of `status --json` and
// `history --json`, and this node), and, with `http.allow_control` and the bearer token,
// POST /api/v1/schedules/NAME/pause|resume|trigger. Reference: daemon/README.md, "Web console".
//
// It never runs on the lease path: every backend read or write runs on a pool of its own
// (bounded: at most max_in_flight requests at once, 503 beyond) against a backend instance of
// its own (its own runtime, connections and threads), and requests are rate limited per client
// address (429).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "baton/config/config.hpp"
#include "http.hpp"

namespace baton::daemon {

/// The console's bounds.
struct console_limits {
  std::size_t max_in_flight = 4;  ///< backend requests running or queued at once (503 beyond)
  unsigned threads = 2;           ///< the pool that runs them
  double rate_per_second = 20;    ///< requests per client address, sustained (429 beyond)
  double burst = 60;              ///< requests per client address at once
};

/// True when `a` equals `b`, in a time that depends only on the length of `b` (the secret).
bool equal_constant_time(std::string_view a, std::string_view b) noexcept;

/// The console's routes on the daemon's HTTP listener (http_endpoints::set_console).
class console : public http_routes {
 public:
  /// `config`: the daemon's (schedules, backend, http.console); `token`: read_console_token()'s
  /// (empty when control is off); `contender_id`: this node's.
  console(config::daemon_config config, std::string version, std::string contender_id,
          std::string token, console_limits limits = {});
  ~console() override;
  console(const console&) = delete;
  console& operator=(const console&) = delete;

  bool serves(const std::string& path) const override;
  void handle(const http_request& request, boost::asio::io_context& io,
              std::function<void(http_reply)> respond) override;
  void stop() noexcept override;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace baton::daemon
