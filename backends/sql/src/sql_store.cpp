#include "sql_store.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <limits>
#include <unordered_set>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/stats.hpp"
#include "config.hpp"
#include "connection.hpp"
#include "conninfo.hpp"
#include "errors.hpp"
#include "pg_listener.hpp"

namespace baton::backends::sql::detail {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t max_owner_id_length = 255;
constexpr milliseconds first_backoff{100};
constexpr milliseconds max_backoff{2000};

// A request outlives statement_timeout by this much before its socket is shut down, so that the
// server's own timeout normally answers first.
constexpr milliseconds watchdog_slack{500};
constexpr milliseconds min_request_time{250};

// Mutexes per acquire or release statement.
constexpr std::size_t max_lease_batch = 500;
// How long a request that nobody awaits in a hurry waits for others to share its statement.
constexpr milliseconds max_linger{100};

std::string lease_key_of(const std::string& name, const std::string& owner_id) {
  std::string key;
  key.reserve(name.size() + 1 + owner_id.size());
  key += name;
  key += '\n';
  key += owner_id;
  return key;
}

template <class Call>
void call_safely(const std::string& label, const char* operation, const std::string& name,
                 Call&& call) noexcept {
  try {
    call();
  } catch (const std::exception& e) {
    baton::detail::log().error("{}: {} '{}': completion handler threw: {}", label, operation, name,
                               e.what());
  } catch (...) {
    baton::detail::log().error("{}: {} '{}': completion handler threw", label, operation, name);
  }
}

// Watched mutexes per poll statement (PostgreSQL, SQLite: one array parameter, answered with
// the free ones only; MySQL: the size of its IN list).
constexpr std::size_t max_poll_batch = 2000;
// From this many waiters in one store on, one batched SELECT per round finds the free mutexes
// for all of them; below it each waiter polls on its own (one round trip from a free mutex to
// the acquire, which matters when few contenders churn through a mutex).
constexpr std::size_t batch_poll_threshold = 16;

milliseconds backoff(unsigned failures) {
  milliseconds delay = first_backoff;
  for (unsigned i = 1; i < failures && delay < max_backoff; ++i) delay *= 2;
  return std::min(delay, max_backoff);
}

std::error_code check_owner_id(const std::string& owner_id) {
  if (owner_id.empty() || owner_id.size() > max_owner_id_length)
    return make_error_code(errc::invalid_argument);
  return {};
}

void log_refused(const std::string& label, const char* operation, const std::string& name,
                 const std::string& why) {
  baton::detail::log().error("{}: {} '{}': {}", label, operation, name, why);
}

}  // namespace

bool storable_text(std::string_view bytes) noexcept {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= bytes.size()) return false;  // truncated sequence
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t min_of[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_of[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

std::string to_hex(const std::string& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  auto value = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw reply_error("stored state is not hex-encoded");
  };
  if (hex.size() % 2 != 0) throw reply_error("stored state has an odd number of hex digits");
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2)
    out += static_cast<char>(value(hex[i]) * 16 + value(hex[i + 1]));
  return out;
}

sql_store::sql_store(sql_options options, runtime& rt)
    : options_(std::move(options)),
      runtime_(rt),
      sql_(make_dialect_sql(options_.kind, options_.table)),
      connect_string_(soci_connect_string(options_)),
      label_(to_string(options_.kind)),
      secrets_(options_.kind == dialect::sqlite
                   ? std::vector<std::string>{}
                   : mask_connection(options_.kind, options_.connection).secrets) {
  if (options_.kind == dialect::postgresql)
    listener_ = std::make_shared<pg_listener>(rt, connect_string_, sql_.channel, secrets_);
  statement_connections_ = std::max(1u, options_.pool_size - (listener_ && options_.pool_size > 1));
}

sql_store::~sql_store() {
  if (listener_) listener_->stop();
}

std::uint64_t sql_store::watch(const std::string& name, const std::string& owner_id,
                               milliseconds poll_interval, std::function<void()> wake) {
  watcher w{name, owner_id, wake, poll_interval, 0};
  if (listener_)
    w.listener_handle =
        listener_->watch(name, [weak = weak_from_this(), key = lease_key_of(name, owner_id), wake] {
          if (auto self = weak.lock()) self->woken(key);
          wake();
        });
  bool start = false;
  std::uint64_t handle = 0;
  {
    std::lock_guard lock(watch_mutex_);
    handle = next_watch_++;
    watchers_.emplace(handle, std::move(w));
    poll_dirty_ = true;
    watched_.store(watchers_.size(), std::memory_order_relaxed);
    start = watchers_.size() >= batch_poll_threshold && !std::exchange(polling_, true);
  }
  if (start) schedule_poll();
  return handle;
}

