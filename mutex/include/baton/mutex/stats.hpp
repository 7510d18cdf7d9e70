#pragma once
/// Process-wide counters for diagnostics and benchmarks.
#include <atomic>
#include <cstdint>

namespace baton {

/// Requests this process has sent to any backend since it started: one per Redis command, per
/// SQL request (one transaction or statement batch), per ZooKeeper request. Relaxed; cheap.
std::uint64_t backend_requests_sent() noexcept;

namespace detail {
extern std::atomic<std::uint64_t> backend_requests;
/// Called by the backends for every request they send.
inline void count_backend_requests(std::uint64_t n = 1) noexcept {
  backend_requests.fetch_add(n, std::memory_order_relaxed);
}
}  // namespace detail

}  // namespace baton
