#include "baton/mutex/options.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace baton {

std::chrono::milliseconds contend_options::effective_drift_margin() const noexcept {
  if (drift_margin > std::chrono::milliseconds::zero()) return drift_margin;
  return std::max(std::chrono::milliseconds{50}, lease() / 50);
}

void validate(const contend_options& o) {
  using std::chrono::milliseconds;
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("lease options: " + what);
  };
  if (o.ttl <= milliseconds::zero()) fail("ttl must be greater than 0");
  if (o.transition < milliseconds::zero()) fail("transition must not be negative");
  if (o.retry_period <= milliseconds::zero()) fail("retry_period must be greater than 0");
  if (o.poll_interval <= milliseconds::zero()) fail("poll_interval must be greater than 0");
  if (o.max_backoff < o.retry_period) fail("max_backoff must be at least retry_period");
  if (o.drift_margin < milliseconds::zero()) fail("drift_margin must not be negative");
  if (o.effective_drift_margin() >= o.lease())
    fail("drift_margin (" + std::to_string(o.effective_drift_margin().count()) +
         " ms) must be less than ttl + transition (" + std::to_string(o.lease().count()) + " ms)");
}

}  // namespace baton
