#pragma once
// One database connection: a SOCI session, its per-connection setup and prepared statements.
// Blocking; used by one blocking-pool thread at a time. Every method may throw (soci_error and
// friends); the caller then discards the connection.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <string>

#include "baton/backends/sql/sql_backend.hpp"
#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/records.hpp"
#include "dialect.hpp"
#include "errors.hpp"

namespace soci {
class session;
class statement;
}  // namespace soci

namespace baton::backends::sql::detail {

/// Shuts a connection's socket down when a request outlives its deadline, so a server that
/// stopped answering cannot block a pool thread forever. Shared with the io timer.
class watchdog {
 public:
  explicit watchdog(int fd) : fd_(fd) {}
  bool armed() const noexcept { return fd_ >= 0; }
  /// A request starts; returns its token.
  std::uint64_t start();
  /// The request is over: fire() no longer acts.
  void finish();
  /// Deadline of request `token` passed: shut the socket down if it is still running.
  void fire(std::uint64_t token);
  bool fired();

 private:
  std::mutex mutex_;
  int fd_;
  std::uint64_t token_ = 0;
  bool busy_ = false;
  bool fired_ = false;
};

/// Arms a watchdog for one request: fires after `limit` unless destroyed first.
class watchdog_scope {
 public:
  watchdog_scope(boost::asio::io_context& io, std::shared_ptr<watchdog> guard,
                 std::chrono::milliseconds limit);
  watchdog_scope(const watchdog_scope&) = delete;
  watchdog_scope& operator=(const watchdog_scope&) = delete;
  ~watchdog_scope() noexcept;

 private:
  std::shared_ptr<watchdog> guard_;
  std::optional<boost::asio::steady_timer> timer_;
};

class connection {
 public:
  /// Connects (bounded by the connect timeout in `connect_string`). Throws.
  connection(const dialect_sql& sql, const std::string& connect_string);
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() noexcept;

  /// Sets the session up: timeouts, SQLite WAL and clock functions, MySQL UTC and READ
  /// COMMITTED. Throws.
  void configure(const sql_options& options);
  /// SQLite: makes the file's lease times this boot's monotonic times, once per file and boot
  /// (BEGIN IMMEDIATE): converts the wall-clock times of an older baton's file, moves the times
  /// of another boot to the past, and records clock and boot in the meta table. Read-only: only
  /// learns how to read the times (an older baton's wall-clock times, another boot's). Other
  /// dialects: nothing. Throws.
  void prepare_clock(bool read_only);
  /// Runs the schema (CREATE TABLE IF NOT EXISTS), serialized between processes on PostgreSQL.
  void create_table();
  /// Throws when one of the tables (owner records, history, controls) is missing or unusable;
  /// checking() then names it.
  void check_table();
  /// The table check_table() was looking at when it threw.
  const std::string& checking() const noexcept { return checking_; }
  /// Whether a table exists (one read; creates nothing): the owner records table, or the one
  /// `find_t` names (dialect_sql::find_history_t, find_controls_t). Throws.
  bool table_exists();
  bool table_exists(const std::string& find_t);

  /// In one transaction: if `me` owns `name` with `fence` (its row locked), appends `bytes` with
  /// the next seq and deletes all but the newest `keep` entries; false (nothing written) if not.
  bool append_history(const std::string& name, const std::string& me, std::uint64_t fence,
                      const std::string& bytes, std::size_t keep);
  /// The newest `limit` history entries of `name`, newest first.
  std::vector<history_entry> read_history(const std::string& name, std::size_t limit);
  /// The controls record of `name` ({"", 0} when never written).
  controls_record read_controls(const std::string& name);
  /// The name and version of every controls row, sorted by name (the controls watch's poll).
  std::vector<std::pair<std::string, std::uint64_t>> controls_versions();
  /// Writes the controls of `name` if their version is `expected` (0: no row yet); true if it
  /// did. PostgreSQL: NOTIFYs the change in the same transaction.
  bool write_controls(const std::string& name, std::uint64_t expected, const std::string& bytes);

