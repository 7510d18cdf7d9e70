#include "support/faults.hpp"

#include <cstdlib>

#include "support/env.hpp"

namespace baton::test {
namespace {

bool run(const std::string& command) { return std::system(command.c_str()) == 0; }

bool lock_sqlite(const std::string& path, std::chrono::milliseconds duration) {
  // Debian's python3 always has sqlite3; BEGIN EXCLUSIVE blocks every other connection.
  return run("/usr/bin/python3 -c \"import sqlite3,time; c=sqlite3.connect('" + path +
             "', isolation_level=None, timeout=30); c.execute('BEGIN EXCLUSIVE'); time.sleep(" +
             std::to_string(duration.count() / 1000.0) + "); c.execute('COMMIT')\"");
}

}  // namespace

bool kill_connections(const std::string& type, const std::string& sqlite_path,
                      std::chrono::milliseconds duration) {
  if (type == "sqlite") return lock_sqlite(sqlite_path, duration);
  if (type == "postgresql")
    return run("psql -q -X \"" + require_env("BATON_TEST_POSTGRES") +
               "\" -c \"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
               "datname = current_database() AND pid <> pg_backend_pid()\" >/dev/null");
  if (type == "mysql")
    return run("for id in $(mariadb -N -B -h 127.0.0.1 -P " + require_env("BATON_TEST_MYSQL_PORT") +
               " -u baton -pbaton -e \"SELECT id FROM information_schema.processlist WHERE "
               "user = 'baton' AND id <> CONNECTION_ID()\"); do mariadb -h 127.0.0.1 -P " +
               require_env("BATON_TEST_MYSQL_PORT") +
               " -u baton -pbaton -e \"KILL $id\" 2>/dev/null; done; true");
  if (type == "redis")
    return run("redis-cli -p " + require_env("BATON_TEST_REDIS_PORT") +
               " CLIENT KILL TYPE normal >/dev/null && redis-cli -p " +
               require_env("BATON_TEST_REDIS_PORT") + " CLIENT KILL TYPE pubsub >/dev/null");
  if (type == "zookeeper") return server_ctl("restart", "zookeeper");
  return true;  // memory: nothing to break
}

bool restart_server(const std::string& type, const std::string& sqlite_path) {
  if (type == "sqlite") return lock_sqlite(sqlite_path, std::chrono::seconds{3});
  if (type == "postgresql") return server_ctl("restart", "postgres");
  if (type == "mysql") return server_ctl("restart", "mariadb");
  if (type == "redis") return server_ctl("restart", "redis");
  if (type == "zookeeper") return server_ctl("restart", "zookeeper");
  return true;
}

}  // namespace baton::test
