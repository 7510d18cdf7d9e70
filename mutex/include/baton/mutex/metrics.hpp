#pragma once
/// Process-wide metrics of the mutex layer: per backend type, request latency, errors by kind and
/// lease events. Cheap (relaxed atomics, no locks on the lock path) and on by default; an
/// embedding service reads snapshots and exports them however it likes (the daemon serves them
/// as Prometheus text on /metrics).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace baton {

/// A histogram as read at one moment.
struct histogram_snapshot {
  std::vector<double> bounds;         ///< bucket upper bounds, ascending (seconds); +Inf implied
  std::vector<std::uint64_t> counts;  ///< per bucket, not cumulative: bounds.size() + 1 entries
  double sum = 0;                     ///< sum of the observed values (seconds)
  std::uint64_t count = 0;            ///< observations
};

/// A fixed-bucket histogram of durations; observe() is lock-free and thread-safe.
class histogram {
 public:
  /// `bounds`: ascending upper bounds in seconds (at most 32).
  explicit histogram(std::vector<double> bounds);
  histogram(const histogram&) = delete;
  histogram& operator=(const histogram&) = delete;
  void observe(std::chrono::nanoseconds d) noexcept;
  histogram_snapshot snapshot() const;

  /// 0.5 ms .. 10 s: backend requests.
  static const std::vector<double>& request_bounds();
  /// 10 ms .. 6 h: job runs.
  static const std::vector<double>& run_bounds();

 private:
  std::vector<double> bounds_;
  std::array<std::atomic<std::uint64_t>, 33> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
  std::atomic<std::uint64_t> count_{0};
};

/// What happened to a lease, counted per backend type.
enum class lease_event {
  acquired,   ///< this process became owner (a handover to this node; the fence changed)
  renewed,    ///< a renewal succeeded (ZooKeeper: an answered heartbeat extended the lease)
  lost,       ///< the backend said this process is no longer owner (taken, expired, session gone)
  step_down,  ///< the local lease deadline passed before a renewal succeeded (stepped down;
              ///< ZooKeeper also when the connection drops)
  released,   ///< given up on purpose (stop, unlock)
};
inline constexpr std::size_t lease_event_count = 5;
std::string_view to_string(lease_event e) noexcept;

/// One backend type's counters as read at one moment.
struct backend_metrics {
  std::string type;  ///< "sqlite", "postgresql", "mysql", "redis", "zookeeper", "memory"
  /// Requests sent (as backend_requests_sent() counts them), counted when answered or failed;
  /// Redis pub/sub (UN)SUBSCRIBE are not included.
  std::uint64_t requests = 0;
  histogram_snapshot request_latency;  ///< send to reply, seconds
  /// Failed requests by kind: errc names ("connection_lost", "timeout", "session_expired",
  /// "backend_error", ...); only kinds seen so far, in errc order. Failed: no answer (connection,
  /// timeout, session gone; also a request that could not be sent), an error reply or an
  /// unreadable one. An answer such as "not owner" or a lost compare-and-set is not a failure.
  std::vector<std::pair<std::string, std::uint64_t>> errors;
  std::array<std::uint64_t, lease_event_count> lease_events{};  ///< indexed by lease_event
  /// The latest measured offset of the backend's clock from this host's wall clock (backend
  /// minus local, clock.hpp), when any request has measured one.
  std::optional<std::chrono::milliseconds> clock_offset;
};

/// Turns collection on or off for the whole process (on by default). Off: the hooks below
/// return at once (for comparing costs; the snapshots keep what was counted).
void set_metrics_enabled(bool on) noexcept;
bool metrics_enabled() noexcept;

/// Every backend type that counted something in this process, in a fixed order.
std::vector<backend_metrics> backend_metrics_snapshot();

namespace detail {
/// Called by the backends: one request of backend `type` answered after `latency`.
void record_backend_request(std::string_view type, std::chrono::nanoseconds latency) noexcept;
/// Called by the backends: one request of backend `type` failed with `ec`.
void record_backend_error(std::string_view type, std::error_code ec) noexcept;
/// Called by the contend services: a lease event on a mutex of backend `type`.
void record_lease_event(std::string_view type, lease_event e) noexcept;
/// Called by the contend services: the latest clock offset measured on backend `type`.
void record_clock_offset(std::string_view type, std::chrono::milliseconds offset) noexcept;
}  // namespace detail

}  // namespace baton
