#include "baton/mutex/stats.hpp"

namespace baton {

namespace detail {
std::atomic<std::uint64_t> backend_requests{0};
}  // namespace detail

std::uint64_t backend_requests_sent() noexcept {
  return detail::backend_requests.load(std::memory_order_relaxed);
}

}  // namespace baton