void sql_store::unwatch(std::uint64_t handle) noexcept {
  std::uint64_t listener_handle = 0;
  {
    std::lock_guard lock(watch_mutex_);
    auto it = watchers_.find(handle);
    if (it == watchers_.end()) return;
    listener_handle = it->second.listener_handle;
    watchers_.erase(it);
    poll_dirty_ = true;
    watched_.store(watchers_.size(), std::memory_order_relaxed);
  }
  if (listener_ && listener_handle != 0) listener_->unwatch(listener_handle);
}

wakeup_coverage sql_store::wakeups() const noexcept {
  return watched_.load(std::memory_order_relaxed) >= batch_poll_threshold
             ? wakeup_coverage::release_and_expiry
             : wakeup_coverage::none;
}

void sql_store::refresh_poll_list() {
  if (!poll_dirty_) return;
  poll_dirty_ = false;
  auto names = std::make_shared<std::vector<std::string>>();
  names->reserve(watchers_.size());
  poll_every_ = options_.poll_interval;
  if (!watchers_.empty()) poll_every_ = watchers_.begin()->second.poll_interval;
  for (const auto& [handle, w] : watchers_) {
    names->push_back(w.name);
    poll_every_ = std::min(poll_every_, w.poll_interval);
  }
  std::sort(names->begin(), names->end());
  names->erase(std::unique(names->begin(), names->end()), names->end());
  poll_names_ = std::move(names);
}

void sql_store::schedule_poll() {
  // The next round comes after the shortest poll_interval among the waiters (a waiter that
  // joins with a shorter one is served at that rate from the round after).
  milliseconds interval = options_.poll_interval;
  {
    std::lock_guard lock(watch_mutex_);
    refresh_poll_list();
    interval = poll_every_;
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(runtime_.io(), interval);
  timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self) return;
    if (ec) {
      std::lock_guard lock(self->watch_mutex_);
      self->polling_ = false;
      return;
    }
    self->poll_round();
  });
}

void sql_store::poll_round() {
  std::shared_ptr<const std::vector<std::string>> names;
  {
    std::lock_guard lock(watch_mutex_);
    // Once started, the rounds go on while anybody waits: the waiters that were told the poll
    // covers them (wakeups()) sleep long, also after others left and fewer than the threshold
    // remain (those that ask again from then on poll on their own).
    if (watchers_.empty()) {
      polling_ = false;
      return;
    }
    // The sorted names are kept from round to round while nobody starts or stops waiting.
    refresh_poll_list();
    names = poll_names_;
  }
  poll_batch(std::move(names), 0);
}

void sql_store::poll_batch(std::shared_ptr<const std::vector<std::string>> names,
                           std::size_t from) {
  if (from >= names->size()) return schedule_poll();
  const auto to = std::min(names->size(), from + max_poll_batch);
  auto batch =
      std::make_shared<std::vector<std::string>>(names->begin() + static_cast<std::ptrdiff_t>(from),
                                                 names->begin() + static_cast<std::ptrdiff_t>(to));
  auto free = std::make_shared<std::vector<std::string>>();
  submit(
      "poll", batch->front(), options_.statement_timeout + watchdog_slack, true,
      [batch, free](connection& c) {
        *free = c.free_among(*batch);
        return std::error_code{};
      },
      [self = shared_from_this(), names, to, free](std::error_code ec) {
        // A failed batch ends the round (the failure is logged): waiters are not woken while the
        // database does not answer; the next round tries again.
        if (ec) return self->schedule_poll();
        self->wake(*free);
        self->poll_batch(names, to);
      });
}

void sql_store::wake(const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<std::function<void()>> calls;
  std::vector<std::string> keys;
  {
    std::lock_guard lock(watch_mutex_);
    for (const auto& [handle, w] : watchers_)
      if (std::binary_search(names.begin(), names.end(), w.name)) {
        calls.push_back(w.wake);
        keys.push_back(lease_key_of(w.name, w.owner_id));
      }
  }
  for (const auto& key : keys) woken(key);
  for (auto& call : calls) call();
}

