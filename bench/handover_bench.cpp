// baton_handover_bench: figure 1, graceful handover. Two processes (bench/contender_child.cpp)
// contend for one mutex with the backend's default_options(); the owner releases (stop()) and
// the time until the other process's on_acquired is one sample. The released process contends
// again, and the next release goes the other way.
//
// In the same run, per backend, a floor: what the backend's client library needs at least for a
// handover, used raw from this process.
//   redis       PUBLISH -> message on a second, subscribed connection (hiredis), plus one EVALSHA
//               of acquire.lua ($BATON_BENCH_LUA_DIR) taking a free mutex
//   zookeeper   delete of a node watched by a second session -> watch fires, plus one zoo_create
//               (EPHEMERAL|SEQUENTIAL) round trip
//   postgresql  NOTIFY -> LISTEN wake-up on a second connection (libpq), plus one UPDATE like the
//               backend's acquire (SOCI, autocommit)
//   sqlite,     waiters poll: one UPDATE like the backend's acquire (SOCI, autocommit); the
//   mysql       record names the target poll_interval + 2 statement round trips
// The floor's median is median(notify) + median(acquire); its p99, min, max and mean likewise.
// Each floor sample follows the same idle pause (uniform [20, 70) ms) as a baton handover.
//
// Samples per backend: 200 (BATON_BENCH_QUICK=1: 20), after 2 unrecorded warm-up handovers.
// BATON_BENCH_HANDOVER_NO_PAUSE=1: the method of the kazoo and redis-py peers (bench/peers), which
// release as soon as the other contender waits: the owner releases at the waiter's first
// observation and the floors take no idle pause. Only the notified backends (Redis, ZooKeeper,
// PostgreSQL); the subjects are "baton-no-pause" and "floor-no-pause".
// Output: JSON records on stdout (figure "handover", subject "baton" and "floor"); progress and
// errors on stderr. Exits 1 if any backend failed.
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <soci/mysql/soci-mysql.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

using namespace std::chrono_literals;

