#include "connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <soci/mysql/soci-mysql.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>

#include "baton/mutex/detail/log.hpp"
#include "config.hpp"
#include "pg_listener.hpp"
#include "sqlite_clock.hpp"

namespace baton::backends::sql::detail {
namespace {

enum which {
  acquire_stmt,
  insert_stmt,
  select_owner_stmt,
  select_now_stmt,
  release_stmt,
  write_state_stmt,
  read_state_stmt,
  notify_stmt,
  lock_owner_stmt,
  max_seq_stmt,
  insert_history_stmt,
  prune_history_stmt,
  read_history_stmt,
  read_controls_stmt,
  insert_controls_stmt,
  update_controls_stmt,
  notify_controls_stmt,
  acquire_many_stmt,
  select_many_stmt,
  insert_many_stmt,
  release_many_stmt,
  poll_many_stmt,
  controls_versions_stmt
};

int socket_of(dialect d, soci::session& session) {
  switch (d) {
    case dialect::postgresql:
      return PQsocket(static_cast<soci::postgresql_session_backend*>(session.get_backend())->conn_);
    case dialect::mysql:
      return static_cast<int>(mysql_get_socket(
          static_cast<soci::mysql_session_backend*>(session.get_backend())->conn_));
    case dialect::sqlite:
      break;
  }
  return -1;
}

// The backends are linked in: no dynamic loading of SOCI backends by name.
const soci::backend_factory& factory_of(dialect d) {
  switch (d) {
    case dialect::postgresql:
      return *soci::factory_postgresql();
    case dialect::mysql:
      return *soci::factory_mysql();
    case dialect::sqlite:
      break;
  }
  return *soci::factory_sqlite3();
}

// Runs a single-row SELECT. Stepping past the row ends the statement: SQLite keeps the read
// snapshot of an unfinished statement, and a later BEGIN IMMEDIATE on a stale snapshot fails
// at once with SQLITE_BUSY instead of waiting.
bool select_one(soci::statement& st) {
  if (!st.execute(true)) return false;
  st.fetch();
  return true;
}

backend_time at(long long ms) { return backend_time{std::chrono::milliseconds{ms}}; }

// The SQL functions of sqlite_clock.hpp on one SQLite connection. `mode` (the connection's) says
// what baton_monotonic_ms() returns: the wall clock on an older baton's file read read-only.
void register_clock_functions(soci::session& session, const connection::clock_mode* mode) {
  // SOCI declares SQLite's C API in namespace sqlite_api.
  using namespace sqlite_api;
  auto* db = static_cast<soci::sqlite3_session_backend*>(session.get_backend())->conn_;
  auto monotonic = [](sqlite3_context* context, int, sqlite3_value**) {
    const auto* m = static_cast<const connection::clock_mode*>(sqlite3_user_data(context));
    sqlite3_result_int64(
        context, *m == connection::clock_mode::legacy_wall ? realtime_ms() : monotonic_ms());
  };
  auto wall = [](sqlite3_context* context, int, sqlite3_value**) {
    sqlite3_result_int64(context, realtime_ms());
  };
  // Innocuous (no side effects): usable in the schema's triggers whatever trusted_schema says.
  const int flags = SQLITE_UTF8 | SQLITE_INNOCUOUS;
  for (auto [name, fn] :
       {std::pair{sqlite_monotonic_function, +monotonic}, std::pair{sqlite_wall_function, +wall}}) {
    const std::string n(name);
    if (sqlite3_create_function_v2(db, n.c_str(), 0, flags,
                                   const_cast<connection::clock_mode*>(mode), fn, nullptr, nullptr,
                                   nullptr) != SQLITE_OK)
      throw soci::soci_error("cannot register the SQLite function " + n + ": " +
                             sqlite3_errmsg(db));
  }
}

long long to_ms(const std::string& text) {
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::uint64_t watchdog::start() {
  std::lock_guard lock(mutex_);
  busy_ = true;
  fired_ = false;
  return ++token_;
}

void watchdog::finish() {
  std::lock_guard lock(mutex_);
  busy_ = false;
}

void watchdog::fire(std::uint64_t token) {
  std::lock_guard lock(mutex_);
  // The socket stays open (the driver owns it) until the connection is destroyed, which happens
  // only after finish(): shutting it down here cannot hit a reused descriptor.
  if (!busy_ || token != token_ || fd_ < 0) return;
  ::shutdown(fd_, SHUT_RDWR);
  fired_ = true;
}

bool watchdog::fired() {
  std::lock_guard lock(mutex_);
  return fired_;
}

watchdog_scope::watchdog_scope(boost::asio::io_context& io, std::shared_ptr<watchdog> guard,
                               std::chrono::milliseconds limit)
    : guard_(std::move(guard)) {
  if (!guard_->armed()) return;
  const auto token = guard_->start();
  timer_.emplace(io, limit);
  timer_->async_wait([guard = guard_, token](const boost::system::error_code& ec) {
    if (!ec) guard->fire(token);
  });
}

watchdog_scope::~watchdog_scope() noexcept {
  if (!timer_) return;
  guard_->finish();
  try {
    timer_->cancel();
  } catch (...) {
    // The timer then fires into a finished request, which does nothing.
  }
}

connection::connection(const dialect_sql& sql, const std::string& connect_string)
    : sql_(sql),
      session_(std::make_unique<soci::session>(factory_of(sql.kind), connect_string)),
      watchdog_(std::make_shared<detail::watchdog>(socket_of(sql.kind, *session_))) {}

void connection::configure(const sql_options& options) {
  const auto ms = std::to_string(options.statement_timeout.count());
  switch (sql_.kind) {
    case dialect::sqlite: {
      // Busy timeout in ms (SOCI's connect string takes whole seconds); WAL lets readers and
      // one writer of several processes share the file.
      std::string value;
      *session_ << "PRAGMA busy_timeout = " + ms, soci::into(value);
      register_clock_functions(*session_, &clock_mode_);
      read_only_ = options.read_only;
      if (options.read_only) break;  // the file's journal mode is not ours to change
      use_wal(options.statement_timeout);
      exec("PRAGMA synchronous = NORMAL");
      break;
    }
    case dialect::postgresql:
      quiet_notices(static_cast<soci::postgresql_session_backend*>(session_->get_backend())->conn_);
      exec("SET statement_timeout = " + ms);
      // A client that vanished inside a transaction must not hold the row lock for long.
      exec("SET idle_in_transaction_session_timeout = " +
           std::to_string(2 * options.statement_timeout.count()));
      break;
    case dialect::mysql: {
      exec("SET SESSION time_zone = '+00:00'");
      exec("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
      const auto seconds = std::to_string(ceil_seconds(options.statement_timeout));
      exec("SET SESSION innodb_lock_wait_timeout = " + seconds);
      std::string version;
      *session_ << "SELECT VERSION()", soci::into(version);
      if (version.find("MariaDB") != std::string::npos) {
        exec("SET SESSION max_statement_time = " +
             std::to_string(options.statement_timeout.count() / 1000.0));
        exec("SET SESSION idle_transaction_timeout = " +
             std::to_string(ceil_seconds(2 * options.statement_timeout)));
      }
      break;
    }
  }
}

void connection::use_wal(std::chrono::milliseconds timeout) {
  std::string mode;
  *session_ << "PRAGMA journal_mode", soci::into(mode);
  if (mode == "wal") return;
  // Switching a file to WAL needs it to itself and does not wait for the busy timeout: when
  // several connections (or processes) open a new file at once, retry for a while.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      *session_ << "PRAGMA journal_mode = WAL", soci::into(mode);
      return;
    } catch (const soci::sqlite3_soci_error& e) {
      const int code = e.result() & 0xff;
      if ((code != 5 && code != 6) || std::chrono::steady_clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

connection::~connection() noexcept {
  try {
    acquire_.reset();
    insert_.reset();
    select_owner_.reset();
    select_now_.reset();
    release_.reset();
    write_state_.reset();
    read_state_.reset();
    notify_.reset();
    for (auto* slot :
         {&acquire_many_, &select_many_, &insert_many_, &release_many_, &poll_many_, &lock_owner_,
          &max_seq_, &insert_history_, &prune_history_, &read_history_, &read_controls_,
          &insert_controls_, &update_controls_, &notify_controls_, &controls_versions_})
      slot->reset();
    session_.reset();
  } catch (...) {
    // A broken connection may fail to deallocate its statements; it is closed either way.
  }
}

void connection::exec(const std::string& text) { *session_ << text; }

soci::statement& connection::prepared(std::unique_ptr<soci::statement>& slot, int which) {
  if (slot) return *slot;
  using soci::into;
  using soci::use;
  auto& s = *session_;
  switch (which) {
    case acquire_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.acquire, use(me_, "me1"), use(me_, "me2"), use(me_, "me3"),
           use(ttl_, "ttl"), use(lease_, "lease"), use(name_, "name"), use(me_, "me4")));
      break;
    case insert_stmt:
      slot =
          std::make_unique<soci::statement>((s.prepare << sql_.insert_missing, use(name_, "name")));
      break;
    case select_owner_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.select_owner, into(owner_id_), into(acquired_at_), into(ttl_at_),
           into(transition_at_), into(fence_), into(now_), use(name_, "name")));
      break;
    case select_now_stmt:
      slot = std::make_unique<soci::statement>((s.prepare << sql_.select_now, into(now_)));
      break;
    case release_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.release, use(name_, "name"), use(me_, "me")));
      break;
    case write_state_stmt:
      slot = std::make_unique<soci::statement>((s.prepare << sql_.write_state, use(state_, "state"),
                                                use(name_, "name"), use(me_, "me"),
                                                use(fence_in_, "fence")));
      break;
    case notify_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.notify, use(sql_.channel, "channel"), use(name_, "name")));
      break;
    case read_state_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.read_state, into(state_), use(name_, "name")));
      break;
    case lock_owner_stmt:
      slot = std::make_unique<soci::statement>((s.prepare << sql_.lock_owner, into(locked_fence_),
                                                use(name_, "name"), use(me_, "me"),
                                                use(fence_in_, "fence")));
      break;
    case max_seq_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.max_seq, into(seq_), use(name_, "name")));
      break;
    case insert_history_stmt:
      slot = std::make_unique<soci::statement>((s.prepare << sql_.insert_history,
                                                use(name_, "name"), use(seq_, "seq"),
                                                use(fence_in_, "fence"), use(bytes_, "bytes")));
      break;
    case prune_history_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.prune_history, use(name_, "name"), use(cut_, "cut")));
      break;
    case read_history_stmt:
      slot = std::make_unique<soci::statement>((s.prepare << sql_.read_history, into(seq_),
                                                into(fence_), into(bytes_), use(name_, "name"),
                                                use(limit_, "limit")));
      break;
    case read_controls_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.read_controls, into(version_), into(bytes_), use(name_, "name")));
      break;
    case controls_versions_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.controls_versions, into(row_name_), into(version_)));
      break;
    case insert_controls_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.insert_controls, use(name_, "name"), use(bytes_, "bytes")));
      break;
    case update_controls_stmt:
      slot = std::make_unique<soci::statement>((s.prepare << sql_.update_controls,
                                                use(bytes_, "bytes"), use(name_, "name"),
                                                use(expected_, "expected")));
      break;
    case acquire_many_stmt:
      if (sql_.kind == dialect::postgresql)
        slot = std::make_unique<soci::statement>(
            (s.prepare << sql_.acquire_many, into(row_name_), into(owner_id_), into(acquired_at_),
             into(ttl_at_), into(transition_at_), into(fence_), into(now_), use(ttl_, "ttl"),
             use(lease_, "lease"), use(names_, "names"), use(mes_, "mes")));
      else
        slot = std::make_unique<soci::statement>(
            (s.prepare << sql_.acquire_many, into(row_name_), into(owner_id_), into(acquired_at_),
             into(ttl_at_), into(transition_at_), into(fence_), into(now_), use(ttl_, "ttl"),
             use(lease_, "lease"), use(names_, "pairs")));
      break;
    case select_many_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.select_many, into(row_name_), into(owner_id_), into(acquired_at_),
           into(ttl_at_), into(transition_at_), into(fence_), into(now_), use(names_, "names")));
      break;
    case insert_many_stmt:
      slot =
          std::make_unique<soci::statement>((s.prepare << sql_.insert_many, use(names_, "names")));
      break;
    case poll_many_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.poll_many, into(row_name_), use(names_, "names")));
      break;
    case release_many_stmt:
      if (sql_.kind == dialect::postgresql)
        slot = std::make_unique<soci::statement>((s.prepare << sql_.release_many, into(count_),
                                                  use(names_, "names"), use(mes_, "mes"),
                                                  use(sql_.channel, "channel")));
      else
        slot = std::make_unique<soci::statement>(
            (s.prepare << sql_.release_many, use(names_, "pairs")));
      break;
    case notify_controls_stmt:
      slot = std::make_unique<soci::statement>(
          (s.prepare << sql_.notify, use(sql_.channel, "channel"), use(payload_, "name")));
      break;
  }
  return *slot;
}