void sql_store::async_acquire(const std::string& name, const std::string& owner_id,
                              std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                              grant_handler handler) {
  if (auto ec = check_owner_id(owner_id))
    return fail([handler](std::error_code e) { handler(e, {}); }, ec);
  bool release_first = false;
  {
    std::lock_guard lock(mutex_);
    release_first = unreleased_.count(std::pair(name, owner_id)) != 0;
  }
  if (!release_first) {
    enqueue(lease_key{false, ttl.count(), transition.count()},
            lease_request{name, owner_id, std::move(handler), nullptr},
            std::min(max_linger, ttl / 20));
    return;
  }
  // `owner_id` released this mutex but the release did not reach the database: release and
  // acquire in one transaction, so this is a new ownership with a new fence, not a renewal.
  auto result = std::make_shared<lease_grant>();
  // A renewal that hangs must fail before the lease it renews runs out (within reason: a
  // request gets at least min_request_time).
  const auto limit =
      std::min(options_.statement_timeout + watchdog_slack, std::max(transition, min_request_time));
  submit(
      "acquire", name, limit, false,
      [=, this](connection& c) {
        *result = c.acquire(name, owner_id, ttl, transition, true);
        std::lock_guard lock(mutex_);
        unreleased_.erase(std::pair(name, owner_id));
        return std::error_code{};
      },
      [result, handler = std::move(handler)](std::error_code ec) {
        handler(ec, ec ? lease_grant{} : std::move(*result));
      });
}

void sql_store::async_release(const std::string& name, const std::string& owner_id,
                              done_handler handler) {
  if (auto ec = check_owner_id(owner_id)) return fail(std::move(handler), ec);
  enqueue(lease_key{true, 0, 0}, lease_request{name, owner_id, nullptr, std::move(handler)},
          milliseconds::zero());
}

bool sql_store::may_linger(const std::string& key) const {
  if (held_.count(key) != 0) return true;
  // A waiter's own request while the batched poll covers it is a safeguard: the poll wakes it
  // (and it then asks at once) when the mutex may be free.
  return waiting_.count(key) != 0 && wakeups() == wakeup_coverage::release_and_expiry;
}

void sql_store::woken(const std::string& key) {
  std::lock_guard lock(batch_mutex_);
  waiting_.erase(key);
}

void sql_store::enqueue(lease_key key, lease_request request, milliseconds linger) {
  std::lock_guard lock(batch_mutex_);
  const auto held = lease_key_of(request.name, request.owner_id);
  if (key.release) {
    held_.erase(held);
    waiting_.erase(held);
  }
  const bool lingers = !key.release && linger > milliseconds::zero() && may_linger(held);
  auto& group = groups_[key];
  if (!lingers) {
    group.urgent.push_back(std::move(request));
    if (!group.ready) {
      group.ready = true;
      ready_.push_back(std::move(key));
    }
    spawn_drainers();
    return;
  }
  group.lingering.push_back(std::move(request));
  const auto until = steady::now() + linger;
  if (linger_until_ != steady::time_point{} && linger_until_ <= until) return;
  // Arm (or bring forward) the linger timer.
  linger_until_ = until;
  const auto generation = ++linger_generation_;
  if (!linger_timer_) linger_timer_ = std::make_shared<boost::asio::steady_timer>(runtime_.io());
  linger_timer_->expires_at(until);
  // The wait's handler is destroyed without running when the io_context goes away first (a
  // runtime destroyed while requests linger): its last copy then drops what is queued.
  struct wait_state {
    std::weak_ptr<sql_store> store;
    bool ran = false;
    ~wait_state() {
      if (ran) return;
      if (auto self = store.lock()) self->abandon_queued();
    }
  };
  auto state = std::make_shared<wait_state>();
  state->store = weak_from_this();
  linger_timer_->async_wait([state, generation](boost::system::error_code ec) {
    state->ran = true;
    if (ec) return;
    if (auto self = state->store.lock()) self->flush_lingering(generation);
  });
}

void sql_store::abandon_queued() {
  std::map<lease_key, lease_group> dropped;  // destroyed after the lock is released
  {
    std::lock_guard lock(batch_mutex_);
    dropped.swap(groups_);
    ready_.clear();
    linger_until_ = {};
  }
}

void sql_store::flush_lingering(std::uint64_t generation) {
  std::lock_guard lock(batch_mutex_);
  if (generation != linger_generation_) return;  // brought forward meanwhile
  linger_until_ = {};
  for (auto& [key, group] : groups_) {
    if (group.lingering.empty()) continue;
    for (auto& r : group.lingering) group.urgent.push_back(std::move(r));
    group.lingering.clear();
    if (!group.ready) {
      group.ready = true;
      ready_.push_back(key);
    }
  }
  spawn_drainers();
}

