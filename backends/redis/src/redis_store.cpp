// The Redis lease_store.
//
// Keys of mutex NAME (P = key_prefix, default "baton:"), all with the hash tag {NAME} so that one
// mutex lives on one Redis Cluster slot:
//   P{NAME}           hash: id, fence, acquired_at, ttl_at, transition_at (server ms); expires
//                     at transition_at, so "the key exists" means "the lease is live"
//   P{NAME}:fence     the fence counter; never deleted by baton. When missing (first use, data
//                     lost by a restart without persistence or FLUSHALL) it is seeded with the
//                     server's TIME in microseconds before INCR, so fences keep increasing as
//                     long as fewer than a million were issued per second.
//   P{NAME}:queue     zset contender -> first-join time (us): the FIFO wait queue
//   P{NAME}:alive     zset contender -> expiry (ms): a waiter that stops polling drops out
//   P{NAME}:handoff   string: the waiter a just-freed mutex is reserved for (PX handoff_window)
//   P{NAME}:state     the lease-guarded state
//   P{NAME}:history   list, newest first, of '<seq> <fence> <bytes>' (append_history.lua trims
//                     it to `keep`); P{NAME}:history:seq is its seq counter
//   P{NAME}:controls  hash {version, bytes}: the controls record (write_controls.lua, CAS)
// Channels: P{NAME}:wake:<contender id> (one per waiter, on the shared subscriber connection)
// and P{NAME}:events ("acquired <fence> <id>", "released <id>", for observers), and
// P{NAME}:controls:changed (the new version after each controls write; watch_controls subscribes
// to it on the same subscriber connection).
//
// FIFO hand-off: a release (or a waiter finding the mutex free while it is not the head of the
// queue) offers the mutex to the head of the queue: the head is removed from the queue, named in
// the handoff key for handoff_window, and woken on its channel; during the window the acquire
// script refuses everybody else (their reply shows a free mutex whose transition_at is the end
// of the window, so they re-check then). The woken head takes the mutex at once. A head that
// missed its message (pub/sub is lossy: a reconnecting subscriber misses it) loses its place
// and joins the queue again at the tail when it next polls; nobody is ever stranded, since
// every waiter also polls (at most every poll_interval, and at transition_at).
#include "redis_store.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <charconv>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_map>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton_redis_scripts.hpp"
#include "blocking_client.hpp"
#include "connection.hpp"
#include "sentinel.hpp"