void connection::create_table() {
  if (sql_.kind == dialect::postgresql) {
    // Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL (pg_type unique violation):
    // serialize creators with a transaction-scoped advisory lock.
    exec("BEGIN");
    long long locked = 0;
    std::string key = "baton:" + sql_.table;
    *session_ << "SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtext(:k))) AS l",
        soci::use(key, "k"), soci::into(locked);
    for (const auto& statement : sql_.schema) exec(statement);
    exec("COMMIT");
    return;
  }
  for (const auto& statement : sql_.schema) exec(statement);
}

void connection::check_table() {
  std::string name;
  checking_ = sql_.table;
  *session_ << sql_.check_table, soci::into(name);
  checking_ = sql_.history_table;
  *session_ << sql_.check_history, soci::into(name);
  checking_ = sql_.controls_table;
  *session_ << sql_.check_controls, soci::into(name);
  if (!sql_.check_meta.empty()) {
    checking_ = sql_.meta_table;
    *session_ << sql_.check_meta, soci::into(name);
  }
  checking_.clear();
}

std::string connection::read_meta(const std::string& key) {
  meta_key_ = key;
  meta_value_.clear();
  soci::indicator ind = soci::i_ok;
  *session_ << sql_.read_meta, soci::use(meta_key_, "key"), soci::into(meta_value_, ind);
  return ind == soci::i_ok && session_->got_data() ? meta_value_ : std::string();
}