void sql_store::spawn_drainers() {
  // Running drainers are busy with a batch (an idle one exits): a ready group not yet claimed by
  // a starting drainer gets one, up to statement_connections_ in all.
  while (!ready_.empty() && drainers_ < statement_connections_ && starting_ < ready_.size()) {
    ++drainers_;
    ++starting_;
    boost::asio::post(runtime_.blocking(), [self = shared_from_this()] { self->drain(); });
  }
}

void sql_store::drain() {
  {
    std::lock_guard lock(batch_mutex_);
    --starting_;
  }
  for (;;) {
    lease_key key;
    std::vector<lease_request> batch;
    {
      std::lock_guard lock(batch_mutex_);
      if (ready_.empty()) {
        --drainers_;
        return;
      }
      key = ready_.front();
      ready_.pop_front();
      auto it = groups_.find(key);
      auto& group = it->second;
      // Up to max_lease_batch distinct names: the urgent ones first, then the lingering ones of
      // the same group (going early costs nothing). A name twice (two requests of one owner)
      // waits for the next batch.
      std::unordered_set<std::string> names;
      std::deque<lease_request> later;
      for (auto* queue : {&group.urgent, &group.lingering}) {
        while (!queue->empty() && batch.size() < max_lease_batch) {
          auto r = std::move(queue->front());
          queue->pop_front();
          if (names.insert(r.name).second)
            batch.push_back(std::move(r));
          else
            later.push_back(std::move(r));
        }
      }
      for (auto& r : later) group.urgent.push_front(std::move(r));
      if (!group.urgent.empty()) {
        ready_.push_back(key);
        spawn_drainers();
      } else {
        group.ready = false;
        if (group.lingering.empty()) groups_.erase(it);
      }
    }
    if (key.release)
      run_releases(batch);
    else
      run_acquires(key, batch);
  }
}

sql_store::batch_names sql_store::sort_batch(std::vector<lease_request>& batch) {
  std::sort(batch.begin(), batch.end(),
            [](const lease_request& a, const lease_request& b) { return a.name < b.name; });
  batch_names out;
  out.names.reserve(batch.size());
  out.owners.reserve(batch.size());
  for (const auto& r : batch) {
    out.names.push_back(r.name);
    out.owners.push_back(r.owner_id);
  }
  out.what = batch.size() == 1
                 ? out.names.front()
                 : out.names.front() + " (and " + std::to_string(batch.size() - 1) + " more)";
  return out;
}

void sql_store::run_acquires(const lease_key& key, std::vector<lease_request>& batch) {
  const auto sorted = sort_batch(batch);
  const auto& [names, owners, what] = sorted;
  const milliseconds ttl{key.ttl}, transition{key.transition};
  // A renewal that hangs must fail before the lease it renews runs out (within reason: a
  // request gets at least min_request_time).
  const auto limit =
      std::min(options_.statement_timeout + watchdog_slack, std::max(transition, min_request_time));
  std::vector<connection::batch_grant> results;
  bool reused = false;
  const auto ec = run(
      "acquire", what, limit,
      [&](connection& c) {
        results = c.acquire_many(names, owners, ttl, transition);
        return std::error_code{};
      },
      reused);
  {
    std::lock_guard lock(batch_mutex_);
    for (std::size_t i = 0; !ec && i < batch.size(); ++i) {
      const auto held = lease_key_of(batch[i].name, batch[i].owner_id);
      const auto& r = results[i];
      if (!r.ok) continue;
      const auto& owner = r.grant.owner;
      if (owner.is(batch[i].owner_id)) {
        held_.insert(held);
        waiting_.erase(held);
      } else {
        held_.erase(held);
        if (!owner.owner_id.empty() && owner.transition_at >= r.grant.now)
          waiting_.insert(held);
        else
          waiting_.erase(held);
      }
    }
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& r = batch[i];
    std::error_code e = ec;
    lease_grant g;
    if (!e) {
      if (results[i].ok) {
        g = std::move(results[i].grant);
      } else {
        e = make_error_code(errc::backend_error);
        baton::detail::record_backend_error(label_, e);
        baton::detail::log().warn("{}: acquire '{}' failed ({}): {}", label_, r.name, e.message(),
                                  results[i].error);
      }
    }
    call_safely(label_, "acquire", r.name, [&] { r.granted(e, std::move(g)); });
  }
}

