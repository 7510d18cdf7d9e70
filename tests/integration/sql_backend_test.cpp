// The SQL backend against real databases: SQLite files, PostgreSQL and MariaDB started by
// scripts/test.sh (BATON_TEST_POSTGRES, BATON_TEST_MYSQL).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <soci/soci.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include "baton/backends/factory.hpp"
#include "baton/backends/sql/sql_backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/locker.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/records.hpp"
#include "baton/mutex/stats.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

using namespace std::chrono_literals;
using baton::errc;
using baton::lease_grant;

namespace {

constexpr auto reply_timeout = 10s;

// Blocking calls over the backend's lease_store, each bounded so a hang fails the test.
class sync_store {
 public:
  explicit sync_store(const std::shared_ptr<baton::mutex_backend>& backend) {
    auto lsb = std::dynamic_pointer_cast<baton::lease_store_backend>(backend);
    if (!lsb) throw std::logic_error("not a lease_store_backend");
    store_ = lsb->store();
  }

  std::pair<std::error_code, lease_grant> acquire(const std::string& name, const std::string& me,
                                                  std::chrono::milliseconds ttl = 2s,
                                                  std::chrono::milliseconds transition = 1s) {
    return wait<std::pair<std::error_code, lease_grant>>([&](auto done) {
      store_->async_acquire(name, me, ttl, transition, [done](std::error_code ec, lease_grant g) {
        done({ec, g});
      });
    });
  }
  /// Acquires (renews) every one of `names` at once: all requests are sent before any reply.
  std::vector<std::pair<std::error_code, lease_grant>> acquire_all(
      const std::vector<std::string>& names, const std::string& me, std::chrono::milliseconds ttl,
      std::chrono::milliseconds transition) {
    std::vector<std::future<std::pair<std::error_code, lease_grant>>> futures;
    for (const auto& name : names) {
      auto promise = std::make_shared<std::promise<std::pair<std::error_code, lease_grant>>>();
      futures.push_back(promise->get_future());
      store_->async_acquire(name, me, ttl, transition,
                            [promise](std::error_code ec, lease_grant g) {
                              promise->set_value({ec, std::move(g)});
                            });
    }
    std::vector<std::pair<std::error_code, lease_grant>> out;
    for (auto& f : futures) {
      if (f.wait_for(reply_timeout) != std::future_status::ready)
        throw std::runtime_error("no reply from the store within 10 s");
      out.push_back(f.get());
    }
    return out;
  }
  std::error_code release(const std::string& name, const std::string& me) {
    return wait<std::error_code>([&](auto done) {
      store_->async_release(name, me, [done](std::error_code ec) { done(ec); });
    });
  }
  std::pair<std::error_code, lease_grant> read(const std::string& name) {
    return wait<std::pair<std::error_code, lease_grant>>([&](auto done) {
      store_->async_read(name, [done](std::error_code ec, lease_grant g) { done({ec, g}); });
    });
  }
  std::pair<std::error_code, std::string> read_state(const std::string& name) {
    return wait<std::pair<std::error_code, std::string>>([&](auto done) {
      store_->async_read_state(name, [done](std::error_code ec, std::string s) { done({ec, s}); });
    });
  }
  std::error_code write_state(const std::string& name, const std::string& me, std::uint64_t fence,
                              const std::string& bytes) {
    return wait<std::error_code>([&](auto done) {
      store_->async_write_state(name, me, fence, bytes, [done](std::error_code ec) { done(ec); });
    });
  }

 private:
  template <class T, class Start>
  T wait(Start start) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    start([promise](T value) { promise->set_value(std::move(value)); });
    if (future.wait_for(reply_timeout) != std::future_status::ready)
      throw std::runtime_error("no reply from the store within 10 s");
    return future.get();
  }

  std::shared_ptr<baton::lease_store> store_;
};

std::string unique(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
}

