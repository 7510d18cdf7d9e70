#include "baton/backends/redis/redis_backend.hpp"

#include <stdexcept>

#include "redis_config.hpp"
#include "redis_store.hpp"

namespace baton::backends::redis {

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  if (!config.type.empty() && config.type != "redis")
    throw std::invalid_argument("redis backend: config of type '" + config.type + "'");
  auto settings = detail::parse_settings(config);
  contend_options defaults;
  // Waiters are woken over pub/sub; polling only covers a lost message or a crashed owner.
  defaults.poll_interval = settings.poll_interval;
  validate(defaults);
  auto store = detail::make_store(rt.io(), settings);
  return std::make_shared<lease_store_backend>("redis", rt, std::move(store), defaults);
}

}  // namespace baton::backends::redis