void sql_store::run_releases(std::vector<lease_request>& batch) {
  const auto sorted = sort_batch(batch);
  const auto& [names, owners, what] = sorted;
  auto body = [&](connection& c) {
    c.release_many(names, owners);
    return std::error_code{};
  };
  bool reused = false;
  const auto limit = options_.statement_timeout + watchdog_slack;
  auto ec = run("release", what, limit, body, reused);
  if (reused && ec == errc::connection_lost) ec = run("release", what, limit, body, reused);
  {
    // A release that does not reach the database must still end this ownership: the next
    // acquire by the same contender then releases first, so it gets a new fence.
    std::lock_guard lock(mutex_);
    for (const auto& r : batch) {
      auto k = std::pair(r.name, r.owner_id);
      if (ec)
        unreleased_.insert(std::move(k));
      else
        unreleased_.erase(k);
    }
  }
  for (auto& r : batch) call_safely(label_, "release", r.name, [&] { r.released(ec); });
}

void sql_store::async_read(const std::string& name, grant_handler handler) {
  auto result = std::make_shared<lease_grant>();
  submit(
      "read", name, options_.statement_timeout + watchdog_slack, false,
      [=](connection& c) {
        *result = c.read(name);
        return std::error_code{};
      },
      [result, handler = std::move(handler)](std::error_code ec) {
        handler(ec, ec ? lease_grant{} : std::move(*result));
      });
}

void sql_store::async_read_state(const std::string& name, state_handler handler) {
  auto result = std::make_shared<std::string>();
  submit(
      "read_state", name, options_.statement_timeout + watchdog_slack, false,
      [=](connection& c) {
        *result = from_hex(c.read_state(name));
        return std::error_code{};
      },
      [result, handler = std::move(handler)](std::error_code ec) {
        handler(ec, ec ? std::string{} : std::move(*result));
      });
}

void sql_store::async_write_state(const std::string& name, const std::string& owner_id,
                                  std::uint64_t fence, std::string bytes, done_handler handler) {
  if (bytes.size() > max_state_size) {
    baton::detail::log().error("{}: write_state '{}': state of {} bytes exceeds the {} byte limit",
                               label_, name, bytes.size(), max_state_size);
    return fail(std::move(handler), make_error_code(errc::invalid_argument));
  }
  if (auto ec = check_owner_id(owner_id)) return fail(std::move(handler), ec);
  auto hex = std::make_shared<std::string>(to_hex(bytes));
  submit(
      "write_state", name, options_.statement_timeout + watchdog_slack, false,
      [=](connection& c) {
        return c.write_state(name, owner_id, fence, *hex) ? std::error_code{}
                                                          : make_error_code(errc::not_owner);
      },
      std::move(handler));
}

void sql_store::async_append_history(const std::string& name, const std::string& owner_id,
                                     std::uint64_t fence, std::string bytes, std::size_t keep,
                                     append_handler handler) {
  std::string refused;
  if (options_.read_only)
    refused = "refused: the backend is read-only";
  else if (keep == 0 || keep > max_history_keep)
    refused = "keep " + std::to_string(keep) + " is not 1 to " + std::to_string(max_history_keep);
  else if (bytes.size() > max_history_entry_bytes)
    refused = "entry of " + std::to_string(bytes.size()) + " bytes exceeds the " +
              std::to_string(max_history_entry_bytes) + " byte limit";
  else if (!storable_text(bytes))
    refused = "entry is not UTF-8 text without NUL (stored as text)";
  if (!refused.empty()) {
    log_refused(label_, "append_history", name, refused);
    return fail(std::move(handler), make_error_code(errc::invalid_argument));
  }
  if (auto ec = check_owner_id(owner_id)) return fail(std::move(handler), ec);
  auto entry = std::make_shared<std::string>(std::move(bytes));
  submit(
      "append_history", name, options_.statement_timeout + watchdog_slack, false,
      [=](connection& c) {
        return c.append_history(name, owner_id, fence, *entry, keep)
                   ? std::error_code{}
                   : make_error_code(errc::not_owner);
      },
      std::move(handler));
}

bool sql_store::records_table_readable(connection& c, bool history) {
  if (!options_.read_only) return true;  // created or checked with the owner records table
  auto& seen = history ? history_seen_ : controls_seen_;
  if (seen.load()) return true;
  if (!c.table_exists(history ? sql_.find_history_t : sql_.find_controls_t)) return false;
  seen.store(true);
  return true;
}

namespace {

// Read-only SQLite on a plain path that does not exist: nothing has run yet (opening it
// read-only would fail; creating it is not ours to do).
bool no_sqlite_file(const sql_options& o) {
  std::error_code ec;
  return o.read_only && o.kind == dialect::sqlite && o.connection.rfind("file:", 0) != 0 &&
         !std::filesystem::exists(o.connection, ec) && !ec;
}

}  // namespace