// Captures what the backend logs while alive.
class log_capture {
 public:
  log_capture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(200)) {
    baton::detail::log().sinks().push_back(sink_);
  }
  ~log_capture() {
    auto& sinks = baton::detail::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  bool contains(const std::string& text) const {
    for (const auto& line : sink_->last_formatted())
      if (line.find(text) != std::string::npos) return true;
    return false;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

// A plain SOCI session to the test database, for checks and faults behind the backend's back.
std::unique_ptr<soci::session> admin_session(const baton::backend_config& config) {
  if (config.type == "sqlite")
    return std::make_unique<soci::session>("sqlite3",
                                           "db=" + config.params.at("path") + " timeout=5");
  return std::make_unique<soci::session>(config.type, config.params.at("connection"));
}

bool table_exists(const baton::backend_config& config, const std::string& table) {
  auto sql = admin_session(config);
  long long n = 0;
  if (config.type == "sqlite") {
    std::string count;
    *sql << "SELECT CAST(COUNT(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = :t",
        soci::use(table, "t"), soci::into(count);
    return count != "0";
  }
  if (config.type == "postgresql")
    *sql << "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = :t",
        soci::use(table, "t"), soci::into(n);
  else
    *sql << "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND "
            "table_name = :t",
        soci::use(table, "t"), soci::into(n);
  return n > 0;
}

// The owner records table and the history and controls tables derived from its name.
void drop_table(const baton::backend_config& config, const std::string& table) {
  auto sql = admin_session(config);
  for (const char* suffix : {"", "_history", "_controls"})
    *sql << "DROP TABLE IF EXISTS " + table + suffix;
}

baton::backends::sql::dialect dialect_of(const std::string& type) {
  using baton::backends::sql::dialect;
  return type == "sqlite"       ? dialect::sqlite
         : type == "postgresql" ? dialect::postgresql
                                : dialect::mysql;
}

// The statements of the shipped schema file for `table` (a driver runs one statement at a time):
// `--` comments dropped, split at ';' (the shipped files quote no ';').
std::vector<std::string> schema_statements(const std::string& type, const std::string& table) {
  std::string text;
  std::istringstream lines(baton::backends::sql::schema_sql(dialect_of(type), table));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("--", 0) != 0) text += line + "\n";
  // A CREATE TRIGGER (SQLite's clock guards) runs to the ';' after its END.
  auto open_trigger = [](const std::string& statement) {
    const auto first = statement.find_first_not_of(" \n");
    const auto last = statement.find_last_not_of(" \n");
    return first != std::string::npos && statement.compare(first, 14, "CREATE TRIGGER") == 0 &&
           (last < 3 || statement.compare(last - 2, 3, "END") != 0);
  };
  std::vector<std::string> out;
  std::string current;
  std::size_t from = 0;
  for (auto semi = text.find(';'); semi != std::string::npos; semi = text.find(';', from)) {
    current += text.substr(from, semi - from);
    from = semi + 1;
    if (open_trigger(current)) {
      current += ';';
      continue;
    }
    out.push_back(current);
    current.clear();
  }
  return out;
}

class sql_backend_test : public ::testing::TestWithParam<std::string> {
 protected:
  baton::backend_config config(std::map<std::string, std::string> extra = {}) {
    auto c = base_;
    c.params["table"] = table_;
    for (auto& [k, v] : extra) c.params[k] = v;
    return c;
  }
  std::shared_ptr<baton::mutex_backend> make(const baton::backend_config& c) {
    return baton::backends::sql::make_backend(c, rt_);
  }
  void TearDown() override {
    if (created_) drop_table(*created_, table_);
  }
  // A backend on a fresh table, dropped after the test.
  std::shared_ptr<baton::mutex_backend> fresh(std::map<std::string, std::string> extra = {}) {
    created_ = config(std::move(extra));
    return make(*created_);
  }
  void lock_row_m(soci::session& admin);
  // A plain session has no baton_monotonic_ms(), which SQLite's guard against older batons calls
  // on every write of the owner records: drops the guard before writing behind the backend's back.
  void drop_clock_guard(soci::session& admin) {
    if (GetParam() == "sqlite") admin << "DROP TRIGGER IF EXISTS " + table_ + "_clock_update";
  }

  baton::runtime rt_;
  baton::backend_config base_ = baton::test::backend_config_for(GetParam());  // one SQLite file
  std::string table_ = unique("baton_t");
  std::optional<baton::backend_config> created_;
};

TEST_P(sql_backend_test, creates_the_table_when_missing) {
  auto backend = fresh();
  ASSERT_FALSE(table_exists(*created_, table_));
  sync_store store(backend);
  auto [ec, grant] = store.acquire("m", "a");
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(grant.owner.is("a"));
  EXPECT_TRUE(table_exists(*created_, table_));
  EXPECT_TRUE(table_exists(*created_, table_ + "_history"));
  EXPECT_TRUE(table_exists(*created_, table_ + "_controls"));
}

TEST_P(sql_backend_test, missing_table_with_create_table_false_is_a_clear_error) {
  log_capture log;
  auto backend = make(config({{"create_table", "false"}}));
  sync_store store(backend);
  auto [ec, grant] = store.acquire("m", "a");
  EXPECT_EQ(ec, errc::backend_error);
  EXPECT_TRUE(log.contains("create_table=false"));
  EXPECT_TRUE(log.contains(table_));
  EXPECT_FALSE(table_exists(config(), table_));
}

TEST_P(sql_backend_test, create_table_false_uses_an_existing_table) {
  created_ = config();
  auto sql = admin_session(*created_);
  for (const auto& statement : schema_statements(GetParam(), table_)) *sql << statement;
  sync_store store(make(config({{"create_table", "false"}})));
  auto [ec, grant] = store.acquire("m", "a");
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(grant.owner.is("a"));
}

TEST_P(sql_backend_test, renewal_keeps_the_fence_and_acquired_at) {
  sync_store store(fresh());
  auto [ec1, first] = store.acquire("m", "a");
  ASSERT_FALSE(ec1) << ec1.message();
  EXPECT_EQ(first.owner.fence, 1u);
  EXPECT_EQ(first.owner.acquired_at, first.owner.ttl_at - 2s);
  EXPECT_EQ(first.owner.transition_at, first.owner.ttl_at + 1s);
  EXPECT_GE(first.now, first.owner.acquired_at);
  EXPECT_LT(first.now - first.owner.acquired_at, 1s);

  std::this_thread::sleep_for(5ms);  // let the database clock move on
  auto [ec2, second] = store.acquire("m", "a");
  ASSERT_FALSE(ec2) << ec2.message();
  EXPECT_TRUE(second.owner.is("a"));
  EXPECT_EQ(second.owner.fence, 1u);
  EXPECT_EQ(second.owner.acquired_at, first.owner.acquired_at);
  EXPECT_GT(second.owner.ttl_at, first.owner.ttl_at);
}

TEST_P(sql_backend_test, another_contender_waits_for_transition_at_then_takes_over) {
  sync_store store(fresh());
  auto [ec, a] = store.acquire("m", "a", 100ms, 100ms);
  ASSERT_FALSE(ec) << ec.message();

  auto [ec_b, b] = store.acquire("m", "b", 100ms, 100ms);
  ASSERT_FALSE(ec_b) << ec_b.message();
  EXPECT_TRUE(b.owner.is("a")) << "a lost race is no error: the reply names the owner";
  EXPECT_EQ(b.owner.fence, 1u);
  EXPECT_LE(b.now, b.owner.transition_at);

  lease_grant taken;
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        auto [e, g] = store.acquire("m", "b", 100ms, 100ms);
        taken = g;
        return !e && g.owner.is("b");
      },
      3s));
  EXPECT_GT(taken.owner.acquired_at, a.owner.transition_at);
  EXPECT_EQ(taken.owner.fence, 2u);
}

TEST_P(sql_backend_test, release_frees_at_once_and_a_new_ownership_increments_the_fence) {
  sync_store store(fresh());
  auto [ec, a] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_FALSE(store.release("m", "b"));  // not the owner: nothing happens
  EXPECT_TRUE(store.read("m").second.owner.is("a"));

  ASSERT_FALSE(store.release("m", "a"));
  auto [ec_r, read] = store.read("m");
  ASSERT_FALSE(ec_r);
  EXPECT_TRUE(read.owner.empty());
  EXPECT_LT(read.owner.transition_at, read.now);

  auto [ec_b, b] = store.acquire("m", "b", 5s, 5s);
  ASSERT_FALSE(ec_b);
  EXPECT_TRUE(b.owner.is("b"));
  EXPECT_EQ(b.owner.fence, 2u);
  ASSERT_FALSE(store.release("m", "b"));

  auto [ec_a, again] = store.acquire("m", "b", 5s, 5s);
  ASSERT_FALSE(ec_a);
  EXPECT_EQ(again.owner.fence, 3u) << "re-acquiring after a release is a new ownership";
}

TEST_P(sql_backend_test, reacquire_after_the_own_lease_lapsed_increments_the_fence) {
  sync_store store(fresh());
  auto [ec, a] = store.acquire("m", "a", 20ms, 20ms);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        auto [e, r] = store.read("m");
        return !e && r.now > r.owner.transition_at;
      },
      3s));
  auto [ec2, again] = store.acquire("m", "a", 20ms, 20ms);
  ASSERT_FALSE(ec2);
  EXPECT_EQ(again.owner.fence, 2u);
  EXPECT_GT(again.owner.acquired_at, a.owner.acquired_at);
}

TEST_P(sql_backend_test, read_of_an_unknown_mutex_is_empty) {
  sync_store store(fresh());
  auto [ec, g] = store.read("never-used");
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(g.owner.empty());
  EXPECT_EQ(g.owner.fence, 0u);
  EXPECT_GT(g.now.time_since_epoch(), 0ms);
  auto [ec_s, state] = store.read_state("never-used");
  ASSERT_FALSE(ec_s);
  EXPECT_EQ(state, "");
}

