#include "floors.hpp"

#include <hiredis/hiredis.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <soci/mysql/soci-mysql.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common.hpp"

namespace baton::bench {
namespace {

// The lease baton asks for with default options (contend_options{}): ttl 10 s, transition 6 s.
constexpr long long ttl_ms = 10'000;
constexpr long long transition_ms = 6'000;

std::string floor_id() { return "floor-" + std::to_string(::getpid()); }

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("floor: " + what); }

// ---- Redis: hiredis sync API, the backend's own Lua scripts ---------------------------------

struct redis_free {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct reply_free {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path + " (is BATON_BENCH_LUA_DIR set?)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class redis_floor final : public floor_lock {
 public:
  explicit redis_floor(const std::string& name) : id_(floor_id()) {
    // redis://[[user]:password@]host[:port][/db], as the backend accepts it.
    const auto url = backend_config_for("redis").params.at("url");
    std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
    std::string user, password;
    if (auto at = rest.rfind('@'); at != std::string::npos) {
      auto credentials = rest.substr(0, at);
      rest = rest.substr(at + 1);
      auto colon = credentials.find(':');
      if (colon == std::string::npos) {
        password = credentials;
      } else {
        user = credentials.substr(0, colon);
        password = credentials.substr(colon + 1);
      }
    }
    std::string db;
    if (auto slash = rest.find('/'); slash != std::string::npos) {
      db = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    int port = 6379;
    if (auto colon = rest.rfind(':'); colon != std::string::npos) {
      port = std::stoi(rest.substr(colon + 1));
      rest = rest.substr(0, colon);
    }
    const timeval timeout{2, 0};
    ctx_.reset(redisConnectWithTimeout(rest.c_str(), port, timeout));
    if (!ctx_ || ctx_->err)
      fail("redis: cannot connect to " + rest + ":" + std::to_string(port) + ": " +
           (ctx_ ? ctx_->errstr : "out of memory"));
    redisSetTimeout(ctx_.get(), timeout);
    if (!password.empty()) {
      if (user.empty())
        command({"AUTH", password});
      else
        command({"AUTH", user, password});
    }
    if (!db.empty() && db != "0") command({"SELECT", db});

    const char* dir = std::getenv("BATON_BENCH_LUA_DIR");
    if (!dir || !*dir) fail("BATON_BENCH_LUA_DIR is not set (run through bench/run.sh)");
    acquire_sha_ = load(std::string(dir) + "/acquire.lua");
    release_sha_ = load(std::string(dir) + "/release.lua");

    // The keys and arguments redis_store.cpp builds (a prefix of our own).
    const std::string base = "baton-floor:{" + name + "}";
    const std::vector<std::string> keys{base, base + ":fence", base + ":queue", base + ":alive",
                                        base + ":handoff"};
    const std::string window = "500";  // settings::handoff_window default
    acquire_ = {"EVALSHA", acquire_sha_, "5"};
    acquire_.insert(acquire_.end(), keys.begin(), keys.end());
    // id ttl transition window wake_prefix events seen_until seen_own min_fence fresh
    acquire_.insert(acquire_.end(),
                    {id_, std::to_string(ttl_ms), std::to_string(transition_ms), window,
                     base + ":wake:", base + ":events", "0", "0", "0", "0"});
    release_ = {"EVALSHA", release_sha_, "5"};
    release_.insert(release_.end(), keys.begin(), keys.end());
    release_.insert(release_.end(), {id_, window, base + ":wake:", base + ":events"});
  }

  void cycle() override {
    // As baton does after a release: no live lease seen, the highest fence seen.
    acquire_[min_fence_arg] = std::to_string(fence_);
    auto r = command(acquire_);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_INTEGER)
      fail("redis: unexpected reply to the acquire script");
    if (std::string(r->element[0]->str, r->element[0]->len) != id_)
      fail("redis: acquire did not make the floor client owner");
    fence_ = r->element[1]->integer;
    auto released = command(release_);
    if (released->type != REDIS_REPLY_INTEGER || released->integer != 1)
      fail("redis: release script did not release");
  }

