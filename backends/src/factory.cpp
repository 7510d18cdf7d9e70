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

std::vector<std::string> available_backends() {
  std::vector<std::string> types{"memory"};
#ifdef BATON_HAS_SQL
  types.insert(types.end(), {"sqlite", "postgresql", "mysql"});
#endif
#ifdef BATON_HAS_REDIS
  types.push_back("redis");
#endif
#ifdef BATON_HAS_ZOOKEEPER
  types.push_back("zookeeper");
#endif
  return types;
}

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  const auto& type = config.type;
  if (type == "memory")
    return std::make_shared<lease_store_backend>("memory", rt,
                                                 std::make_shared<memory_lease_store>());
#ifdef BATON_HAS_SQL
  if (type == "sqlite" || type == "postgresql" || type == "mysql")
    return backends::sql::make_backend(config, rt);
#endif
#ifdef BATON_HAS_REDIS
  if (type == "redis") return backends::redis::make_backend(config, rt);
#endif
#ifdef BATON_HAS_ZOOKEEPER
  if (type == "zookeeper") return backends::zookeeper::make_backend(config, rt);
#endif
  std::string known;
  for (const auto& t : available_backends()) known += (known.empty() ? "" : ", ") + t;
  throw std::invalid_argument("unknown backend type '" + type + "' (this build has: " + known +
                              ")");
}

}  // namespace baton