TEST_P(sql_backend_test, write_state_needs_the_owner_and_the_current_fence) {
  sync_store store(fresh());
  auto [ec, a] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec);
  EXPECT_FALSE(store.write_state("m", "a", a.owner.fence, "one"));
  EXPECT_EQ(store.write_state("m", "b", a.owner.fence, "x"), errc::not_owner);
  EXPECT_EQ(store.write_state("m", "a", a.owner.fence + 1, "x"), errc::not_owner);
  EXPECT_EQ(store.write_state("other", "a", 1, "x"), errc::not_owner);
  EXPECT_EQ(store.read_state("m").second, "one");

  ASSERT_FALSE(store.release("m", "a"));
  EXPECT_EQ(store.write_state("m", "a", a.owner.fence, "x"), errc::not_owner);
  auto [ec2, again] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec2);
  EXPECT_EQ(store.write_state("m", "a", a.owner.fence, "x"), errc::not_owner) << "stale fence";
  EXPECT_FALSE(store.write_state("m", "a", again.owner.fence, "two"));
  EXPECT_EQ(store.read_state("m").second, "two");
}

TEST_P(sql_backend_test, write_state_after_the_lease_lapsed_is_refused) {
  sync_store store(fresh());
  auto [ec, a] = store.acquire("m", "a", 20ms, 20ms);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        auto [e, r] = store.read("m");
        return !e && r.now > r.owner.transition_at;
      },
      3s));
  EXPECT_EQ(store.write_state("m", "a", a.owner.fence, "late"), errc::not_owner);
}

TEST_P(sql_backend_test, state_round_trips_arbitrary_bytes_up_to_4_kib) {
  sync_store store(fresh());
  auto [ec, a] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec);
  std::string bytes;
  for (int i = 0; i < 4096; ++i) bytes += static_cast<char>(i % 256);
  ASSERT_EQ(bytes[0], '\0');
  ASSERT_FALSE(store.write_state("m", "a", a.owner.fence, bytes));
  EXPECT_EQ(store.read_state("m").second, bytes);

  ASSERT_FALSE(store.write_state("m", "a", a.owner.fence, std::string("\0'\"\\;--", 8)));
  EXPECT_EQ(store.read_state("m").second, std::string("\0'\"\\;--", 8));

  log_capture log;
  EXPECT_EQ(store.write_state("m", "a", a.owner.fence, std::string(4097, 'x')),
            errc::invalid_argument);
  EXPECT_TRUE(log.contains("4096 byte limit"));
}