  std::string requests() const override { return "EVALSHA acquire.lua + EVALSHA release.lua"; }

 private:
  static constexpr std::size_t min_fence_arg = 3 + 5 + 8;  // ARGV[9]

  reply_ptr command(const std::vector<std::string>& args) {
    argv_.clear();
    lengths_.clear();
    for (const auto& a : args) {
      argv_.push_back(a.data());
      lengths_.push_back(a.size());
    }
    reply_ptr r(static_cast<redisReply*>(redisCommandArgv(ctx_.get(), static_cast<int>(args.size()),
                                                          argv_.data(), lengths_.data())));
    if (!r) fail("redis: " + args[0] + " failed: " + ctx_->errstr);
    if (r->type == REDIS_REPLY_ERROR) fail("redis: " + args[0] + ": " + std::string(r->str));
    return r;
  }

  std::string load(const std::string& path) {
    auto r = command({"SCRIPT", "LOAD", read_text(path)});
    if (r->type != REDIS_REPLY_STRING) fail("redis: SCRIPT LOAD of " + path + " failed");
    return std::string(r->str, r->len);
  }

  std::string id_;
  std::unique_ptr<redisContext, redis_free> ctx_;
  std::string acquire_sha_, release_sha_;
  std::vector<std::string> acquire_, release_;
  std::vector<const char*> argv_;
  std::vector<std::size_t> lengths_;
  long long fence_ = 0;
};

// ---- SQL: SOCI, the statements of backends/sql/src/dialect.cpp -----------------------------
//
// Kept in step with dialect.cpp and connection.cpp by hand: acquire = BEGIN, the conditional
// UPDATE, the owner SELECT, COMMIT; release = the conditional UPDATE (PostgreSQL: and the
// pg_notify SELECT that wakes waiters). Session settings as connection::configure() sets them.

constexpr const char* floor_table = "baton_floor";

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
}

class sql_floor final : public floor_lock {
 public:
  sql_floor(const std::string& type, const std::string& name) : name_(name), me_(floor_id()) {
    const auto config = backend_config_for(type);
    std::string now, begin, insert, create;
    const std::string columns =
        "(name VARCHAR(128) NOT NULL PRIMARY KEY, owner_id VARCHAR(255) NOT NULL DEFAULT '', "
        "acquired_at BIGINT NOT NULL DEFAULT 0, ttl_at BIGINT NOT NULL DEFAULT 0, "
        "transition_at BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0, "
        "state TEXT NOT NULL DEFAULT '')";
    const std::string values =
        "(name, owner_id, acquired_at, ttl_at, transition_at, fence, state) "
        "VALUES (:name, '', 0, 0, 0, 0, '')";
    if (type == "sqlite") {
      session_.open(*soci::factory_sqlite3(), "db=" + config.params.at("path") + " timeout=2");
      std::string value;
      session_ << "PRAGMA busy_timeout = 2000", soci::into(value);
      for (int i = 0;; ++i) {
        try {
          session_ << "PRAGMA journal_mode = WAL", soci::into(value);
          break;
        } catch (const soci::soci_error&) {
          if (i == 100) throw;  // another connection switching the file: retry for ~1 s
          std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
      }
      session_ << "PRAGMA synchronous = NORMAL";
      now = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";
      begin_ = "BEGIN IMMEDIATE";
      create = std::string("CREATE TABLE IF NOT EXISTS ") + floor_table + " " + columns;
      insert = std::string("INSERT OR IGNORE INTO ") + floor_table + " " + values;
    } else if (type == "postgresql") {
      session_.open(*soci::factory_postgresql(),
                    config.params.at("connection") + " connect_timeout=2");
      session_ << "SET statement_timeout = 2000";
      now = "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)";
      begin_ = "BEGIN";
      create = std::string("CREATE TABLE IF NOT EXISTS ") + floor_table + " " + columns;
      insert = std::string("INSERT INTO ") + floor_table + " " + values +
               " ON CONFLICT (name) DO NOTHING";
      channel_ = std::string("baton:") + floor_table;
    } else {
      // Bounded reads and writes, as the backend adds them (no hang on a frozen server).
      session_.open(
          *soci::factory_mysql(),
          config.params.at("connection") + " connect_timeout=2 read_timeout=2 write_timeout=2");
      session_ << "SET SESSION time_zone = '+00:00'";
      session_ << "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";
      now = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
      begin_ = "START TRANSACTION";
      std::string mysql_columns = columns;
      replace_all(mysql_columns, "VARCHAR(128) NOT NULL PRIMARY KEY",
                  "VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY");
      replace_all(mysql_columns, "owner_id VARCHAR(255)",
                  "owner_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin");
      replace_all(mysql_columns, "state TEXT NOT NULL DEFAULT ''",
                  "state TEXT CHARACTER SET ascii NOT NULL");
      create = std::string("CREATE TABLE IF NOT EXISTS ") + floor_table + " " + mysql_columns +
               " ENGINE = InnoDB";
      insert = std::string("INSERT IGNORE INTO ") + floor_table + " " + values;
    }
    session_ << create;
    session_ << insert, soci::use(name_, "name");

    auto expand = [&](std::string text) {
      replace_all(text, "{now}", now);
      replace_all(text, "{t}", floor_table);
      return text;
    };
    const auto acquire = expand(
        "UPDATE {t} SET "
        "fence = CASE WHEN owner_id = :me1 AND transition_at >= {now} THEN fence ELSE fence + 1 "
        "END, "
        "acquired_at = CASE WHEN owner_id = :me2 AND transition_at >= {now} THEN acquired_at "
        "ELSE {now} END, "
        "owner_id = :me3, ttl_at = {now} + :ttl, transition_at = {now} + :lease "
        "WHERE name = :name AND (transition_at < {now} OR owner_id = :me4)");
    const auto select = expand(
        "SELECT owner_id, acquired_at, ttl_at, transition_at, fence, {now} FROM {t} "
        "WHERE name = :name");
    const auto release = expand(
        "UPDATE {t} SET owner_id = '', ttl_at = {now}, transition_at = {now} - 1 "
        "WHERE name = :name AND owner_id = :me");
    using soci::into;
    using soci::use;
    acquire_ = std::make_unique<soci::statement>(
        (session_.prepare << acquire, use(me_, "me1"), use(me_, "me2"), use(me_, "me3"),
         use(ttl_, "ttl"), use(lease_, "lease"), use(name_, "name"), use(me_, "me4")));
    select_ = std::make_unique<soci::statement>(
        (session_.prepare << select, into(owner_id_), into(acquired_at_), into(ttl_at_),
         into(transition_at_), into(fence_), into(now_), use(name_, "name")));
    release_ = std::make_unique<soci::statement>(
        (session_.prepare << release, use(name_, "name"), use(me_, "me")));
    if (!channel_.empty())
      notify_ = std::make_unique<soci::statement>(
          (session_.prepare << "SELECT pg_notify(:channel, :name)", use(channel_, "channel"),
           use(name_, "name")));
  }

  ~sql_floor() override {
    acquire_.reset();
    select_.reset();
    release_.reset();
    notify_.reset();
  }

  void cycle() override {
    session_ << begin_;
    acquire_->execute(true);
    const auto won = acquire_->get_affected_rows();
    if (!select_->execute(true)) fail("sql: the floor row is missing");
    select_->fetch();  // steps past the row, as baton's select_one() does
    session_ << "COMMIT";
    if (won != 1 || owner_id_ != me_) fail("sql: acquire did not make the floor client owner");
    release_->execute(true);
    if (release_->get_affected_rows() != 1) fail("sql: release did not release");
    if (notify_) {
      notify_->execute(true);
      notify_->fetch();
    }
  }

  std::string requests() const override {
    return begin_ + " + UPDATE (acquire) + SELECT owner + COMMIT + UPDATE (release)" +
           (notify_ ? " + SELECT pg_notify" : "");
  }

 private:
  soci::session session_;
  std::string begin_, channel_;
  std::string name_, me_;
  long long ttl_ = ttl_ms, lease_ = ttl_ms + transition_ms;
  std::string owner_id_;
  long long acquired_at_ = 0, ttl_at_ = 0, transition_at_ = 0, fence_ = 0, now_ = 0;
  std::unique_ptr<soci::statement> acquire_, select_, release_, notify_;
};

// ---- ZooKeeper: the C client's synchronous API ----------------------------------------------
//
// The lock recipe baton follows (backends/zookeeper/src/contend.cpp): create an EPHEMERAL |
// SEQUENTIAL node "_c_<guid>-lock-" (data: the contender id), list the children to learn whether
// it is the lowest (the owner), delete it to release. Three round trips; a hand-written lock
// that skipped the listing could not tell it owns the mutex.

struct zk_connection {
  std::mutex mutex;
  std::condition_variable changed;
  int state = 0;
};

void zk_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* c = static_cast<zk_connection*>(context);
  std::lock_guard lock(c->mutex);
  c->state = state;
  c->changed.notify_all();
}

class zk_floor final : public floor_lock {
 public:
  explicit zk_floor(const std::string& name) : id_(floor_id()) {
    const auto hosts = backend_config_for("zookeeper").params.at("hosts");
    zh_ = zookeeper_init(hosts.c_str(), &zk_watcher, 2000, nullptr, &connection_, 0);
    if (!zh_) fail("zookeeper: zookeeper_init(" + hosts + ") failed");
    {
      std::unique_lock lock(connection_.mutex);
      if (!connection_.changed.wait_for(lock, std::chrono::seconds{10},
                                        [&] { return connection_.state == ZOO_CONNECTED_STATE; }))
        fail("zookeeper: no connection to " + hosts + " within 10 s");
    }
    dir_ = "/baton-floor";
    make_dir(dir_);
    dir_ += "/" + name;
    make_dir(dir_);
    // The guid part of baton's node names: 32 hex digits.
    prefix_ = dir_ + "/_c_" + std::string(32 - std::min<std::size_t>(32, id_.size()), '0') +
              id_.substr(0, 32) + "-lock-";
  }

