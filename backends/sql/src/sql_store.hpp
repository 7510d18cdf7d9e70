#pragma once
// The lease_store of the SQL backend: runs each request on the runtime's blocking pool with a
// connection from a small lazily filled pool.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "baton/backends/sql/sql_backend.hpp"
#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/records.hpp"
#include "dialect.hpp"

namespace baton::backends::sql::detail {

class connection;
class pg_listener;

/// Largest lease-guarded state, in bytes (stored hex-encoded, twice that in the table).
inline constexpr std::size_t max_state_size = 4096;

/// Lower-case hex of `bytes`.
std::string to_hex(const std::string& bytes);
/// The bytes of `hex`; throws reply_error when it is not hex.
std::string from_hex(const std::string& hex);

/// Whether `bytes` can be stored in a text column of every dialect: well-formed UTF-8 (no
/// surrogates, overlong forms or code points past U+10FFFF) without NUL.
bool storable_text(std::string_view bytes) noexcept;

/// The owner records (lease_store) and the history and controls (record_store) of one table
/// family: `<table>`, `<table>_history`, `<table>_controls`.
class sql_store final : public lease_store,
                        public record_store,
                        public std::enable_shared_from_this<sql_store> {
 public:
  sql_store(sql_options options, runtime& rt);
  ~sql_store() override;

  void async_acquire(const std::string& name, const std::string& owner_id,
                     std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                     grant_handler handler) override;
  void async_release(const std::string& name, const std::string& owner_id,
                     done_handler handler) override;
  void async_read(const std::string& name, grant_handler handler) override;
  void async_read_state(const std::string& name, state_handler handler) override;
  void async_write_state(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                         std::string bytes, done_handler handler) override;
  /// Wakes the waiters of a mutex when it may be free. PostgreSQL wakes them at once on release
  /// (LISTEN/NOTIFY). With many waiters in this store (batch_poll_threshold), one SELECT per
  /// max_poll_batch watched mutexes every (shortest waiter) poll_interval finds the released
  /// and lapsed ones for all of them (every dialect), and waiters ask on their own only as a
  /// safeguard; with few, each waiter polls every poll_interval itself. Once started, the
  /// rounds go on while any waiter is left (some may have settled into the long wait).
  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::chrono::milliseconds poll_interval, std::function<void()> wake) override;
  void unwatch(std::uint64_t handle) noexcept override;
  /// release_and_expiry while the batched poller serves the waiters, else none.
  wakeup_coverage wakeups() const noexcept override;