void connection::write_meta(const std::string& key, const std::string& value) {
  meta_key_ = key;
  meta_value_ = value;
  *session_ << sql_.write_meta, soci::use(meta_key_, "key"), soci::use(meta_value_, "value");
}

void connection::prepare_clock(bool read_only) {
  if (sql_.kind != dialect::sqlite) return;
  constexpr std::string_view monotonic = "monotonic";
  const std::string boot = boot_id();
  if (read_only) {
    // Read the times as they are; change nothing.
    clock_mode_ = clock_mode::monotonic;
    boot_delta_ = 0;
    if (!table_exists(sql_.find_meta_t) || read_meta("clock") != monotonic) {
      clock_mode_ = clock_mode::legacy_wall;
    } else if (read_meta("boot_id") != boot) {
      clock_mode_ = clock_mode::foreign_boot;
      boot_delta_ = to_ms(read_meta("wall_minus_mono")) - wall_minus_monotonic_ms();
    }
    return;
  }
  if (boot.empty())
    throw reply_error(
        "cannot read /proc/sys/kernel/random/boot_id: SQLite lease times are on the host's "
        "monotonic clock and need the boot they belong to");
  if (read_meta("clock") == monotonic && read_meta("boot_id") == boot) return;

  // Once per file and boot; the first connection to get the write lock does it, the others
  // find it done.
  exec("BEGIN IMMEDIATE");
  try {
    const auto clock = read_meta("clock");
    const auto stored_boot = read_meta("boot_id");
    if (clock != monotonic || stored_boot != boot) {
      const long long offset = wall_minus_monotonic_ms();
      const long long now = monotonic_ms();
      const bool legacy = clock != monotonic;
      const long long delta = legacy ? 0 : to_ms(read_meta("wall_minus_mono")) - offset;
      struct row {
        std::string name;
        long long acquired_at, ttl_at, transition_at;
      };
      std::vector<row> rows;
      {
        soci::rowset<soci::row> all = (session_->prepare << "SELECT name, acquired_at, ttl_at, "
                                                            "transition_at FROM " +
                                                                sql_.table);
        for (const auto& r : all)
          rows.push_back({r.get<std::string>(0), r.get<long long>(1), r.get<long long>(2),
                          r.get<long long>(3)});
      }
      for (auto& r : rows) {
        if (legacy) {
          r.acquired_at = legacy_to_monotonic_ms(r.acquired_at, offset);
          r.ttl_at = legacy_to_monotonic_ms(r.ttl_at, offset);
          r.transition_at = legacy_to_monotonic_ms(r.transition_at, offset);
        } else {
          r.acquired_at = rebased_ms(r.acquired_at, delta, now, false);
          r.ttl_at = rebased_ms(r.ttl_at, delta, now, true);
          r.transition_at = rebased_ms(r.transition_at, delta, now, true);
        }
        *session_ << "UPDATE " + sql_.table +
                         " SET acquired_at = :a, ttl_at = :b, transition_at = :c WHERE name = :n",
            soci::use(r.acquired_at, "a"), soci::use(r.ttl_at, "b"),
            soci::use(r.transition_at, "c"), soci::use(r.name, "n");
      }
      write_meta("clock", std::string(monotonic));
      write_meta("boot_id", boot);
      write_meta("wall_minus_mono", std::to_string(offset));
      if (legacy && !rows.empty())
        baton::detail::log({.event = "sqlite.clock_converted"})
            .warn(
                "sqlite: table '{}': converted the lease times of {} mutexes from wall-clock "
                "to monotonic time (the file was used by an older baton, which can no longer "
                "write it)",
                sql_.table, rows.size());
      else if (!legacy)
        baton::detail::log({.event = "sqlite.boot_changed"})
            .info(
                "sqlite: table '{}': lease times of {} mutexes were from another boot; they "
                "count as past",
                sql_.table, rows.size());
    }
    exec("COMMIT");
  } catch (...) {
    try {
      exec("ROLLBACK");
    } catch (...) {
      // The connection is discarded anyway.
    }
    throw;
  }
}