void sql_store::async_read_history(const std::string& name, std::size_t limit,
                                   history_handler handler) {
  auto result = std::make_shared<std::vector<history_entry>>();
  if (no_sqlite_file(options_)) {
    return boost::asio::post(runtime_.blocking(),
                             [handler = std::move(handler)] { handler({}, {}); });
  }
  submit(
      "read_history", name, options_.statement_timeout + watchdog_slack, true,
      [=, this](connection& c) {
        if (records_table_readable(c, true)) *result = c.read_history(name, limit);
        return std::error_code{};
      },
      [result, handler = std::move(handler)](std::error_code ec) {
        handler(ec, ec ? std::vector<history_entry>{} : std::move(*result));
      });
}

void sql_store::async_read_controls(const std::string& name, controls_handler handler) {
  auto result = std::make_shared<controls_record>();
  if (no_sqlite_file(options_)) {
    return boost::asio::post(runtime_.blocking(),
                             [handler = std::move(handler)] { handler({}, {}); });
  }
  submit(
      "read_controls", name, options_.statement_timeout + watchdog_slack, true,
      [=, this](connection& c) {
        if (records_table_readable(c, false)) *result = c.read_controls(name);
        return std::error_code{};
      },
      [result, handler = std::move(handler)](std::error_code ec) {
        handler(ec, ec ? controls_record{} : std::move(*result));
      });
}

void sql_store::async_write_controls(const std::string& name, std::uint64_t expected,
                                     std::string bytes, controls_handler handler) {
  std::string refused;
  if (options_.read_only)
    refused = "refused: the backend is read-only";
  else if (bytes.size() > max_controls_bytes)
    refused = "controls of " + std::to_string(bytes.size()) + " bytes exceed the " +
              std::to_string(max_controls_bytes) + " byte limit";
  else if (!storable_text(bytes))
    refused = "controls are not UTF-8 text without NUL (stored as text)";
  else if (expected > static_cast<std::uint64_t>(std::numeric_limits<long long>::max()))
    refused = "expected version " + std::to_string(expected) + " is out of range";
  if (!refused.empty()) {
    log_refused(label_, "write_controls", name, refused);
    return boost::asio::post(runtime_.blocking(), [handler = std::move(handler)] {
      handler(make_error_code(errc::invalid_argument), {});
    });
  }
  auto written = std::make_shared<controls_record>(controls_record{std::move(bytes), expected + 1});
  auto conflict = std::make_shared<bool>(false);
  auto now = std::make_shared<controls_record>();
  submit(
      "write_controls", name, options_.statement_timeout + watchdog_slack, false,
      [=](connection& c) {
        if (c.write_controls(name, expected, written->bytes)) return std::error_code{};
        // Lost the compare-and-set: reply what is there now (it may have moved on again).
        *now = c.read_controls(name);
        return make_error_code(errc::conflict);
      },
      [written, now, handler = std::move(handler)](std::error_code ec) {
        if (!ec) return handler(ec, std::move(*written));
        handler(ec, ec == errc::conflict ? std::move(*now) : controls_record{});
      });
}

std::uint64_t sql_store::watch_controls(const std::string& name, std::function<void()> changed) {
  if (listener_) return listener_->watch(dialect_sql::controls_payload(name), std::move(changed));
  if (no_sqlite_file(options_)) return 0;  // nothing to read (read-only, no file yet): poll
  bool start = false;
  std::uint64_t handle = 0;
  {
    std::lock_guard lock(controls_mutex_);
    handle = next_controls_watch_++;
    controls_watchers_.emplace(handle, controls_watcher{name, std::move(changed)});
    start = !std::exchange(controls_polling_, true);
  }
  if (start) schedule_controls_poll();
  return handle;
}

void sql_store::unwatch_controls(std::uint64_t handle) noexcept {
  if (handle == 0) return;
  if (listener_) return listener_->unwatch(handle);
  std::lock_guard lock(controls_mutex_);
  controls_watchers_.erase(handle);
}

void sql_store::schedule_controls_poll() {
  auto timer = std::make_shared<boost::asio::steady_timer>(runtime_.io(), options_.poll_interval);
  timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self) return;
    if (ec) {
      std::lock_guard lock(self->controls_mutex_);
      self->controls_polling_ = false;
      return;
    }
    self->controls_round();
  });
}