  /// History and controls (records.hpp). Entries and controls are stored as text: bytes that
  /// are not UTF-8 (or hold NUL) are refused with errc::invalid_argument. Read-only: writes are
  /// refused with errc::invalid_argument.
  void async_append_history(const std::string& name, const std::string& owner_id,
                            std::uint64_t fence, std::string bytes, std::size_t keep,
                            append_handler handler) override;
  void async_read_history(const std::string& name, std::size_t limit,
                          history_handler handler) override;
  void async_read_controls(const std::string& name, controls_handler handler) override;
  void async_write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                            controls_handler handler) override;
  /// PostgreSQL: a NOTIFY in the transaction of every controls write wakes `changed` (also once
  /// after each reconnect of the listening connection). SQLite, MySQL: the controls poller, one
  /// SELECT of every controls row's version every poll_interval while anybody watches, wakes
  /// `changed` when the version of `name` changed (and, in the store's first round only, every
  /// watcher once: no earlier round tells what it may have missed). So a node with thousands of
  /// schedules reads one small table per poll_interval instead of each schedule's controls.
  std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) override;
  void unwatch_controls(std::uint64_t handle) noexcept override;

  const sql_options& options() const noexcept { return options_; }

  /// Whether the table exists: one read on the calling thread (blocking; not on an io thread),
  /// creating nothing. Throws std::system_error when the database cannot be asked.
  bool table_exists();

 private:
  using steady = std::chrono::steady_clock;
  using work = std::function<std::error_code(connection&)>;

  /// Runs `body` on the blocking pool, then `done` on the same thread. A request still running
  /// after `limit` has its connection shut down (network dialects) and fails with timeout.
  /// `idempotent`: a request that failed with connection_lost on a pooled connection (one the
  /// server may have dropped while idle) runs once more on a new connection.
  void submit(const char* operation, std::string name, std::chrono::milliseconds limit,
              bool idempotent, work body, std::function<void(std::error_code)> done);
  /// Runs `body` with a pooled connection; translates and logs failures. `reused`: the
  /// connection had served earlier requests.
  std::error_code run(const char* operation, const std::string& name,
                      std::chrono::milliseconds limit, const work& body, bool& reused);
  std::unique_ptr<connection> checkout(const char* operation, const std::string& name,
                                       std::error_code& ec, bool& reused);
  /// Returns `c` to the pool, or drops it (and, when the server looks gone, every idle one).
  void checkin(std::unique_ptr<connection> c, bool broken, bool drop_idle);
  void fail(done_handler handler, std::error_code ec);
  /// Read-only: whether the history (or controls) table is there to read. A database made by
  /// an older baton has only the owner records table, and a read-only backend creates nothing:
  /// its records then read as empty. Once found, a table is not looked for again.
  bool records_table_readable(connection& c, bool history);
  /// The poller: arms the next round (the shortest waiter poll_interval from now).
  void schedule_poll();
  /// One round: a SELECT per batch of watched names (one after the other), each waking the
  /// waiters of the free ones.
  void poll_round();
  void poll_batch(std::shared_ptr<const std::vector<std::string>> names, std::size_t from);
  /// Rebuilds poll_names_ and poll_every_ after watchers_ changed. watch_mutex_ held.
  void refresh_poll_list();
  /// Calls the wake-ups of every watcher of `names` (sorted).
  void wake(const std::vector<std::string>& names);
  /// The controls poller (SQLite, MySQL): arms the next round, poll_interval from now.
  void schedule_controls_poll();
  /// One round: reads every controls row's version, wakes the watchers of changed ones.
  void controls_round();

  // Batched acquires and releases. Requests wait in a queue per group (same kind, ttl and
  // transition: one statement serves a group, each row for its own owner); up to pool_size drainers
  // on the blocking pool take up to max_lease_batch requests of a group at a time, so requests that
  // come while others run (a burst, a graceful stop of thousands) share statements, and a stop of
  // any size needs no more than pool_size connections. A request whose answer is not awaited by
  // anybody in a hurry (a renewal, or a waiter's safeguard poll while the batched poll covers
  // it) lingers a little (min(ttl/20, 100 ms)) so that renewals due about together go together;
  // any statement of its group takes it along earlier.
  struct lease_key {
    bool release = false;
    long long ttl = 0, transition = 0;
    auto operator<=>(const lease_key&) const = default;
  };
  struct lease_request {
    std::string name, owner_id;
    grant_handler granted;  // acquire
    done_handler released;  // release
  };
  struct lease_group {
    std::deque<lease_request> urgent, lingering;
    bool ready = false;  // its key is in ready_
  };
  void enqueue(lease_key key, lease_request request, std::chrono::milliseconds linger);
  /// Posts drainers while there is work and fewer than pool_size run. batch_mutex_ held.
  void spawn_drainers();
  /// A drainer: runs batches until no group is ready.
  void drain();
  struct batch_names {
    std::vector<std::string> names, owners;  // of each request, in name order
    std::string what;                        // how the log names the batch
  };
  /// Sorts `batch` by name.
  static batch_names sort_batch(std::vector<lease_request>& batch);
  void run_acquires(const lease_key& key, std::vector<lease_request>& batch);
  void run_releases(std::vector<lease_request>& batch);
  /// The linger timer fired: every lingering request becomes urgent.
  void flush_lingering(std::uint64_t generation);
  /// The io_context went away with the linger timer's wait (it never ran): drops every queued
  /// request. Their handlers hold the contend services, which hold this store, so without this
  /// the store, its connections and the services would never be freed.
  void abandon_queued();
  /// Whether an acquire of `name` by `owner_id` may linger. batch_mutex_ held.
  bool may_linger(const std::string& key) const;
  /// The waiter `key` was woken: its next acquire goes at once.
  void woken(const std::string& key);

  sql_options options_;
  runtime& runtime_;
  dialect_sql sql_;
  std::string connect_string_;
  std::string label_;                      // "postgresql" etc., for messages
  std::vector<std::string> secrets_;       // the connection's passwords, scrubbed from messages
  std::shared_ptr<pg_listener> listener_;  // PostgreSQL only
  // Connections for statements: pool_size, less the one the PostgreSQL listener holds (pool_size
  // bounds every connection of the store), but at least one.
  unsigned statement_connections_ = 1;

  struct watcher {
    std::string name;
    std::string owner_id;
    std::function<void()> wake;
    std::chrono::milliseconds poll_interval;  // the waiter's: rounds run at the shortest
    std::uint64_t listener_handle = 0;
  };
  std::mutex watch_mutex_;  // guards the fields below
  std::map<std::uint64_t, watcher> watchers_;
  std::uint64_t next_watch_ = 1;
  bool polling_ = false;    // a poll round is armed or running
  bool poll_dirty_ = true;  // watchers_ changed since poll_names_ was made
  std::shared_ptr<const std::vector<std::string>> poll_names_;  // watched names, sorted, distinct
  std::chrono::milliseconds poll_every_{0};                     // the shortest poll_interval
  std::atomic<std::size_t> watched_{0};  // watchers_.size(), read without the lock

  struct controls_watcher {
    std::string name;
    std::function<void()> changed;
  };
  std::mutex controls_mutex_;  // guards the fields below
  std::map<std::uint64_t, controls_watcher> controls_watchers_;
  std::uint64_t next_controls_watch_ = 1;
  bool controls_polling_ = false;   // a round is armed or running
  bool controls_baseline_ = false;  // a round completed: controls_versions_ holds its rows
  std::vector<std::pair<std::string, std::uint64_t>> controls_versions_;  // sorted, last round

  std::mutex batch_mutex_;  // guards the fields below
  std::map<lease_key, lease_group> groups_;
  std::deque<lease_key> ready_;  // groups with urgent requests, in turn
  unsigned drainers_ = 0;        // posted or running
  std::size_t starting_ = 0;     // posted, not yet running
  std::shared_ptr<boost::asio::steady_timer> linger_timer_;
  steady::time_point linger_until_{};  // when the armed linger timer fires; {} when not armed
  std::uint64_t linger_generation_ = 0;
  // name '\n' owner_id of the leases whose last answer named their owner (renewals next), and
  // of the waiters whose last answer named another live owner (not woken since).
  std::unordered_set<std::string> held_, waiting_;

  std::mutex setup_mutex_;  // held while a first connection sets the schema up
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<connection>> idle_;
  unsigned open_ = 0;
  unsigned connect_failures_ = 0;
  steady::time_point next_connect_{};
  bool schema_ready_ = false;
  std::atomic<bool> history_seen_{false}, controls_seen_{false};  // read-only: table found
  // (name, owner_id) whose release failed: their next acquire releases first (new fence).
  std::set<std::pair<std::string, std::string>> unreleased_;
};

}  // namespace baton::backends::sql::detail
