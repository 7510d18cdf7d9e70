#include "baton/backends/redis/redis_backend.hpp"

#include <future>
#include <stdexcept>

#include "baton/mutex/duration.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/names.hpp"

#include "redis_config.hpp"
#include "redis_store.hpp"

namespace baton::backends::redis {
namespace {

// The lease_store backend plus what only Redis knows here: its wait queue.
class redis_backend final : public lease_store_backend {
 public:
  redis_backend(runtime& rt, std::shared_ptr<detail::store> store, contend_options defaults,
                std::chrono::milliseconds answer_within)
      : lease_store_backend("redis", rt, store, store, defaults),
        store_(std::move(store)),
        answer_within_(answer_within) {}

  std::optional<std::vector<std::string>> read_waiters(const std::string& name) override {
    validate_mutex_name(name);
    auto promise =
        std::make_shared<std::promise<std::pair<std::error_code, std::vector<std::string>>>>();
    auto future = promise->get_future();
    store_->async_read_waiters(name, [promise](std::error_code ec, std::vector<std::string> ids) {
      promise->set_value({ec, std::move(ids)});
    });
    if (future.wait_for(answer_within_) != std::future_status::ready)
      throw std::system_error(make_error_code(errc::timeout),
                              "redis: read_waiters('" + name + "'): no answer");
    auto [ec, ids] = future.get();
    if (ec) throw std::system_error(ec, "redis: read_waiters('" + name + "')");
    return ids;
  }

 private:
  std::shared_ptr<detail::store> store_;
  std::chrono::milliseconds answer_within_;
};

}  // namespace

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  if (!config.type.empty() && config.type != "redis")
    throw std::invalid_argument("redis backend: config of type '" + config.type + "'");
  auto settings = detail::parse_settings(config);
  const auto defaults = detail::lease_defaults(settings);
  validate(defaults);
  auto store = detail::make_store(rt.io(), settings);
  // A command waits at most connect_timeout for a connection, then command_timeout for its reply.
  const auto answer_within =
      settings.connect_timeout + settings.command_timeout + std::chrono::milliseconds{1'000};
  return std::make_shared<redis_backend>(rt, std::move(store), defaults, answer_within);
}

const backend_descriptor& descriptor() {
  static const backend_descriptor d = [] {
    const detail::settings defaults;
    backend_descriptor d;
    d.type = "redis";
    d.doc = "Redis: Lua scripts keep the owner records, pub/sub wakes the longest waiter";
    d.params = {
        {"url", param_kind::text, false, "", false,
         "redis://[[user]:password@]host[:port][/db] (port 6379, db 0; the user info runs to the "
         "last '@', %XX decoded); shown with the password as ***; or sentinels and master",
         detail::mask_url},
        {"sentinels", param_kind::text, false, "", false,
         "Redis Sentinel instead of url: host[:port][,host[:port]...] (port 26379), asked in "
         "order for the master, which is followed across failovers"},
        {"master", param_kind::text, false, "", false,
         "the master name the sentinels monitor (with sentinels)"},
        {"user", param_kind::text, false, "", false,
         "ACL user for the master (with sentinels; needs password)"},
        {"password", param_kind::text, false, "", true, "password for the master (with sentinels)"},
        {"sentinel_user", param_kind::text, false, "", false,
         "ACL user for the sentinels (needs sentinel_password)"},
        {"sentinel_password", param_kind::text, false, "", true,
         "password for the sentinels (with sentinels)"},
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