namespace {

using baton::bench::child_process;
using baton::bench::expect_line;
using baton::bench::last_field;
using baton::bench::mono_ns;
using milliseconds = std::chrono::milliseconds;

constexpr int warmup_handovers = 2;

double ms_between(long long from_ns, long long to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e6;
}

std::string fmt(double v) {
  std::ostringstream o;
  o.precision(4);
  o << v;
  return o.str();
}

bool polling_backend(const std::string& type) { return type == "sqlite" || type == "mysql"; }

// BATON_BENCH_HANDOVER_NO_PAUSE=1: the peers' method (see the top of this file).
bool no_pause() {
  static const bool on = [] {
    const char* v = std::getenv("BATON_BENCH_HANDOVER_NO_PAUSE");
    return v && std::string(v) == "1";
  }();
  return on;
}

// A record's subject: "-no-pause" marks the peers' method.
std::string subject(const char* s) { return no_pause() ? std::string(s) + "-no-pause" : s; }

// Before each floor sample: the same idle pause as before a baton handover on a notified
// backend, so that both start from threads that have been idle (waking an idle thread or vCPU
// costs tens to hundreds of microseconds; a back-to-back loop would hide that from the floor).
void idle_pause() {
  if (no_pause()) return;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<long long> ms(20, 69);
  std::this_thread::sleep_for(std::chrono::milliseconds{ms(rng)});
}

// ---------------------------------------------------------------------------------------------
// baton: two contender processes hand the mutex back and forth.

struct handover_result {
  std::vector<double> samples;        // stop() -> on_acquired in the other process, ms
  std::vector<double> release_times;  // stop() -> stop done in the releasing process, ms
  long long ttl_ms = 0, transition_ms = 0, retry_ms = 0, poll_ms = 0;
};

handover_result run_baton(const std::string& type, int samples) {
  const auto config = baton::bench::backend_config_for(type);
  const std::string mutex = "bench-handover-" + std::to_string(::getpid());
  const auto argv = baton::bench::contender_argv(config, mutex);
  handover_result result;

  auto first = std::make_unique<child_process>(argv, baton::bench::bench_child_options);
  const auto options = expect_line(*first, {"OPTIONS"}, 30s, "OPTIONS line");
  result.ttl_ms = std::stoll(baton::bench::field(options, 1));
  result.transition_ms = std::stoll(baton::bench::field(options, 2));
  result.retry_ms = std::stoll(baton::bench::field(options, 3));
  result.poll_ms = std::stoll(baton::bench::field(options, 4));
  const milliseconds poll{result.poll_ms};
  // A waiter notices a release at its next poll at the latest; beyond that something is wrong.
  const milliseconds event_timeout = 2 * poll + 10s;

  expect_line(*first, {"ACQUIRED"}, 30s, "first acquisition");
  auto second = std::make_unique<child_process>(argv, baton::bench::bench_child_options);
  if (expect_line(*second, {"WAITING", "ACQUIRED"}, 30s, "first observation").rfind("ACQ", 0) == 0)
    throw std::runtime_error("the second contender acquired a mutex the first one holds");

  child_process* owner = first.get();
  child_process* waiter = second.get();
  std::mt19937_64 rng{std::random_device{}()};
  // Pollers: release at a random point of the waiter's poll period, so the samples spread over
  // it as they would in use. Notified waiters: a short pause so the waiter has settled.
  std::uniform_int_distribution<long long> pause_ms(
      20, polling_backend(type) ? 20 + result.poll_ms - 1 : 70);

  for (int i = 0; i < warmup_handovers + samples; ++i) {
    if (!no_pause()) std::this_thread::sleep_for(milliseconds{pause_ms(rng)});
    if (!owner->send("release"))
      throw std::runtime_error("owner " + owner->describe() + " does not take commands");
    const auto acquired = expect_line(*waiter, {"ACQUIRED"}, event_timeout, "on_acquired");
    const auto releasing = expect_line(*owner, {"RELEASING"}, 10s, "RELEASING");
    const auto released = expect_line(*owner, {"RELEASED", "RELEASE-TIMEOUT"}, 15s, "RELEASED");
    if (released.rfind("RELEASE-TIMEOUT", 0) == 0)
      throw std::runtime_error("owner " + owner->describe() + ": stop_and_wait timed out");
    const double took = ms_between(last_field(releasing), last_field(acquired));
    if (took < 0)
      throw std::runtime_error("the waiter acquired before the owner released (" + fmt(took) +
                               " ms): mutual exclusion broken?");
    if (i >= warmup_handovers) {
      result.samples.push_back(took);
      result.release_times.push_back(ms_between(last_field(releasing), last_field(released)));
    }
    // The released process contends again and becomes the next waiter.
    if (!owner->send("start"))
      throw std::runtime_error("contender " + owner->describe() + " does not take commands");
    // Its first observation (WAITING) says it waits in line again.
    if (expect_line(*owner, {"WAITING", "ACQUIRED"}, event_timeout, "observation after restart")
            .rfind("ACQ", 0) == 0)
      throw std::runtime_error("the restarted contender took the mutex back from the new owner");
    std::swap(owner, waiter);
    if ((i + 1 - warmup_handovers) % 50 == 0 && i >= warmup_handovers)
      std::cerr << "handover " << type << ": " << i + 1 - warmup_handovers << "/" << samples
                << "\n";
  }

  for (auto* c : {first.get(), second.get()}) c->send("quit");
  for (auto* c : {first.get(), second.get()}) {
    auto status = c->wait_exit(20s);
    if (!status) throw std::runtime_error("contender " + c->describe() + " did not quit in 20 s");
    if (*status != 0)
      throw std::runtime_error("contender " + c->describe() + " failed (see its messages above)");
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Floors.

struct floor_parts {
  std::vector<double> notify;   // ms; empty for polling backends
  std::vector<double> acquire;  // ms
  std::map<std::string, std::string> extra;
};

// --- redis (hiredis, synchronous API)

struct redis_free {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct reply_free {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using redis_ptr = std::unique_ptr<redisContext, redis_free>;
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

struct redis_address {
  std::string host, password;
  int port = 6379;
};

// redis://[[user]:password@]host[:port][/db]
redis_address parse_redis_url(std::string url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) throw std::runtime_error("redis url must start with redis://");
  url = url.substr(scheme.size());
  redis_address a;
  if (auto at = url.rfind('@'); at != std::string::npos) {
    auto colon = url.find(':');
    if (colon < at) a.password = url.substr(colon + 1, at - colon - 1);
    url = url.substr(at + 1);
  }
  url = url.substr(0, url.find('/'));
  if (auto colon = url.rfind(':'); colon != std::string::npos) {
    a.port = std::stoi(url.substr(colon + 1));
    url = url.substr(0, colon);
  }
  a.host = url;
  return a;
}

reply_ptr redis_reply(redisContext* c, void* raw, const std::string& what) {
  reply_ptr r{static_cast<redisReply*>(raw)};
  if (!r)
    throw std::runtime_error("redis " + what + ": " + (c->errstr[0] ? c->errstr : "no reply"));
  if (r->type == REDIS_REPLY_ERROR)
    throw std::runtime_error("redis " + what + ": " + std::string(r->str, r->len));
  return r;
}

reply_ptr redis_command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return redis_reply(
      c, redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()), args[0]);
}

redis_ptr redis_connect(const redis_address& a) {
  redis_ptr c{redisConnectWithTimeout(a.host.c_str(), a.port, timeval{5, 0})};
  if (!c || c->err)
    throw std::runtime_error("redis: cannot connect to " + a.host + ":" + std::to_string(a.port) +
                             ": " + (c ? c->errstr : "out of memory"));
  redisSetTimeout(c.get(), timeval{5, 0});  // every reply within 5 s, or an error
  if (!a.password.empty()) redis_command(c.get(), {"AUTH", a.password});
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

floor_parts redis_floor(int samples) {
  const auto address = parse_redis_url(baton::bench::backend_config_for("redis").params.at("url"));
  const char* lua_dir = std::getenv("BATON_BENCH_LUA_DIR");
  if (!lua_dir || !*lua_dir)
    throw std::runtime_error("BATON_BENCH_LUA_DIR is not set (backends/redis/lua)");
  const std::string script = read_file(std::string(lua_dir) + "/acquire.lua");

  auto publisher = redis_connect(address);
  auto subscriber = redis_connect(address);
  const auto sha_reply = redis_command(publisher.get(), {"SCRIPT", "LOAD", script});
  const std::string sha(sha_reply->str, sha_reply->len);

  // Keys as the backend names them (redis_store.cpp), under a prefix of their own.
  const std::string p = "baton-bench-floor:{m" + std::to_string(::getpid()) + "}";
  const std::vector<std::string> keys{p, p + ":fence", p + ":queue", p + ":alive", p + ":handoff"};
  const std::string id = "floor-contender";
  const std::string channel = p + ":wake:" + id;
  redis_command(subscriber.get(), {"SUBSCRIBE", channel});

  floor_parts parts;
  for (int i = 0; i < samples; ++i) {
    idle_pause();
    // Notification: PUBLISH sent on one connection, the message read on the other.
    const long long sent = mono_ns();
    if (redisAppendCommand(publisher.get(), "PUBLISH %b %b", channel.data(), channel.size(), "wake",
                           static_cast<size_t>(4)) != REDIS_OK)
      throw std::runtime_error("redis PUBLISH: cannot queue the command");
    for (int done = 0; !done;)
      if (redisBufferWrite(publisher.get(), &done) != REDIS_OK)
        throw std::runtime_error(std::string("redis PUBLISH: ") + publisher->errstr);
    void* raw = nullptr;
    redisGetReply(subscriber.get(), &raw);
    const long long received = mono_ns();
    auto message = redis_reply(subscriber.get(), raw, "subscribed read");
    if (message->type != REDIS_REPLY_ARRAY || message->elements != 3)
      throw std::runtime_error("redis: unexpected push on the subscribed connection");
    raw = nullptr;
    redisGetReply(publisher.get(), &raw);
    redis_reply(publisher.get(), raw, "PUBLISH");
    parts.notify.push_back(ms_between(sent, received));

    // One acquire of the free mutex (a new ownership: a fence, the owner hash, the event).
    redis_command(publisher.get(), {"DEL", keys[0], keys[4]});
    std::vector<std::string> args{"EVALSHA", sha, "5"};
    args.insert(args.end(), keys.begin(), keys.end());
    args.insert(args.end(),
                {id, "10000", "6000", "500", p + ":wake:", p + ":events", "0", "0", "0", "0"});
    const long long asked = mono_ns();
    auto grant = redis_command(publisher.get(), args);
    const long long answered = mono_ns();
    if (grant->type != REDIS_REPLY_ARRAY || grant->elements != 6 ||
        grant->element[0]->type != REDIS_REPLY_STRING ||
        std::string(grant->element[0]->str, grant->element[0]->len) != id)
      throw std::runtime_error("redis: acquire.lua did not grant the free floor mutex");
    parts.acquire.push_back(ms_between(asked, answered));
  }
  std::vector<std::string> del{"DEL"};
  del.insert(del.end(), keys.begin(), keys.end());
  redis_command(publisher.get(), del);
  parts.extra = {
      {"floor_notify",
       "PUBLISH on one hiredis connection -> message read on a second, "
       "subscribed connection"},
      {"floor_acquire", "one EVALSHA of acquire.lua taking the free mutex (new ownership)"}};
  return parts;
}

// --- zookeeper (C client, multi-threaded library, synchronous calls)

struct zk_event {
  std::mutex mutex;
  std::condition_variable cv;
  bool fired = false;
  int state = 0;
  long long at_ns = 0;
};

void zk_session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* e = static_cast<zk_event*>(context);
  std::lock_guard lock(e->mutex);
  e->state = state;
  e->cv.notify_all();
}

void zk_node_watcher(zhandle_t*, int type, int, const char*, void* context) {
  auto* e = static_cast<zk_event*>(context);
  const long long now = mono_ns();
  std::lock_guard lock(e->mutex);
  if (type != ZOO_DELETED_EVENT) return;
  e->fired = true;
  e->at_ns = now;
  e->cv.notify_all();
}

struct zk_session {
  zk_event session_event;
  zhandle_t* handle = nullptr;

  explicit zk_session(const std::string& hosts) {
    handle = zookeeper_init(hosts.c_str(), zk_session_watcher, 10'000, nullptr, &session_event, 0);
    if (!handle) throw std::runtime_error("zookeeper_init failed for " + hosts);
    std::unique_lock lock(session_event.mutex);
    if (!session_event.cv.wait_for(lock, 10s,
                                   [&] { return session_event.state == ZOO_CONNECTED_STATE; })) {
      lock.unlock();
      zookeeper_close(handle);
      throw std::runtime_error("zookeeper: no session with " + hosts + " within 10 s");
    }
  }
  ~zk_session() { zookeeper_close(handle); }
  zk_session(const zk_session&) = delete;
  zk_session& operator=(const zk_session&) = delete;
};

void zk_check(int rc, const std::string& what) {
  if (rc != ZOK) throw std::runtime_error("zookeeper " + what + ": " + zerror(rc));
}

floor_parts zookeeper_floor(int samples) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  const auto hosts = baton::bench::backend_config_for("zookeeper").params.at("hosts");
  zk_session owner(hosts), waiter(hosts);
  const std::string dir = "/baton-bench-floor-" + std::to_string(::getpid());
  int rc = zoo_create(owner.handle, dir.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
  if (rc != ZNODEEXISTS) zk_check(rc, "create " + dir);
  const std::string prefix = dir + "/_c_floor-lock-";
  const std::string data = "floor-contender";

  floor_parts parts;
  for (int i = 0; i < samples; ++i) {
    idle_pause();
    // The acquire round trip: a lock node as the backend creates it.
    char created[512];
    const long long asked = mono_ns();
    rc = zoo_create(owner.handle, prefix.c_str(), data.data(), static_cast<int>(data.size()),
                    &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, created, sizeof created);
    const long long answered = mono_ns();
    zk_check(rc, "create " + prefix);
    parts.acquire.push_back(ms_between(asked, answered));

    // The notification: the other session watches the node, this one deletes it.
    zk_event deleted;
    struct Stat stat {};
    zk_check(zoo_wexists(waiter.handle, created, zk_node_watcher, &deleted, &stat),
             std::string("exists ") + created);
    const long long sent = mono_ns();
    zk_check(zoo_delete(owner.handle, created, -1), std::string("delete ") + created);
    std::unique_lock lock(deleted.mutex);
    if (!deleted.cv.wait_for(lock, 10s, [&] { return deleted.fired; }))
      throw std::runtime_error("zookeeper: the watch on " + std::string(created) +
                               " did not fire within 10 s of its deletion");
    parts.notify.push_back(ms_between(sent, deleted.at_ns));
  }
  zoo_delete(owner.handle, dir.c_str(), -1);
  parts.extra = {
      {"floor_notify", "zoo_delete by one session -> exists watch of a second session fires"},
      {"floor_acquire", "one zoo_create (EPHEMERAL|SEQUENCE) round trip"}};
  return parts;
}

// --- SQL (SOCI, as the backend uses it; libpq for PostgreSQL's LISTEN/NOTIFY)

struct sql_dialect {
  const soci::backend_factory* factory;
  std::string connect, now, create, insert;
};

sql_dialect sql_dialect_of(const std::string& type) {
  const auto config = baton::bench::backend_config_for(type);
  // The schema and the {now} expressions of backends/sql (schema/*.sql, src/dialect.cpp).
  const std::string columns =
      "owner_id VARCHAR(255) NOT NULL DEFAULT '', acquired_at BIGINT NOT NULL DEFAULT 0, "
      "ttl_at BIGINT NOT NULL DEFAULT 0, transition_at BIGINT NOT NULL DEFAULT 0, "
      "fence BIGINT NOT NULL DEFAULT 0)";
  const std::string values =
      " (name, owner_id, acquired_at, ttl_at, transition_at, fence) VALUES (:name, '', 0, 0, 0, 0)";
  if (type == "sqlite") {
    const auto& db = config.params.at("path");
    return {soci::factory_sqlite3(), "db=" + db.substr(0, db.find_last_of('/')) + "/bench-floor.db",
            "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
            "CREATE TABLE IF NOT EXISTS baton_bench_floor (name VARCHAR(128) NOT NULL PRIMARY "
            "KEY, " +
                columns,
            "INSERT OR IGNORE INTO baton_bench_floor" + values};
  }
  if (type == "postgresql")
    return {soci::factory_postgresql(), config.params.at("connection"),
            "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)",
            "CREATE TABLE IF NOT EXISTS baton_bench_floor (name VARCHAR(128) NOT NULL PRIMARY "
            "KEY, " +
                columns,
            "INSERT INTO baton_bench_floor" + values + " ON CONFLICT (name) DO NOTHING"};
  return {soci::factory_mysql(), config.params.at("connection"),
          "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
          "CREATE TABLE IF NOT EXISTS baton_bench_floor (name VARCHAR(128) CHARACTER SET ascii "
          "COLLATE ascii_bin NOT NULL PRIMARY KEY, " +
              columns + " ENGINE = InnoDB",
          "INSERT IGNORE INTO baton_bench_floor" + values};
}

// Round trips of the backend's acquire UPDATE (dialect.cpp), autocommit. The lease it writes
// has already ended (transition_at = now - 1), so every UPDATE, alternating between two owners,
// takes the mutex: a real write each time, as a handover's acquire is.
std::vector<double> sql_acquire_rtts(const std::string& type, int samples) {
  const auto d = sql_dialect_of(type);
  soci::session s(*d.factory, d.connect);
  if (type == "sqlite") {
    std::string mode;
    s << "PRAGMA busy_timeout = 5000", soci::into(mode);
    s << "PRAGMA journal_mode = WAL", soci::into(mode);
    s << "PRAGMA synchronous = NORMAL";
  } else if (type == "mysql") {
    s << "SET SESSION time_zone = '+00:00'";
    s << "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";
  }
  std::string name = "floor-" + std::to_string(::getpid());
  s << d.create;
  s << d.insert, soci::use(name, "name");
  std::string me;
  long long ttl = 0, lease = -1;
  const std::string update =
      "UPDATE baton_bench_floor SET "
      "fence = CASE WHEN owner_id = :me1 AND transition_at >= {now} THEN fence ELSE fence + 1 "
      "END, acquired_at = CASE WHEN owner_id = :me2 AND transition_at >= {now} THEN acquired_at "
      "ELSE {now} END, owner_id = :me3, ttl_at = {now} + :ttl, transition_at = {now} + :lease "
      "WHERE name = :name AND (transition_at < {now} OR owner_id = :me4)";
  std::string text = update;
  for (auto pos = text.find("{now}"); pos != std::string::npos; pos = text.find("{now}", pos))
    text.replace(pos, 5, d.now);
  soci::statement st = (s.prepare << text, soci::use(me, "me1"), soci::use(me, "me2"),
                        soci::use(me, "me3"), soci::use(ttl, "ttl"), soci::use(lease, "lease"),
                        soci::use(name, "name"), soci::use(me, "me4"));
  std::vector<double> rtts;
  for (int i = 0; i < samples + 1; ++i) {
    idle_pause();
    me = i % 2 ? "floor-a" : "floor-b";
    const long long asked = mono_ns();
    st.execute(true);
    const long long answered = mono_ns();
    if (st.get_affected_rows() != 1)
      throw std::runtime_error(type + ": the floor UPDATE did not take the mutex");
    if (i > 0) rtts.push_back(ms_between(asked, answered));  // the first one prepares
  }
  s << "DELETE FROM baton_bench_floor WHERE name = :name", soci::use(name, "name");
  return rtts;
}

struct pq_free {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using pq_ptr = std::unique_ptr<PGconn, pq_free>;

pq_ptr pq_connect(const std::string& conninfo) {
  pq_ptr c{PQconnectdb(conninfo.c_str())};
  if (!c || PQstatus(c.get()) != CONNECTION_OK)
    throw std::runtime_error(std::string("postgresql: cannot connect: ") +
                             (c ? PQerrorMessage(c.get()) : "out of memory"));
  return c;
}

void pq_exec(PGconn* c, const std::string& sql) {
  std::unique_ptr<PGresult, void (*)(PGresult*)> r{PQexec(c, sql.c_str()), PQclear};
  const auto status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    throw std::runtime_error("postgresql " + sql + ": " + PQerrorMessage(c));
}

std::vector<double> pg_notify_times(int samples) {
  const auto conninfo = baton::bench::backend_config_for("postgresql").params.at("connection");
  auto notifier = pq_connect(conninfo);
  auto listener = pq_connect(conninfo);
  const std::string channel = "baton_bench_floor_" + std::to_string(::getpid());
  pq_exec(listener.get(), "LISTEN " + channel);
  // As the backend's release sends it (dialect.cpp: SELECT pg_notify(:channel, :name)).
  const std::string notify = "SELECT pg_notify('" + channel + "', 'floor')";
  std::vector<double> times;
  for (int i = 0; i < samples; ++i) {
    idle_pause();
    const long long sent = mono_ns();
    if (!PQsendQuery(notifier.get(), notify.c_str()))
      throw std::runtime_error(std::string("postgresql NOTIFY: ") + PQerrorMessage(notifier.get()));
    long long received = 0;
    const long long deadline = sent + 10'000'000'000LL;
    while (received == 0) {
      pollfd p{PQsocket(listener.get()), POLLIN, 0};
      const long long left_ms = (deadline - mono_ns()) / 1'000'000;
      if (left_ms <= 0)
        throw std::runtime_error("postgresql: NOTIFY not received by the listener within 10 s");
      if (::poll(&p, 1, static_cast<int>(left_ms)) < 0 && errno != EINTR)
        throw std::runtime_error("postgresql: poll failed");
      if (!PQconsumeInput(listener.get()))
        throw std::runtime_error(std::string("postgresql LISTEN: ") +
                                 PQerrorMessage(listener.get()));
      while (PGnotify* n = PQnotifies(listener.get())) {
        received = mono_ns();
        PQfreemem(n);
      }
    }
    bool ok = true;
    while (PGresult* r = PQgetResult(notifier.get())) {
      ok = ok && PQresultStatus(r) == PGRES_TUPLES_OK;
      PQclear(r);
    }
    if (!ok)
      throw std::runtime_error(std::string("postgresql NOTIFY: ") + PQerrorMessage(notifier.get()));
    times.push_back(ms_between(sent, received));
  }
  return times;
}

floor_parts sql_floor(const std::string& type, int samples) {
  floor_parts parts;
  if (type == "postgresql") {
    parts.notify = pg_notify_times(samples);
    parts.extra["floor_notify"] =
        "SELECT pg_notify() on one libpq connection -> notification read on a second, "
        "LISTENing connection";
  }
  parts.acquire = sql_acquire_rtts(type, samples);
  parts.extra["floor_acquire"] =
      "one round trip of the backend's acquire UPDATE (SOCI, autocommit, taking the row)";
  return parts;
}

// ---------------------------------------------------------------------------------------------

void emit_floor(const std::string& type, floor_parts parts, long long poll_ms) {
  using baton::bench::summarize;
  auto extra = std::move(parts.extra);
  const auto acquire = summarize(parts.acquire);
  extra["acquire_median_ms"] = fmt(acquire.median);
  extra["acquire_p99_ms"] = fmt(acquire.p99);
  extra["poll_interval_ms"] = std::to_string(poll_ms);
  extra["pause_before_sample"] =
      no_pause() ? "none" : "uniform [20, 70) ms (idle, as before a baton handover)";
  if (parts.notify.empty()) {
    extra["floor"] =
        "one statement round trip (waiters poll, so no notification); median/p99 of the UPDATE";
    extra["target_ms"] = fmt(static_cast<double>(poll_ms) + 2 * acquire.median);
    extra["target"] = "poll_interval + 2 statement round trips (median)";
    baton::bench::emit("handover", type, "floor", "ms", acquire, extra);
    return;
  }
  const auto notify = summarize(parts.notify);
  extra["notify_median_ms"] = fmt(notify.median);
  extra["notify_p99_ms"] = fmt(notify.p99);
  extra["floor"] =
      "one notification plus one acquire round trip, measured separately: median = "
      "median(notify) + median(acquire), p99 = p99(notify) + p99(acquire), min/max/mean likewise";
  baton::bench::summary sum;
  sum.samples = std::min(notify.samples, acquire.samples);
  sum.median = notify.median + acquire.median;
  sum.p99 = notify.p99 + acquire.p99;
  sum.min = notify.min + acquire.min;
  sum.max = notify.max + acquire.max;
  sum.mean = notify.mean + acquire.mean;
  baton::bench::emit("handover", type, subject("floor"), "ms", sum, extra);
}

void run_backend(const std::string& type, int samples) {
  if (no_pause() && polling_backend(type)) {
    std::cerr << "handover " << type << ": skipped (no-pause runs only the notified backends)\n";
    return;
  }
  std::cerr << "handover " << type << ": " << samples << " handovers between two processes\n";
  const auto started = mono_ns();
  auto result = run_baton(type, samples);
  const auto s = baton::bench::summarize(result.samples);
  baton::bench::emit(
      "handover", type, subject("baton"), "ms", s,
      {{"measured",
        "owner process calls stop() -> the other process's on_acquired "
        "(CLOCK_MONOTONIC of both)"},
       {"options", "backend default_options()"},
       {"poll_interval_ms", std::to_string(result.poll_ms)},
       {"ttl_ms", std::to_string(result.ttl_ms)},
       {"transition_ms", std::to_string(result.transition_ms)},
       {"warmup_handovers", std::to_string(warmup_handovers)},
       {"pause_before_release",
        polling_backend(type) ? "uniform [20, 20 + poll_interval) ms after the waiter's first poll"
        : no_pause()          ? "none: at the waiter's first observation (as the kazoo peer)"
                              : "uniform [20, 70) ms after the waiter's first observation"},
       {"release_median_ms", fmt(baton::bench::summarize(result.release_times).median)},
       {"release_p99_ms", fmt(baton::bench::summarize(result.release_times).p99)}});

  std::cerr << "handover " << type << ": floor (" << samples << " samples)\n";
  floor_parts parts;
  if (type == "redis")
    parts = redis_floor(samples);
  else if (type == "zookeeper")
    parts = zookeeper_floor(samples);
  else
    parts = sql_floor(type, samples);
  emit_floor(type, std::move(parts), result.poll_ms);
  std::cerr << "handover " << type << ": done in " << (mono_ns() - started) / 1'000'000'000
            << " s (median " << fmt(s.median) << " ms, p99 " << fmt(s.p99) << " ms)\n";
}

}  // namespace

int main() { return baton::bench::run_backends("baton_handover_bench", 20, 200, run_backend); }