void sql_store::controls_round() {
  {
    std::lock_guard lock(controls_mutex_);
    if (controls_watchers_.empty()) {
      controls_polling_ = false;
      return;
    }
  }
  auto rows = std::make_shared<std::vector<std::pair<std::string, std::uint64_t>>>();
  submit(
      "poll_controls", options_.table, options_.statement_timeout + watchdog_slack, true,
      [this, rows](connection& c) {
        if (records_table_readable(c, false)) *rows = c.controls_versions();
        return std::error_code{};
      },
      [self = shared_from_this(), rows](std::error_code ec) {
        // A failed round (logged) wakes nobody; the next one compares with the last good one.
        if (ec) return self->schedule_controls_poll();
        std::vector<std::function<void()>> calls;
        {
          std::lock_guard lock(self->controls_mutex_);
          // Usually nothing changed: one comparison of two short sorted lists.
          if (!self->controls_baseline_ || *rows != self->controls_versions_) {
            // The names whose version changed (or that appeared or went) since the last round.
            std::vector<std::string> changed;
            const auto& old = self->controls_versions_;
            std::vector<std::pair<std::string, std::uint64_t>> diff;
            std::set_symmetric_difference(rows->begin(), rows->end(), old.begin(), old.end(),
                                          std::back_inserter(diff));
            for (auto& [name, version] : diff) changed.push_back(std::move(name));
            std::sort(changed.begin(), changed.end());
            // Without an earlier round, a watcher may have missed a change before this one's
            // snapshot: all are woken once to read again.
            for (const auto& [handle, w] : self->controls_watchers_)
              if (!self->controls_baseline_ ||
                  std::binary_search(changed.begin(), changed.end(), w.name))
                calls.push_back(w.changed);
            self->controls_versions_ = std::move(*rows);
            self->controls_baseline_ = true;
          }
        }
        for (auto& call : calls) call();
        self->schedule_controls_poll();
      });
}

bool sql_store::table_exists() {
  bool found = false;
  bool reused = false;
  const auto ec = run(
      "find table", options_.table, options_.statement_timeout + watchdog_slack,
      [&found](connection& c) {
        found = c.table_exists();
        return std::error_code{};
      },
      reused);
  if (ec) throw std::system_error(ec, label_ + ": cannot look for table '" + options_.table + "'");
  return found;
}

void sql_store::fail(done_handler handler, std::error_code ec) {
  boost::asio::post(runtime_.blocking(), [handler = std::move(handler), ec] { handler(ec); });
}

void sql_store::submit(const char* operation, std::string name, milliseconds limit, bool idempotent,
                       work body, std::function<void(std::error_code)> done) {
  boost::asio::post(runtime_.blocking(),
                    [self = shared_from_this(), operation, name = std::move(name), limit,
                     idempotent, body = std::move(body), done = std::move(done)] {
                      bool reused = false;
                      auto ec = self->run(operation, name, limit, body, reused);
                      if (idempotent && reused && ec == errc::connection_lost)
                        ec = self->run(operation, name, limit, body, reused);
                      try {
                        done(ec);
                      } catch (const std::exception& e) {
                        baton::detail::log().error("{}: {} '{}': completion handler threw: {}",
                                                   self->label_, operation, name, e.what());
                      } catch (...) {
                        baton::detail::log().error("{}: {} '{}': completion handler threw",
                                                   self->label_, operation, name);
                      }
                    });
}

std::error_code sql_store::run(const char* operation, const std::string& name, milliseconds limit,
                               const work& body, bool& reused) {
  const auto started = steady::now();
  std::error_code ec;
  auto conn = checkout(operation, name, ec, reused);
  if (!conn) {
    // Not sent (no connection): a failed request all the same.
    baton::detail::record_backend_error(label_, ec);
    return ec;
  }

  // Bound the whole request: a server that stops answering (frozen, cut off) would otherwise
  // block this thread for as long as TCP keeps the connection.
  std::exception_ptr error;
  steady::time_point replied;
  {
    watchdog_scope watch(runtime_.io(), conn->guard(), limit);
    baton::detail::count_backend_requests();
    const auto sent = steady::now();
    try {
      ec = body(*conn);
    } catch (...) {
      error = std::current_exception();
    }
    // Answered or failed: the latency of the request either way (a body's not_owner or
    // conflict is an answer, not a failure).
    replied = steady::now();
    baton::detail::record_backend_request(label_, replied - sent);
  }
  if (!error) {
    checkin(std::move(conn), false, false);
    const auto took = std::chrono::duration_cast<milliseconds>(replied - started);
    baton::detail::log().trace("{}: {} '{}' done in {} ms: {}", label_, operation, name,
                               took.count(), ec ? ec.message() : "ok");
    if (took > options_.statement_timeout / 2)
      baton::detail::log().warn("{}: {} '{}' took {} ms (statement_timeout {} ms)", label_,
                                operation, name, took.count(), options_.statement_timeout.count());
    return ec;
  }
  const auto failure = translate_error(options_.kind, error, conn->guard()->fired(), secrets_);
  baton::detail::record_backend_error(label_, failure.code);
  baton::detail::log().warn("{}: {} '{}' failed ({}): {}", label_, operation, name,
                            failure.code.message(), failure.message);
  // Any error may mean a lost session: never reuse this connection. A lost connection or a
  // silent server probably means the same for the idle ones.
  const bool server_gone = failure.code == errc::connection_lost ||
                           (failure.code == errc::timeout && options_.kind != dialect::sqlite);
  checkin(std::move(conn), true, server_gone);
  return failure.code;
}

