#include "support/store_probe.hpp"

#include <soci/soci.h>

#include <filesystem>
#include <stdexcept>

#include "support/env.hpp"

#if __has_include(<baton/backends/redis/redis_backend.hpp>)
#include <hiredis/hiredis.h>
#define BATON_PROBE_REDIS 1
#endif
#if __has_include(<baton/backends/zookeeper/zookeeper_backend.hpp>)
#ifndef THREADED
#define THREADED  // the synchronous C API (zoo_exists) is declared only with THREADED
#endif
#include <zookeeper/zookeeper.h>
#define BATON_PROBE_ZOOKEEPER 1
#endif

namespace baton::test {
namespace {

using namespace std::chrono_literals;

std::string param(const backend_config& config, const std::string& key, std::string fallback) {
  auto it = config.params.find(key);
  return it == config.params.end() ? fallback : it->second;
}

std::string file_footprint(const std::string& path) {
  std::string out;
  for (const char* suffix : {"", "-wal", "-journal"}) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path + suffix, ec);
    out += std::string(" ") + (suffix[0] ? suffix : "file") + ": " +
           (ec ? std::string("absent") : std::to_string(size) + " bytes");
  }
  return "sqlite" + out;
}

std::string table_footprint(const backend_config& config) {
  const std::string table = param(config, "table", "baton_mutex");
  soci::session sql(config.type, config.params.at("connection"));
  long long rows = 0;
  try {
    sql << "SELECT COUNT(*) FROM " + table, soci::into(rows);
  } catch (const soci::soci_error&) {
    return config.type + " table " + table + ": absent";
  }
  return config.type + " table " + table + ": " + std::to_string(rows) + " rows";
}

#ifdef BATON_PROBE_REDIS
// redis://host:port[/db], as BATON_TEST_REDIS_URL (no password).
std::string redis_footprint(const std::string& url) {
  std::string rest = url.substr(url.find("://") + 3);
  std::string db = "0";
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  const auto colon = rest.rfind(':');
  redisContext* c = redisConnectWithTimeout(rest.substr(0, colon).c_str(),
                                            std::stoi(rest.substr(colon + 1)), timeval{5, 0});
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    throw std::runtime_error("store_footprint: cannot connect to redis at " + rest);
  }
  auto command = [&](const std::string& text) {
    auto* reply = static_cast<redisReply*>(redisCommand(c, text.c_str()));
    if (reply == nullptr) throw std::runtime_error("store_footprint: redis: " + text);
    const long long n = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    return n;
  };
  command("SELECT " + db);
  const long long keys = command("DBSIZE");
  redisFree(c);
  return "redis db " + db + ": " + std::to_string(keys) + " keys";
}
#endif

#ifdef BATON_PROBE_ZOOKEEPER
std::string zookeeper_footprint(const backend_config& config) {
  const std::string root = param(config, "root", "/baton");
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh =
      zookeeper_init(config.params.at("hosts").c_str(), nullptr, 10'000, nullptr, nullptr, 0);
  if (zh == nullptr) throw std::runtime_error("store_footprint: zookeeper_init failed");
  int rc = ZCONNECTIONLOSS;
  if (wait_until([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s))
    rc = zoo_exists(zh, root.c_str(), 0, nullptr);
  zookeeper_close(zh);
  if (rc != ZOK && rc != ZNONODE)
    throw std::runtime_error("store_footprint: zookeeper: " + std::string(zerror(rc)));
  return "zookeeper " + root + ": " + (rc == ZOK ? "exists" : "absent");
}
#endif

}  // namespace

std::string store_footprint(const backend_config& config) {
  if (config.type == "sqlite") return file_footprint(config.params.at("path"));
  if (config.type == "postgresql" || config.type == "mysql") return table_footprint(config);
#ifdef BATON_PROBE_REDIS
  if (config.type == "redis") return redis_footprint(config.params.at("url"));
#endif
#ifdef BATON_PROBE_ZOOKEEPER
  if (config.type == "zookeeper") return zookeeper_footprint(config);
#endif
  throw std::invalid_argument("store_footprint: no probe for backend type '" + config.type + "'");
}

}  // namespace baton::test