bool connection::table_exists() { return table_exists(sql_.find_table_t); }

bool connection::table_exists(const std::string& find_t) {
  std::string found;
  std::string table = find_t;
  *session_ << sql_.find_table, soci::use(table, "t"), soci::into(found);
  return found == "yes";
}

bool connection::append_history(const std::string& name, const std::string& me, std::uint64_t fence,
                                const std::string& bytes, std::size_t keep) {
  name_ = name;
  me_ = me;
  fence_in_ = static_cast<long long>(fence);
  auto& lock = prepared(lock_owner_, lock_owner_stmt);
  auto& max_seq = prepared(max_seq_, max_seq_stmt);
  auto& insert = prepared(insert_history_, insert_history_stmt);
  auto& prune = prepared(prune_history_, prune_history_stmt);
  // The owner row stays locked (SQLite: the whole file) until COMMIT, so no takeover can come
  // between the check and the insert, and appends of one mutex get their seq one at a time.
  exec(sql_.begin);
  if (!select_one(lock)) {
    exec(sql_.rollback);
    return false;
  }
  seq_ = 0;
  select_one(max_seq);
  // The newest entry is never pruned (keep >= 1), so the highest seq only grows: never reused.
  ++seq_;
  bytes_ = bytes;
  insert.execute(true);
  cut_ = seq_ - static_cast<long long>(keep);
  if (cut_ > 0) prune.execute(true);
  exec(sql_.commit);
  bytes_.clear();
  return true;
}