std::unique_ptr<connection> sql_store::checkout(const char* operation, const std::string& name,
                                                std::error_code& ec, bool& reused) {
  reused = false;
  std::unique_lock lock(mutex_);
  const auto deadline = steady::now() + options_.statement_timeout;
  while (idle_.empty() && open_ >= statement_connections_) {
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= statement_connections_) {
      ec = make_error_code(errc::timeout);
      baton::detail::log().warn("{}: {} '{}': no free connection within statement_timeout", label_,
                                operation, name);
      return nullptr;
    }
  }
  if (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    reused = true;
    return c;
  }
  if (steady::now() < next_connect_) {
    // Backing off after failed connects: do not hammer a server that is down.
    ec = make_error_code(errc::connection_lost);
    return nullptr;
  }
  ++open_;
  // Read-only: no schema setup at all (nothing is created; table_exists() looks for the table).
  bool need_schema = !schema_ready_ && !options_.read_only;
  lock.unlock();

  // Until the schema is known to be in place, one connection at a time sets up (SQLite: switch
  // the file to WAL; create the table): concurrent first requests would only trip each other.
  std::unique_lock<std::mutex> setup;
  if (need_schema) {
    setup = std::unique_lock(setup_mutex_);
    lock.lock();
    need_schema = !schema_ready_;
    lock.unlock();
  }

  std::unique_ptr<connection> c;
  std::exception_ptr error;
  const char* stage = "connect";
  bool fired = false;
  std::string checking;  // the table check_table() found missing or unusable
  try {
    c = std::make_unique<connection>(sql_, connect_string_);
    try {
      watchdog_scope watch(runtime_.io(), c->guard(), options_.statement_timeout + watchdog_slack);
      stage = "session setup";
      c->configure(options_);
      if (need_schema) {
        if (options_.create_table) {
          stage = "create table";
          c->create_table();
        }
        stage = "check table";
        c->check_table();
      }
      stage = "clock setup";
      c->prepare_clock(options_.read_only);
    } catch (...) {
      fired = c->guard()->fired();
      checking = c->checking();
      throw;
    }
  } catch (...) {
    error = std::current_exception();
  }

  lock.lock();
  if (!error) {
    connect_failures_ = 0;
    next_connect_ = {};
    if (need_schema) schema_ready_ = true;
    return c;
  }
  --open_;
  ++connect_failures_;
  const auto delay = backoff(connect_failures_);
  next_connect_ = steady::now() + delay;
  returned_.notify_one();
  lock.unlock();
  c.reset();

  const auto failure = translate_error(options_.kind, error, fired, secrets_);
  ec = failure.code;
  if (std::string_view(stage) == "check table" && !options_.create_table)
    baton::detail::log().error(
        "{}: {} '{}': table '{}' is missing or unusable and create_table=false (create it with "
        "the shipped schema/{}.sql, which makes '{}', '{}'{} and '{}'): {}",
        label_, operation, name, checking.empty() ? options_.table : checking, label_,
        options_.table, sql_.history_table,
        sql_.meta_table.empty() ? "" : ", '" + sql_.meta_table + "'", sql_.controls_table,
        failure.message);
  else
    baton::detail::log().warn("{}: {} '{}': {} failed ({}); next attempt in {} ms: {}", label_,
                              operation, name, stage, failure.code.message(), delay.count(),
                              failure.message);
  return nullptr;
}

void sql_store::checkin(std::unique_ptr<connection> c, bool broken, bool drop_idle) {
  std::vector<std::unique_ptr<connection>> dropped;
  {
    std::lock_guard lock(mutex_);
    if (broken) {
      --open_;
      dropped.push_back(std::move(c));
      if (drop_idle) {
        open_ -= static_cast<unsigned>(idle_.size());
        for (auto& i : idle_) dropped.push_back(std::move(i));
        idle_.clear();
      }
    } else {
      idle_.push_back(std::move(c));
    }
  }
  returned_.notify_all();
  // Closing happens outside the lock.
}

}  // namespace baton::backends::sql::detail
