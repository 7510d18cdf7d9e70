#include "support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace baton::test {

namespace {

using steady = std::chrono::steady_clock;

// Closes the descriptor at scope exit.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

// Waits for `events` on `fd` until `deadline`; false on timeout or error.
bool wait_for(int fd, short events, steady::time_point deadline) {
  while (true) {  // bounded by the deadline
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

http_response http_request(int port, const std::string& method, const std::string& target,
                           std::chrono::milliseconds timeout, const std::string& extra_headers) {
  http_response r;
  const auto deadline = steady::now() + timeout;
  fd_guard s{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)};
  if (s.fd < 0) return r.error = "socket: " + std::string(std::strerror(errno)), r;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return r.error = "connect: " + std::string(std::strerror(errno)), r;
    if (!wait_for(s.fd, POLLOUT, deadline)) return r.error = "connect: timed out", r;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return r.error = "connect: " + std::string(std::strerror(err)), r;
  }
  const std::string request = method + " " + target +
                              " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nConnection: close\r\n" + extra_headers + "\r\n";
  for (std::size_t sent = 0; sent < request.size();) {
    if (!wait_for(s.fd, POLLOUT, deadline)) return r.error = "send: timed out", r;
    const ssize_t n = ::send(s.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return r.error = "send: " + std::string(std::strerror(errno)), r;
    if (n > 0) sent += static_cast<std::size_t>(n);
  }
  std::string raw;
  const bool head = method == "HEAD";
  char buf[16384];
  while (true) {  // bounded by the deadline and the server closing
    if (head && raw.find("\r\n\r\n") != std::string::npos) break;
    if (!wait_for(s.fd, POLLIN, deadline)) return r.error = "read: timed out after: " + raw, r;
    const ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      if (errno == ECONNRESET && !raw.empty()) break;
      return r.error = "read: " + std::string(std::strerror(errno)), r;
    }
    raw.append(buf, static_cast<std::size_t>(n));
  }
  const auto end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return r.error = "no end of headers in: " + raw, r;
  std::istringstream head_lines(raw.substr(0, end));
  std::string line;
  std::getline(head_lines, line);
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12)
    return r.error = "bad status line: " + line, r;
  const int status = std::atoi(line.c_str() + 9);
  while (std::getline(head_lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos) return r.error = "bad header line: " + line, r;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    r.headers[name] = value;
  }
  r.body = raw.substr(end + 4);
  r.status = status;
  return r;
}

http_response http_get(int port, const std::string& target, std::chrono::milliseconds timeout) {
  return http_request(port, "GET", target, timeout);
}

const std::map<std::string, std::string>& documented_metric_families() {
  static const std::map<std::string, std::string> families{
      {"baton_schedules", "gauge"},
      {"baton_schedule_leader", "gauge"},
      {"baton_schedule_fence", "gauge"},
      {"baton_schedule_paused", "gauge"},
      {"baton_schedule_running", "gauge"},
      {"baton_schedule_clock_refused", "gauge"},
      {"baton_schedule_consecutive_failures", "gauge"},
      {"baton_schedule_runs_total", "counter"},
      {"baton_schedule_run_duration_seconds", "histogram"},
      {"baton_schedule_last_success_timestamp_seconds", "gauge"},
      {"baton_backend_requests_total", "counter"},
      {"baton_backend_request_duration_seconds", "histogram"},
      {"baton_backend_errors_total", "counter"},
      {"baton_lease_acquisitions_total", "counter"},
      {"baton_lease_renewals_total", "counter"},
      {"baton_lease_losses_total", "counter"},
      {"baton_lease_step_downs_total", "counter"},
      {"baton_lease_releases_total", "counter"},
      {"baton_clock_offset_seconds", "gauge"},
      {"baton_balance_enabled", "gauge"},
      {"baton_balance_members_alive", "gauge"},
      {"baton_balance_assigned_schedules", "gauge"},
      {"baton_balance_leading_schedules", "gauge"},
      {"baton_balance_handoffs_total", "counter"},
      {"baton_balance_view_changes_total", "counter"},
      {"baton_balance_draining", "gauge"},
      {"baton_balance_drained", "gauge"},
      {"baton_balance_mixed_configs", "gauge"},
      {"baton_balance_record_errors_total", "counter"},
      {"baton_build_info", "gauge"},
      {"baton_config_reloads_total", "counter"},
      {"process_cpu_seconds_total", "counter"},
      {"process_resident_memory_bytes", "gauge"},
      {"process_virtual_memory_bytes", "gauge"},
      {"process_start_time_seconds", "gauge"},
      {"process_open_fds", "gauge"},
      {"process_max_fds", "gauge"},
      {"process_threads", "gauge"},
  };
  return families;
}

}  // namespace baton::test