namespace baton::backends::redis::detail {
namespace {

using std::chrono::milliseconds;

struct mutex_keys {
  std::string owner, fence, queue, alive, handoff, state, wake_prefix, events, history, history_seq,
      controls, controls_channel;
};

enum script_id : std::size_t {
  acquire_script,
  release_script,
  read_script,
  write_state_script,
  append_history_script,
  write_controls_script,
  read_waiters_script,
  batch_script,
  script_count
};

struct script {
  const char* name;
  std::string text;
  std::string sha;  // from SCRIPT LOAD; empty: use EVAL
};

// batch.lua runs acquire.lua, release.lua and read.lua as functions, each with its own KEYS and
// ARGV: the very same code as alone, so a request in a batch does exactly what it does alone.
std::string batch_text() {
  auto function = [](const char* name, const char* body) {
    return std::string("local function ") + name + "(KEYS, ARGV)\n" + body + "\nend\n";
  };
  return function("acquire_op", lua::acquire) + function("release_op", lua::release) +
         function("read_op", lua::read) + lua::batch;
}

// An owner record, {owner_id, fence, acquired_at, ttl_at, transition_at, now}, into `grant`;
// the five numbers already checked to be >= 0.
void fill_grant(std::string_view owner_id, const std::array<long long, 5>& n, lease_grant& grant) {
  auto at = [](long long ms) { return backend_time{milliseconds{ms}}; };
  grant.owner.owner_id.assign(owner_id);
  grant.owner.fence = static_cast<std::uint64_t>(n[0]);
  grant.owner.acquired_at = at(n[1]);
  grant.owner.ttl_at = at(n[2]);
  grant.owner.transition_at = at(n[3]);
  grant.now = at(n[4]);
}

// Reads an owner record into `grant`: a script alone replies it as an array, {owner_id, fence,
// acquired_at, ttl_at, transition_at, now}; batch.lua packs it into one string, 'fence
// acquired_at ttl_at transition_at now owner_id' (the owner id is the rest, possibly empty).
bool parse_grant(const reply& r, lease_grant& grant) {
  std::array<long long, 5> n{};
  if (r.type == reply::kind::string) {
    const char* p = r.str.data();
    const char* const end = p + r.str.size();
    for (auto& value : n) {
      const auto [next, ec] = std::from_chars(p, end, value);
      if (ec != std::errc{} || value < 0 || next == end || *next != ' ') return false;
      p = next + 1;
    }
    fill_grant({p, static_cast<std::size_t>(end - p)}, n, grant);
    return true;
  }
  if (r.type != reply::kind::array || r.elements.size() != 6) return false;
  const auto& e = r.elements;
  if (e[0].type != reply::kind::string) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (e[i + 1].type != reply::kind::integer || e[i + 1].integer < 0) return false;
    n[i] = e[i + 1].integer;
  }
  fill_grant(e[0].str, n, grant);
  return true;
}

bool parse_u64(std::string_view text, std::uint64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

// '<seq> <fence> <bytes>' (append_history.lua) into `entry`.
bool parse_entry(const std::string& text, history_entry& entry) {
  const auto first = text.find(' ');
  if (first == std::string::npos) return false;
  const auto second = text.find(' ', first + 1);
  if (second == std::string::npos) return false;
  std::string_view view(text);
  if (!parse_u64(view.substr(0, first), entry.seq) ||
      !parse_u64(view.substr(first + 1, second - first - 1), entry.fence))
    return false;
  entry.bytes = text.substr(second + 1);
  return true;
}

class store_core : public std::enable_shared_from_this<store_core> {
 public:
  store_core(boost::asio::io_context& io, settings config)
      : strand_(boost::asio::make_strand(io)),
        settings_(std::move(config)),
        scripts_{{{"acquire", lua::acquire, {}},
                  {"release", lua::release, {}},
                  {"read", lua::read, {}},
                  {"write_state", lua::write_state, {}},
                  {"append_history", lua::append_history, {}},
                  {"write_controls", lua::write_controls, {}},
                  {"read_waiters", lua::read_waiters, {}},
                  {"batch", batch_text(), {}}}},
        blocking_(settings_, {lua::acquire, lua::release}) {}

  void start() {
    boost::asio::post(strand_, [self = shared_from_this()] { self->start_on_strand(); });
  }

  void shutdown() noexcept {
    try {
      boost::asio::post(strand_, [self = shared_from_this()] {
        if (self->command_) self->command_->stop();
        if (self->subscriber_) self->subscriber_->stop();
        if (self->switch_listener_) self->switch_listener_->stop();
        if (self->resolver_) self->resolver_->stop();
        self->watchers_.clear();
        self->channels_.clear();
        self->lapse_timer_.cancel();
        self->linger_timer_.cancel();
        // What is still queued fails (errc::stopped) on the stopped connection.
        self->flush();
        self->lapse_.clear();
        self->lapse_due_.clear();
      });
    } catch (const std::exception& e) {
      baton::detail::log().error("redis {}: shutdown: {}", settings_.server.display, e.what());
    }
  }

  // Acquire/renew, release and read go through one queue: whatever is queued together goes to
  // Redis in one batch.lua call (one request alone: its own script), and at most
  // max_batches_in_flight calls are on the wire at once (flow control; see flush()).
  void acquire(const std::string& name, const std::string& owner_id, milliseconds ttl,
               milliseconds transition, lease_store::grant_handler handler) {
    lease_op op{op_kind::acquire, name, owner_id, ttl, transition, std::move(handler), {}};
    enqueue(std::move(op));
  }

  void release(const std::string& name, const std::string& owner_id,
               lease_store::done_handler handler) {
    lease_op op{op_kind::release, name, owner_id, {}, {}, {}, std::move(handler)};
    enqueue(std::move(op));
  }

  void read(const std::string& name, lease_store::grant_handler handler) {
    lease_op op{op_kind::read, name, {}, {}, {}, std::move(handler), {}};
    enqueue(std::move(op));
  }

  // The blocking path (lease_store::acquire_blocking): the request acquire() would send, on the
  // caller's thread over a connection of its own (made on first use). Not in sentinel mode
  // (where the master is comes from the sentinels, asynchronously), and not while the command
  // connection is down (the caller would wait for a connect that is bound to fail).
  bool acquire_blocking(const std::string& name, const std::string& owner_id, milliseconds ttl,
                        milliseconds transition, std::error_code& ec, lease_grant& grant) {
    if (settings_.sentinel || !command_up_.load()) return false;
    lease_op op{op_kind::acquire, name, owner_id, ttl, transition, {}, {}};
    std::vector<std::string> keys, args;
    build(op, keys, args);
    reply r;
    if (!blocking_.eval(0, keys, args, ec, r)) return false;
    lease_grant g;
    if (!(ec = check("acquire", name, ec, r)) && !parse_grant(r, g))
      ec = unexpected("acquire", name, r, "an array of the owner id and 5 integers");
    if (!ec) {
      note_grant(name, g);
      note_acquired(name, owner_id);
      grant = std::move(g);
    }
    return true;
  }

  bool release_blocking(const std::string& name, const std::string& owner_id, std::error_code& ec,
                        bool& released) {
    if (settings_.sentinel || !command_up_.load()) return false;
    lease_op op{op_kind::release, name, owner_id, {}, {}, {}, {}};
    std::vector<std::string> keys, args;
    build(op, keys, args);
    reply r;
    if (!blocking_.eval(1, keys, args, ec, r)) return false;
    if (!(ec = check("release", name, ec, r)) && r.type != reply::kind::integer)
      ec = unexpected("release", name, r, "an integer");
    released = !ec && r.integer == 1;
    note_release(name, owner_id, ec);
    return true;
  }

  void read_state(const std::string& name, lease_store::state_handler handler) {
    std::vector<std::string> command{"GET", keys(name).state};
    on_strand(
        [=, command = std::move(command), handler = std::move(handler)](store_core& self) mutable {
          self.command_->exec(std::move(command), [&self, name, handler = std::move(handler)](
                                                      std::error_code ec, reply r) {
            if ((ec = self.check("read_state", name, ec, r))) return handler(ec, {});
            if (r.type == reply::kind::nil) return handler({}, {});
            if (r.type != reply::kind::string)
              return handler(self.unexpected("read_state", name, r, "a string or nil"), {});
            handler({}, std::move(r.str));
          });
        });
  }

  void write_state(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                   std::string bytes, lease_store::done_handler handler) {
    auto k = keys(name);
    std::vector<std::string> keys{k.owner, k.state};
    std::vector<std::string> args{owner_id, std::to_string(fence), std::move(bytes)};
    on_strand([=, keys = std::move(keys), args = std::move(args),
               handler = std::move(handler)](store_core& self) mutable {
      self.eval(
          write_state_script, std::move(keys), std::move(args),
          [&self, name, handler = std::move(handler)](std::error_code ec, reply r) {
            if (!(ec = self.check("write_state", name, ec, r)) && r.type != reply::kind::integer)
              ec = self.unexpected("write_state", name, r, "an integer");
            handler(ec);
          });
    });
  }

  void append_history(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                      std::string bytes, std::size_t keep, record_store::append_handler handler) {
    if (keep == 0 || keep > max_history_keep || bytes.size() > max_history_entry_bytes)
      return handler(make_error_code(errc::invalid_argument));
    auto k = keys(name);
    std::vector<std::string> keys{k.owner, k.history, k.history_seq};
    std::vector<std::string> args{owner_id, std::to_string(fence), std::move(bytes),
                                  std::to_string(keep)};
    on_strand([=, keys = std::move(keys), args = std::move(args),
               handler = std::move(handler)](store_core& self) mutable {
      self.eval(
          append_history_script, std::move(keys), std::move(args),
          [&self, name, handler = std::move(handler)](std::error_code ec, reply r) {
            if (!(ec = self.check("append_history", name, ec, r)) && r.type != reply::kind::integer)
              ec = self.unexpected("append_history", name, r, "an integer");
            handler(ec);
          });
    });
  }

  void read_history(const std::string& name, std::size_t limit,
                    record_store::history_handler handler) {
    if (limit == 0) return handler({}, {});
    // LRANGE's stop is inclusive; the list never holds more than max_history_keep entries.
    const auto stop = std::min<std::size_t>(limit, max_history_keep) - 1;
    std::vector<std::string> command{"LRANGE", keys(name).history, "0", std::to_string(stop)};
    on_strand([=, command = std::move(command),
               handler = std::move(handler)](store_core& self) mutable {
      self.command_->exec(std::move(command), [&self, name, handler = std::move(handler)](
                                                  std::error_code ec, reply r) {
        if ((ec = self.check("read_history", name, ec, r))) return handler(ec, {});
        std::vector<history_entry> out;
        if (r.type != reply::kind::array)
          return handler(self.unexpected("read_history", name, r, "an array"), {});
        for (const auto& e : r.elements) {
          history_entry entry;
          if (e.type != reply::kind::string || !parse_entry(e.str, entry))
            return handler(self.unexpected("read_history", name, e, "'<seq> <fence> <bytes>'"), {});
          out.push_back(std::move(entry));
        }
        handler({}, std::move(out));
      });
    });
  }

  void read_controls(const std::string& name, record_store::controls_handler handler) {
    std::vector<std::string> command{"HMGET", keys(name).controls, "version", "bytes"};
    on_strand([=, command = std::move(command),
               handler = std::move(handler)](store_core& self) mutable {
      self.command_->exec(std::move(command), [&self, name, handler = std::move(handler)](
                                                  std::error_code ec, reply r) {
        if ((ec = self.check("read_controls", name, ec, r))) return handler(ec, {});
        controls_record rec;
        const bool ok =
            r.type == reply::kind::array && r.elements.size() == 2 &&
            (r.elements[0].type == reply::kind::nil ||
             (r.elements[0].type == reply::kind::string &&
              parse_u64(r.elements[0].str, rec.version))) &&
            (r.elements[1].type == reply::kind::nil || r.elements[1].type == reply::kind::string);
        if (!ok)
          return handler(self.unexpected("read_controls", name, r, "a version and bytes, or nils"),
                         {});
        rec.bytes = std::move(r.elements[1].str);
        handler({}, std::move(rec));
      });
    });
  }

  void write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                      record_store::controls_handler handler) {
    if (bytes.size() > max_controls_bytes)
      return handler(make_error_code(errc::invalid_argument), {});
    auto k = keys(name);
    std::vector<std::string> keys{k.controls};
    std::vector<std::string> args{std::to_string(expected), std::move(bytes), k.controls_channel};
    on_strand([=, keys = std::move(keys), args = std::move(args),
               handler = std::move(handler)](store_core& self) mutable {
      self.eval(
          write_controls_script, std::move(keys), std::move(args),
          [&self, name, handler = std::move(handler)](std::error_code ec, reply r) {
            if ((ec = self.check("write_controls", name, ec, r))) return handler(ec, {});
            const bool ok = r.type == reply::kind::array && r.elements.size() == 3 &&
                            r.elements[0].type == reply::kind::integer &&
                            r.elements[1].type == reply::kind::integer &&
                            r.elements[1].integer >= 0 && r.elements[2].type == reply::kind::string;
            if (!ok)
              return handler(
                  self.unexpected("write_controls", name, r, "{written, version, bytes}"), {});
            controls_record rec{std::move(r.elements[2].str),
                                static_cast<std::uint64_t>(r.elements[1].integer)};
            handler(
                r.elements[0].integer == 1 ? std::error_code{} : make_error_code(errc::conflict),
                std::move(rec));
          });
    });
  }

  void read_waiters(const std::string& name, store::waiters_handler handler) {
    auto k = keys(name);
    std::vector<std::string> keys{k.queue, k.alive, k.handoff};
    on_strand([=, keys = std::move(keys), handler = std::move(handler)](store_core& self) mutable {
      self.eval(read_waiters_script, std::move(keys), {},
                [&self, name, handler = std::move(handler)](std::error_code ec, reply r) {
                  if ((ec = self.check("read_waiters", name, ec, r))) return handler(ec, {});
                  std::vector<std::string> ids;
                  if (r.type != reply::kind::array)
                    return handler(self.unexpected("read_waiters", name, r, "an array"), {});
                  for (auto& e : r.elements) {
                    if (e.type != reply::kind::string)
                      return handler(self.unexpected("read_waiters", name, r, "strings"), {});
                    ids.push_back(std::move(e.str));
                  }
                  handler({}, std::move(ids));
                });
    });
  }

  // Controls changes come over the subscriber connection like wake-ups; a (re)subscription
  // also calls `changed` (a change may have been missed while the connection was down).
  std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) {
    const auto handle = next_handle_.fetch_add(1);
    on_strand([handle, channel = keys(name).controls_channel,
               changed = std::move(changed)](store_core& self) mutable {
      self.add_watch(handle, channel, std::move(changed));
    });
    return handle;
  }

  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::function<void()> wake) {
    const auto handle = next_handle_.fetch_add(1);
    on_strand([handle, name, owner_id, channel = keys(name).wake_prefix + owner_id,
               wake = std::move(wake)](store_core& self) mutable {
      self.add_watch(handle, channel, std::move(wake));
      self.watch_lapse(handle, name, owner_id);
    });
    return handle;
  }

  void unwatch(std::uint64_t handle) noexcept {
    try {
      on_strand([handle](store_core& self) { self.remove_watch(handle); });
    } catch (const std::exception& e) {
      baton::detail::log().error("redis {}: unwatch: {}", settings_.server.display, e.what());
    }
  }

 private:
  enum class op_kind { acquire, release, read, check };
  // One queued acquire/renew, release or read; its keys and arguments are built when it is
  // sent, from what this process knows then.
  struct lease_op {
    op_kind kind;
    std::string name;
    std::string owner_id;
    milliseconds ttl{};
    milliseconds transition{};
    lease_store::grant_handler on_grant;  // acquire, read
    lease_store::done_handler on_done;    // release
    bool reseed = false;                  // acquire: sent with the sentinel re-seed flag
  };

  // Requests per batch.lua call: large enough that a graceful stop of 100,000 leases takes a
  // few hundred calls, small enough that one call keeps the server busy for only milliseconds.
  static constexpr std::size_t max_batch = 512;
  // Calls of lease requests on the wire at once: one being answered while the next is sent.
  static constexpr std::size_t max_batches_in_flight = 2;
  // Added to command_timeout per request in a call: the server runs them one after the other.
  static constexpr std::chrono::microseconds allowance_per_request{200};

  // Renewals of leases that run for seconds more wait up to this long for others to share a
  // call with (renewals come at ttl_at, spread out): the local lease counts from when the
  // contender asked, so waiting only shortens it on paper. Everything else goes at once.
  static constexpr milliseconds renewal_linger{50};

  // Renewals and releases go before everything else (a renewal that waits too long costs a
  // lease; a waiter's request that waits only waits): with 100,000 mutexes the queue can hold
  // seconds of work right after a start.
  void enqueue(lease_op op) {
    on_strand([op = std::move(op)](store_core& self) mutable {
      const bool renewal = self.is_renewal(op);
      auto& queue = renewal || op.kind == op_kind::release ? self.urgent_ : self.queue_;
      queue.push_back(std::move(op));
      if (renewal && self.urgent_.size() + self.queue_.size() < max_batch)
        self.linger();
      else
        self.flush();
    });
  }

  // An acquire by the contender this process last saw owning the mutex.
  bool is_renewal(const lease_op& op) const {
    if (op.kind != op_kind::acquire) return false;
    std::lock_guard lock(seen_mutex_);
    auto seen = last_seen_.find(op.name);
    return seen != last_seen_.end() && seen->second.owner_id == op.owner_id &&
           (failed_releases_.empty() || !failed_releases_.count(op.name + '\n' + op.owner_id));
  }

  void linger() {
    if (lingering_) return;
    lingering_ = true;
    linger_timer_.expires_after(renewal_linger);
    linger_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->lingering_ = false;
      if (!ec) self->flush();
    });
  }

  // Sends what is queued while fewer than max_batches_in_flight calls are on the wire. What
  // comes meanwhile waits here (not on the connection, where a deadline would run for it) and
  // goes out together once a call is answered: the batches grow with the load.
  void flush() {
    if (flushing_) return;  // a completion inside send_batch(): the loop below goes on
    flushing_ = true;
    while (batches_in_flight_ < max_batches_in_flight && (!urgent_.empty() || !queue_.empty())) {
      std::vector<lease_op> batch;
      for (auto* queue : {&urgent_, &queue_}) {
        const auto n = std::min(queue->size(), max_batch - batch.size());
        std::move(queue->begin(), queue->begin() + n, std::back_inserter(batch));
        queue->erase(queue->begin(), queue->begin() + n);
      }
      send_batch(std::move(batch));
    }
    flushing_ = false;
  }

  void send_batch(std::vector<lease_op> batch) {
    ++batches_in_flight_;
    auto ops = std::make_shared<std::vector<lease_op>>(std::move(batch));
    auto done = [this, ops](std::error_code ec, reply r) {
      --batches_in_flight_;
      complete_batch(*ops, ec, std::move(r));
      flush();
    };
    const bool alone = ops->size() == 1 && ops->front().kind != op_kind::check;
    const auto allowance = alone ? milliseconds::zero()
                                 : std::chrono::duration_cast<milliseconds>(
                                       allowance_per_request * static_cast<long>(ops->size()));
    // Built into the command as it is sent (and again should the script have to go with EVAL):
    // no copy of the keys and arguments is kept meanwhile.
    eval_built(
        alone ? script_of(ops->front().kind) : batch_script,
        [this, ops, alone](std::vector<std::string>& command) {
          if (alone) return build_alone(ops->front(), command);
          build_batch(*ops, command);
        },
        std::move(done), allowance);
  }

  // One request on its own: its script's numkeys, keys and arguments, appended to `command`.
  void build_alone(lease_op& op, std::vector<std::string>& command) {
    const auto numkeys = command.size();
    command.emplace_back();
    const auto first_key = command.size();
    scratch_args_.clear();
    build(op, command, scratch_args_);
    command[numkeys] = std::to_string(command.size() - first_key);
    std::move(scratch_args_.begin(), scratch_args_.end(), std::back_inserter(command));
  }

  // batch.lua's numkeys, the keys of every request, then the count of requests and, for each,
  // its kind, the counts of its keys and arguments and its arguments.
  void build_batch(std::vector<lease_op>& ops, std::vector<std::string>& command) {
    const auto numkeys = command.size();
    command.reserve(command.size() + 1 + 5 * ops.size());
    command.emplace_back();
    const auto first_key = command.size();
    scratch_args_.clear();
    scratch_args_.push_back(std::to_string(ops.size()));
    for (auto& op : ops) {
      const auto keys_before = command.size();
      const auto kind_at = scratch_args_.size();
      scratch_args_.push_back(op.kind == op_kind::acquire   ? "a"
                              : op.kind == op_kind::release ? "r"
                              : op.kind == op_kind::read    ? "q"
                                                            : "w");
      scratch_args_.emplace_back();  // its keys, known once built
      scratch_args_.emplace_back();  // its arguments
      const auto args_before = scratch_args_.size();
      build(op, command, scratch_args_);
      scratch_args_[kind_at + 1] = std::to_string(command.size() - keys_before);
      scratch_args_[kind_at + 2] = std::to_string(scratch_args_.size() - args_before);
    }
    command[numkeys] = std::to_string(command.size() - first_key);
    command.reserve(command.size() + scratch_args_.size());
    std::move(scratch_args_.begin(), scratch_args_.end(), std::back_inserter(command));
  }

  static script_id script_of(op_kind kind) {
    switch (kind) {
      case op_kind::acquire:
        return acquire_script;
      case op_kind::release:
        return release_script;
      case op_kind::read:
      case op_kind::check:
        break;
    }
    return read_script;
  }

  // The keys and arguments of one request, as its script takes them, appended to `keys` and
  // `args`.
  void build(lease_op& op, std::vector<std::string>& keys, std::vector<std::string>& args) {
    auto k = lease_keys(op.name);
    const auto add_keys = [&](std::initializer_list<std::string*> some) {
      for (auto* key : some) keys.push_back(std::move(*key));
    };
    switch (op.kind) {
      case op_kind::read:
        add_keys({&k.owner, &k.fence, &k.handoff});
        return;
      case op_kind::check:
        add_keys({&k.owner, &k.fence, &k.handoff, &k.queue, &k.alive});
        if (auto it = lapse_.find(op.name); it != lapse_.end())
          for (const auto& [id, horizon] : it->second.alive_for) {
            if (horizon <= milliseconds::zero()) continue;  // not seen waiting since its watch
            args.push_back(id);
            args.push_back(std::to_string(horizon.count()));
          }
        return;
      case op_kind::release:
        add_keys({&k.owner, &k.fence, &k.queue, &k.alive, &k.handoff});
        args.push_back(op.owner_id);
        args.push_back(std::to_string(settings_.handoff_window.count()));
        args.push_back(std::move(k.wake_prefix));
        args.push_back(std::move(k.events));
        return;
      case op_kind::acquire:
        break;
    }
    add_keys({&k.owner, &k.fence, &k.queue, &k.alive, &k.handoff});
    args.push_back(op.owner_id);
    args.push_back(std::to_string(op.ttl.count()));
    args.push_back(std::to_string(op.transition.count()));
    args.push_back(std::to_string(settings_.handoff_window.count()));
    args.push_back(std::move(k.wake_prefix));
    args.push_back(std::move(k.events));
    // What this process saw last protects the owner when Redis loses its data (acquire.lua).
    long long seen_until = 0;
    bool seen_own = false;
    std::uint64_t min_fence = 0;
    bool failed_release = false;
    {
      std::lock_guard lock(seen_mutex_);
      if (auto seen = last_seen_.find(op.name); seen != last_seen_.end()) {
        if (!seen->second.empty()) {
          seen_until = seen->second.transition_at.time_since_epoch().count();
          seen_own = seen->second.owner_id == op.owner_id;
        }
        min_fence = seen->second.fence;
      }
      failed_release =
          !failed_releases_.empty() && failed_releases_.count(op.name + '\n' + op.owner_id) != 0;
    }
    args.push_back(std::to_string(seen_until));
    args.push_back(seen_own ? "1" : "0");
    args.push_back(std::to_string(min_fence));
    // After a failed release the key may still name this contender: not a renewal.
    args.push_back(failed_release ? "1" : "0");
    // Sentinel mode: the first acquire on each new connection re-seeds the fence counter
    // from the server's clock (a failover may have lost the old master's last INCRs). A
    // command that waits for a connection may run on a new master: it re-seeds too.
    const auto seeded = reseeded_.find(op.name);
    op.reseed = settings_.sentinel && (!command_->ready() || seeded == reseeded_.end() ||
                                       seeded->second != master_epoch_);
    args.push_back(op.reseed ? "1" : "0");
  }

  // Hands each request its part of the reply: a failed call (connection, timeout, an error
  // reply to the whole call) fails every request in it.
  void complete_batch(std::vector<lease_op>& ops, std::error_code ec, reply r) {
    if (ops.size() == 1 && ops.front().kind != op_kind::check) return complete(ops.front(), ec, r);
    if (!ec && !r.is_error() && (r.type != reply::kind::array || r.elements.size() != ops.size())) {
      const auto expected = "an array of " + std::to_string(ops.size()) + " replies";
      (void)unexpected("batch", ops.front().name, r, expected.c_str());
      ec = make_error_code(errc::bad_reply);
    }
    for (std::size_t i = 0; i < ops.size(); ++i)
      complete(ops[i], ec, ec || r.is_error() ? r : std::move(r.elements[i]));
  }

  void complete(lease_op& op, std::error_code ec, const reply& r) {
    switch (op.kind) {
      case op_kind::read:
        complete_grant("read", op.name, ec, r, op.on_grant);
        return;
      case op_kind::check:
        complete_grant("lapse check", op.name, ec, r, op.on_grant);
        return;
      case op_kind::acquire:
        complete_grant("acquire", op.name, ec, r, [&](std::error_code e, lease_grant g) {
          if (!e) note_acquired(op.name, op.owner_id);
          // A waiter of this process: its lapse checks keep it alive in the queue as long as
          // its own polls would.
          if (!e && !g.owner.is(op.owner_id))
            if (auto it = lapse_.find(op.name); it != lapse_.end())
              if (auto w = it->second.alive_for.find(op.owner_id); w != it->second.alive_for.end())
                w->second = 2 * (op.ttl + op.transition) + milliseconds{1'000};
          // The reply came over the current connection.
          if (!e && op.reseed) reseeded_[op.name] = master_epoch_;
          op.on_grant(e, std::move(g));
        });
        return;
      case op_kind::release:
        break;
    }
    if (!(ec = check("release", op.name, ec, r)) && r.type != reply::kind::integer)
      ec = unexpected("release", op.name, r, "an integer");
    note_release(op.name, op.owner_id, ec);
    op.on_done(ec);
  }

  // What this process saw of each mutex (last_seen_, failed_releases_), from the strand and from
  // the blocking path's callers.
  void note_grant(const std::string& name, const lease_grant& grant) {
    std::lock_guard lock(seen_mutex_);
    // A free mutex leaves the last owner in place: a lease that may still run matters only
    // when the fence counter was lost, and then it must be respected until it ends.
    auto& seen = last_seen_[name];
    if (!grant.owner.empty())
      seen = grant.owner;
    else
      seen.fence = std::max(seen.fence, grant.owner.fence);
  }

  void note_acquired(const std::string& name, const std::string& owner_id) {
    std::lock_guard lock(seen_mutex_);
    if (!failed_releases_.empty()) failed_releases_.erase(name + '\n' + owner_id);
  }

  void note_release(const std::string& name, const std::string& owner_id, std::error_code ec) {
    std::lock_guard lock(seen_mutex_);
    // Released: no live lease to protect, but keep the fence (a later acquire that finds the
    // counter gone knows Redis lost its data).
    if (auto seen = last_seen_.find(name);
        !ec && seen != last_seen_.end() && seen->second.owner_id == owner_id)
      seen->second.owner_id.clear();
    if (ec)
      failed_releases_.insert(name + '\n' + owner_id);
    else
      failed_releases_.erase(name + '\n' + owner_id);
  }

  struct watcher {
    std::string channel;
    std::function<void()> wake;
    std::string lease;  // the mutex whose lapse it is told about (empty: a controls watch)
  };
  // A mutex that waiters of this process wait for: the store checks when its lease would lapse
  // and wakes them (wakeups(): release_and_expiry), so they need not poll for it themselves.
  struct lapse_entry {
    std::map<std::uint64_t, std::string> handles;   // watch handle -> contender id
    std::map<std::string, milliseconds> alive_for;  // contender id -> its alive horizon, 0: unknown
    std::chrono::steady_clock::time_point due{};    // in lapse_due_ when set
  };
  using lapse_map = std::unordered_map<std::string, lapse_entry>;
  // A check comes this long after the lease's end (the key expires exactly then). With many
  // mutexes waited for (lapse_coalesce_from or more), checks due within lapse_window of each
  // other go in one call, each up to lapse_window late; with fewer, each goes when due (a
  // crashed owner's lease is taken over lapse_window sooner: the takeover benchmark measured
  // 105 ms from the lapse to the new owner with the window, against a few ms without).
  static constexpr milliseconds lapse_margin{5};
  static constexpr milliseconds lapse_window{100};
  static constexpr std::size_t lapse_coalesce_from = 64;
  // After a failed check, the next one.
  static constexpr milliseconds lapse_retry{1'000};

  void watch_lapse(std::uint64_t handle, const std::string& name, const std::string& owner_id) {
    watchers_[handle].lease = name;
    auto [it, added] = lapse_.try_emplace(name);
    it->second.handles[handle] = owner_id;
    it->second.alive_for.try_emplace(owner_id, milliseconds::zero());
    // The first check within poll_interval (the waiter's own next poll comes about then, too);
    // every reply for this mutex moves it to the end of the lease it names.
    if (added) schedule_lapse(it, std::chrono::steady_clock::now() + settings_.poll_interval);
  }

  void unwatch_lapse(std::uint64_t handle, const std::string& name) {
    auto it = lapse_.find(name);
    if (it == lapse_.end()) return;
    auto h = it->second.handles.find(handle);
    if (h == it->second.handles.end()) return;
    const auto id = h->second;
    it->second.handles.erase(h);
    if (std::none_of(it->second.handles.begin(), it->second.handles.end(),
                     [&](const auto& other) { return other.second == id; }))
      it->second.alive_for.erase(id);
    if (!it->second.handles.empty()) return;
    if (it->second.due != std::chrono::steady_clock::time_point{})
      lapse_due_.erase({it->second.due, name});
    lapse_.erase(it);
  }

  void schedule_lapse(lapse_map::iterator it, std::chrono::steady_clock::time_point at) {
    auto& e = it->second;
    if (e.due != std::chrono::steady_clock::time_point{}) lapse_due_.erase({e.due, it->first});
    e.due = at;
    lapse_due_.emplace(at, it->first);
    arm_lapse();
  }

  void arm_lapse() {
    if (lapse_due_.empty()) return;
    const auto at =
        lapse_due_.begin()->first +
        (lapse_due_.size() >= lapse_coalesce_from ? lapse_window : milliseconds::zero());
    if (lapse_armed_ != std::chrono::steady_clock::time_point{} && lapse_armed_ <= at) return;
    lapse_armed_ = at;
    lapse_timer_.expires_at(at);
    lapse_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;  // re-armed or shut down
      self->lapse_armed_ = {};
      self->check_lapses();
    });
  }

  // Every mutex whose check is due, in as few calls as the queue makes of them; a free one
  // wakes its waiters.
  void check_lapses() {
    const auto now = std::chrono::steady_clock::now();
    while (!lapse_due_.empty() && lapse_due_.begin()->first <= now) {
      auto name = lapse_due_.begin()->second;
      lapse_due_.erase(lapse_due_.begin());
      auto it = lapse_.find(name);
      if (it == lapse_.end()) continue;
      it->second.due = {};
      lease_op op{op_kind::check, name, {}, {}, {}, {}, {}};
      op.on_grant = [this, name](std::error_code ec, lease_grant grant) {
        auto it = lapse_.find(name);
        if (it == lapse_.end()) return;  // nobody waits any more
        if (ec) {
          schedule_lapse(it, std::chrono::steady_clock::now() + lapse_retry);
          return;
        }
        if (grant.owner.empty() && grant.owner.transition_at <= grant.now) {
          std::set<std::uint64_t> handles;
          for (const auto& [h, id] : it->second.handles) handles.insert(h);
          wake(handles);
        }
      };
      queue_.push_back(std::move(op));
    }
    flush();
    arm_lapse();
  }

  struct channel_state {
    std::set<std::uint64_t> handles;
    bool subscribed = false;     // SUBSCRIBE sent on the current subscriber connection
    bool unsubscribing = false;  // UNSUBSCRIBE sent, confirmation not yet in
  };

  template <class F>
  void on_strand(F f) {
    // Deferred: called from a service's strand on an io thread, it runs next on that thread.
    boost::asio::defer(strand_,
                       [self = shared_from_this(), f = std::move(f)]() mutable { f(*self); });
  }

  // The keys and channels a lease request uses (keys() builds every one of a mutex).
  struct lease_key_set {
    std::string owner, fence, queue, alive, handoff, wake_prefix, events;
  };
  lease_key_set lease_keys(const std::string& name) const {
    std::string base;
    base.reserve(settings_.key_prefix.size() + name.size() + 2);
    base.append(settings_.key_prefix).append("{").append(name).append("}");
    lease_key_set k{{},
                    base + ":fence",
                    base + ":queue",
                    base + ":alive",
                    base + ":handoff",
                    base + ":wake:",
                    base + ":events"};
    k.owner = std::move(base);
    return k;
  }

  mutex_keys keys(const std::string& name) const {
    const std::string base = settings_.key_prefix + "{" + name + "}";
    return {base,
            base + ":fence",
            base + ":queue",
            base + ":alive",
            base + ":handoff",
            base + ":state",
            base + ":wake:",
            base + ":events",
            base + ":history",
            base + ":history:seq",
            base + ":controls",
            base + ":controls:changed"};
  }

  connection::options connection_options(std::string role) const {
    connection::options o;
    o.server = settings_.server;
    o.role = std::move(role);
    o.connect_timeout = settings_.connect_timeout;
    o.command_timeout = settings_.command_timeout;
    if (resolver_) {
      // Sentinel mode: every connect asks the sentinels where the master is and checks ROLE.
      o.resolve = [resolver = resolver_](resolve_handler done) {
        resolver->resolve(std::move(done));
      };
      o.resolve_timeout = resolver_->timeout();
      o.require_master = true;
    }
    return o;
  }

  // Sentinel mode: a sentinel announced that our master moved to host:port.
  void switch_master(const std::string& host, int port, const std::string& sentinel) {
    const auto address = host + ":" + std::to_string(port);
    baton::detail::log({.event = "redis.switch_master"})
        .warn(
            "redis {}: {} announced +switch-master to {}; reconnecting there (a lease held "
            "on the old master counts only until its local deadline)",
            settings_.server.display, sentinel, address);
    resolver_->prefer(host, port);
    const auto why = "+switch-master to " + address;
    command_->reconnect_now(address, why);
    subscriber_->reconnect_now(address, why);
  }

  // Every (re)connect of the command connection.
  void command_ready() {
    if (settings_.sentinel) {
      ++master_epoch_;  // re-seed each mutex's fence counter before its next fence
      const auto& server = command_->server();
      const auto address = server.host + ":" + std::to_string(server.port);
      if (address != master_address_)
        baton::detail::log({.event = "redis.master"})
            .info("redis {}: using master {}{}", settings_.server.display, address,
                  master_address_.empty() ? "" : " (was " + master_address_ + ")");
      master_address_ = address;
    }
    command_up_ = true;
    // After a reconnect every mutex re-checks at once instead of waiting for its next poll.
    wake_all();
  }

  void start_on_strand() {
    if (settings_.sentinel) {
      resolver_ = std::make_shared<sentinel_resolver>(strand_, settings_);
      // The listener lives no longer than this core (it stops it), so `this` is safe.
      switch_listener_ = make_switch_listener(
          strand_, settings_,
          [this](const std::string& host, int port, const std::string& sentinel) {
            switch_master(host, port, sentinel);
          });
    }
    command_ = std::make_shared<connection>(strand_, connection_options("command"));
    subscriber_ = std::make_shared<connection>(strand_, connection_options("subscriber"));
    std::vector<std::vector<std::string>> load;
    for (const auto& s : scripts_) load.push_back({"SCRIPT", "LOAD", s.text});
    // The connections live no longer than this core (it stops them), so `this` is safe.
    command_->set_setup(std::move(load), [this](const std::vector<reply>& replies) {
      for (std::size_t i = 0; i < scripts_.size() && i < replies.size(); ++i) {
        if (replies[i].type == reply::kind::string) {
          scripts_[i].sha = replies[i].str;
        } else {
          scripts_[i].sha.clear();
          baton::detail::log().warn("redis {}: SCRIPT LOAD of {} failed ({}); using EVAL",
                                    settings_.server.display, scripts_[i].name,
                                    replies[i].describe());
        }
      }
    });
    command_->set_on_ready([this] { command_ready(); });
    command_->set_on_down([this] { command_up_ = false; });
    subscriber_->set_on_ready([this] { resubscribe(); });
    subscriber_->set_on_down([this] {
      for (auto& [name, ch] : channels_) ch.subscribed = ch.unsubscribing = false;
    });
    subscriber_->set_on_push([this](const reply& r) { on_push(r); });
    command_->start();
    subscriber_->start();
    if (switch_listener_) switch_listener_->start();
  }

  // EVALSHA, or EVAL when the script is not loaded (NOSCRIPT after a restart or SCRIPT FLUSH;
  // EVAL caches it on the server again).
  void eval(script_id id, std::vector<std::string> keys, std::vector<std::string> args,
            reply_handler handler, milliseconds allowance = {}) {
    auto parts = std::make_shared<std::pair<std::vector<std::string>, std::vector<std::string>>>(
        std::move(keys), std::move(args));
    eval_built(
        id,
        [parts](std::vector<std::string>& command) {
          command.push_back(std::to_string(parts->first.size()));
          command.insert(command.end(), parts->first.begin(), parts->first.end());
          command.insert(command.end(), parts->second.begin(), parts->second.end());
        },
        std::move(handler), allowance);
  }

  // The same, with what follows the script in the command (numkeys, keys, arguments) appended
  // by `build`: called once, and once more should the script have to go with EVAL.
  template <class Build>
  void eval_built(script_id id, Build build, reply_handler handler, milliseconds allowance) {
    auto command = [this, id, &build](bool by_sha) {
      std::vector<std::string> c;
      c.push_back(by_sha ? "EVALSHA" : "EVAL");
      c.push_back(by_sha ? scripts_[id].sha : scripts_[id].text);
      build(c);
      return c;
    };
    if (scripts_[id].sha.empty()) {
      command_->exec(command(false), std::move(handler), allowance);
      return;
    }
    auto by_sha = command(true);  // before `build` moves into the handler
    command_->exec(std::move(by_sha),
                   [this, id, allowance, build = std::move(build), handler = std::move(handler)](
                       std::error_code ec, reply r) mutable {
                     if (!ec && r.is_error("NOSCRIPT")) {
                       baton::detail::log().info(
                           "redis {}: script {} is not loaded on the server; sending it "
                           "with EVAL",
                           settings_.server.display, scripts_[id].name);
                       std::vector<std::string> c{"EVAL", scripts_[id].text};
                       build(c);
                       command_->exec(std::move(c), std::move(handler), allowance);
                       return;
                     }
                     handler(ec, std::move(r));
                   });
  }

  // An error of the request (connection, timeout) or of the reply (a Redis error reply). Every
  // request passes here once: failed ones are counted (metrics.hpp), except NOT_OWNER, which is
  // an answer (the lease moved on), not a failure.
  std::error_code check(const char* op, const std::string& name, std::error_code ec,
                        const reply& r) {
    if (ec) {
      baton::detail::record_backend_error("redis", ec);
      return ec;
    }
    if (!r.is_error()) return {};
    auto translated = translate({0, r.str});
    if (translated != errc::not_owner) {
      baton::detail::record_backend_error("redis", translated);
      baton::detail::log().warn("redis {}: {} of mutex '{}' failed: {}", settings_.server.display,
                                op, name, r.str);
    }
    return translated;
  }

  std::error_code unexpected(const char* op, const std::string& name, const reply& r,
                             const char* expected) {
    baton::detail::record_backend_error("redis", make_error_code(errc::bad_reply));
    baton::detail::log().error("redis {}: unexpected reply to {} of mutex '{}': {} (expected {})",
                               settings_.server.display, op, name, r.describe(), expected);
    return make_error_code(errc::bad_reply);
  }

  void complete_grant(const char* op, const std::string& name, std::error_code ec, const reply& r,
                      const lease_store::grant_handler& handler) {
    lease_grant grant;
    if (!(ec = check(op, name, ec, r)) && !parse_grant(r, grant))
      ec = unexpected(op, name, r, "the owner id and 5 integers");
    if (!ec) {
      note_grant(name, grant);
      // Waited for here: check again when this lease (or hand-off) would lapse. A mutex free
      // now is for its waiters to take; checked again after poll_interval should they not.
      if (auto it = lapse_.find(name); it != lapse_.end()) {
        const milliseconds left = grant.owner.transition_at - grant.now;
        schedule_lapse(
            it, std::chrono::steady_clock::now() +
                    (left > milliseconds::zero() ? left + lapse_margin : settings_.poll_interval));
      }
    }
    handler(ec, ec ? lease_grant{} : std::move(grant));
  }

  void add_watch(std::uint64_t handle, const std::string& channel, std::function<void()> wake) {
    watchers_[handle] = watcher{channel, std::move(wake), {}};
    auto& ch = channels_[channel];
    ch.handles.insert(handle);
    if (!ch.subscribed && !ch.unsubscribing) ch.subscribed = subscriber_->subscribe(channel);
  }

  void remove_watch(std::uint64_t handle) {
    auto it = watchers_.find(handle);
    if (it == watchers_.end()) return;
    if (!it->second.lease.empty()) unwatch_lapse(handle, it->second.lease);
    auto channel = std::move(it->second.channel);
    watchers_.erase(it);
    auto ch = channels_.find(channel);
    if (ch == channels_.end()) return;
    ch->second.handles.erase(handle);
    if (!ch->second.handles.empty()) return;
    if (ch->second.subscribed && subscriber_->unsubscribe(channel)) {
      // hiredis 0.14 forgets a channel's callback when the UNSUBSCRIBE confirmation arrives,
      // even if it was subscribed again meanwhile: a new watch waits for the confirmation.
      ch->second.subscribed = false;
      ch->second.unsubscribing = true;
      return;
    }
    if (!ch->second.unsubscribing) channels_.erase(ch);
  }

  void resubscribe() {
    for (auto it = channels_.begin(); it != channels_.end();) {
      if (it->second.handles.empty()) {
        it = channels_.erase(it);
        continue;
      }
      it->second.unsubscribing = false;
      it->second.subscribed = subscriber_->subscribe(it->first);
      ++it;
    }
  }

  void on_push(const reply& r) {
    if (r.type != reply::kind::array || r.elements.size() < 3 ||
        r.elements[0].type != reply::kind::string || r.elements[1].type != reply::kind::string)
      return;
    const auto& kind = r.elements[0].str;
    const auto& channel = r.elements[1].str;
    auto ch = channels_.find(channel);
    if (ch == channels_.end()) return;
    if (kind == "message" || kind == "subscribe") {
      // A wake-up, or a (re)subscription: a message may have been missed before it, re-check.
      wake(ch->second.handles);
    } else if (kind == "unsubscribe") {
      ch->second.unsubscribing = false;
      if (ch->second.handles.empty())
        channels_.erase(ch);
      else
        ch->second.subscribed = subscriber_->subscribe(channel);
    }
  }

  void wake(const std::set<std::uint64_t>& handles) {
    std::vector<std::function<void()>> calls;
    for (auto h : handles)
      if (auto it = watchers_.find(h); it != watchers_.end()) calls.push_back(it->second.wake);
    for (auto& c : calls) c();
  }

  void wake_all() {
    std::vector<std::function<void()>> calls;
    for (auto& [h, w] : watchers_) calls.push_back(w.wake);
    for (auto& c : calls) c();
  }

  connection::strand_type strand_;
  settings settings_;
  std::array<script, script_count> scripts_;
  std::shared_ptr<connection> command_;
  std::shared_ptr<connection> subscriber_;
  // Sentinel mode: where the master is, and the sentinel connection that says when it moves.
  std::shared_ptr<sentinel_resolver> resolver_;
  std::shared_ptr<connection> switch_listener_;
  std::string master_address_;      // host:port of the master the command connection last used
  std::uint64_t master_epoch_ = 0;  // counts command connects (sentinel mode)
  // Per mutex: the master_epoch_ whose connection re-seeded its fence counter.
  std::unordered_map<std::string, std::uint64_t> reseeded_;
  std::atomic<std::uint64_t> next_handle_{1};
  std::map<std::uint64_t, watcher> watchers_;
  std::map<std::string, channel_state> channels_;
  // Per mutex: the last owner record this process saw (highest fence kept when it was free).
  mutable std::mutex seen_mutex_;  // guards last_seen_ and failed_releases_ (the blocking path too)
  std::unordered_map<std::string, mutex_owner> last_seen_;
  // "name\nid" of releases that failed: that contender's next acquire is a new ownership.
  std::set<std::string> failed_releases_;
  // The blocking path's connections (none until it is first used), and whether the command
  // connection is up (the blocking path is used only then).
  blocking_client blocking_;
  std::atomic<bool> command_up_{false};
  // Lease requests not yet sent (flush()), and calls of them on the wire.
  std::deque<lease_op> urgent_;  // renewals and releases
  std::deque<lease_op> queue_;   // the rest
  std::size_t batches_in_flight_ = 0;
  bool flushing_ = false;
  boost::asio::steady_timer linger_timer_{strand_};
  bool lingering_ = false;
  // The lapse checks of mutexes waited for here: when each is due, and the timer of the next.
  lapse_map lapse_;
  std::set<std::pair<std::chrono::steady_clock::time_point, std::string>> lapse_due_;
  boost::asio::steady_timer lapse_timer_{strand_};
  std::chrono::steady_clock::time_point lapse_armed_{};
  // build_alone() and build_batch(): the arguments while the keys go first (kept for its capacity).
  std::vector<std::string> scratch_args_;
};