  /// The conditional UPDATE (inserting a free row first if missing) and the owner record with the
  /// database's clock, in one transaction. `release_first`: `me` released the mutex but the
  /// release did not reach the database; release it in the same transaction, so this is a new
  /// ownership with a new fence rather than a renewal.
  lease_grant acquire(const std::string& name, const std::string& me, std::chrono::milliseconds ttl,
                      std::chrono::milliseconds transition, bool release_first = false);
  /// One name's answer in a batch: its owner record, or why there is none (that name alone
  /// failed).
  struct batch_grant {
    bool ok = false;
    lease_grant grant;
    std::string error;
  };
  /// acquire() for every name of `names` (distinct, valid) by its own owner mes[i], in autocommit,
  /// the fewest round trips the dialect allows: PostgreSQL and SQLite one UPDATE ... RETURNING, and
  /// a SELECT of the rows it did not take or renew (none when every lease was renewed); MySQL the
  /// UPDATE and a SELECT of all. A row found free after the UPDATE missed it (released meanwhile)
  /// is asked again, a missing row is inserted first, as acquire() does. Answers in the order of
  /// `names`.
  std::vector<batch_grant> acquire_many(const std::vector<std::string>& names,
                                        const std::vector<std::string>& mes,
                                        std::chrono::milliseconds ttl,
                                        std::chrono::milliseconds transition);
  /// release() for every name of `names` (distinct, valid) by mes[i], in one statement (PostgreSQL:
  /// with the NOTIFYs); how many it freed (MySQL, SQLite: affected rows).
  long long release_many(const std::vector<std::string>& names,
                         const std::vector<std::string>& mes);
  /// Frees the mutex if `me` owns it (PostgreSQL: and NOTIFYs the waiters); true if it did.
  bool release(const std::string& name, const std::string& me);
  /// The owner record (empty when the row is missing) and the database's clock.
  lease_grant read(const std::string& name);
  /// The stored (hex) state; empty when the row is missing.
  std::string read_state(const std::string& name);
  /// Writes `hex` if `me` owns the mutex with `fence` and a live lease; true if it did.
  bool write_state(const std::string& name, const std::string& me, std::uint64_t fence,
                   const std::string& hex);

  /// Of `names` (valid mutex names: A-Z a-z 0-9 . _ -), those free now: released, lapsed
  /// (transition_at passed) or without a row, sorted. One SELECT (PostgreSQL, SQLite: a prepared
  /// one that answers with the free names only).
  std::vector<std::string> free_among(const std::vector<std::string>& names);

  const std::shared_ptr<detail::watchdog>& guard() const noexcept { return watchdog_; }

 private:
  void exec(const std::string& text);
  void use_wal(std::chrono::milliseconds timeout);
  soci::statement& prepared(std::unique_ptr<soci::statement>& slot, int which);
  lease_grant grant() const;
  /// SQLite: the meta value of `key`, or "" when missing.
  std::string read_meta(const std::string& key);
  void write_meta(const std::string& key, const std::string& value);

 public:
  /// How a SQLite connection reads the lease times of its file.
  enum class clock_mode {
    monotonic,     ///< this boot's monotonic ms (the normal case; other dialects: unused)
    legacy_wall,   ///< read-only on an older baton's file: wall-clock ms
    foreign_boot,  ///< read-only, times of another boot: rebased by boot_delta_, deadlines past
  };

 private:
  clock_mode clock_mode_ = clock_mode::monotonic;
  long long boot_delta_ = 0;  // foreign_boot: the old boot's wall - mono minus this one's
  bool read_only_ = false;

  const dialect_sql& sql_;
  std::unique_ptr<soci::session> session_;
  std::shared_ptr<detail::watchdog> watchdog_;

  // Variables the prepared statements are bound to.
  std::string name_, me_, state_;
  long long ttl_ = 0, lease_ = 0, fence_in_ = 0;
  std::string owner_id_;
  long long acquired_at_ = 0, ttl_at_ = 0, transition_at_ = 0, fence_ = 0, now_ = 0;

  std::unique_ptr<soci::statement> acquire_, insert_, select_owner_, select_now_, release_,
      write_state_, read_state_, notify_;

  // Batches: the names parameter, the name of a row read, a count.
  std::string names_, mes_, row_name_;
  long long count_ = 0;
  std::unique_ptr<soci::statement> acquire_many_, select_many_, insert_many_, release_many_,
      poll_many_;
  /// Reads the owner records of `names`, calling `row` with each (row_name_ and the owner
  /// fields set).
  /// Binds the (name, owner) pairs of a batch statement (names_, mes_).
  void bind_pairs(const std::vector<std::string>& names, const std::vector<std::string>& mes);
  template <class Row>
  void select_many(const std::vector<std::string>& names, Row row);

  // History and controls.
  std::string bytes_, payload_, checking_, meta_key_, meta_value_;
  long long seq_ = 0, cut_ = 0, limit_ = 0, version_ = 0, expected_ = 0, locked_fence_ = 0;
  std::unique_ptr<soci::statement> lock_owner_, max_seq_, insert_history_, prune_history_,
      read_history_, read_controls_, insert_controls_, update_controls_, notify_controls_,
      controls_versions_;
};

}  // namespace baton::backends::sql::detail