std::vector<history_entry> connection::read_history(const std::string& name, std::size_t limit) {
  std::vector<history_entry> out;
  if (limit == 0) return out;
  name_ = name;
  limit_ = static_cast<long long>(std::min(limit, max_history_keep));
  auto& select = prepared(read_history_, read_history_stmt);
  select.execute(false);
  while (select.fetch())
    out.push_back({static_cast<std::uint64_t>(seq_), static_cast<std::uint64_t>(fence_), bytes_});
  bytes_.clear();
  return out;
}

controls_record connection::read_controls(const std::string& name) {
  name_ = name;
  controls_record out;
  if (select_one(prepared(read_controls_, read_controls_stmt))) {
    out.bytes = std::move(bytes_);
    out.version = static_cast<std::uint64_t>(version_);
  }
  bytes_.clear();
  return out;
}

bool connection::write_controls(const std::string& name, std::uint64_t expected,
                                const std::string& bytes) {
  name_ = name;
  bytes_ = bytes;
  expected_ = static_cast<long long>(expected);
  // The first write inserts (a row already there: no row affected); later ones compare the
  // version. Each is one statement, atomic on its own; PostgreSQL wraps it with its NOTIFY so
  // that listeners hear of the change when it is committed, and only then.
  auto& write = expected == 0 ? prepared(insert_controls_, insert_controls_stmt)
                              : prepared(update_controls_, update_controls_stmt);
  const bool notify = !sql_.notify.empty();
  if (notify) exec(sql_.begin);
  write.execute(true);
  const bool written = write.get_affected_rows() == 1;
  if (notify) {
    if (written) {
      payload_ = dialect_sql::controls_payload(name);
      select_one(prepared(notify_controls_, notify_controls_stmt));
    }
    exec(written ? sql_.commit : sql_.rollback);
  }
  bytes_.clear();
  return written;
}