TEST_P(sql_backend_test, names_and_owner_ids_are_data_not_sql) {
  sync_store store(fresh());
  const std::string evil = "x'); DROP TABLE " + table_ + "; --";
  auto [ec, g] = store.acquire("Case.sensitive-name_1", evil, 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(g.owner.owner_id, evil);
  auto [ec2, other] = store.acquire("case.sensitive-name_1", "b", 5s, 5s);
  ASSERT_FALSE(ec2);
  EXPECT_TRUE(other.owner.is("b")) << "names differing in case are different mutexes";
  EXPECT_TRUE(table_exists(*created_, table_));
}

TEST_P(sql_backend_test, concurrent_contenders_get_exactly_one_owner) {
  sync_store store(fresh());
  std::vector<std::future<std::pair<std::error_code, lease_grant>>> replies;
  for (int i = 0; i < 8; ++i)
    replies.push_back(std::async(std::launch::async, [&store, i] {
      return store.acquire("race", "c" + std::to_string(i), 5s, 5s);
    }));
  std::set<std::string> owners;
  int winners = 0;
  for (int i = 0; i < 8; ++i) {
    auto [ec, g] = replies[i].get();
    ASSERT_FALSE(ec) << ec.message();
    owners.insert(g.owner.owner_id);
    if (g.owner.is("c" + std::to_string(i))) ++winners;
    EXPECT_EQ(g.owner.fence, 1u);
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(owners.size(), 1u);
}

TEST_P(sql_backend_test, two_lockers_hand_over) {
  auto backend = fresh({{"poll_interval", "20ms"}});
  baton::contend_options options = backend->default_options();
  EXPECT_EQ(options.poll_interval, 20ms);
  options.ttl = 1s;
  options.transition = 1s;
  options.retry_period = 200ms;  // below ttl (baton::check)
  baton::locker first(*backend, "handover", options);
  baton::locker second(*backend, "handover", options);
  ASSERT_TRUE(first.try_lock_for(5s));
  ASSERT_TRUE(first.owns_lease());
  const auto first_fence = first.fence();

  auto waiter = std::async(std::launch::async, [&] { return second.try_lock_for(5s); });
  EXPECT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "second got a held mutex";
  const auto released = std::chrono::steady_clock::now();
  first.unlock();
  ASSERT_TRUE(waiter.get());
  EXPECT_LT(std::chrono::steady_clock::now() - released, 1s) << "waiters poll every 20 ms";
  EXPECT_TRUE(second.owns_lease());
  EXPECT_GT(second.fence(), first_fence);
  EXPECT_TRUE(backend->read_owner("handover").is(second.contender_id()));
  second.unlock();
  EXPECT_TRUE(backend->read_owner("handover").empty());
}

// Counts one contend service's callbacks.
struct tally final : baton::mutex_contender {
  std::atomic<bool> owner{false};
  std::atomic<int> observed{0};
  void on_acquired(const baton::mutex_state&) override { owner = true; }
  void on_released(const baton::mutex_state&) override { owner = false; }
  void on_observed(const baton::mutex_owner&) override { ++observed; }
};

struct contenders {
  std::vector<std::shared_ptr<tally>> tallies;
  std::vector<std::shared_ptr<baton::contend_service>> services;
  contenders(baton::mutex_backend& backend, int n, const baton::contend_options& o) {
    for (int i = 0; i < n; ++i) {
      tallies.push_back(std::make_shared<tally>());
      services.push_back(
          backend.make_contend_service("many-" + std::to_string(i), tallies.back(), o));
      services.back()->start();
    }
  }
  int owned() const {
    return static_cast<int>(std::count_if(tallies.begin(), tallies.end(),
                                          [](const auto& t) { return t->owner.load(); }));
  }
  // Every service has had `n` replies.
  bool observed_at_least(int n) const {
    return std::all_of(tallies.begin(), tallies.end(),
                       [n](const auto& t) { return t->observed.load() >= n; });
  }
};

// With many waiters in one process, one batched SELECT per poll_interval finds the free mutexes
// for all of them: a release and a lapse are noticed within a poll or two, although each waiter
// asks on its own only every two leases (here 4 s) once it has settled.
TEST_P(sql_backend_test, many_waiters_notice_release_and_lapse_through_the_batched_poll) {
  created_ = config();
  constexpr int n = 20;  // above the store's batch threshold (16 waiters)
  const auto o = baton::test::lease_options();
  baton::runtime holder_rt, waiter_rt;  // two processes' worth of stores
  auto holder_backend = baton::backends::sql::make_backend(*created_, holder_rt);
  auto waiter_backend = baton::backends::sql::make_backend(*created_, waiter_rt);
  contenders holders(*holder_backend, n, o);
  ASSERT_TRUE(baton::test::wait_until([&] { return holders.owned() == n; }, 10s));
  contenders waiters(*waiter_backend, n, o);
  // Two replies each: the first wait after a new watch is one poll_interval; after the second
  // reply a waiter has settled into its long safeguard wait.
  ASSERT_TRUE(baton::test::wait_until([&] { return waiters.observed_at_least(2); }, 10s));
  EXPECT_EQ(waiters.owned(), 0);
  // Settled, the waiters cost one SELECT per poll (10/s), not one request each per poll
  // (200/s); the owners renew 20 mutexes a second. Measured over a window of at least 1 s.
  const auto requests0 = baton::backend_requests_sent();
  const auto window0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - window0).count();
  const double rate = static_cast<double>(baton::backend_requests_sent() - requests0) / seconds;
  EXPECT_LT(rate, 80.0) << "waiters poll one by one";

  auto released = std::chrono::steady_clock::now();
  for (auto& h : holders.services) ASSERT_TRUE(h->stop_and_wait(5s));
  ASSERT_TRUE(baton::test::wait_until([&] { return waiters.owned() == n; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - released, 2s)
      << "a release waited for the safeguard";

  // Now the waiters' process owns everything; the other process waits, then the owner's
  // process dies (its io threads stop: no renewal, no release).
  for (auto& t : holders.tallies) t->observed = 0;
  for (auto& h : holders.services) h->start();
  ASSERT_TRUE(baton::test::wait_until([&] { return holders.observed_at_least(2); }, 10s));
  EXPECT_EQ(holders.owned(), 0);
  const auto crashed = std::chrono::steady_clock::now();
  waiter_rt.stop();
  // Free at most one lease (2 s) after the last renewal, then found by the next poll.
  ASSERT_TRUE(baton::test::wait_until([&] { return holders.owned() == n; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - crashed, 3500ms)
      << "a lapse waited for the safeguard";
  for (auto& h : holders.services) h->stop_and_wait(5s);
}

// Waiters that settled into the long wait while the batched poll ran are still told of a
// release and of a lapse once others stopped waiting and fewer than the batch threshold are left
// (a balanced scheduler withdraws waiters whenever the assignment changes).
TEST_P(sql_backend_test, waiters_left_below_the_batch_threshold_still_notice_release_and_lapse) {
  created_ = config();
  constexpr int n = 20;     // above the store's batch threshold (16 waiters)
  constexpr int left = 10;  // below it
  const auto o = baton::test::lease_options();
  baton::runtime holder_rt, waiter_rt;
  auto holder_backend = baton::backends::sql::make_backend(*created_, holder_rt);
  auto waiter_backend = baton::backends::sql::make_backend(*created_, waiter_rt);
  contenders holders(*holder_backend, n, o);
  ASSERT_TRUE(baton::test::wait_until([&] { return holders.owned() == n; }, 10s));
  contenders waiters(*waiter_backend, n, o);
  ASSERT_TRUE(baton::test::wait_until([&] { return waiters.observed_at_least(2); }, 10s));
  for (int i = left; i < n; ++i) ASSERT_TRUE(waiters.services[i]->stop_and_wait(5s));
  std::this_thread::sleep_for(3 * o.poll_interval);  // a poll round or two with 10 waiters

  auto released = std::chrono::steady_clock::now();
  for (int i = 0; i < left / 2; ++i) ASSERT_TRUE(holders.services[i]->stop_and_wait(5s));
  ASSERT_TRUE(baton::test::wait_until([&] { return waiters.owned() == left / 2; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - released, 2s)
      << "a release waited for the safeguard";

  // The holders' process dies: the other half lapses (one lease after the last renewal).
  const auto crashed = std::chrono::steady_clock::now();
  holder_rt.stop();
  ASSERT_TRUE(baton::test::wait_until([&] { return waiters.owned() == left; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - crashed, 3500ms)
      << "a lapse waited for the safeguard";
  for (int i = 0; i < left; ++i) waiters.services[i]->stop_and_wait(5s);
}

// Locks mutex "m"'s row from `admin` (SQLite: the whole file) until ROLLBACK.
void sql_backend_test::lock_row_m(soci::session& admin) {
  if (GetParam() == "sqlite") {
    admin << "BEGIN IMMEDIATE";
  } else {
    admin << (GetParam() == "mysql" ? "START TRANSACTION" : "BEGIN");
    std::string name;
    admin << "SELECT name FROM " + table_ + " WHERE name = 'm' FOR UPDATE", soci::into(name);
  }
}

TEST_P(sql_backend_test, a_request_blocked_by_a_lock_fails_with_timeout_after_statement_timeout) {
  sync_store store(fresh({{"statement_timeout", "300ms"}}));
  auto [ec, a] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();

  // Another session locks the row (SQLite: the whole file) behind the backend's back.
  auto admin = admin_session(*created_);
  lock_row_m(*admin);
  const auto start = std::chrono::steady_clock::now();
  auto [ec2, blocked] = store.acquire("m", "a", 5s, 5s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ec2, errc::timeout) << ec2.message();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);
  *admin << "ROLLBACK";

  auto [ec3, again] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec3) << ec3.message();
  EXPECT_EQ(again.owner.fence, a.owner.fence);
}

TEST_P(sql_backend_test, reacquire_after_a_failed_release_is_a_new_ownership) {
  sync_store store(fresh({{"statement_timeout", "300ms"}}));
  auto [ec, a] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();

  auto admin = admin_session(*created_);
  lock_row_m(*admin);
  EXPECT_EQ(store.release("m", "a"), errc::timeout);
  *admin << "ROLLBACK";

  // The release never reached the database, yet "a" gave the mutex up: taking it again is a
  // new ownership, not a renewal of the old one.
  auto [ec2, again] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec2) << ec2.message();
  EXPECT_TRUE(again.owner.is("a"));
  EXPECT_EQ(again.owner.fence, a.owner.fence + 1);
  auto [ec3, renewed] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec3) << ec3.message();
  EXPECT_EQ(renewed.owner.fence, again.owner.fence) << "then renewals keep the fence again";
}

namespace {

std::error_code append(baton::mutex_backend& backend, const std::string& name,
                       const std::string& me, std::uint64_t fence, std::string bytes,
                       std::size_t keep = 50) {
  auto promise = std::make_shared<std::promise<std::error_code>>();
  auto future = promise->get_future();
  backend.records().async_append_history(name, me, fence, std::move(bytes), keep,
                                         [promise](std::error_code ec) { promise->set_value(ec); });
  if (future.wait_for(reply_timeout) != std::future_status::ready)
    throw std::runtime_error("no reply to append_history within 10 s");
  return future.get();
}

}  // namespace

TEST_P(sql_backend_test,
       create_table_false_with_the_schema_file_loaded_serves_history_and_controls) {
  created_ = config();
  auto sql = admin_session(*created_);
  const auto statements = schema_statements(GetParam(), table_);
  // Three tables; SQLite also the meta table and two triggers (its clock, sqlite_clock_test).
  ASSERT_EQ(statements.size(), GetParam() == "sqlite" ? 6u : 3u);
  for (const auto& statement : statements) *sql << statement;
  auto backend = make(config({{"create_table", "false"}}));
  sync_store store(backend);
  auto [ec, a] = store.acquire("m", "a");
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_FALSE(append(*backend, "m", "a", a.owner.fence, "one"));
  EXPECT_FALSE(append(*backend, "m", "a", a.owner.fence, "two"));
  auto h = baton::read_history(backend->records(), "m", 10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].bytes, "two");
  EXPECT_EQ(h[0].fence, a.owner.fence);
  EXPECT_EQ(baton::write_controls(backend->records(), "m", 0, "{}"),
            (baton::controls_record{"{}", 1}));
  EXPECT_EQ(baton::read_controls(backend->records(), "m"), (baton::controls_record{"{}", 1}));
}

TEST_P(sql_backend_test, create_table_false_without_the_records_tables_names_the_missing_one) {
  // A database set up for an older baton: the owner records table only.
  created_ = config();
  auto sql = admin_session(*created_);
  *sql << schema_statements(GetParam(), table_).front();
  log_capture log;
  sync_store store(make(config({{"create_table", "false"}})));
  auto [ec, grant] = store.acquire("m", "a");
  EXPECT_EQ(ec, errc::backend_error);
  EXPECT_TRUE(log.contains("table '" + table_ + "_history' is missing or unusable"));
  EXPECT_TRUE(log.contains("create_table=false"));
  EXPECT_TRUE(log.contains("schema/" + GetParam() + ".sql"));
  EXPECT_FALSE(table_exists(*created_, table_ + "_history"));
  EXPECT_FALSE(table_exists(*created_, table_ + "_controls"));
}

TEST_P(sql_backend_test, an_older_database_gets_the_records_tables_when_create_table_is_true) {
  created_ = config();
  auto sql = admin_session(*created_);
  *sql << schema_statements(GetParam(), table_).front();
  *sql << "INSERT INTO " + table_ +
              " (name, owner_id, acquired_at, ttl_at, transition_at, fence, state) "
              "VALUES ('m', '', 0, 0, 0, 7, '')";
  auto backend = make(*created_);
  sync_store store(backend);
  auto [ec, a] = store.acquire("m", "a");
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(a.owner.fence, 8u);
  EXPECT_FALSE(append(*backend, "m", "a", a.owner.fence, "after the upgrade"));
  EXPECT_EQ(baton::read_history(backend->records(), "m", 10).size(), 1u);
}

TEST_P(sql_backend_test, a_read_only_backend_reads_empty_records_where_the_tables_are_missing) {
  // An older baton made this database; `baton status` and `history` must still work on it.
  created_ = config();
  auto sql = admin_session(*created_);
  *sql << schema_statements(GetParam(), table_).front();
  auto cfg = config();
  cfg.read_only = true;
  auto ro = make(cfg);
  EXPECT_TRUE(baton::read_history(ro->records(), "m", 10).empty());
  EXPECT_EQ(baton::read_controls(ro->records(), "m"), (baton::controls_record{"", 0}));
  EXPECT_EQ(append(*ro, "m", "a", 1, "x"), errc::invalid_argument);
  EXPECT_THROW(baton::write_controls(ro->records(), "m", 0, "x"), std::system_error);
  EXPECT_FALSE(table_exists(*created_, table_ + "_history"));
  EXPECT_FALSE(table_exists(*created_, table_ + "_controls"));
  // Once a newer node made them, the same read-only backend reads them.
  auto writer = make(*created_);
  sync_store store(writer);
  auto [ec, a] = store.acquire("m", "a");
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_FALSE(append(*writer, "m", "a", a.owner.fence, "entry"));
  auto h = baton::read_history(ro->records(), "m", 10);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].bytes, "entry");
}

TEST_P(sql_backend_test, a_table_whose_derived_names_are_too_long_is_refused_at_config_time) {
  // <table>_controls, the longer derived name, must fit PostgreSQL's 63 and MySQL's 64
  // characters; SQLite has no such limit.
  const std::size_t limit = GetParam() == "postgresql" ? 63 : GetParam() == "mysql" ? 64 : 0;
  if (limit == 0) {
    EXPECT_NO_THROW(make(config({{"table", std::string(63, 't')}})));
    return;
  }
  const std::string fits(limit - 9, 't');
  const std::string too_long(limit - 8, 't');
  EXPECT_NO_THROW(make(config({{"table", fits}})));
  for (const auto& table : {too_long, "s." + too_long}) {
    try {
      make(config({{"table", table}}));
      ADD_FAILURE() << table << " was accepted";
    } catch (const baton::backend_param_error& e) {
      EXPECT_EQ(e.param(), "table");
      EXPECT_NE(std::string(e.what()).find(too_long + "_controls"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(limit)), std::string::npos) << e.what();
    }
  }
}

TEST_P(sql_backend_test, a_history_append_racing_with_a_takeover_is_rejected) {
  auto backend = fresh({{"statement_timeout", "10s"}});
  sync_store store(backend);
  auto [ec, a] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_FALSE(append(*backend, "m", "a", a.owner.fence, "by a"));

  // Another session holds the owner row (SQLite: the write lock) and hands the mutex to "b"
  // while a's next append waits for that lock: the append must see the takeover, not its own
  // stale check.
  auto admin = admin_session(*created_);
  lock_row_m(*admin);
  const auto sent = baton::backend_requests_sent();
  auto late = std::async(std::launch::async,
                         [&] { return append(*backend, "m", "a", a.owner.fence, "late by a"); });
  EXPECT_TRUE(baton::test::wait_until([&] { return baton::backend_requests_sent() > sent; }, 10s));
  if (GetParam() != "sqlite") {
    // Until the append waits for the row lock (SQLite cannot show that: its wait is in-process).
    auto observer = admin_session(*created_);
    const std::string waiting =
        GetParam() == "postgresql"
            ? "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query "
              "LIKE '%FOR UPDATE%' AND query LIKE '%" +
                  table_ + "%'"
            // MySQL: innodb_trx needs PROCESS; the statement still running in the processlist
            // (our own user's threads need no privilege) can only be waiting for the lock.
            : "SELECT COUNT(*) FROM information_schema.processlist WHERE id <> CONNECTION_ID() "
              "AND command = 'Query' AND info LIKE '%FOR UPDATE%' AND info LIKE '%" +
                  table_ + "%'";
    EXPECT_TRUE(baton::test::wait_until(
        [&] {
          long long n = 0;
          *observer << waiting, soci::into(n);
          return n > 0;
        },
        8s));
  }
  // This plain session has no baton_monotonic_ms(), which SQLite's guard against older batons
  // calls on every write of the owner records: drop the guard (the admin writes no times).
  if (GetParam() == "sqlite") *admin << "DROP TRIGGER " + table_ + "_clock_update";
  *admin << "UPDATE " + table_ + " SET owner_id = 'b', fence = fence + 1 WHERE name = 'm'";
  *admin << "COMMIT";
  ASSERT_EQ(late.wait_for(15s), std::future_status::ready);
  EXPECT_EQ(late.get(), errc::not_owner);

  auto h = baton::read_history(backend->records(), "m", 10);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].bytes, "by a");
  // The new ownership writes with its own fence; the old one stays out.
  EXPECT_FALSE(append(*backend, "m", "b", a.owner.fence + 1, "by b"));
  EXPECT_EQ(append(*backend, "m", "a", a.owner.fence, "later by a"), errc::not_owner);
  h = baton::read_history(backend->records(), "m", 10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].bytes, "by b");
  EXPECT_EQ(h[0].fence, a.owner.fence + 1);
  EXPECT_GT(h[0].seq, h[1].seq);
}

