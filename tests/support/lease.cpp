#include "support/lease.hpp"

namespace baton::test {

contend_options lease_options(std::chrono::milliseconds ttl, std::chrono::milliseconds retry) {
  contend_options o;
  o.ttl = ttl;
  o.transition = ttl;
  o.retry_period = retry;
  o.poll_interval = retry;
  return o;
}

}  // namespace baton::test