lease_grant connection::grant() const {
  lease_grant g;
  g.owner.owner_id = owner_id_;
  g.owner.acquired_at = at(acquired_at_);
  g.owner.ttl_at = at(ttl_at_);
  g.owner.transition_at = at(transition_at_);
  g.owner.fence = static_cast<std::uint64_t>(fence_);
  g.now = at(now_);
  if (sql_.kind == dialect::sqlite && clock_mode_ != clock_mode::legacy_wall) {
    // Monotonic times shown on the host's wall clock (raw): differences, which is all the lease
    // arithmetic uses, stay exact; lease_grant::now is then the kernel's wall clock, against
    // which a process with a skewed clock measures its offset.
    const long long offset = display_offset_ms();
    auto shown = [&](long long t, bool deadline) {
      if (clock_mode_ == clock_mode::foreign_boot) t = rebased_ms(t, boot_delta_, now_, deadline);
      return at(to_wall_ms(t, offset));
    };
    g.owner.acquired_at = shown(acquired_at_, false);
    g.owner.ttl_at = shown(ttl_at_, true);
    g.owner.transition_at = shown(transition_at_, true);
    g.now = at(now_ + offset);
  }
  return g;
}

lease_grant connection::acquire(const std::string& name, const std::string& me,
                                std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                                bool release_first) {
  name_ = name;
  me_ = me;
  ttl_ = ttl.count();
  lease_ = (ttl + transition).count();
  auto& update = prepared(acquire_, acquire_stmt);
  auto& select = prepared(select_owner_, select_owner_stmt);
  exec(sql_.begin);
  if (release_first) prepared(release_, release_stmt).execute(true);
  long long won = 0;
  bool found = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    update.execute(true);
    won = update.get_affected_rows();
    found = select_one(select);
    if (!found) {
      // First use of this mutex: a free row, inserted on its own (a duplicate-key check inside
      // the transaction keeps a shared lock, and two such contenders deadlock on MySQL), then
      // the conditional update again in a new transaction.
      exec(sql_.commit);
      prepared(insert_, insert_stmt).execute(true);
      exec(sql_.begin);
      continue;
    }
    // Lost, yet the row is free: it was inserted or released between the update and the read
    // (READ COMMITTED sees both). Contend again rather than report a free mutex.
    if (won != 0 || transition_at_ >= now_) break;
  }
  exec(sql_.commit);
  if (!found) throw reply_error("the row of mutex '" + name + "' is missing after insert");
  auto g = grant();
  if ((won == 1) != g.owner.is(me))
    throw reply_error("acquire of '" + name + "' changed " + std::to_string(won) +
                      " rows but the owner is '" + g.owner.owner_id + "'");
  return g;
}