TEST_P(sql_backend_test, history_and_controls_are_utf8_text_and_other_bytes_are_refused) {
  auto backend = fresh();
  sync_store store(backend);
  auto [ec, a] = store.acquire("m", "a");
  ASSERT_FALSE(ec) << ec.message();
  const auto fence = a.owner.fence;
  for (const std::string bad : {std::string("bad \xff byte"), std::string("nul \0 byte", 10),
                                std::string("surrogate \xed\xa0\x80"),
                                std::string("overlong \xc0\xaf"), std::string("cut \xe2\x82")}) {
    EXPECT_EQ(append(*backend, "m", "a", fence, bad), errc::invalid_argument) << bad;
    EXPECT_THROW(baton::write_controls(backend->records(), "m", 0, bad), std::system_error) << bad;
  }
  EXPECT_TRUE(baton::read_history(backend->records(), "m", 10).empty());
  EXPECT_EQ(baton::read_controls(backend->records(), "m").version, 0u);
  // Every plane of UTF-8 round-trips (MySQL: utf8mb4, four-byte characters included).
  const std::string text = "a \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
  ASSERT_FALSE(append(*backend, "m", "a", fence, text));
  EXPECT_EQ(baton::read_history(backend->records(), "m", 1).at(0).bytes, text);
  EXPECT_EQ(baton::write_controls(backend->records(), "m", 0, text).bytes, text);
  EXPECT_EQ(baton::read_controls(backend->records(), "m").bytes, text);
}