class redis_store final : public store {
 public:
  explicit redis_store(std::shared_ptr<store_core> core) : core_(std::move(core)) {}
  ~redis_store() override { core_->shutdown(); }

  void async_acquire(const std::string& name, const std::string& owner_id, milliseconds ttl,
                     milliseconds transition, grant_handler handler) override {
    core_->acquire(name, owner_id, ttl, transition, std::move(handler));
  }
  void async_release(const std::string& name, const std::string& owner_id,
                     done_handler handler) override {
    core_->release(name, owner_id, std::move(handler));
  }
  void async_read(const std::string& name, grant_handler handler) override {
    core_->read(name, std::move(handler));
  }
  void async_read_state(const std::string& name, state_handler handler) override {
    core_->read_state(name, std::move(handler));
  }
  void async_write_state(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                         std::string bytes, done_handler handler) override {
    core_->write_state(name, owner_id, fence, std::move(bytes), std::move(handler));
  }
  bool acquire_blocking(const std::string& name, const std::string& owner_id, milliseconds ttl,
                        milliseconds transition, std::error_code& ec, lease_grant& grant) override {
    return core_->acquire_blocking(name, owner_id, ttl, transition, ec, grant);
  }
  bool release_blocking(const std::string& name, const std::string& owner_id, std::error_code& ec,
                        bool& released) override {
    return core_->release_blocking(name, owner_id, ec, released);
  }
  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::chrono::milliseconds, std::function<void()> wake) override {
    return core_->watch(name, owner_id, std::move(wake));
  }
  void unwatch(std::uint64_t handle) noexcept override { core_->unwatch(handle); }
  // Pub/sub wakes the head of the queue on a release, and the store's lapse checks wake the
  // waiters when a lease ends without one (a crashed owner).
  wakeup_coverage wakeups() const noexcept override { return wakeup_coverage::release_and_expiry; }

  void async_append_history(const std::string& name, const std::string& owner_id,
                            std::uint64_t fence, std::string bytes, std::size_t keep,
                            append_handler handler) override {
    core_->append_history(name, owner_id, fence, std::move(bytes), keep, std::move(handler));
  }
  void async_read_history(const std::string& name, std::size_t limit,
                          history_handler handler) override {
    core_->read_history(name, limit, std::move(handler));
  }
  void async_read_controls(const std::string& name, controls_handler handler) override {
    core_->read_controls(name, std::move(handler));
  }
  void async_write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                            controls_handler handler) override {
    core_->write_controls(name, expected, std::move(bytes), std::move(handler));
  }
  std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) override {
    return core_->watch_controls(name, std::move(changed));
  }
  void unwatch_controls(std::uint64_t handle) noexcept override { core_->unwatch(handle); }
  void async_read_waiters(const std::string& name, waiters_handler handler) override {
    core_->read_waiters(name, std::move(handler));
  }

 private:
  std::shared_ptr<store_core> core_;
};

}  // namespace

std::shared_ptr<store> make_store(boost::asio::io_context& io, const settings& config) {
  auto core = std::make_shared<store_core>(io, config);
  core->start();
  return std::make_shared<redis_store>(std::move(core));
}

}  // namespace baton::backends::redis::detail