template <class Row>
void connection::select_many(const std::vector<std::string>& names, Row row) {
  if (names.empty()) return;
  using soci::into;
  if (sql_.kind == dialect::mysql) {
    // The client sends the text anyway (no server-side statement): the names go in it.
    soci::statement st =
        (session_->prepare << with_names(sql_.select_many, names), into(row_name_), into(owner_id_),
         into(acquired_at_), into(ttl_at_), into(transition_at_), into(fence_), into(now_));
    st.execute(false);
    while (st.fetch()) row();
    return;
  }
  names_ = names_param(sql_.kind, names);
  auto& st = prepared(select_many_, select_many_stmt);
  st.execute(false);
  while (st.fetch()) row();
}

void connection::bind_pairs(const std::vector<std::string>& names,
                            const std::vector<std::string>& mes) {
  if (sql_.kind == dialect::postgresql) {
    names_ = names_param(sql_.kind, names);
    mes_ = text_array(mes);
  } else {
    names_ = json_pairs(names, mes);
  }
}

std::vector<connection::batch_grant> connection::acquire_many(
    const std::vector<std::string>& names, const std::vector<std::string>& mes,
    std::chrono::milliseconds ttl, std::chrono::milliseconds transition) {
  using soci::use;
  std::vector<batch_grant> out(names.size());
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) index.emplace(names[i], i);
  ttl_ = ttl.count();
  lease_ = (ttl + transition).count();
  std::vector<std::string> pending = names;
  auto owners_of = [&](const std::vector<std::string>& some) {
    std::vector<std::string> out;
    out.reserve(some.size());
    for (const auto& n : some) out.push_back(mes[index.at(n)]);
    return out;
  };
  for (int attempt = 0; attempt < 3 && !pending.empty(); ++attempt) {
    const bool last = attempt == 2;
    // The conditional UPDATE on every pending row, one statement.
    std::unordered_set<std::string> taken;
    const auto pending_mes = owners_of(pending);
    if (sql_.returning) {
      bind_pairs(pending, pending_mes);
      auto& update = prepared(acquire_many_, acquire_many_stmt);
      update.execute(false);
      while (update.fetch()) {
        auto it = index.find(row_name_);
        if (it == index.end()) continue;
        out[it->second] = batch_grant{true, grant(), {}};
        taken.insert(row_name_);
      }
    } else {
      soci::statement update =
          (session_->prepare << with_names(sql_.acquire_many, pending, pending_mes),
           use(ttl_, "ttl"), use(lease_, "lease"));
      update.execute(true);
    }
    std::vector<std::string> rest;
    for (const auto& n : pending)
      if (taken.count(n) == 0) rest.push_back(n);
    // The owner records of the rest (MySQL: of all; those that name `me` are the ones the
    // UPDATE took or renewed: nobody else writes `me`, and the UPDATE matches every row `me`
    // owns).
    std::vector<std::string> again;
    std::unordered_set<std::string> seen;
    select_many(rest, [&] {
      auto it = index.find(row_name_);
      if (it == index.end()) return;
      seen.insert(row_name_);
      auto& r = out[it->second];
      const auto& me = mes[it->second];
      r = batch_grant{true, grant(), {}};
      if (r.grant.owner.is(me)) {
        if (sql_.returning) {
          // Not returned by the UPDATE, yet ours: the row changed under us.
          r.ok = false;
          r.error = "acquire of '" + row_name_ + "' changed no row but the owner is '" + me + "'";
        }
      } else if (transition_at_ < now_ && !last) {
        // Lost, yet the row is free: released between the UPDATE and the read. Contend again
        // rather than report a free mutex.
        again.push_back(row_name_);
      }
    });
    std::vector<std::string> missing;
    for (const auto& n : rest)
      if (seen.count(n) == 0) missing.push_back(n);
    if (!missing.empty()) {
      // First use of these mutexes: free rows, inserted on their own, then the UPDATE again.
      for (const auto& n : missing)
        out[index.at(n)] = batch_grant{false, {}, "the row of mutex '" + n + "' is missing"};
      if (sql_.kind == dialect::mysql) {
        *session_ << with_names(sql_.insert_many, missing);
      } else {
        names_ = names_param(sql_.kind, missing);
        prepared(insert_many_, insert_many_stmt).execute(true);
      }
      again.insert(again.end(), missing.begin(), missing.end());
    }
    std::sort(again.begin(), again.end());
    pending = std::move(again);
  }
  names_.clear();
  mes_.clear();
  return out;
}