namespace {

// The raw owner columns of one row, read behind the backend's back.
struct raw_row {
  std::string owner_id;
  long long ttl_at = 0, transition_at = 0, fence = 0;
  friend bool operator==(const raw_row&, const raw_row&) = default;
};

raw_row read_row(soci::session& admin, const std::string& table, const std::string& name) {
  raw_row r;
  std::string n = name;
  admin << "SELECT owner_id, ttl_at, transition_at, fence FROM " + table + " WHERE name = :n",
      soci::use(n, "n"), soci::into(r.owner_id), soci::into(r.ttl_at), soci::into(r.transition_at),
      soci::into(r.fence);
  return r;
}

// Rows of `table` with an owner (SQLite returns COUNT(*) as text).
long long owned_rows(soci::session& admin, const std::string& table) {
  std::string count;
  admin << "SELECT CAST(COUNT(*) AS CHAR(20)) FROM " + table + " WHERE owner_id <> ''",
      soci::into(count);
  return std::stoll(count);
}

// Counts one contend service's acquisitions and releases, and whom it lost to.
struct owner_log final : baton::mutex_contender {
  std::atomic<bool> owner{false};
  std::atomic<int> acquired{0}, released{0}, observed{0};
  std::mutex mutex;
  std::string lost_to;
  void on_acquired(const baton::mutex_state&) override {
    ++acquired;
    owner = true;
  }
  void on_released(const baton::mutex_state& s) override {
    {
      std::lock_guard lock(mutex);
      lost_to = s.after.owner_id;
    }
    ++released;
    owner = false;
  }
  void on_observed(const baton::mutex_owner&) override { ++observed; }
  std::string loser() {
    std::lock_guard lock(mutex);
    return lost_to;
  }
};

}  // namespace

// Renewals due together share statements (the store batches them). A lease that another owner
// took on the server meanwhile is answered with that owner and left as it is, while the other
// leases of the same batch are renewed with their fence.
TEST_P(sql_backend_test, a_batch_of_renewals_reports_a_lost_lease_lost_and_renews_the_others) {
  sync_store store(fresh());
  constexpr int n = 40;
  std::vector<std::string> names;
  std::map<std::string, lease_grant> first;
  for (int i = 0; i < n; ++i) {
    names.push_back("batch-" + std::to_string(i));
    auto [ec, g] = store.acquire(names.back(), "a", 5s, 5s);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(g.owner.is("a"));
    first[names.back()] = g;
  }
  auto admin = admin_session(*created_);
  drop_clock_guard(*admin);
  const std::string lost = "batch-7";
  *admin << "UPDATE " + table_ + " SET owner_id = 'intruder', fence = fence + 1 WHERE name = '" +
                lost + "'";
  const auto lost_row = read_row(*admin, table_, lost);
  std::map<std::string, raw_row> before;
  for (const auto& name : names) before[name] = read_row(*admin, table_, name);

  const auto requests0 = baton::backend_requests_sent();
  auto replies = store.acquire_all(names, "a", 5s, 5s);
  const auto requests = baton::backend_requests_sent() - requests0;
  EXPECT_LT(requests, static_cast<std::uint64_t>(n)) << "renewals due together went one by one";
  for (int i = 0; i < n; ++i) {
    const auto& [ec, g] = replies[i];
    const auto& name = names[i];
    ASSERT_FALSE(ec) << name << ": " << ec.message();
    if (name == lost) {
      EXPECT_EQ(g.owner.owner_id, "intruder");
      EXPECT_EQ(g.owner.fence, first[name].owner.fence + 1);
      EXPECT_EQ(read_row(*admin, table_, name), lost_row) << "the lost lease was extended";
      continue;
    }
    EXPECT_TRUE(g.owner.is("a")) << name;
    EXPECT_EQ(g.owner.fence, first[name].owner.fence) << name;
    EXPECT_EQ(g.owner.acquired_at, first[name].owner.acquired_at) << name;
    const auto row = read_row(*admin, table_, name);
    EXPECT_EQ(row.owner_id, "a");
    EXPECT_GE(row.ttl_at, before[name].ttl_at) << name;
    EXPECT_EQ(row.transition_at - row.ttl_at, 5000) << name;
  }
}

