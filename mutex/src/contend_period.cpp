#include "baton/mutex/contend_period.hpp"

#include <algorithm>
#include <random>

namespace baton {

random_source default_random_source() {
  return [](std::int64_t lo, std::int64_t hi) -> std::int64_t {
    if (hi <= lo) return lo;
    thread_local std::mt19937_64 engine{std::random_device{}()};
    return std::uniform_int_distribution<std::int64_t>{lo, hi - 1}(engine);
  };
}

contend_period::contend_period(contend_options options, random_source random)
    : options_(options), random_(random ? std::move(random) : default_random_source()) {}

std::chrono::milliseconds contend_period::next_delay(const mutex_owner& owner,
                                                     const std::string& self, backend_time now,
                                                     wakeup_coverage wakeups) const {
  using std::chrono::milliseconds;
  if (owner.is(self)) return std::max(milliseconds::zero(), owner.ttl_at - now);
  const milliseconds jitter{
      options_.lapse_jitter > milliseconds::zero() ? random_(0, options_.lapse_jitter.count()) : 0};
  milliseconds until_free = owner.transition_at - now + jitter;
  if (until_free <= milliseconds::zero()) return milliseconds::zero();
  switch (wakeups) {
    case wakeup_coverage::none:
      return std::min(until_free, options_.poll_interval);
    case wakeup_coverage::release:
      return std::min(until_free, std::max(options_.poll_interval, options_.lease()));
    case wakeup_coverage::release_and_expiry:
      break;
  }
  return std::max(options_.poll_interval, 2 * options_.lease() + jitter);
}

}  // namespace baton
