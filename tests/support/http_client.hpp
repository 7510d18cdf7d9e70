#pragma once
// A small blocking HTTP/1.1 client over a raw socket, for tests that talk to the daemon's
// /metrics, /healthz and /readyz: one request per connection (Connection: close).
#include <chrono>
#include <map>
#include <string>

namespace baton::test {

/// What the server answered.
struct http_response {
  int status = -1;    ///< -1: no answer (could not connect, timed out, malformed)
  std::string error;  ///< why, when status is -1
  std::map<std::string, std::string> headers;  ///< names lower-cased
  std::string body;
};

/// Sends `method target` to 127.0.0.1:`port` with `extra_headers` (each "Name: value\r\n") and
/// reads the answer until the server closes, at most `timeout` in all. A HEAD answer ends after
/// its headers.
http_response http_request(int port, const std::string& method, const std::string& target,
                           std::chrono::milliseconds timeout = std::chrono::seconds{10},
                           const std::string& extra_headers = "");

/// http_request(port, "GET", target, timeout).
http_response http_get(int port, const std::string& target,
                       std::chrono::milliseconds timeout = std::chrono::seconds{10});

/// Every metric family daemon/README.md ("Metrics and health") documents, with its type: what
/// /metrics must expose (the unit test of the writer and the scrape of a running daemon).
const std::map<std::string, std::string>& documented_metric_families();

}  // namespace baton::test