// Through the contend services: of 30 leases one process renews, the one taken behind its back
// is seen lost to the new owner (as a single renewal would see it); the others are kept.
TEST_P(sql_backend_test, an_owner_of_many_sees_the_lease_taken_behind_its_back_lost_only) {
  auto backend = fresh();
  const auto o = baton::test::lease_options();  // ttl 1 s: a renewal round a second
  constexpr int n = 30;
  std::vector<std::shared_ptr<owner_log>> logs;
  std::vector<std::shared_ptr<baton::contend_service>> services;
  for (int i = 0; i < n; ++i) {
    logs.push_back(std::make_shared<owner_log>());
    services.push_back(backend->make_contend_service("own-" + std::to_string(i), logs.back(), o));
    services.back()->start();
  }
  auto all_owned = [&] {
    return std::all_of(logs.begin(), logs.end(), [](const auto& l) { return l->owner.load(); });
  };
  ASSERT_TRUE(baton::test::wait_until(all_owned, 10s));
  auto admin = admin_session(*created_);
  drop_clock_guard(*admin);
  // Another owner with a new fence and a lease far beyond ours.
  *admin << "UPDATE " + table_ +
                " SET owner_id = 'intruder', fence = fence + 1, ttl_at = ttl_at + 600000, "
                "transition_at = transition_at + 600000 WHERE name = 'own-5'";
  ASSERT_TRUE(baton::test::wait_until([&] { return !logs[5]->owner.load(); }, 10s));
  EXPECT_EQ(logs[5]->loser(), "intruder");
  EXPECT_EQ(read_row(*admin, table_, "own-5").owner_id, "intruder");
  // Two more renewals each: the others never stopped being owners.
  std::vector<int> seen;
  for (const auto& l : logs) seen.push_back(l->observed.load());
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        for (int i = 0; i < n; ++i)
          if (i != 5 && logs[i]->observed.load() < seen[i] + 2) return false;
        return true;
      },
      10s));
  for (int i = 0; i < n; ++i) {
    if (i == 5) continue;
    EXPECT_TRUE(logs[i]->owner.load()) << i;
    EXPECT_EQ(logs[i]->acquired.load(), 1) << i;
    EXPECT_EQ(logs[i]->released.load(), 0) << i;
  }
  EXPECT_EQ(logs[5]->acquired.load(), 1);
  EXPECT_EQ(logs[5]->released.load(), 1);
  for (auto& s : services) s->stop_and_wait(5s);
}

// A graceful stop of a process holding thousands of leases releases every row at once, with
// no failed request (no "timed out" waiting for one of pool_size connections).
TEST_P(sql_backend_test, a_graceful_stop_of_thousands_of_leases_releases_every_row) {
  auto backend = fresh();
  const auto o = baton::test::lease_options(10s, 500ms);
  constexpr int n = 3000;
  std::vector<std::shared_ptr<owner_log>> logs;
  std::vector<std::shared_ptr<baton::contend_service>> services;
  for (int i = 0; i < n; ++i) {
    logs.push_back(std::make_shared<owner_log>());
    services.push_back(backend->make_contend_service("stop-" + std::to_string(i), logs.back(), o));
    services.back()->start();
  }
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        return std::all_of(logs.begin(), logs.end(), [](const auto& l) { return l->owner.load(); });
      },
      60s));
  auto admin = admin_session(*created_);
  EXPECT_EQ(owned_rows(*admin, table_), n);
  const auto errors0 = baton::test::backend_failures(GetParam());
  auto stopped = std::make_shared<std::atomic<int>>(0);
  for (auto& s : services) s->stop([stopped] { ++*stopped; });
  ASSERT_TRUE(baton::test::wait_until([&] { return stopped->load() == n; }, 60s))
      << stopped->load() << " of " << n << " stopped";
  EXPECT_EQ(baton::test::backend_failures(GetParam()) - errors0, 0u) << "releases failed";
  EXPECT_EQ(owned_rows(*admin, table_), 0) << "rows left owned after the stop";
}

INSTANTIATE_TEST_SUITE_P(dialects, sql_backend_test,
                         ::testing::Values("sqlite", "postgresql", "mysql"),
                         [](const auto& info) { return info.param; });

// Network failures: PostgreSQL and MariaDB.
class sql_network_test : public ::testing::TestWithParam<std::string> {
 protected:
  baton::runtime rt_;
};

TEST_P(sql_network_test, unreachable_server_fails_fast_with_connection_lost) {
  const auto port = std::to_string(baton::test::unused_loopback_port());
  baton::backend_config config;
  config.type = GetParam();
  config.params["connection"] =
      GetParam() == "postgresql"
          ? "dbname=baton_test user=postgres host=127.0.0.1 port=" + port
          : "db=baton_test user=baton password=baton host=127.0.0.1 port=" + port;
  sync_store store(baton::make_backend(config, rt_));
  const auto start = std::chrono::steady_clock::now();
  auto [ec, g] = store.acquire("m", "a");
  EXPECT_EQ(ec, errc::connection_lost);
  auto [ec2, g2] = store.acquire("m", "a");  // within the connect backoff: fails at once
  EXPECT_EQ(ec2, errc::connection_lost);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// Kills the server side of the connections a backend under test opened: PostgreSQL by the
// application_name its connection string carries, MariaDB by the baton user's connections that
// were not there before (other tests' connections stay alive).
class connection_killer {
 public:
  explicit connection_killer(baton::backend_config& config)
      : type_(config.type), app_(unique("baton_kill")) {
    if (type_ == "postgresql") config.params["connection"] += " application_name=" + app_;
    admin_ = admin_session(config);
    if (type_ == "mysql") {
      auto ids = mysql_ids();
      before_.insert(ids.begin(), ids.end());
    }
  }
  // Returns how many connections were killed.
  long long kill() {
    long long killed = 0;
    if (type_ == "postgresql") {
      *admin_ << "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE application_name = :app AND pid <> pg_backend_pid()) AS t",
          soci::use(app_, "app"), soci::into(killed);
    } else {
      for (auto id : mysql_ids())
        if (before_.count(id) == 0) {
          *admin_ << "KILL " + std::to_string(id);
          ++killed;
        }
    }
    return killed;
  }
  soci::session& admin() { return *admin_; }

 private:
  std::vector<long long> mysql_ids() {
    std::vector<long long> ids(1000);
    *admin_ << "SELECT id FROM information_schema.processlist WHERE user = 'baton' AND "
               "id <> CONNECTION_ID()",
        soci::into(ids);
    return ids;
  }

  std::string type_;
  std::string app_;
  std::unique_ptr<soci::session> admin_;
  std::set<long long> before_;
};

TEST_P(sql_network_test, reconnects_after_the_server_killed_its_connections) {
  const std::string table = unique("baton_t");
  auto config = baton::test::backend_config_for(GetParam());
  config.params["table"] = table;
  connection_killer killer(config);
  sync_store store(baton::make_backend(config, rt_));
  auto [ec, first] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();

  EXPECT_GE(killer.kill(), 1);
  auto [ec2, failed] = store.acquire("m", "a", 5s, 5s);
  EXPECT_EQ(ec2, errc::connection_lost) << ec2.message();
  auto [ec3, again] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec3) << ec3.message();
  EXPECT_TRUE(again.owner.is("a"));
  EXPECT_EQ(again.owner.fence, first.owner.fence) << "still a renewal";
  killer.admin() << "DROP TABLE IF EXISTS " + table;
}

