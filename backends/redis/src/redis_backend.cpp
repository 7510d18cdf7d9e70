#include "baton/backends/redis/redis_backend.hpp"

#include <stdexcept>

#include "baton/mutex/detail/unsupported_records.hpp"
#include "baton/mutex/duration.hpp"

#include "redis_config.hpp"
#include "redis_store.hpp"

namespace baton::backends::redis {

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  if (!config.type.empty() && config.type != "redis")
    throw std::invalid_argument("redis backend: config of type '" + config.type + "'");
  auto settings = detail::parse_settings(config);
  const auto defaults = detail::lease_defaults(settings);
  validate(defaults);
  auto store = detail::make_store(rt.io(), settings);
  return std::make_shared<lease_store_backend>(
      "redis", rt, std::move(store), std::make_shared<baton::detail::unsupported_records>(),
      defaults);
}

const backend_descriptor& descriptor() {
  static const backend_descriptor d = [] {
    const detail::settings defaults;
    backend_descriptor d;
    d.type = "redis";
    d.doc = "Redis: Lua scripts keep the owner records, pub/sub wakes the longest waiter";
    d.params = {
        {"url", param_kind::text, true, "", false,
         "redis://[[user]:password@]host[:port][/db] (port 6379, db 0; the user info runs to the "
         "last '@', %XX decoded); shown with the password as ***",
         detail::mask_url},
        {"key_prefix", param_kind::text, false, defaults.key_prefix, false,
         "prefix of every key and channel (no '{' or '}')"},
        {"poll_interval", param_kind::duration, false, format_duration(defaults.poll_interval),
         false, "the lease's default poll_interval: waiters re-check this often"},
        {"connect_timeout", param_kind::duration, false, format_duration(defaults.connect_timeout),
         false, "connect + AUTH/SELECT deadline"},
        {"command_timeout", param_kind::duration, false, format_duration(defaults.command_timeout),
         false, "per-command deadline; a late reply drops the connection"},
        {"handoff_window", param_kind::duration, false, format_duration(defaults.handoff_window),
         false, "how long a released mutex is reserved for the longest waiter"},
    };
    d.default_lease = [](const backend_config& config) {
      return detail::lease_defaults(detail::parse_settings(config));
    };
    d.make = [](const backend_config& config, runtime& rt) { return make_backend(config, rt); };
    return d;
  }();
  return d;
}

}  // namespace baton::backends::redis
