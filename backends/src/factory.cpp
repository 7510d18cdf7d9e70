#include "baton/backends/factory.hpp"

#include <stdexcept>

#include "baton/mutex/memory_store.hpp"
#ifdef BATON_HAS_SQL
#include "baton/backends/sql/sql_backend.hpp"
#endif
#ifdef BATON_HAS_REDIS
#include "baton/backends/redis/redis_backend.hpp"
#endif
#ifdef BATON_HAS_ZOOKEEPER
#include "baton/backends/zookeeper/zookeeper_backend.hpp"
#endif

namespace baton {
namespace {

const backend_descriptor& memory_descriptor() {
  static const backend_descriptor d = [] {
    backend_descriptor d;
    d.type = "memory";
    d.doc = "in this process only: for trying things out and tests";
    d.process_local =
        "the memory backend keeps leases in this process only: another baton running this "
        "config runs every job too (no exclusion between processes); for more than one node use "
        "sqlite, postgresql, mysql, redis or zookeeper";
    d.default_lease = [](const backend_config&) { return contend_options{}; };
    d.make = [](const backend_config&, runtime& rt) -> std::shared_ptr<mutex_backend> {
      return std::make_shared<lease_store_backend>("memory", rt,
                                                   std::make_shared<memory_lease_store>());
    };
    return d;
  }();
  return d;
}

const backend_descriptor& descriptor_of(const backend_config& config) {
  if (const auto* d = find_backend(config.type)) return *d;
  std::string known;
  for (const auto& t : available_backends()) known += (known.empty() ? "" : ", ") + t;
  throw std::invalid_argument("unknown backend type '" + config.type +
                              "' (this build has: " + known + ")");
}

}  // namespace

const std::vector<const backend_descriptor*>& backend_descriptors() {
  static const std::vector<const backend_descriptor*> all{
      &memory_descriptor(),
#ifdef BATON_HAS_SQL
      &backends::sql::descriptor(backends::sql::dialect::sqlite),
      &backends::sql::descriptor(backends::sql::dialect::postgresql),
      &backends::sql::descriptor(backends::sql::dialect::mysql),
#endif
#ifdef BATON_HAS_REDIS
      &backends::redis::descriptor(),
#endif
#ifdef BATON_HAS_ZOOKEEPER
      &backends::zookeeper::descriptor(),
#endif
  };
  return all;
}

const backend_descriptor* find_backend(std::string_view type) {
  for (const auto* d : backend_descriptors())
    if (d->type == type) return d;
  return nullptr;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> types;
  for (const auto* d : backend_descriptors()) types.push_back(d->type);
  return types;
}

contend_options default_lease(const backend_config& config) {
  const auto& d = descriptor_of(config);
  check_params(d, config);
  return d.default_lease(config);
}

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  const auto& d = descriptor_of(config);
  check_params(d, config);
  return d.make(config, rt);
}

}  // namespace baton