TEST_P(sql_network_test, release_is_retried_on_a_new_connection_after_a_lost_one) {
  const std::string table = unique("baton_t");
  auto config = baton::test::backend_config_for(GetParam());
  config.params["table"] = table;
  connection_killer killer(config);
  sync_store store(baton::make_backend(config, rt_));
  auto [ec, first] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();

  EXPECT_GE(killer.kill(), 1);
  EXPECT_FALSE(store.release("m", "a")) << "a graceful stop must not leave the lease behind";
  auto [ec2, read] = store.read("m");
  ASSERT_FALSE(ec2) << ec2.message();
  EXPECT_TRUE(read.owner.empty());
  killer.admin() << "DROP TABLE IF EXISTS " + table;
}

TEST(sql_postgresql, a_frozen_server_process_gives_timeout_not_a_hang) {
  baton::runtime rt;
  const std::string table = unique("baton_t");
  const std::string app = unique("baton_freeze");
  auto config = baton::test::backend_config_for("postgresql");
  config.params["table"] = table;
  config.params["statement_timeout"] = "300ms";
  config.params["connection"] += " application_name=" + app;
  sync_store store(baton::make_backend(config, rt));
  auto [ec, first] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec) << ec.message();

  auto admin = admin_session(config);
  long long pid = 0;
  *admin << "SELECT pid FROM pg_stat_activity WHERE application_name = :app", soci::use(app, "app"),
      soci::into(pid);
  ASSERT_GT(pid, 0);
  // Freeze the server process of the backend's connection: its kernel still acknowledges TCP,
  // so only the backend's own deadline can end the request.
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  auto [ec2, frozen] = store.acquire("m", "a", 5s, 5s);
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(static_cast<pid_t>(pid), SIGCONT);
  EXPECT_EQ(ec2, errc::timeout) << ec2.message();
  EXPECT_LT(took, 2s);

  auto [ec3, again] = store.acquire("m", "a", 5s, 5s);
  ASSERT_FALSE(ec3) << ec3.message();
  EXPECT_EQ(again.owner.fence, first.owner.fence);
  *admin << "DROP TABLE IF EXISTS " + table;
}

// The time a waiting locker needs to take over after the owner unlocks.
std::chrono::steady_clock::duration handover_time(baton::mutex_backend& backend,
                                                  const std::string& name) {
  baton::contend_options options = backend.default_options();
  options.ttl = 10s;
  options.transition = 5s;
  baton::locker first(backend, name, options);
  baton::locker second(backend, name, options);
  if (!first.try_lock_for(5s)) throw std::runtime_error("first locker got no lock");
  auto waiter = std::async(std::launch::async, [&] { return second.try_lock_for(10s); });
  // Let the waiter see the owner and settle into polling.
  if (waiter.wait_for(300ms) != std::future_status::timeout)
    throw std::runtime_error("second locker got a held lock");
  const auto released = std::chrono::steady_clock::now();
  first.unlock();
  if (!waiter.get()) throw std::runtime_error("second locker got no lock");
  return std::chrono::steady_clock::now() - released;
}

TEST(sql_postgresql, release_wakes_waiters_at_once_with_listen_notify) {
  baton::runtime rt;
  const std::string table = unique("baton_t");
  const std::string app = unique("baton_notify");
  auto config = baton::test::backend_config_for("postgresql");
  config.params["table"] = table;
  config.params["poll_interval"] = "5s";  // a poll alone would take seconds
  config.params["connection"] += " application_name=" + app;
  auto backend = baton::make_backend(config, rt);
  EXPECT_LT(handover_time(*backend, "notify"), 1s);

  // The LISTEN connection is rebuilt after the server dropped it.
  auto admin = admin_session(config);
  long long killed = 0;
  *admin << "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = :app AND pid <> pg_backend_pid()) AS t",
      soci::use(app, "app"), soci::into(killed);
  EXPECT_GE(killed, 2) << "a request connection and the LISTEN connection";
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        long long listening = 0;
        *admin << "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = :app AND "
                  "query LIKE 'LISTEN%'",
            soci::use(app, "app"), soci::into(listening);
        return listening == 1;
      },
      5s));
  EXPECT_LT(handover_time(*backend, "notify"), 1s);
  *admin << "DROP TABLE IF EXISTS " + table;
}

INSTANTIATE_TEST_SUITE_P(servers, sql_network_test, ::testing::Values("postgresql", "mysql"),
                         [](const auto& info) { return info.param; });

// This process's TCP connections to loopback `port`.
int connections_to(int port) {
  return static_cast<int>(baton::test::connections_to_port(port).size());
}

// Issue 19: pool_size bounds every connection of a PostgreSQL backend, the LISTEN one included
// (it was pool_size + 1: the scale benchmark counted 5 against a pool_size of 4).
TEST(sql_postgresql_pool, pool_size_counts_the_listen_connection) {
  baton::runtime rt;
  auto config = baton::test::backend_config_for("postgresql");
  config.params["pool_size"] = "2";
  auto backend = baton::make_backend(config, rt);
  const int port = std::stoi(baton::test::require_env("BATON_TEST_POSTGRES_PORT"));
  const int before = connections_to(port);
  // A burst of acquires keeps every statement connection busy (and opened); the second contender
  // of each mutex waits, so the listener connects too.
  constexpr int n = 200;
  const auto prefix = baton::test::unique_name("pool") + "-";
  std::vector<std::shared_ptr<owner_log>> logs;
  std::vector<std::shared_ptr<baton::contend_service>> services;
  for (int i = 0; i < 2 * n; ++i) {
    logs.push_back(std::make_shared<owner_log>());
    services.push_back(backend->make_contend_service(prefix + std::to_string(i % n), logs.back(),
                                                     baton::test::lease_options(10s, 500ms)));
  }
  int most = 0;
  for (auto& x : services) x->start();
  ASSERT_TRUE(baton::test::wait_until(
      [&] {
        most = std::max(most, connections_to(port) - before);
        return std::count_if(logs.begin(), logs.end(),
                             [](const auto& l) { return l->owner.load(); }) == n &&
               std::all_of(services.begin(), services.end(), [](const auto& x) {
                 return x->is_owner() || !x->last_observed().owner_id.empty();
               });
      },
      60s));
  most = std::max(most, connections_to(port) - before);
  EXPECT_GE(most, 2) << "the burst must have used the statement connection and the listener";
  EXPECT_LE(most, 2) << "pool_size 2 bounds every connection, the LISTEN one included";
  for (auto& x : services) x->stop_and_wait(5s);
}

}  // namespace