long long connection::release_many(const std::vector<std::string>& names,
                                   const std::vector<std::string>& mes) {
  if (names.empty()) return 0;
  if (sql_.kind == dialect::mysql) {
    soci::statement update = (session_->prepare << with_names(sql_.release_many, names, mes));
    update.execute(true);
    return update.get_affected_rows();
  }
  bind_pairs(names, mes);
  auto& update = prepared(release_many_, release_many_stmt);
  count_ = 0;
  if (sql_.kind == dialect::postgresql) {
    select_one(update);
    names_.clear();
    mes_.clear();
    return count_;
  }
  update.execute(true);
  names_.clear();
  return update.get_affected_rows();
}

bool connection::release(const std::string& name, const std::string& me) {
  name_ = name;
  me_ = me;
  auto& update = prepared(release_, release_stmt);
  update.execute(true);
  const bool released = update.get_affected_rows() > 0;
  if (released && !sql_.notify.empty()) select_one(prepared(notify_, notify_stmt));
  return released;
}

lease_grant connection::read(const std::string& name) {
  name_ = name;
  // Read-only SQLite: a writer may have converted the file (or a reboot happened) since.
  if (read_only_ && sql_.kind == dialect::sqlite) prepare_clock(true);
  if (select_one(prepared(select_owner_, select_owner_stmt))) return grant();
  select_one(prepared(select_now_, select_now_stmt));
  lease_grant g;
  g.now = at(now_);
  return g;
}

std::vector<std::string> connection::free_among(const std::vector<std::string>& names) {
  if (names.empty()) return {};
  std::vector<std::string> out;
  if (sql_.kind != dialect::mysql) {
    // One prepared statement that answers with the free names only (usually none).
    names_ = names_param(sql_.kind, names);
    auto& poll = prepared(poll_many_, poll_many_stmt);
    poll.execute(false);
    while (poll.fetch()) out.push_back(row_name_);
    names_.clear();
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<std::string> busy;
  {
    soci::rowset<std::string> rows = (session_->prepare << with_names(sql_.poll_many, names));
    for (const auto& n : rows) busy.push_back(n);
  }
  std::sort(busy.begin(), busy.end());
  for (const auto& n : names)
    if (!std::binary_search(busy.begin(), busy.end(), n)) out.push_back(n);
  return out;
}

std::vector<std::pair<std::string, std::uint64_t>> connection::controls_versions() {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  auto& select = prepared(controls_versions_, controls_versions_stmt);
  select.execute(false);
  while (select.fetch()) out.emplace_back(row_name_, static_cast<std::uint64_t>(version_));
  std::sort(out.begin(), out.end());
  return out;
}

std::string connection::read_state(const std::string& name) {
  name_ = name;
  state_.clear();
  if (!select_one(prepared(read_state_, read_state_stmt))) return {};
  return state_;
}

bool connection::write_state(const std::string& name, const std::string& me, std::uint64_t fence,
                             const std::string& hex) {
  name_ = name;
  me_ = me;
  fence_in_ = static_cast<long long>(fence);
  state_ = hex;
  auto& update = prepared(write_state_, write_state_stmt);
  update.execute(true);
  return update.get_affected_rows() > 0;
}

}  // namespace baton::backends::sql::detail