  ~zk_floor() override {
    if (zh_) zookeeper_close(zh_);
  }

  void cycle() override {
    char created[512];
    int rc =
        zoo_create(zh_, prefix_.c_str(), id_.data(), static_cast<int>(id_.size()),
                   &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, created, sizeof created);
    if (rc != ZOK) fail(std::string("zookeeper: create failed: ") + zerror(rc));
    String_vector children{};
    rc = zoo_get_children(zh_, dir_.c_str(), 0, &children);
    if (rc != ZOK) fail(std::string("zookeeper: get_children failed: ") + zerror(rc));
    // Lowest sequence number = owner; the sequence is the last 10 digits of the name.
    const std::string mine = std::string(created).substr(dir_.size() + 1);
    auto sequence = [](const std::string& node) { return node.substr(node.size() - 10); };
    bool lowest = true;
    for (int i = 0; i < children.count; ++i)
      if (sequence(children.data[i]) < sequence(mine)) lowest = false;
    deallocate_String_vector(&children);
    if (!lowest) fail("zookeeper: the floor's node is not the lowest");
    rc = zoo_delete(zh_, created, -1);
    if (rc != ZOK) fail(std::string("zookeeper: delete failed: ") + zerror(rc));
  }

  std::string requests() const override {
    return "create EPHEMERAL|SEQUENTIAL + get_children + delete";
  }

 private:
  void make_dir(const std::string& path) {
    int rc = zoo_create(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS)
      fail("zookeeper: cannot create " + path + ": " + zerror(rc));
  }

  std::string id_;
  zk_connection connection_;
  zhandle_t* zh_ = nullptr;
  std::string dir_, prefix_;
};

}  // namespace

std::unique_ptr<floor_lock> make_floor_lock(const std::string& type, const std::string& name) {
  if (type == "redis") return std::make_unique<redis_floor>(name);
  if (type == "sqlite" || type == "postgresql" || type == "mysql")
    return std::make_unique<sql_floor>(type, name);
  if (type == "zookeeper") return std::make_unique<zk_floor>(name);
  throw std::invalid_argument("floor: unknown backend " + type);
}

}  // namespace baton::bench
